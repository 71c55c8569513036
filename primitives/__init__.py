"""The derivative rules of dplus, one module per family. Importing this package registers them."""

from dplus.runtime.registry import register_lazy_rules

# Registration order: a later rule for the same callable replaces an earlier one.
# isort: off
from . import operators  # noqa: F401
from . import math  # noqa: F401
from . import containers  # noqa: F401
from . import sets  # noqa: F401
from . import stdlib_algorithms  # noqa: F401
from . import collections_stdlib  # noqa: F401
from . import caching  # noqa: F401
from . import builtins  # noqa: F401
from . import builtin_iteration  # noqa: F401
from . import builtin_eval  # noqa: F401
from . import functional  # noqa: F401
from . import functional_reduce  # noqa: F401
from . import cmath  # noqa: F401
from . import statistics  # noqa: F401
from . import checkpointing  # noqa: F401
from . import parallel  # noqa: F401
from . import generators  # noqa: F401  (after the rules it wraps: those that consume iterables)
from . import numpy  # noqa: F401  (registers nothing without NumPy)
from . import numpy_ufuncs  # noqa: F401
from . import numpy_products  # noqa: F401
from . import numpy_arrays  # noqa: F401
from . import numpy_table  # noqa: F401
from . import numpy_shape  # noqa: F401
from . import numpy_math  # noqa: F401
from . import numpy_linalg  # noqa: F401
from . import numpy_fft  # noqa: F401
from . import numpy_iterables  # noqa: F401
from . import numpy_callbacks  # noqa: F401
from . import numpy_inplace  # noqa: F401  (after numpy_table: replaces its refusals of in-place writes)
from . import numpy_inplace_methods  # noqa: F401
from . import program_dunders  # noqa: F401  (last: wraps the step operators' final rules)

# isort: on


def _load_scipy_special() -> None:
    from . import scipy_special  # noqa: F401


def _load_scipy_linalg() -> None:
    from . import scipy_linalg  # noqa: F401


# SciPy is an optional extra, never imported by dplus: its rules are registered once the
# program imports the SciPy module
register_lazy_rules("scipy.special", _load_scipy_special)
register_lazy_rules("scipy.linalg", _load_scipy_linalg)
