"""The math rules against finite differences, on hypothesis-generated inputs inside each domain."""

from __future__ import annotations

import math
import operator

import pytest
from dplus.primitives.math import digamma, polygamma
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rules_fd_helpers import (
    assert_close,
    backprop,
    check_grad_matches_backprop,
    check_inlinable,
    check_number_rule,
    expected_sens,
    richardson,
    step,
)

import dplus
from dplus import BoxSensitivities, gen_zero
from dplus.rules import inline_rule_for, inline_rules
from dplus.runtime.registry import lookup_transform

SETTINGS = settings(max_examples=50, deadline=None)


def floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def away_from_zero(lo: float, hi: float, gap: float = 0.05) -> st.SearchStrategy[float]:
    return st.one_of(floats(-hi, -max(lo, gap)), floats(max(lo, gap), hi))


def non_integer(lo: float, hi: float, gap: float = 0.05) -> st.SearchStrategy[float]:
    return floats(lo, hi).filter(lambda x: abs(x - round(x)) > gap)


# function -> (strategies for each argument, differentiable argument positions)
ONE_ARG = {
    math.sin: floats(-10, 10),
    math.cos: floats(-10, 10),
    math.tan: floats(-1.4, 1.4),
    math.asin: floats(-0.98, 0.98),
    math.acos: floats(-0.98, 0.98),
    math.atan: floats(-50, 50),
    math.sinh: floats(-5, 5),
    math.cosh: floats(-5, 5),
    math.tanh: floats(-5, 5),
    math.asinh: floats(-50, 50),
    math.acosh: floats(1.02, 50),
    math.atanh: floats(-0.98, 0.98),
    math.exp: floats(-10, 10),
    math.expm1: floats(-10, 10),
    math.log: floats(0.02, 100),
    math.log2: floats(0.02, 100),
    math.log10: floats(0.02, 100),
    math.log1p: floats(-0.98, 100),
    math.sqrt: floats(0.02, 100),
    math.erf: floats(-4, 4),
    math.erfc: floats(-4, 4),
    math.gamma: st.one_of(floats(0.1, 8.0), non_integer(-4.9, -0.1)),
    math.lgamma: st.one_of(floats(0.1, 40.0), non_integer(-6.9, -0.1)),
    math.fabs: away_from_zero(0.0, 100),
    math.degrees: floats(-100, 100),
    math.radians: floats(-1000, 1000),
}
if hasattr(math, "exp2"):
    ONE_ARG[math.exp2] = floats(-10, 10)
if hasattr(math, "cbrt"):
    ONE_ARG[math.cbrt] = away_from_zero(0.02, 100)


@pytest.mark.parametrize("fn", list(ONE_ARG), ids=lambda f: f.__name__)
@SETTINGS
@given(data=st.data())
def test_one_argument_rules(fn, data):
    x = data.draw(ONE_ARG[fn], label="x")
    A = data.draw(st.sampled_from([1.0, -0.5, 2.0]), label="A")
    out = check_number_rule(fn, (x,), A=A, rtol=1e-6)
    if A == 1.0:
        check_grad_matches_backprop(fn, (x,), out)


@pytest.mark.parametrize("fn", list(ONE_ARG), ids=lambda f: f.__name__)
def test_one_argument_rules_accept_ints(fn):
    x = {math.acosh: 2, math.asin: 0, math.acos: 0, math.atanh: 0, math.tan: 1}.get(fn, 1)
    if fn in (math.gamma, math.lgamma):
        x = 3
    out = backprop(fn, x)
    assert_close(out[1], expected_sens(fn, (float(x),), 1.0, 0), 1e-6, 1e-9, fn.__name__)


def _pair_not_origin(lo: float, hi: float) -> st.SearchStrategy[tuple[float, float]]:
    # atan2(y, x) jumps across the negative x axis (y == 0, x < 0)
    return st.tuples(floats(lo, hi), floats(lo, hi)).filter(
        lambda p: math.hypot(*p) > 0.1 and (p[1] > 0 or abs(p[0]) > 0.05)
    )


def _quotient_margin(x: float, y: float) -> float:
    """How far x/y moves when finite differences move x or y (with room to spare)."""
    return 3 * (step(x) / abs(y) + abs(x) * step(y) / (y * y)) + 1e-3


def _fmod_args() -> st.SearchStrategy[tuple[float, float]]:
    def ok(p: tuple[float, float]) -> bool:
        x, y = p
        q = x / y
        return abs(q - round(q)) > _quotient_margin(x, y)  # fmod jumps where x/y is an integer

    return st.tuples(floats(-50, 50), away_from_zero(0.1, 10)).filter(ok)


