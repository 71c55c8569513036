"""The table of NumPy rules: which gradient (of :mod:`primitives.numpy_ufuncs`,
:mod:`primitives.numpy_products`, :mod:`primitives.numpy_arrays`) each NumPy function,
``ndarray`` method and attribute gets, registered on import when NumPy is installed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .numpy import (
    _as_array_sens,
    _register,
    defgrad,
    defvjp_joint,
    fit,
    mark_module_helpers,
    mutating,
    nondiff,
)
from .numpy_arrays import (
    _array_grad,
    _astype_grad,
    _broadcast_to_grad,
    _column_stack_grad,
    _concatenate_grad,
    _exponential_vjp,
    _flip_grad,
    _full_grad,
    _full_like_grad,
    _hsplit_axis,
    _hstack_grad,
    _item_grad,
    _linspace_start,
    _linspace_stop,
    _method_vjp,
    _moveaxis_grad,
    _normal_vjp,
    _ravel_grad,
    _repeat_grad,
    _reshape_grad,
    _reshape_like,
    _reshape_method_grad,
    _roll_grad,
    _sort_grad,
    _split_axis,
    _split_transform,
    _stack_grad,
    _swapaxes_grad,
    _take_grad,
    _tile_grad,
    _tolist_transform,
    _transpose_grad,
    _transpose_method_grad,
    _tril_grad,
    _triu_grad,
    _uniform_vjp,
    _vstack_grad,
)
from .numpy_products import (
    _det_grad,
    _diag_grad,
    _diagonal_grad,
    _dot_vjp,
    _einsum_vjp,
    _inner_vjp,
    _inv_grad,
    _matmul_vjp,
    _norm_grad,
    _outer_vjp,
    _slogdet_grad,
    _solve_vjp,
    _tensordot_vjp,
    _trace_grad,
)
from .numpy_ufuncs import (
    _ACCUMULATE_GRADS,
    _REDUCE_GRADS,
    _abs_grad,
    _balanced,
    _chooser_grad,
    _clip_hi,
    _clip_lo,
    _clip_x,
    _cumsum_grad,
    _diff_append_grad,
    _diff_grad,
    _diff_prepend_grad,
    _flat_plus,
    _mean_grad,
    _nanmean_grad,
    _nansum_grad,
    _over_root,
    _power_gx,
    _power_gy,
    _prod_grad,
    _running_chooser_grad,
    _running_product_grad,
    _safe_div,
    _sinc_grad,
    _std_grad,
    _sum_grad,
    _ufunc_accumulate_plus,
    _ufunc_reduce_plus,
    _var_grad,
)

Z = gen_zero


# ---------------------------------------------------------------------------
# the rule builders


Grad = Callable[..., Any]


_Z1 = ((), Z)


# ---------------------------------------------------------------------------
# the table


def _attr(obj: Any, *names: str) -> Any:
    """``obj.name`` for the first name this NumPy version has (``None`` if none)."""
    for name in names:
        v = getattr(obj, name, None)
        if v is not None:
            return v
    return None


# A table (one registration per NumPy function, with the loops and version tests that list
# them), not logic to split: its complexity is the table's length.
def register_numpy_rules() -> None:  # noqa: C901
    """Register every rule of this module (done on import when NumPy is installed)."""
    from .container_reads import register_attribute

    nd = np.ndarray

    # -- unary ufuncs
    defgrad(np.sin, lambda A, r, x: A * np.cos(x))
    defgrad(np.cos, lambda A, r, x: -A * np.sin(x))
    defgrad(np.tan, lambda A, r, x: A * (1 + r * r))
    defgrad(np.arcsin, lambda A, r, x: A / np.sqrt((1 - x) * (1 + x)))
    defgrad(np.arccos, lambda A, r, x: -A / np.sqrt((1 - x) * (1 + x)))
    defgrad(np.arctan, lambda A, r, x: A / (1 + x * x))
    defgrad(np.sinh, lambda A, r, x: A * np.cosh(x))
    defgrad(np.cosh, lambda A, r, x: A * np.sinh(x))
    defgrad(np.tanh, lambda A, r, x: A * (1 - r * r))
    defgrad(np.arcsinh, lambda A, r, x: A / np.sqrt(x * x + 1))
    defgrad(np.arccosh, lambda A, r, x: A / np.sqrt((x - 1) * (x + 1)))
    defgrad(np.arctanh, lambda A, r, x: A / ((1 - x) * (1 + x)))
    defgrad(np.exp, lambda A, r, x: A * r)
    defgrad(np.exp2, lambda A, r, x: A * r * np.log(2.0))
    defgrad(np.expm1, lambda A, r, x: A * (r + 1))
    defgrad(np.log, lambda A, r, x: A / x)
    defgrad(np.log2, lambda A, r, x: A / (x * np.log(2.0)))
    defgrad(np.log10, lambda A, r, x: A / (x * np.log(10.0)))
    defgrad(np.log1p, lambda A, r, x: A / (1 + x))
    defgrad(np.sqrt, lambda A, r, x: _over_root(A, 2 * r))
    defgrad(np.cbrt, lambda A, r, x: _over_root(A, 3 * r * r))
    defgrad(np.square, lambda A, r, x: A * 2 * x)
    defgrad(np.absolute, _abs_grad)  # np.abs is np.absolute
    defgrad(np.fabs, lambda A, r, x: A * np.sign(x))
    defgrad(np.negative, lambda A, r, x: -A)
    defgrad(np.positive, lambda A, r, x: A)
    defgrad(np.reciprocal, lambda A, r, x: -A * r * r)
    defgrad(np.conjugate, lambda A, r, x: np.conj(A))  # np.conj is np.conjugate
    defgrad(np.real, lambda A, r, x: A if not np.iscomplexobj(x) else A + 0j)
    defgrad(np.imag, lambda A, r, x: Z if not np.iscomplexobj(x) else -1j * A)
    defgrad(np.deg2rad, lambda A, r, x: A * (np.pi / 180.0))
    defgrad(np.radians, lambda A, r, x: A * (np.pi / 180.0))
    defgrad(np.rad2deg, lambda A, r, x: A * (180.0 / np.pi))
    defgrad(np.degrees, lambda A, r, x: A * (180.0 / np.pi))
    defgrad(np.sinc, _sinc_grad)

    # -- binary ufuncs (fit sums the broadcast axes)
    defgrad(np.add, lambda A, r, x, y: A, lambda A, r, x, y: A)
    defgrad(np.subtract, lambda A, r, x, y: A, lambda A, r, x, y: -A)
    defgrad(np.multiply, lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)
    defgrad(np.divide, lambda A, r, x, y: A / y, lambda A, r, x, y: -A * r / y)  # np.true_divide
    defgrad(np.power, _power_gx, _power_gy)
    defgrad(
        np.float_power,
        lambda A, r, x, y: _power_gx(A, r, np.asarray(x, float), y),
        lambda A, r, x, y: _power_gy(A, r, np.asarray(x, float), y),
    )
    defgrad(
        np.maximum,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.minimum,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.fmax,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.fmin,
        lambda A, r, x, y: A * _balanced(x, r, y),
        lambda A, r, x, y: A * _balanced(y, r, x),
    )
    defgrad(
        np.arctan2,
        lambda A, r, y, x: A * x / (x * x + y * y),
        lambda A, r, y, x: -A * y / (x * x + y * y),
    )
    defgrad(
        np.hypot, lambda A, r, x, y: A * _safe_div(x, r), lambda A, r, x, y: A * _safe_div(y, r)
    )
    defgrad(
        np.logaddexp, lambda A, r, x, y: A * np.exp(x - r), lambda A, r, x, y: A * np.exp(y - r)
    )
    defgrad(
        np.logaddexp2, lambda A, r, x, y: A * np.exp2(x - r), lambda A, r, x, y: A * np.exp2(y - r)
    )
    defgrad(
        np.remainder, lambda A, r, x, y: A, lambda A, r, x, y: -A * np.floor_divide(x, y)
    )  # np.mod
    defgrad(np.fmod, lambda A, r, x, y: A, lambda A, r, x, y: -A * np.trunc(np.divide(x, y)))
    defgrad(
        np.where,
        None,
        lambda A, r, c, x, y: np.where(c, A, 0.0),
        lambda A, r, c, x, y: np.where(c, 0.0, A),
    )
    defgrad(
        np.clip,
        _clip_x,
        _clip_lo,
        _clip_hi,
        kw={"a": 0, "a_min": 1, "a_max": 2, "min": 1, "max": 2},
    )
    defgrad(nd.clip, _clip_x, _clip_lo, _clip_hi, kw={"min": 1, "max": 2})

    # -- reductions (the same gradients serve the functions and the methods)
    for fns, g in (
        ((np.sum, nd.sum), _sum_grad),
        ((np.mean, nd.mean), _mean_grad),
        ((np.prod, nd.prod), _prod_grad),
        ((np.max, _attr(np, "amax"), nd.max), _chooser_grad),
        ((np.min, _attr(np, "amin"), nd.min), _chooser_grad),
        ((np.var, nd.var), _var_grad),
        ((np.std, nd.std), _std_grad),
        ((np.cumsum, nd.cumsum), _cumsum_grad),
    ):
        for fn in fns:
            if fn is not None:
                defgrad(fn, g)
    defgrad(np.nansum, _nansum_grad)
    defgrad(np.nanmean, _nanmean_grad)
    _REDUCE_GRADS.update(
        {
            np.add: _sum_grad,
            np.multiply: _prod_grad,
            np.maximum: _chooser_grad,
            np.minimum: _chooser_grad,
            np.fmax: _chooser_grad,
            np.fmin: _chooser_grad,
        }
    )
    _register(
        np.ufunc.reduce,
        _ufunc_reduce_plus,
        "numpy rule: ufunc.reduce (add, multiply, maximum, minimum)",
    )
    _ACCUMULATE_GRADS.update(
        {
            np.add: _cumsum_grad,
            np.multiply: _running_product_grad,
            np.maximum: _running_chooser_grad,
            np.minimum: _running_chooser_grad,
            np.fmax: _running_chooser_grad,
            np.fmin: _running_chooser_grad,
        }
    )
    _register(
        np.ufunc.accumulate,
        _ufunc_accumulate_plus,
        "numpy rule: ufunc.accumulate (add, multiply, maximum, minimum, fmax, fmin)",
    )
    mutating(
        np.ufunc.at, "Use np.bincount, or build the array with np.zeros and a NumPy expression"
    )
    defgrad(
        np.diff,
        _diff_grad,
        None,
        None,
        _diff_prepend_grad,
        _diff_append_grad,
        kw={"prepend": 3, "append": 4},
    )

    # -- products
    defvjp_joint(np.dot, _dot_vjp, skips=True)
    defvjp_joint(nd.dot, _dot_vjp, skips=True)
    defvjp_joint(np.matmul, _matmul_vjp, skips=True)
    defvjp_joint(np.inner, _inner_vjp)
    defvjp_joint(np.outer, _outer_vjp)
    defvjp_joint(np.tensordot, _tensordot_vjp)
    defvjp_joint(np.einsum, _einsum_vjp)

    # -- linear algebra
    la = np.linalg
    defgrad(la.norm, _norm_grad)
    defgrad(la.inv, _inv_grad)
    defgrad(la.det, _det_grad)
    defgrad(la.slogdet, _slogdet_grad)
    defvjp_joint(la.solve, _solve_vjp)
    defgrad(np.trace, _trace_grad)
    defgrad(nd.trace, _trace_grad)
    defgrad(np.diagonal, _diagonal_grad)
    defgrad(nd.diagonal, _diagonal_grad)
    defgrad(np.diag, _diag_grad)

    # -- shapes
    defgrad(np.reshape, _reshape_grad)
    defgrad(nd.reshape, _reshape_method_grad)
    for fn in (np.ravel, nd.ravel, nd.flatten):
        defgrad(fn, _ravel_grad)
    for fn in (np.expand_dims, np.squeeze, nd.squeeze):  # (atleast_*d: numpy_shape.py)
        defgrad(fn, _reshape_like)
    defgrad(np.transpose, _transpose_grad)
    defgrad(nd.transpose, _transpose_method_grad)
    defgrad(np.swapaxes, _swapaxes_grad)
    defgrad(nd.swapaxes, _swapaxes_grad)
    defgrad(np.moveaxis, _moveaxis_grad)
    defgrad(np.broadcast_to, _broadcast_to_grad)
    defgrad(np.concatenate, _concatenate_grad, coerce=False)
    defgrad(np.stack, _stack_grad, coerce=False)
    defgrad(np.hstack, _hstack_grad, coerce=False)
    defgrad(np.vstack, _vstack_grad, coerce=False)
    defgrad(np.column_stack, _column_stack_grad, coerce=False)
    _split_transform(np.split, _split_axis)
    _split_transform(np.array_split, _split_axis)
    _split_transform(np.hsplit, _hsplit_axis)
    _split_transform(np.vsplit, lambda args, kwargs: 0)
    defgrad(np.flip, _flip_grad)
    defgrad(np.fliplr, lambda A, r, m: np.fliplr(A))
    defgrad(np.flipud, lambda A, r, m: np.flipud(A))
    defgrad(np.roll, _roll_grad)
    defgrad(np.tile, _tile_grad)
    defgrad(np.repeat, _repeat_grad)
    defgrad(nd.repeat, _repeat_grad)
    defgrad(np.sort, _sort_grad)
    defgrad(np.take, _take_grad)
    defgrad(nd.take, _take_grad)
    defgrad(np.triu, _triu_grad)
    defgrad(np.tril, _tril_grad)
    for fn in (np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.copy, nd.copy):
        defgrad(fn, _array_grad)
    defgrad(nd.astype, _astype_grad)
    defgrad(nd.item, _item_grad, coerce=False)
    register_primitive(nd.tolist, _tolist_transform, note="numpy rule: ndarray.tolist")
    defgrad(nd.conj, lambda A, r, x: np.conj(A))
    defgrad(nd.conjugate, lambda A, r, x: np.conj(A))

    # -- the same methods on NumPy scalars (np.float64(2.0).sum(), np.max(x).item(), ...)
    gen = np.generic
    scalar_method_grads: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("sum", _sum_grad),
        ("mean", _mean_grad),
        ("prod", _prod_grad),
        ("max", _chooser_grad),
        ("min", _chooser_grad),
        ("var", _var_grad),
        ("std", _std_grad),
        ("cumsum", _cumsum_grad),
        ("reshape", _reshape_method_grad),
        ("ravel", _ravel_grad),
        ("flatten", _ravel_grad),
        ("squeeze", _reshape_like),
        ("transpose", _transpose_method_grad),
        ("copy", _array_grad),
        ("astype", _astype_grad),
        ("conj", lambda A, r, x: np.conj(A)),
        ("conjugate", lambda A, r, x: np.conj(A)),
        ("item", lambda A, r, x, *args: A),
        ("tolist", lambda A, r, x: A),
    )
    for name, scalar_grad in scalar_method_grads:
        fn = getattr(gen, name, None)
        if fn is not None:
            defgrad(fn, scalar_grad)
    defgrad(gen.clip, _clip_x, _clip_lo, _clip_hi, kw={"min": 1, "max": 2})
    nondiff(gen.argmax, gen.argmin, gen.argsort, gen.all, gen.any, gen.nonzero)

    # -- attributes (of arrays, and of NumPy scalars, which have the same ones)
    scalar_types = (
        np.float64,
        np.float32,
        np.float16,
        np.longdouble,
        np.complex128,
        np.complex64,
        np.clongdouble,
    )

    def attribute(name: str, grad: Grad | None, scalars: bool = False) -> None:
        def transform(a: Any) -> ProcResult:
            r = getattr(a, name)

            def backprop(A: Any, Abox: Any) -> tuple:
                if A is Z or grad is None:
                    return _Z1
                return ((), fit(grad(_as_array_sens(A, r), r, a), a))

            return ProcResult(r, backprop)

        transform.__name__ = transform.__qualname__ = f"ndarray_{name}_plus"
        mark_derived(transform, "rule helper")
        register_attribute(nd, name, transform)
        for t in scalar_types if scalars else ():
            register_attribute(t, name, transform)

    attribute("T", lambda A, r, a: np.transpose(A))
    attribute("mT", lambda A, r, a: np.swapaxes(A, -1, -2))
    attribute("real", lambda A, r, a: A if not np.iscomplexobj(a) else A + 0j, scalars=True)
    attribute("imag", lambda A, r, a: Z if not np.iscomplexobj(a) else -1j * A, scalars=True)
    for name in ("shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides", "flags"):
        attribute(name, None, scalars=True)
    register_attribute(nd, "flat", _flat_plus)

    # -- NumPy scalar types: conversions
    for t in (np.float64, np.float32, np.float16, np.longdouble, np.complex128, np.complex64):
        defgrad(t, lambda A, r, x=0.0: A)
    nondiff(
        np.int64,
        np.int32,
        np.int16,
        np.int8,
        np.uint64,
        np.uint32,
        np.uint16,
        np.uint8,
        np.bool_,
        np.intp,
        note="non-differentiable: an integer or bool conversion",
    )

    # -- constructors: differentiable in the fill value / end points only
    defgrad(np.full, None, _full_grad, kw={"fill_value": 1})
    defgrad(np.full_like, None, _full_like_grad, kw={"fill_value": 1})
    defgrad(np.linspace, _linspace_start, _linspace_stop, kw={"start": 0, "stop": 1})
    nondiff(
        np.zeros,
        np.ones,
        np.empty,
        np.zeros_like,
        np.ones_like,
        np.empty_like,
        np.eye,
        np.identity,
        np.arange,
        np.logspace,
        np.geomspace,
        np.tri,
        np.indices,
        np.diag_indices,
        np.tril_indices,
        np.triu_indices,
        note="non-differentiable: an array constructor",
    )
    # (a class whose __next__ calls next() on an itertools.product: run as it is, not from source)
    nondiff(np.ndindex, note="non-differentiable: an iterator of index tuples")
    from dplus.runtime.routers import LABEL_ITERATORS

    LABEL_ITERATORS.add(np.ndindex)

    # -- piecewise constant, integer- or bool-valued: zero sensitivity
    nondiff(
        np.sign,
        np.floor,
        np.ceil,
        np.round,
        _attr(np, "around"),
        np.rint,
        np.trunc,
        np.fix,
        np.floor_divide,
        np.heaviside,
        np.greater,
        np.greater_equal,
        np.less,
        np.less_equal,
        np.equal,
        np.not_equal,
        np.logical_and,
        np.logical_or,
        np.logical_not,
        np.logical_xor,
        np.isnan,
        np.isinf,
        np.isfinite,
        np.isneginf,
        np.isposinf,
        np.signbit,
        np.iscomplexobj,
        np.isrealobj,
        np.iscomplex,
        np.isreal,
        np.isscalar,
        np.argmax,
        np.argmin,
        np.argsort,
        np.argpartition,
        np.argwhere,
        np.nonzero,
        np.flatnonzero,
        np.count_nonzero,
        np.searchsorted,
        np.digitize,
        np.shape,
        np.ndim,
        np.size,
        np.all,
        np.any,
        np.allclose,
        np.isclose,
        np.array_equal,
        np.array_equiv,
        np.result_type,
        np.unravel_index,
        np.ravel_multi_index,
        np.bincount,
        nd.argmax,
        nd.argmin,
        nd.argsort,
        nd.nonzero,
        nd.all,
        nd.any,
    )

    # -- in place: raise
    fresh = "Build a new array instead (np.where, np.concatenate, np.sort(a), a.copy(), ...)"
    for fn in (
        nd.fill,
        nd.sort,
        nd.put,
        nd.resize,
        nd.partition,
        nd.setfield,
        _attr(nd, "itemset"),
        nd.__setitem__,
        np.copyto,
        np.put,
        np.place,
        np.putmask,
        np.fill_diagonal,
        np.put_along_axis,
    ):
        mutating(fn, fresh)
    for name in (
        "iadd",
        "isub",
        "imul",
        "itruediv",
        "ifloordiv",
        "imod",
        "ipow",
        "imatmul",
        "iand",
        "ior",
        "ixor",
        "ilshift",
        "irshift",
    ):
        mutating(
            getattr(nd, f"__{name}__", None),
            "Use the operator that makes a new array (`a = a + b`).",
        )

    # -- random draws: constants, except the location/scale of normal, uniform, exponential,
    # which get their pathwise (reparameterization) sensitivities
    rs = np.random.RandomState
    generator = np.random.Generator
    for name in (
        "random",
        "random_sample",
        "rand",
        "randn",
        "standard_normal",
        "integers",
        "randint",
        "choice",
        "permutation",
        "bytes",
        "beta",
        "binomial",
        "chisquare",
        "dirichlet",
        "f",
        "gamma",
        "geometric",
        "gumbel",
        "hypergeometric",
        "laplace",
        "logistic",
        "lognormal",
        "logseries",
        "multinomial",
        "multivariate_normal",
        "negative_binomial",
        "noncentral_chisquare",
        "noncentral_f",
        "pareto",
        "poisson",
        "power",
        "rayleigh",
        "standard_cauchy",
        "standard_exponential",
        "standard_gamma",
        "standard_t",
        "triangular",
        "vonmises",
        "wald",
        "weibull",
        "zipf",
        "seed",
    ):
        for cls in (rs, generator):
            fn = getattr(cls, name, None)
            if fn is not None:
                defnondiff(
                    fn, note="random draw: treated as a constant (no derivative in its parameters)"
                )
    for cls in (rs, generator):
        defvjp_joint(cls.normal, _method_vjp(_normal_vjp))
        defvjp_joint(cls.uniform, _method_vjp(_uniform_vjp))
        defvjp_joint(cls.exponential, _method_vjp(_exponential_vjp))
        mutating(cls.shuffle, "Use rng.permutation(a), which returns a new array")
    defnondiff(np.random.default_rng)


if np is not None:
    register_numpy_rules()
    # (the family's modules are imported above, for their gradients)
    for _module in ("numpy", "numpy_ufuncs", "numpy_products", "numpy_arrays", "numpy_table"):
        mark_module_helpers(
            vars(sys.modules[f"{__package__}.{_module}"]),
            "fit",
            "_fit_plus",
            "mark_module_helpers",
            "register_numpy_rules",
        )

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
