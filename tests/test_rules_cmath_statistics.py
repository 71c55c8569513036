"""The cmath and statistics rules against finite differences."""

from __future__ import annotations

import cmath
import math
import statistics

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rules_fd_helpers import (
    assert_close,
    backprop,
    check_number_rule,
    expected_sens,
    holomorphic_derivative,
    richardson,
    step,
)

import dplus
from dplus import BoxSensitivities, gen_zero
from dplus.errors import NonDifferentiableError
from dplus.rules import inline_rule_for
from dplus.runtime.linear import OneHot
from dplus.runtime.registry import lookup_transform

SETTINGS = settings(max_examples=50, deadline=None)


def floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def off_axes(lo: float = -3, hi: float = 3, gap: float = 0.05) -> st.SearchStrategy[complex]:
    """Complex numbers away from both axes: clear of every branch cut of cmath."""
    part = st.one_of(floats(lo, -gap), floats(gap, hi))
    return st.builds(complex, part, part)


HOLOMORPHIC = [
    cmath.exp, cmath.log, cmath.log10, cmath.sqrt, cmath.sin, cmath.cos, cmath.tan,
    cmath.sinh, cmath.cosh, cmath.tanh, cmath.asin, cmath.acos, cmath.atan,
    cmath.asinh, cmath.acosh, cmath.atanh,
]  # fmt: skip