def _remainder_args() -> st.SearchStrategy[tuple[float, float]]:
    def ok(p: tuple[float, float]) -> bool:
        x, y = p
        q = x / y
        return abs(abs(q - math.floor(q)) - 0.5) > _quotient_margin(x, y)  # jumps at half-integers

    return st.tuples(floats(-50, 50), away_from_zero(0.1, 10)).filter(ok)


TWO_ARG = {
    math.atan2: (_pair_not_origin(-10, 10), (0, 1)),
    math.pow: (st.tuples(floats(0.1, 10), floats(-3, 3)), (0, 1)),
    math.copysign: (st.tuples(away_from_zero(0.01, 100), away_from_zero(0.01, 100)), (0,)),
    math.fmod: (_fmod_args(), (0, 1)),
    math.remainder: (_remainder_args(), (0, 1)),
    math.ldexp: (st.tuples(floats(-100, 100), st.integers(-20, 20)), (0,)),
    math.nextafter: (st.tuples(floats(-100, 100), floats(-100, 100)), (0,)),
    math.log: (st.tuples(floats(0.02, 100), st.one_of(floats(1.1, 20), floats(0.05, 0.9))), (0, 1)),
}


@pytest.mark.parametrize("fn", list(TWO_ARG), ids=lambda f: f.__name__)
@SETTINGS
@given(data=st.data())
def test_two_argument_rules(fn, data):
    strategy, diff = TWO_ARG[fn]
    args = data.draw(strategy, label="args")
    if fn is math.nextafter:
        # nextafter moves x by one ulp: its derivative in x is 1, by definition
        out = backprop(fn, *args)
        assert out[1] == 1.0 and out[2] is gen_zero
        return
    out = check_number_rule(fn, args, diff=diff)
    check_grad_matches_backprop(fn, args, out)


def test_pow_at_special_points():
    assert backprop(math.pow, 0.0, 2.0) == ((), 0.0, 0.0)
    assert backprop(math.pow, 0.0, 1.0)[1] == 1.0
    assert backprop(math.pow, 3.0, 0.0)[1] == 0.0
    assert backprop(math.pow, 0.0, 0.0) == ((), 0.0, 0.0)
    # a negative base with an integer exponent: derivative in the base only
    out = backprop(math.pow, -2.0, 3.0)
    assert out == ((), 12.0, 0.0)


def test_fabs_and_copysign_at_zero():
    assert backprop(math.fabs, 0.0)[1] == 0.0
    assert backprop(math.copysign, 2.0, -0.0)[1] == -1.0


@SETTINGS
@given(xs=st.lists(floats(-100, 100), min_size=0, max_size=6))
def test_hypot(xs):
    assume(math.hypot(*xs) > 1e-3 or not xs)
    out = backprop(math.hypot, *xs)
    assert len(out) == len(xs) + 1
    for i in range(len(xs)):
        assert_close(out[i + 1], expected_sens(math.hypot, tuple(xs), 1.0, i), 1e-6, 1e-9)
    if xs:
        check_grad_matches_backprop(math.hypot, tuple(xs), out)


def test_hypot_at_origin_is_zero():
    assert backprop(math.hypot, 0.0, 0.0) == ((), gen_zero, gen_zero)
    assert dplus.grad(math.hypot)(0.0, 0.0) == (0.0, 0.0)


def _seq_partials(fn, seq_args, A=1.0, kwargs=None):
    """Finite-difference partials of fn with respect to each element of each sequence argument."""
    kwargs = kwargs or {}
    result = []
    for j, s in enumerate(seq_args):
        parts = []
        for i in range(len(s)):

            def L(t, j=j, i=i):
                args = [list(a) for a in seq_args]
                args[j][i] = t
                args = [type(a)(b) for a, b in zip(seq_args, args)]
                return A * fn(*args, **kwargs)

            parts.append(richardson(L, s[i], step(s[i])))
        result.append(parts)
    return result


@SETTINGS
@given(
    pq=st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(floats(-10, 10), min_size=n, max_size=n),
            st.lists(floats(-10, 10), min_size=n, max_size=n),
        )
    ),
    kind=st.sampled_from([list, tuple]),
)
def test_dist(pq, kind):
    p, q = kind(pq[0]), kind(pq[1])
    assume(math.dist(p, q) > 1e-2)
    out = backprop(math.dist, p, q)
    assert type(out[1]) is kind and type(out[2]) is kind
    expected = _seq_partials(math.dist, [p, q])
    assert_close(list(out[1]), expected[0], 1e-6, 1e-9)
    assert_close(list(out[2]), expected[1], 1e-6, 1e-9)
    g = dplus.grad(math.dist)(p, q)
    assert_close(list(g[0]), list(out[1]), 1e-12, 0)


