"""Rules for the ``statistics`` module, on sequences of real numbers.

The sensitivity of the ``data`` argument is shaped like it, as in the builtins rules: a
list for a list, a tuple for a tuple, an array for an array; other iterables are read
once, and a non-zero sensitivity reaching their elements raises
:class:`dplus.NonDifferentiableError` (pass a list instead).
``n`` is the number of data points, ``m`` their mean, ``A`` the result sensitivity.

* ``mean``, ``fmean``: ``1/n`` each; with ``weights``: ``wᵢ/W`` for ``xᵢ`` and
  ``(xᵢ - r)/W`` for ``wᵢ`` (``W = Σw``).
* ``variance(data, xbar)``: ``2(xᵢ - c)/(n-1)`` with ``c = xbar`` if given, else the
  mean; ``xbar`` itself gets ``-2 Σ(xᵢ - c)/(n-1)`` (zero when it is the mean).
  ``pvariance``: the same over ``n``. ``stdev``/``pstdev``: the variance's gradient
  over ``2 r``; ``0`` when all data are equal (a subgradient of a kink).
* ``median``: ``1`` for the middle element, ``1/2`` each for the two middle ones of
  an even count; ``median_low``/``median_high``: ``1`` for the element chosen (ties
  broken as ``sorted`` orders them).
* ``geometric_mean``: ``r/(n xᵢ)``. ``harmonic_mean``: ``r² wᵢ/(W xᵢ²)`` for ``xᵢ``
  and ``r (1 - r/xᵢ)/W`` for ``wᵢ`` (``0`` when a zero makes the result ``0``).
* ``covariance(x, y)``: ``(yᵢ - ȳ)/(n-1)`` and ``(xᵢ - x̄)/(n-1)``.
  ``correlation``: ``(yᵢ-ȳ)/sqrt(SxxSyy) - r(xᵢ-x̄)/Sxx`` and symmetrically (the
  ranked method of Python 3.12 is piecewise constant: zero).
* ``linear_regression(x, y)``: slope ``Sxy/Sxx`` and intercept ``ȳ - slope x̄``
  differentiated through those formulas (``proportional=True``: slope ``Σxy/Σx²``).

``mode``, ``multimode``, ``quantiles`` and ``median_grouped`` have no rule: the
default policy raises if sensitivity reaches them.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from dplus.runtime.linear import gen_zero, tuple_items
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import seq as _seq


def _arg(v: Any, fn: Any, name: str) -> Any:
    return _seq(v, f"statistics.{fn.__name__}", name)


def _mean(xs: Any) -> float:
    return math.fsum(xs) / len(xs)


def _zeros(nargs: int, kwargs: dict) -> tuple:
    out = ((),) + (gen_zero,) * nargs
    return out + ({k: gen_zero for k in kwargs},) if kwargs else out


def _with_kwargs(out: tuple, kwargs: dict, sens: dict) -> tuple:
    if kwargs:
        return out + ({k: sens.get(k, gen_zero) for k in kwargs},)
    return out


def _register(fn: Any, transform: Any, note: str) -> None:
    transform.__name__ = transform.__qualname__ = f"{fn.__name__}_plus"
    register_primitive(fn, transform, note=note)


# ---------------------------------------------------------------------------
# means


def _mean_plus(data: Any) -> ProcResult:
    sd = _arg(data, statistics.mean, "data")
    xs = sd.items
    r = statistics.mean(xs)
    n = len(xs)

    def mean_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(1, {})
        a = A / n
        return ((), sd.sens([a] * n, Abox))

    return ProcResult(r, mean_backprop)


def _fmean_plus(data: Any, *args: Any, **kwargs: Any) -> ProcResult:
    sd = _arg(data, statistics.fmean, "data")
    xs = sd.items
    weights = args[0] if args else kwargs.get("weights")
    swt = None if weights is None else _arg(weights, statistics.fmean, "weights")
    ws = None if swt is None else swt.items
    if ws is None:
        r = statistics.fmean(xs, *args, **kwargs)
    else:
        r = statistics.fmean(xs, ws)
    n = len(xs)
    nargs = 1 + len(args)

    def fmean_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(nargs, kwargs)
        if swt is None:
            a = A / n
            return _with_kwargs(((), sd.sens([a] * n, Abox)) + (gen_zero,) * len(args), kwargs, {})
        W = math.fsum(swt.items)
        sx = sd.sens([A * w / W for w in swt.items], Abox)
        sw = swt.sens([A * (x - r) / W for x in xs], Abox)
        if args:
            return ((), sx, sw)
        return _with_kwargs(((), sx), kwargs, {"weights": sw})

    return ProcResult(r, fmean_backprop)


def _geometric_mean_plus(data: Any) -> ProcResult:
    sd = _arg(data, statistics.geometric_mean, "data")
    xs = sd.items
    r = statistics.geometric_mean(xs)
    n = len(xs)

    def geometric_mean_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(1, {})
        a = A * r / n
        return ((), sd.sens([a / x for x in xs], Abox))

    return ProcResult(r, geometric_mean_backprop)


def _harmonic_mean_plus(data: Any, *args: Any, **kwargs: Any) -> ProcResult:
    sd = _arg(data, statistics.harmonic_mean, "data")
    xs = sd.items
    weights = args[0] if args else kwargs.get("weights")
    swt = None if weights is None else _arg(weights, statistics.harmonic_mean, "weights")
    ws = None if swt is None else swt.items
    r = statistics.harmonic_mean(xs, ws)
    nargs = 1 + len(args)

    def harmonic_mean_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or r == 0:
            return _zeros(nargs, kwargs)
        w_list = [1.0] * len(xs) if ws is None else ws
        W = math.fsum(w_list)
        sx = sd.sens([A * r * r * w / (W * x * x) for w, x in zip(w_list, xs)], Abox)
        if swt is None:
            return _with_kwargs(((), sx) + (gen_zero,) * len(args), kwargs, {})
        sw = swt.sens([A * r * (1.0 - r / x) / W for x in xs], Abox)
        if args:
            return ((), sx, sw)
        return _with_kwargs(((), sx), kwargs, {"weights": sw})

    return ProcResult(r, harmonic_mean_backprop)


# ---------------------------------------------------------------------------
# spread


def _spread(fn: Any, sample: bool, root: bool) -> Any:
    def transform(data: Any, *args: Any, **kwargs: Any) -> ProcResult:
        sd = _arg(data, fn, "data")
        xs = sd.items
        r = fn(xs, *args, **kwargs)
        given = args[0] if args else (next(iter(kwargs.values())) if kwargs else None)
        n = len(xs)
        nargs = 1 + len(args)

        def spread_backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero:
                return _zeros(nargs, kwargs)
            c = _mean(xs) if given is None else given
            dof = n - 1 if sample else n
            scale = 2.0 * A / dof
            if root:
                if r == 0:
                    return _zeros(nargs, kwargs)
                scale = scale / (2.0 * r)
            sx = sd.sens([scale * (x - c) for x in xs], Abox)
            if given is None:
                return _with_kwargs(((), sx) + (gen_zero,) * len(args), kwargs, {})
            sc = -scale * math.fsum(x - c for x in xs)
            if args:
                return ((), sx, sc)
            return _with_kwargs(((), sx), kwargs, {k: sc for k in kwargs})

        return ProcResult(r, spread_backprop)

    return transform


# ---------------------------------------------------------------------------
# order statistics


def _order_stat(fn: Any, kind: str) -> Any:
    def transform(data: Any) -> ProcResult:
        sd = _arg(data, fn, "data")
        xs = sd.items
        r = fn(xs)
        n = len(xs)

        def order_backprop(A: Any, Abox: Any) -> tuple:
            if A is gen_zero:
                return _zeros(1, {})
            order = sorted(range(n), key=xs.__getitem__)
            sens: list = [gen_zero] * n
            if n % 2 == 1:
                sens[order[n // 2]] = A
            elif kind == "median":
                half = A / 2
                sens[order[n // 2 - 1]] = half
                sens[order[n // 2]] = half
            elif kind == "low":
                sens[order[n // 2 - 1]] = A
            else:
                sens[order[n // 2]] = A
            return ((), sd.sens(sens, Abox))

        return ProcResult(r, order_backprop)

    return transform


# ---------------------------------------------------------------------------
# two variables


def _centered(xs: Any) -> list:
    m = _mean(xs)
    return [x - m for x in xs]


def _covariance_plus(x: Any, y: Any) -> ProcResult:
    sx_, sy_ = _arg(x, statistics.covariance, "x"), _arg(y, statistics.covariance, "y")
    xs, ys = sx_.items, sy_.items
    r = statistics.covariance(xs, ys)
    n = len(xs)

    def covariance_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero:
            return _zeros(2, {})
        a = A / (n - 1)
        return (
            (),
            sx_.sens([a * d for d in _centered(ys)], Abox),
            sy_.sens([a * d for d in _centered(xs)], Abox),
        )

    return ProcResult(r, covariance_backprop)


def _correlation_plus(x: Any, y: Any, **kwargs: Any) -> ProcResult:
    sx_, sy_ = _arg(x, statistics.correlation, "x"), _arg(y, statistics.correlation, "y")
    xs, ys = sx_.items, sy_.items
    r = statistics.correlation(xs, ys, **kwargs)

    def correlation_backprop(A: Any, Abox: Any) -> tuple:
        if A is gen_zero or kwargs.get("method", "linear") != "linear":
            return _zeros(2, kwargs)
        dx, dy = _centered(xs), _centered(ys)
        sxx = math.fsum(d * d for d in dx)
        syy = math.fsum(d * d for d in dy)
        root = math.sqrt(sxx * syy)
        sx = [A * (b / root - r * a / sxx) for a, b in zip(dx, dy)]
        sy = [A * (a / root - r * b / syy) for a, b in zip(dx, dy)]
        return _with_kwargs(((), sx_.sens(sx, Abox), sy_.sens(sy, Abox)), kwargs, {})

    return ProcResult(r, correlation_backprop)


def _linear_regression_plus(x: Any, y: Any, **kwargs: Any) -> ProcResult:
    sx_, sy_ = (
        _arg(x, statistics.linear_regression, "x"),
        _arg(y, statistics.linear_regression, "y"),
    )
    xs, ys = sx_.items, sy_.items
    r = statistics.linear_regression(xs, ys, **kwargs)
    proportional = kwargs.get("proportional", False)
    n = len(xs)

    def linear_regression_backprop(A: Any, Abox: Any) -> tuple:
        a_slope, a_icpt = tuple_items(A, 2)
        if a_slope is gen_zero and a_icpt is gen_zero:
            return _zeros(2, kwargs)
        a_slope = 0.0 if a_slope is gen_zero else a_slope
        a_icpt = 0.0 if a_icpt is gen_zero else a_icpt
        slope = r.slope
        if proportional:
            sxx = math.fsum(v * v for v in xs)
            # the intercept is the constant 0
            sx = [a_slope * (b - 2.0 * slope * a) / sxx for a, b in zip(xs, ys)]
            sy = [a_slope * a / sxx for a in xs]
        else:
            mx, my = _mean(xs), _mean(ys)
            dx = [v - mx for v in xs]
            dy = [v - my for v in ys]
            sxx = math.fsum(d * d for d in dx)
            # d slope/dx_i, d slope/dy_i
            ds_dx = [(b - 2.0 * slope * a) / sxx for a, b in zip(dx, dy)]
            ds_dy = [a / sxx for a in dx]
            # intercept = my - slope * mx
            sx = [a_slope * g + a_icpt * (-slope / n - mx * g) for g in ds_dx]
            sy = [a_slope * g + a_icpt * (1.0 / n - mx * g) for g in ds_dy]
        return _with_kwargs(((), sx_.sens(sx, Abox), sy_.sens(sy, Abox)), kwargs, {})

    return ProcResult(r, linear_regression_backprop)


_register(statistics.mean, _mean_plus, "1/n for each data point")
_register(statistics.fmean, _fmean_plus, "1/n each; weighted: w_i/W and (x_i - r)/W")
_register(statistics.geometric_mean, _geometric_mean_plus, "r/(n x_i)")
_register(statistics.harmonic_mean, _harmonic_mean_plus, "r² w_i/(W x_i²); weights: r(1 - r/x_i)/W")
_register(statistics.variance, _spread(statistics.variance, True, False), "2(x_i - m)/(n-1)")
_register(statistics.pvariance, _spread(statistics.pvariance, False, False), "2(x_i - m)/n")
_register(statistics.stdev, _spread(statistics.stdev, True, True), "(x_i - m)/((n-1) r)")
_register(statistics.pstdev, _spread(statistics.pstdev, False, True), "(x_i - m)/(n r)")
_register(
    statistics.median,
    _order_stat(statistics.median, "median"),
    "1 (or 1/2 each) for the middle element(s)",
)
_register(
    statistics.median_low, _order_stat(statistics.median_low, "low"), "1 for the element chosen"
)
_register(
    statistics.median_high, _order_stat(statistics.median_high, "high"), "1 for the element chosen"
)
if hasattr(statistics, "covariance"):
    _register(statistics.covariance, _covariance_plus, "(y_i - ȳ)/(n-1) and (x_i - x̄)/(n-1)")
    _register(statistics.correlation, _correlation_plus, "Pearson correlation")
    _register(
        statistics.linear_regression,
        _linear_regression_plus,
        "slope and intercept of least squares",
    )
