"""The derivative rules of dplus, one module per family. Importing this package registers them."""

from . import operators  # noqa: F401
from . import math  # noqa: F401
from . import containers  # noqa: F401
from . import sets  # noqa: F401
from . import stdlib_algorithms  # noqa: F401
from . import collections_stdlib  # noqa: F401
from . import caching  # noqa: F401
from . import builtins  # noqa: F401
from . import functional  # noqa: F401
from . import cmath  # noqa: F401
from . import statistics  # noqa: F401
from . import numpy  # noqa: F401  (registers nothing without NumPy)