@SETTINGS
@given(
    xs=st.lists(floats(-100, 100), max_size=8), kind=st.sampled_from([list, tuple]), A=floats(-2, 2)
)
def test_fsum(xs, kind, A):
    xs = kind(xs)
    out = backprop(math.fsum, xs, A=A)
    assert type(out[1]) is kind and list(out[1]) == [A] * len(xs)
    assert dplus.grad(math.fsum)(xs) == (kind([1.0] * len(xs)),)


@SETTINGS
@given(
    xs=st.lists(st.one_of(floats(-3, 3), st.just(0.0)), max_size=6),
    start=st.one_of(st.none(), floats(-3, 3)),
)
def test_prod(xs, start):
    kwargs = {} if start is None else {"start": start}
    out = backprop(math.prod, xs, **kwargs)
    if start is None:
        assert len(out) == 2
    else:
        assert len(out) == 3 and set(out[2]) == {"start"}
    expected = _seq_partials(math.prod, [xs], kwargs=kwargs)[0]
    assert_close(list(out[1]), expected, 1e-6, 1e-9)
    if start is not None:
        # (the rule multiplies in another order: below the normal range, 2.2e-308, the
        # products round differently, so the tolerance there is absolute)
        assert_close(out[2]["start"], math.prod(xs), 1e-12, 1e-300)
    # exact with zeros: the product of the others
    for i in range(len(xs)):
        others = xs[:i] + xs[i + 1 :]
        assert_close(out[1][i], math.prod(others) * (1 if start is None else start), 1e-12, 1e-300)


@pytest.mark.skipif(not hasattr(math, "sumprod"), reason="math.sumprod is Python 3.12+")
def test_sumprod():
    out = backprop(math.sumprod, [1.0, 2.0], [3.0, 4.0])
    assert out == ((), [3.0, 4.0], [1.0, 2.0])


@SETTINGS
@given(x=floats(-100, 100), a0=floats(-2, 2), a1=floats(-2, 2))
def test_modf_and_frexp(x, a0, a1):
    assume(abs(x - round(x)) > 1e-3)
    assert backprop(math.modf, x, A=(a0, a1)) == ((), a0)
    assert backprop(math.modf, x, A=dplus.runtime.linear.OneHot(1, a1, 2)) == ((), gen_zero)
    assume(x != 0 and abs(math.frexp(x)[0]) > 0.5 + 1e-6)  # the mantissa jumps at powers of 2
    out = backprop(math.frexp, x, A=(a0, a1))
    assert_close(out[1], a0 * richardson(lambda t: math.frexp(t)[0], x, abs(x) * 1e-9), 1e-5, 1e-9)


NONDIFF = {
    math.floor: (2.5,),
    math.ceil: (2.5,),
    math.trunc: (2.5,),
    math.isfinite: (2.5,),
    math.isinf: (2.5,),
    math.isnan: (2.5,),
    math.isclose: (2.5, 2.6),
    math.factorial: (5,),
    math.comb: (5, 2),
    math.perm: (5, 2),
    math.gcd: (12, 18),
    math.lcm: (4, 6),
    math.isqrt: (17,),
    math.ulp: (2.5,),
}


@pytest.mark.parametrize("fn", list(NONDIFF), ids=lambda f: f.__name__)
def test_non_differentiable(fn):
    args = NONDIFF[fn]
    out = backprop(fn, *args, A=1.0)
    assert out == ((),) + (gen_zero,) * len(args)
    assert inline_rule_for(fn) is None


def test_isclose_with_keywords():
    r = lookup_transform(math.isclose)(1.0, 1.0 + 1e-12, rel_tol=1e-9)
    assert r.primal is True
    assert r.backprop(1.0, BoxSensitivities()) == ((), gen_zero, gen_zero, {"rel_tol": gen_zero})


# ---------------------------------------------------------------------------
# digamma


def test_digamma_known_values():
    euler = 0.5772156649015329
    assert_close(digamma(1.0), -euler, 1e-14, 1e-15)
    assert_close(digamma(0.5), -euler - 2 * math.log(2), 1e-14, 1e-15)
    assert_close(digamma(10.0), sum(1 / k for k in range(1, 10)) - euler, 1e-14, 1e-15)
    assert_close(digamma(-0.5), 0.03648997397857652, 1e-13, 1e-15)
    assert math.isnan(digamma(0.0)) and math.isnan(digamma(-3.0))