@pytest.mark.parametrize("fn", HOLOMORPHIC, ids=lambda f: f.__name__)
@SETTINGS
@given(z=off_axes(), A=st.one_of(floats(-2, 2), st.builds(complex, floats(-2, 2), floats(-2, 2))))
def test_holomorphic(fn, z, A):
    out = backprop(fn, z, A=A)
    # A * f'(z), no conjugation
    assert_close(out[1], A * holomorphic_derivative(fn, z), 1e-6, 1e-9, fn.__name__)
    # and the general convention: dL/dx - i dL/dy of L = Re(A f(z))
    check_number_rule(fn, (z,), A=A, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fn", HOLOMORPHIC, ids=lambda f: f.__name__)
@SETTINGS
@given(x=floats(-3, 3))
def test_holomorphic_on_real_arguments(fn, x):
    """A float argument gets the real part: the derivative of Re(A f(x)) along the reals."""
    cuts = {
        cmath.log: [0.0], cmath.log10: [0.0], cmath.sqrt: [0.0], cmath.asin: [-1.0, 1.0],
        cmath.acos: [-1.0, 1.0], cmath.acosh: [-1.0, 1.0], cmath.atanh: [-1.0, 1.0],
        cmath.tan: [-math.pi / 2, math.pi / 2],
    }  # fmt: skip
    assume(all(abs(x - c) > 0.05 for c in cuts.get(fn, [])))
    out = check_number_rule(fn, (x,), A=1.0, rtol=1e-6, atol=1e-9)
    assert type(out[1]) is float


def test_real_argument_examples():
    assert backprop(cmath.sqrt, -4.0) == ((), 0.0)  # sqrt(-x) = i sqrt(x): real part constant
    assert backprop(cmath.exp, 0.0) == ((), 1.0)
    assert dplus.grad(cmath.exp)(1j) == (cmath.exp(1j),)


@SETTINGS
@given(z=off_axes(), b=st.one_of(floats(1.1, 10), floats(0.1, 0.9), off_axes()), A=floats(-2, 2))
def test_log_with_base(z, b, A):
    check_number_rule(cmath.log, (z, b), A=A, rtol=1e-6, atol=1e-9)


def test_branch_cuts_both_sides():
    # just above and below the cuts, the derivative is the one of the side cmath takes
    for fn, z in [(cmath.asin, 2.0), (cmath.acos, -2.0), (cmath.acosh, 0.5), (cmath.atanh, 2.0),
                  (cmath.asinh, 2j), (cmath.atan, -2j), (cmath.sqrt, -2.0), (cmath.log, -2.0)]:  # fmt: skip
        for side in (1e-3, -1e-3):
            w = z + (side * 1j if isinstance(z, float) else side)
            out = backprop(fn, complex(w), A=1.0)
            f = fn
            h = 1e-6
            d = (f(w + h) - f(w - h)) / (2 * h)
            assert_close(out[1], d, 1e-5, 1e-7, f"{fn.__name__} at {w}")


@SETTINGS
@given(z=off_axes(), A=floats(-2, 2))
def test_phase_abs_polar(z, A):
    check_number_rule(cmath.phase, (z,), A=A, rtol=1e-6, atol=1e-9)
    check_number_rule(abs, (z,), A=A, rtol=1e-6, atol=1e-9)
    a0, a1 = A, 0.5
    out = backprop(cmath.polar, z, A=(a0, a1))

    def L(zz):
        m, p = cmath.polar(zz)
        return a0 * m + a1 * p

    dx = richardson(lambda t: L(complex(t, z.imag)), z.real, step(z.real))
    dy = richardson(lambda t: L(complex(z.real, t)), z.imag, step(z.imag))
    assert_close(out[1], complex(dx, -dy), 1e-6, 1e-9)
    assert backprop(cmath.polar, z, A=OneHot(1, 1.0, 2))[1] == backprop(cmath.phase, z)[1]


def test_phase_of_real_numbers():
    assert backprop(cmath.phase, -2.0) == ((), 0.0)
    assert backprop(cmath.phase, 0j)[1] is gen_zero


@SETTINGS
@given(m=floats(0.1, 5), phi=floats(-3, 3), A=st.builds(complex, floats(-2, 2), floats(-2, 2)))
def test_rect(m, phi, A):
    out = check_number_rule(cmath.rect, (m, phi), A=A, rtol=1e-6, atol=1e-9)
    assert type(out[1]) is float and type(out[2]) is float


@pytest.mark.parametrize(
    "fn", HOLOMORPHIC + [cmath.phase, cmath.polar, cmath.rect], ids=lambda f: f.__name__
)
def test_cmath_gen_zero(fn):
    args = (1.0, 0.5) if fn is cmath.rect else (0.5 + 0.5j,)
    assert backprop(fn, *args, A=gen_zero) == ((),) + (gen_zero,) * len(args)
    assert inline_rule_for(fn) is None  # complex rules are not inlined (see cmath.py)


@pytest.mark.parametrize("fn", [cmath.isfinite, cmath.isinf, cmath.isnan])
def test_cmath_non_differentiable(fn):
    assert backprop(fn, 1 + 1j) == ((), gen_zero)


# ---------------------------------------------------------------------------
# statistics


def data(lo=-10.0, hi=10.0, min_size=2, max_size=7, gap=0.0):
    s = st.lists(floats(lo, hi), min_size=min_size, max_size=max_size)
    if gap:
        s = s.filter(
            lambda xs: all(abs(a - b) > gap for i, a in enumerate(xs) for b in xs[i + 1 :])
        )
    return s


def fd_list(fn, xs, other=(), index=0, **kwargs):
    """Finite-difference partials of fn with respect to each element of its argument ``index``."""
    args = [list(xs)] + [list(o) if isinstance(o, (list, tuple)) else o for o in other]
    target = args[index]
    out = []
    for i in range(len(target)):

        def L(t, i=i):
            a = [list(v) if isinstance(v, list) else v for v in args]
            a[index][i] = t
            return fn(*a, **kwargs)

        out.append(richardson(L, target[i], step(target[i])))
    return out


STATS_ONE = {
    statistics.mean: data(),
    statistics.fmean: data(),
    statistics.variance: data(),
    statistics.pvariance: data(min_size=1),
    statistics.stdev: data(gap=0.01),
    statistics.pstdev: data(gap=0.01),
    statistics.median: data(min_size=1, gap=0.01),
    statistics.median_low: data(min_size=1, gap=0.01),
    statistics.median_high: data(min_size=1, gap=0.01),
    statistics.geometric_mean: data(0.1, 10, min_size=1),
    statistics.harmonic_mean: data(0.1, 10, min_size=1),
}


@pytest.mark.parametrize("fn", list(STATS_ONE), ids=lambda f: f.__name__)
@SETTINGS
@given(d=st.data(), kind=st.sampled_from([list, tuple]), A=floats(-2, 2))
def test_statistics_one_sequence(fn, d, kind, A):
    xs = kind(d.draw(STATS_ONE[fn]))
    if fn in (statistics.stdev, statistics.pstdev):
        assume(fn(xs) > 0.05)
    out = backprop(fn, xs, A=A)
    assert type(out[1]) is kind and len(out[1]) == len(xs)
    expected = [A * e for e in fd_list(fn, xs)]
    assert_close([0.0 if s is gen_zero else s for s in out[1]], expected, 1e-6, 1e-8, fn.__name__)
    g = dplus.grad(fn)(xs)
    assert type(g[0]) is kind and all(v is not gen_zero for v in g[0])


@pytest.mark.parametrize(
    "fn",
    [statistics.variance, statistics.pvariance, statistics.stdev, statistics.pstdev],
    ids=lambda f: f.__name__,
)
@SETTINGS
@given(xs=data(min_size=2), c=floats(-10, 10), as_keyword=st.booleans())
def test_spread_with_given_mean(fn, xs, c, as_keyword):
    assume(fn(xs, c) > 0.05)
    kw = {"xbar": c} if fn in (statistics.variance, statistics.stdev) else {"mu": c}
    out = backprop(fn, xs, **kw) if as_keyword else backprop(fn, xs, c)
    assert_close(out[1], fd_list(fn, xs, (c,)), 1e-6, 1e-8)
    sc = out[2][next(iter(kw))] if as_keyword else out[2]
    assert_close(sc, richardson(lambda t: fn(xs, t), c, step(c)), 1e-6, 1e-8)


@pytest.mark.parametrize(
    "fn", [statistics.fmean, statistics.harmonic_mean], ids=lambda f: f.__name__
)
@SETTINGS
@given(
    xw=st.integers(1, 6).flatmap(lambda n: st.tuples(data(0.1, 10, n, n), data(0.1, 10, n, n))),
    as_keyword=st.booleans(),
)
def test_weighted_means(fn, xw, as_keyword):
    xs, ws = xw
    out = backprop(fn, xs, weights=ws) if as_keyword else backprop(fn, xs, ws)
    assert_close(out[1], fd_list(lambda a, w: fn(a, w), xs, (ws,)), 1e-6, 1e-8)
    sw = out[2]["weights"] if as_keyword else out[2]
    assert_close(sw, fd_list(lambda a, w: fn(a, w), xs, (ws,), index=1), 1e-6, 1e-8)


TWO_SEQ = [statistics.covariance, statistics.correlation]


@pytest.mark.parametrize("fn", TWO_SEQ, ids=lambda f: f.__name__)
@SETTINGS
@given(
    xy=st.integers(3, 7).flatmap(lambda n: st.tuples(data(-10, 10, n, n), data(-10, 10, n, n))),
    A=floats(-2, 2),
)
def test_two_sequences(fn, xy, A):
    xs, ys = xy
    assume(statistics.pstdev(xs) > 0.1 and statistics.pstdev(ys) > 0.1)
    out = backprop(fn, xs, ys, A=A)
    assert_close(out[1], [A * e for e in fd_list(fn, xs, (ys,))], 1e-6, 1e-8)
    assert_close(out[2], [A * e for e in fd_list(fn, xs, (ys,), index=1)], 1e-6, 1e-8)


@SETTINGS
@given(
    xy=st.integers(3, 7).flatmap(lambda n: st.tuples(data(-10, 10, n, n), data(-10, 10, n, n))),
    a=floats(-2, 2),
    b=floats(-2, 2),
    proportional=st.booleans(),
)
def test_linear_regression(xy, a, b, proportional):
    xs, ys = xy
    assume(statistics.pstdev(xs) > 0.1 and sum(v * v for v in xs) > 0.1)
    out = backprop(statistics.linear_regression, xs, ys, A=(a, b), proportional=proportional)

    def L(x, y):
        s, i = statistics.linear_regression(x, y, proportional=proportional)
        return a * s + b * i

    assert_close(out[1], fd_list(L, xs, (ys,)), 1e-6, 1e-8)
    assert_close(out[2], fd_list(L, xs, (ys,), index=1), 1e-6, 1e-8)
    assert out[3] == {"proportional": gen_zero}


def test_median_even_count_and_ties():
    assert backprop(statistics.median, [4.0, 1.0, 3.0, 2.0], A=1.0)[1] == [
        gen_zero,
        gen_zero,
        0.5,
        0.5,
    ]
    assert backprop(statistics.median_low, [4.0, 1.0, 3.0, 2.0])[1] == [
        gen_zero,
        gen_zero,
        gen_zero,
        1.0,
    ]
    assert backprop(statistics.median_high, [4.0, 1.0, 3.0, 2.0])[1] == [
        gen_zero,
        gen_zero,
        1.0,
        gen_zero,
    ]


def test_statistics_other_iterables():
    # a generator can be read, but sensitivity cannot be sent back into it
    r = lookup_transform(statistics.mean)(x for x in [1.0, 2.0])
    assert r.primal == 1.5
    with pytest.raises(NonDifferentiableError, match="list"):
        r.backprop(1.0, BoxSensitivities())
    assert r.backprop(gen_zero, BoxSensitivities()) == ((), gen_zero)


@pytest.mark.parametrize("fn", list(STATS_ONE) + TWO_SEQ, ids=lambda f: f.__name__)
def test_statistics_gen_zero(fn):
    args = ([1.0, 2.0, 4.0], [1.0, 3.0, 2.0]) if fn in TWO_SEQ else ([1.0, 2.0, 4.0],)
    assert backprop(fn, *args, A=gen_zero) == ((),) + (gen_zero,) * len(args)


# ---------------------------------------------------------------------------
# the parts of a complex number


def test_real_imag_conjugate():
    from dplus.primitives.container_reads import getattr_plus

    z = 3.0 + 4.0j
    r = getattr_plus(z, "real")
    assert r.primal == 3.0 and r.backprop(2.0, BoxSensitivities())[1] == 2.0
    r = getattr_plus(z, "imag")
    assert r.primal == 4.0 and r.backprop(2.0, BoxSensitivities())[1] == -2j
    assert getattr_plus(2.5, "real").backprop(1.0, BoxSensitivities())[1] == 1.0
    assert getattr_plus(2.5, "imag").backprop(1.0, BoxSensitivities())[1] is gen_zero
    t = lookup_transform(z.conjugate)
    r = t()
    assert r.primal == z.conjugate() and r.backprop(1 + 2j, BoxSensitivities()) == ((1 - 2j,),)
    assert lookup_transform((2.5).conjugate)().backprop(1.0, BoxSensitivities()) == ((1.0,),)


@SETTINGS
@given(z=off_axes(), a=floats(-2, 2), b=floats(-2, 2))
def test_parts_against_finite_differences(z, a, b):
    from dplus.primitives.container_reads import getattr_plus

    # L = a * Re(z) + b * Im(z): sensitivity dL/dx - i dL/dy = a - i b
    s = (
        getattr_plus(z, "real").backprop(a, BoxSensitivities())[1]
        + getattr_plus(z, "imag").backprop(b, BoxSensitivities())[1]
    )
    assert_close(s, complex(a, -b), 1e-12, 1e-12)
    # conjugate: L = Re(A conj(z)), A complex
    A = complex(a, b)
    out = lookup_transform(complex.conjugate)(z).backprop(A, BoxSensitivities())
    assert_close(out[1], expected_sens(lambda w: w.conjugate(), (z,), A, 0), 1e-8, 1e-10)
