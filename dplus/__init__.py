"""dplus: reverse-mode automatic differentiation of ordinary Python code by source transformation."""

from . import higher as _higher  # noqa: F401  (rules for derivatives of derivatives)
from . import parallel
from . import primitives as _primitives  # noqa: F401  (registers the rule library)
from .api import D, apply, define_dplus, dplus, foldl, grad, grad1, lift_dplus
from .by_line import LineCode, show_by_line
from .checkpoint import checkpoint, checkpoint_loop
from .derived import hessian, hvp, jacobian, jvp, value_and_grad
from .errors import (
    ArgumentError,
    DplusError,
    NonDifferentiableError,
    SensitivityError,
    SourceUnavailableError,
    UnknownTransformError,
    UnsupportedSyntaxError,
)
from .gradcheck import GradCheckError, check_grad
from .policies import (
    current_unknown_transform,
    error_non_zero_sensitivity_transform,
    error_unknown_proc_transform,
    error_unknown_transform,
    transform_from_source,
)
from .runtime.boxes import Box, BoxSensitivities, box, set_box, unbox
from .runtime.linear import add, coerce_zero, dot, gen_zero, register_linear_type, scale, zero
from .runtime.registry import register_backprop, register_primitive
from .runtime.result import ProcResult, backprop, primal
from .structured import register_gradient_structure
from .transform import plus_functions as _plus_functions  # noqa: F401  (installs its runtime hook)
from .transform.persistent_cache import cache_directory, disable_cache, enable_cache
from .transform.persistent_cache import enable_from_environment as _enable_from_environment
from .transform.transformer import generated_source as show

__version__ = "0.1.0"

__all__ = [
    "lift_dplus",
    "dplus",
    "D",
    "grad",
    "grad1",
    "define_dplus",
    "ProcResult",
    "primal",
    "backprop",
    "register_primitive",
    "register_backprop",
    "current_unknown_transform",
    "error_non_zero_sensitivity_transform",
    "error_unknown_proc_transform",
    "error_unknown_transform",
    "transform_from_source",
    "gen_zero",
    "add",
    "scale",
    "dot",
    "zero",
    "coerce_zero",
    "register_linear_type",
    "BoxSensitivities",
    "Box",
    "box",
    "unbox",
    "set_box",
    "foldl",
    "apply",
    "checkpoint",
    "checkpoint_loop",
    "parallel",
    "value_and_grad",
    "register_gradient_structure",
    "jacobian",
    "hessian",
    "hvp",
    "jvp",
    "check_grad",
    "GradCheckError",
    "show",
    "show_by_line",
    "LineCode",
    "enable_cache",
    "disable_cache",
    "cache_directory",
    "DplusError",
    "UnknownTransformError",
    "SensitivityError",
    "UnsupportedSyntaxError",
    "SourceUnavailableError",
    "NonDifferentiableError",
    "ArgumentError",
]

_enable_from_environment()  # DPLUS_CACHE_DIR turns the persistent cache on