@SETTINGS
@given(x=st.one_of(floats(0.05, 200), non_integer(-10, -0.05)))
def test_digamma_recurrence_and_reflection(x):
    assert_close(digamma(x + 1), digamma(x) + 1 / x, 1e-12, 1e-12)
    if x < 1:
        assert_close(digamma(1 - x) - digamma(x), math.pi / math.tan(math.pi * x), 1e-10, 1e-10)


@SETTINGS
@given(x=floats(0.2, 50))
def test_digamma_is_lgamma_derivative(x):
    assert_close(digamma(x), richardson(math.lgamma, x, step(x, 1e-3)), 1e-8, 1e-10)


def test_polygamma_known_values():
    assert_close(polygamma(1, 1.0), math.pi**2 / 6, 1e-14, 0)
    assert_close(polygamma(1, 0.5), math.pi**2 / 2, 1e-14, 0)
    assert_close(polygamma(2, 1.0), -2.4041138063191885, 1e-13, 0)  # -2 zeta(3)
    assert_close(polygamma(3, 1.0), math.pi**4 / 15, 1e-13, 0)
    assert polygamma(0, 2.5) == digamma(2.5)
    assert math.isnan(polygamma(1, -2.0))
    with pytest.raises(ValueError):
        polygamma(-1, 1.0)


@SETTINGS
@given(n=st.integers(1, 4), x=st.one_of(floats(0.05, 100), non_integer(-8, -0.05)))
def test_polygamma_recurrence_and_derivative(n, x):
    # psi_n(x + 1) = psi_n(x) + (-1)^n n! / x^(n+1)
    term = (-1) ** n * math.factorial(n) / x ** (n + 1)
    scale = abs(polygamma(n, x)) + abs(term)  # the sum may cancel
    assert_close(polygamma(n, x + 1), polygamma(n, x) + term, 0.0, 1e-13 * scale + 1e-13)
    if abs(x) > 0.2:
        d = richardson(lambda t: polygamma(n - 1, t), x, 1e-3 * min(1.0, abs(x - round(x)) + 0.05))
        assert_close(polygamma(n, x), d, 1e-6, 1e-8)


# ---------------------------------------------------------------------------
# second derivatives: the rules' own gradient code is differentiated again


def _second_difference(f, x, h=1e-4):
    return (f(x + h) - 2 * f(x) + f(x - h)) / (h * h)


# (a representative subset: the first transform of a rule's own code is not cheap)
SECOND_ORDER = {fn: x for fn, x in [
    (math.sin, 0.7), (math.tan, 0.7), (math.asin, 0.3), (math.atanh, 0.3), (math.exp, 0.7),
    (math.log, 0.7), (math.sqrt, 0.7), (math.erf, 0.7), (math.gamma, -1.5), (math.lgamma, 1.7),
    (math.fabs, -0.7), (digamma, 2.5),
]}  # fmt: skip


@pytest.mark.parametrize("fn", list(SECOND_ORDER), ids=lambda f: f.__name__)
def test_second_derivatives(fn):
    x = SECOND_ORDER[fn]
    assert_close(
        dplus.grad1(dplus.grad1(fn))(x), _second_difference(fn, x), 1e-5, 1e-6, fn.__name__
    )


@pytest.mark.parametrize("fn", [math.atan2, math.hypot], ids=lambda f: f.__name__)
def test_mixed_second_derivatives(fn):
    x, y = 1.3, 0.7
    h = 1e-5
    for i in range(2):
        row = dplus.grad(lambda a, b: dplus.grad(fn)(a, b)[i])(x, y)  # noqa: B023  (differentiated at once, in this iteration)
        for j in range(2):
            got = row[j]
            hi = [0.0, 0.0]
            hi[j] = h
            want = (
                dplus.grad(fn)(x + hi[0], y + hi[1])[i] - dplus.grad(fn)(x - hi[0], y - hi[1])[i]
            ) / (2 * h)
            assert_close(got, want, 1e-5, 1e-7, f"{fn.__name__} d2/d{i}d{j}")


# ---------------------------------------------------------------------------
# gen_zero and inline rules


ALL_DIFF_ARGS = {fn: (1.5,) for fn in ONE_ARG}
ALL_DIFF_ARGS.update({math.acosh: (1.5,), math.asin: (0.5,), math.acos: (0.5,), math.atanh: (0.5,)})
ALL_DIFF_ARGS.update({
    math.atan2: (1.0, 2.0), math.pow: (2.0, 3.0), math.copysign: (1.0, -2.0), math.fmod: (5.5, 2.0),
    math.remainder: (5.5, 2.0), math.ldexp: (1.5, 3), math.nextafter: (1.0, 2.0),
    math.hypot: (3.0, 4.0), math.modf: (2.5,), math.frexp: (2.5,),
})  # fmt: skip


@pytest.mark.parametrize("fn", list(ALL_DIFF_ARGS), ids=lambda f: f.__name__)
def test_gen_zero_sensitivity(fn):
    args = ALL_DIFF_ARGS[fn]
    assert backprop(fn, *args, A=gen_zero) == ((),) + (gen_zero,) * len(args)


def test_gen_zero_for_sequence_functions():
    assert backprop(math.fsum, [1.0, 2.0], A=gen_zero) == ((), gen_zero)
    assert backprop(math.prod, [1.0, 2.0], A=gen_zero) == ((), gen_zero)
    assert backprop(math.prod, [1.0, 2.0], A=gen_zero, start=2.0) == (
        (),
        gen_zero,
        {"start": gen_zero},
    )
    assert backprop(math.dist, [1.0], [2.0], A=gen_zero) == ((), gen_zero, gen_zero)
    assert backprop(math.log, 2.0, 10.0, A=gen_zero) == ((), gen_zero, gen_zero)
    assert backprop(math.hypot, A=gen_zero) == ((),)


MATH_INLINE_DOMAIN = {fn: ONE_ARG[fn] for fn in ONE_ARG}
MATH_INLINE_DOMAIN.update({fn: TWO_ARG[fn][0] for fn in TWO_ARG if fn is not math.log})
MATH_INLINE_DOMAIN[digamma] = st.one_of(floats(0.1, 50), non_integer(-5, -0.1))
MATH_INLINE_DOMAIN[polygamma] = st.tuples(
    st.integers(0, 3), st.one_of(floats(0.2, 50), non_integer(-5, -0.2, 0.1))
)


def test_every_inline_rule_is_inlinable_and_tested():
    import test_rules_operators
    from rules_fd_helpers import check_inlinable as check

    for fn, rule in inline_rules().items():
        if getattr(fn, "__module__", None) not in (
            None,
            "math",
            "operator",
            "builtins",
            "dplus.primitives.math",
        ):
            continue  # rules registered by other tests or by the documentation's examples
        check(fn, rule)
        assert (
            fn in MATH_INLINE_DOMAIN or fn in test_rules_operators.OPERATOR_INLINE or fn is math.log
        ), f"the inline rule of {fn} has no finite-difference test"


def test_every_math_rule_is_inline_or_deliberately_not():
    inl = inline_rules()
    for fn in list(ONE_ARG) + [
        math.atan2,
        math.pow,
        math.copysign,
        math.fmod,
        math.remainder,
        math.ldexp,
        math.nextafter,
    ]:
        assert fn in inl, f"{fn.__name__} should have an inline rule"
        check_inlinable(fn, inl[fn])
    assert inl[math.log].arity == 1  # the one-argument call only
    for fn in (math.hypot, math.dist, math.fsum, math.prod, math.modf, math.frexp):
        assert fn not in inl


@pytest.mark.parametrize(
    "fn", [f for f in MATH_INLINE_DOMAIN if f is not math.nextafter], ids=lambda f: f.__name__
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_math_inline_lambdas_against_finite_differences(fn, data):
    rule = inline_rule_for(fn)
    strategy = MATH_INLINE_DOMAIN[fn]
    args = data.draw(strategy)
    args = args if isinstance(args, tuple) else (args,)
    r = fn(*args)
    for i, g in enumerate(rule.grads):
        if g is None:
            continue
        got = g(0.75, r, *args)
        assert_close(
            got, expected_sens(fn, args, 0.75, i), 1e-6, 1e-9, f"inline {fn.__name__} arg {i}"
        )
        assert g(gen_zero, r, *args) is gen_zero


def test_grad_of_grad_through_math_rules():
    # the rules are themselves differentiable where the transformer is present; here only
    # the first derivative through the API of registered primitives
    assert dplus.grad(math.sin)(0.0) == (1.0,)
    assert dplus.grad(math.log)(2.0, 2.0)[1] == pytest.approx(-1 / (2 * math.log(2)))


def test_operator_module_not_shadowed():
    # the rules module is named dplus.primitives.math, but refers to the standard math
    import dplus.primitives.math as rules_math

    assert rules_math.math is math
    assert operator.add is not None
