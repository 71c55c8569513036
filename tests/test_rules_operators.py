"""The operator rules against finite differences: numbers (int, float, complex, mixed),
NumPy arrays with broadcasting, sequences, user objects, gen_zero, inline lambdas."""

from __future__ import annotations

import builtins
import cmath
import math
import operator

import numpy as np
import pytest
from dplus.primitives.operators import UNSHARED_IN_PLACE
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rules_fd_helpers import (
    assert_close,
    backprop,
    check_grad_matches_backprop,
    check_inlinable,
    check_number_rule,
    expected_sens,
)

import dplus
from dplus import BoxSensitivities, ProcResult, gen_zero, register_primitive
from dplus.gradcheck import check_grad
from dplus.rules import inline_rule_for, inline_rules
from dplus.runtime.linear import OneHot, TupleAccumulator
from dplus.runtime.registry import lookup_transform

SETTINGS = settings(max_examples=50, deadline=None)


def floats(lo: float = -100, hi: float = 100) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def complexes(lo: float = -10, hi: float = 10) -> st.SearchStrategy[complex]:
    return st.builds(complex, floats(lo, hi), floats(lo, hi))


def reals() -> st.SearchStrategy:
    return st.one_of(floats(), st.integers(-50, 50))


def numbers() -> st.SearchStrategy:
    return st.one_of(floats(), st.integers(-50, 50), complexes())


def nonzero(s: st.SearchStrategy) -> st.SearchStrategy:
    return s.filter(lambda v: abs(v) > 0.1)


def sensitivity_for(*args) -> st.SearchStrategy:
    """A real sensitivity for a real result, a complex one when complex numbers are involved."""
    if any(isinstance(a, complex) for a in args):
        return st.one_of(floats(-2, 2), complexes(-2, 2))
    return floats(-2, 2)


ARITH = {
    "add": (operator.add, operator.iadd),
    "sub": (operator.sub, operator.isub),
    "mul": (operator.mul, operator.imul),
    "truediv": (operator.truediv, operator.itruediv),
}


@pytest.mark.parametrize("inplace", [False, True], ids=["plain", "inplace"])
@pytest.mark.parametrize("name", list(ARITH))
@SETTINGS
@given(data=st.data())
def test_arithmetic_on_numbers(name, inplace, data):
    fn = ARITH[name][inplace]
    x = data.draw(numbers(), label="x")
    y = data.draw(nonzero(numbers()) if name == "truediv" else numbers(), label="y")
    A = data.draw(sensitivity_for(x, y), label="A")
    out = check_number_rule(fn, (x, y), A=A, rtol=1e-6, atol=1e-8)
    if A == 1.0 and not isinstance(fn(x, y), complex):
        check_grad_matches_backprop(fn, (x, y), out)


def test_the_spec_examples():
    r = dplus.lift_dplus(operator.mul)(4.0, 2.5)
    assert r.primal == 10.0 and r.backprop(1.0, BoxSensitivities()) == ((), 2.5, 4.0)
    assert dplus.grad(operator.mul)(1, 24.0) == (24.0, 1)  # an int argument gets a number
    assert backprop(operator.mul, 2, 3) == ((), 3.0, 2.0)
    assert backprop(operator.sub, 2, 3, A=1) == ((), 1, -1)


def test_holomorphic_convention():
    z, w = 1 + 2j, 3 - 1j
    assert backprop(operator.mul, z, w) == ((), w, z)
    assert backprop(operator.truediv, z, w)[1] == 1 / w
    # a real argument of a complex operation gets the real part of its sensitivity
    assert backprop(operator.mul, 2.0, 1j) == ((), 0.0, 2.0)
    assert backprop(operator.add, 2.0, 1j, A=1 + 1j) == ((), 1.0, 1 + 1j)


@pytest.mark.parametrize(
    "fn",
    [operator.neg, operator.pos, operator.abs, builtins.abs],
    ids=["neg", "pos", "abs", "builtins.abs"],
)
@SETTINGS
@given(data=st.data())
def test_unary(fn, data):
    x = data.draw(nonzero(numbers()), label="x")
    A = data.draw(
        sensitivity_for(x) if fn in (operator.neg, operator.pos) else floats(-2, 2), label="A"
    )
    check_number_rule(fn, (x,), A=A)


def test_abs_details():
    assert backprop(abs, -3.0) == ((), -1.0)
    assert backprop(abs, -3) == ((), -1.0)
    assert backprop(abs, 0.0) == ((), 0.0)  # a subgradient at the kink
    assert backprop(abs, 3 + 4j) == ((), (0.6 - 0.8j))  # A * conj(z) / |z|
    assert backprop(abs, 0j) == ((), 0.0)
    assert dplus.grad(abs)(-2.5) == (-1.0,)


# ---------------------------------------------------------------------------
# pow


@pytest.mark.parametrize(
    "fn", [operator.pow, operator.ipow, builtins.pow], ids=["pow", "ipow", "builtins.pow"]
)
@SETTINGS
@given(
    x=st.one_of(floats(0.1, 10), st.integers(1, 10)),
    y=st.one_of(floats(-3, 3), st.integers(-3, 3)),
    A=floats(-2, 2),
)
def test_pow_positive_base(fn, x, y, A):
    out = check_number_rule(fn, (x, y), A=A, rtol=1e-6, atol=1e-8)
    if A == 1.0:
        check_grad_matches_backprop(fn, (x, y), out)


@SETTINGS
@given(x=floats(-10, -0.1), n=st.integers(-4, 4), as_float=st.booleans())
def test_pow_negative_base_integer_exponent(x, n, as_float):
    y = float(n) if as_float else n
    out = backprop(operator.pow, x, y)
    # Python's power is complex off the whole exponents: the real part of r * log(x), which
    # finite differences of (x ** y).real see (issue #18)
    assert type(out[2]) is float
    assert_close(out[2], x**y * math.log(-x), 1e-9, 1e-12)
    eps = 1e-6
    assert_close(out[2], (((x ** (y + eps)).real - (x ** (y - eps)).real) / (2 * eps)), 1e-5, 1e-6)
    assert_close(out[1], expected_sens(operator.pow, (x, y), 1.0, 0), 1e-6, 1e-9)


@SETTINGS
@given(
    x=floats(-10, -0.1), y=floats(-3, 3).filter(lambda v: abs(v - round(v)) > 0.05), A=floats(-2, 2)
)
def test_pow_negative_base_fractional_exponent_is_complex(x, y, A):
    assert isinstance(x**y, complex)
    out = check_number_rule(operator.pow, (x, y), A=A, rtol=1e-6, atol=1e-8)
    assert all(type(s) is float for s in out[1:])  # real arguments, real sensitivities


@SETTINGS
@given(
    z=complexes(-5, 5).filter(lambda z: abs(z.imag) > 0.1 or z.real > 0.1),
    w=st.one_of(complexes(-2, 2), floats(-2, 2), st.integers(-3, 3)),
    A=complexes(-2, 2),
)
def test_pow_complex(z, w, A):
    check_number_rule(operator.pow, (z, w), A=A, rtol=1e-6, atol=1e-8)
    # holomorphic: A * w * z**(w-1) and A * r * log z
    out = backprop(operator.pow, z, w, A=A)
    assert_close(out[1], A * w * z ** (w - 1), 1e-9, 1e-12)
    if isinstance(w, complex):
        assert_close(out[2], A * z**w * cmath.log(z), 1e-9, 1e-12)


def test_pow_special_points():
    assert backprop(operator.pow, 0.0, 2.0) == ((), 0.0, 0.0)
    assert backprop(operator.pow, 0.0, 1.0) == ((), 1.0, 0.0)
    assert backprop(operator.pow, 0.0, 0.0) == ((), 0.0, 0.0)
    assert backprop(operator.pow, 5.0, 0) == ((), 0.0, math.log(5.0))
    assert backprop(operator.pow, 0, 3) == ((), 0, 0.0)
    assert backprop(operator.pow, 0.0, 0.5) == (
        (),
        math.inf,
        0.0,
    )  # d/dx sqrt(x) at 0: inf, as in JAX
    r = lookup_transform(builtins.pow)(3, 4, 5)
    assert r.primal == 1 and r.backprop(1.0, BoxSensitivities()) == (
        (),
        gen_zero,
        gen_zero,
        gen_zero,
    )


# ---------------------------------------------------------------------------
# floordiv and mod


def _away_from_jumps(x: float, y: float) -> bool:
    q = x / y
    margin = 3 * (1e-4 * max(1, abs(x)) / abs(y) + abs(x) * 1e-4 * max(1, abs(y)) / (y * y)) + 1e-3
    return abs(q - round(q)) > margin


@pytest.mark.parametrize("fn", [operator.mod, operator.imod], ids=["mod", "imod"])
@SETTINGS
@given(x=reals(), y=nonzero(reals()), A=floats(-2, 2))
def test_mod(fn, x, y, A):
    assume(_away_from_jumps(x, y))
    out = check_number_rule(fn, (x, y), A=A, rtol=1e-6, atol=1e-8)
    assert out[2] == -A * math.floor(x / y)


@pytest.mark.parametrize("fn", [operator.floordiv, operator.ifloordiv])
@SETTINGS
@given(x=reals(), y=nonzero(reals()))
def test_floordiv_is_zero(fn, x, y):
    assert backprop(fn, x, y) == ((), gen_zero, gen_zero)
    assert dplus.grad(fn)(float(x), float(y)) == (0.0, 0.0)


def test_mod_on_strings_is_not_differentiable():
    r = lookup_transform(operator.mod)("%.1f", 2.5)
    assert r.primal == "2.5" and r.backprop(None, BoxSensitivities()) == ((), gen_zero, gen_zero)
    r = lookup_transform(operator.add)("a", "b")
    assert r.primal == "ab" and r.backprop(None, BoxSensitivities()) == ((), gen_zero, gen_zero)
    r = lookup_transform(operator.mul)("ab", 2)
    assert r.primal == "abab" and r.backprop(None, BoxSensitivities()) == ((), gen_zero, gen_zero)


# ---------------------------------------------------------------------------
# non-differentiable operators


NONDIFF = [
    (operator.lt, (1.0, 2.0)), (operator.le, (1.0, 2.0)), (operator.eq, (1.0, 2.0)),
    (operator.ne, (1.0, 2.0)), (operator.ge, (1.0, 2.0)), (operator.gt, (1.0, 2.0)),
    (operator.not_, (1.0,)), (operator.truth, (1.0,)), (operator.is_, (1.0, None)),
    (operator.is_not, (1.0, None)), (operator.contains, ([1.0], 1.0)), (operator.index, (3,)),
    (operator.invert, (3,)), (operator.and_, (3, 5)), (operator.or_, (3, 5)), (operator.xor, (3, 5)),
    (operator.lshift, (3, 1)), (operator.rshift, (3, 1)),
]  # fmt: skip


@pytest.mark.parametrize("fn,args", NONDIFF, ids=[f.__name__ for f, _ in NONDIFF])
def test_non_differentiable(fn, args):
    assert backprop(fn, *args) == ((),) + (gen_zero,) * len(args)
    assert inline_rule_for(fn) is None


# ---------------------------------------------------------------------------
# gen_zero


ALL = [
    operator.add, operator.sub, operator.mul, operator.truediv, operator.mod, operator.pow,
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.imod, operator.ipow,
    operator.floordiv, operator.ifloordiv, builtins.pow,
]  # fmt: skip


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "args",
    [(2.0, 3.0), (2, 3), (2.0 + 1j, 3.0), (np.array([2.0, 3.0]), 1.5)],
    ids=["float", "int", "complex", "array"],
)
def test_gen_zero_sensitivity(fn, args):
    if fn in (operator.mod, operator.imod, operator.floordiv, operator.ifloordiv) and isinstance(
        args[0], complex
    ):
        return
    if isinstance(args[0], np.ndarray):
        fn = UNSHARED_IN_PLACE.get(fn, fn)  # (``a op= b`` on an array nothing else sees)
    assert backprop(fn, *args, A=gen_zero) == ((), gen_zero, gen_zero)


@pytest.mark.parametrize("fn", [operator.neg, operator.pos, operator.abs, builtins.abs])
def test_gen_zero_sensitivity_unary(fn):
    for x in (2.0, -3, 1 + 1j, np.array([1.0, -2.0])):
        assert backprop(fn, x, A=gen_zero) == ((), gen_zero)


def test_gen_zero_operands():
    # reverse code computes with gen_zero, and derivatives of derivatives differentiate that code
    r = lookup_transform(operator.add)(gen_zero, 2.0)
    assert r.primal == 2.0 and r.backprop(1.0, BoxSensitivities()) == ((), gen_zero, 1.0)
    r = lookup_transform(operator.mul)(gen_zero, 2.0)
    assert r.primal is gen_zero and r.backprop(1.0, BoxSensitivities()) == ((), gen_zero, gen_zero)
    r = lookup_transform(operator.sub)(3.0, gen_zero)
    assert r.primal == 3.0 and r.backprop(1.0, BoxSensitivities()) == ((), 1.0, gen_zero)
    r = lookup_transform(operator.neg)(gen_zero)
    assert r.primal is gen_zero and r.backprop(1.0, BoxSensitivities()) == ((), gen_zero)
    r = lookup_transform(operator.matmul)(gen_zero, np.eye(2))
    assert r.primal is gen_zero and r.backprop(np.ones(2), BoxSensitivities()) == (
        (),
        gen_zero,
        gen_zero,
    )


def test_bool_operands_get_no_sensitivity():
    out = backprop(operator.mul, True, 2.5)
    assert out == ((), gen_zero, 1.0)
    assert backprop(operator.neg, True) == ((), gen_zero)


# ---------------------------------------------------------------------------
# inline rules


OPERATOR_INLINE = {
    operator.add: numbers(), operator.sub: numbers(), operator.mul: numbers(),
    operator.truediv: nonzero(numbers()), operator.iadd: numbers(), operator.isub: numbers(),
    operator.imul: numbers(), operator.itruediv: nonzero(numbers()),
    operator.mod: nonzero(floats()), operator.imod: nonzero(floats()),
    operator.pow: floats(0.1, 10), operator.ipow: floats(0.1, 10),
    operator.neg: numbers(), operator.pos: numbers(), operator.abs: nonzero(numbers()),
    builtins.abs: nonzero(numbers()),
    builtins.min: floats(-10, 10), builtins.max: floats(-10, 10),  # (two arguments)
}  # fmt: skip


def test_operator_inline_rules_are_inlinable():
    inl = inline_rules()
    for fn in OPERATOR_INLINE:
        assert fn in inl, fn
        check_inlinable(fn, inl[fn])
    for fn in (operator.matmul, operator.floordiv, operator.concat, builtins.pow):
        assert fn not in inl


@pytest.mark.parametrize("fn", list(OPERATOR_INLINE), ids=lambda f: f"{f.__module__}.{f.__name__}")
@SETTINGS
@given(data=st.data())
def test_operator_inline_lambdas_against_finite_differences(fn, data):
    rule = inline_rule_for(fn)
    strategy = OPERATOR_INLINE[fn]
    if rule.arity == 1:
        args = (data.draw(strategy),)
    else:
        x = data.draw(strategy)
        y = data.draw(strategy)
        if fn in (operator.mod, operator.imod):
            assume(_away_from_jumps(x, y))
        if fn in (builtins.min, builtins.max):
            assume(abs(x - y) > 1e-3)  # (away from the kink; ties below)
        if fn in (operator.pow, operator.ipow):
            y = data.draw(floats(-3, 3))
        if isinstance(x, complex) != isinstance(y, complex):
            # the inline rules are for operands of one kind (the transforms handle mixed ones)
            x, y = complex(x), complex(y)
        args = (x, y)
    r = fn(*args)
    A = 0.75
    for i, g in enumerate(rule.grads):
        got = g(A, r, *args)
        assert_close(
            got, expected_sens(fn, args, A, i), 1e-6, 1e-8, f"inline {fn.__name__} argument {i}"
        )
        assert g(gen_zero, r, *args) is gen_zero


def test_min_and_max_inline_ties_go_to_the_first_argument_as_in_the_builtin_rule():
    for fn in (min, max):
        ga, gb = inline_rule_for(fn).grads
        assert (ga(0.75, 2.0, 2.0, 2.0), gb(0.75, 2.0, 2.0, 2.0)) == (0.75, 0.0)
        general = dplus.dplus(fn)(2.0, 2.0).backprop(0.75)
        assert (general[0], general[1]) == (0.75, 0.0)


# ---------------------------------------------------------------------------
# NumPy arrays


SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((2, 1), (1, 3)),
    ((), (2, 2)),
    ((2, 3), ()),
    ((4, 1, 3), (2, 1)),
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize(
    "fn",
    [
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.pow,
        operator.mod,
        operator.iadd,
        operator.imul,
        operator.ipow,
    ],
    ids=lambda f: f.__name__,
)
def test_array_broadcasting(fn, shapes):
    rng = np.random.default_rng(0)
    sx, sy = shapes
    x = rng.uniform(0.5, 2.0, sx)
    y = rng.uniform(0.5, 2.0, sy)
    if fn is operator.mod:
        x = x * 10
    x = float(x) if sx == () else x
    y = float(y) if sy == () else y
    if isinstance(x, np.ndarray):
        fn = UNSHARED_IN_PLACE.get(fn, fn)  # (``a op= b`` on an array nothing else sees)
    if (
        fn in [UNSHARED_IN_PLACE[f] for f in (operator.iadd, operator.imul, operator.ipow)]
        and isinstance(x, np.ndarray)
        and np.broadcast_shapes(np.shape(x), np.shape(y)) != np.shape(x)
    ):
        # NumPy refuses to grow an array in place; so does the rule
        with pytest.raises(ValueError):
            lookup_transform(fn)(x, y)
        return
    r = fn(x.copy(), y) if isinstance(x, np.ndarray) else fn(x, y)
    S = rng.normal(size=np.shape(r))
    g = check_grad(fn, x, y, sensitivity=S, rtol=1e-5, atol=1e-7)
    assert np.shape(g[0]) == np.shape(x) and np.shape(g[1]) == np.shape(y)


def test_inplace_on_unshared_arrays_does_not_mutate():
    a = np.ones(3)
    r = lookup_transform(UNSHARED_IN_PLACE[operator.iadd])(a, 2.0)
    assert (a == 1.0).all() and (r.primal == 3.0).all()
    r = lookup_transform(UNSHARED_IN_PLACE[operator.imul])(a, 2.0)
    assert (a == 1.0).all()


@pytest.mark.parametrize(
    "fn", sorted(UNSHARED_IN_PLACE, key=lambda f: f.__name__), ids=lambda f: f.__name__
)
def test_inplace_operators_change_arrays_as_python_does(fn):
    # (refused before in-place writes were followed; now the array changes in place, or the
    # call raises what the plain call raises)
    a, plain = np.full(3, 3), np.full(3, 3)
    try:
        expected = fn(plain, 1)
    except Exception as e:
        with pytest.raises(type(e)):
            lookup_transform(fn)(a, 1)
        assert np.array_equal(a, plain)
        return
    r = lookup_transform(fn)(a, 1)
    assert r.primal is a and expected is plain and np.array_equal(a, plain)


def test_complex_arrays_project_to_real():
    x = np.array([1.0, 2.0])
    y = np.array([1j, 2 + 1j])
    out = backprop(operator.mul, x, y, A=np.ones(2))
    assert not np.iscomplexobj(out[1]) and np.allclose(out[1], [0.0, 2.0])
    assert np.allclose(out[2], x)


def test_abs_on_arrays():
    x = np.array([-2.0, 0.0, 3.0])
    out = backprop(abs, x, A=np.ones(3))
    assert np.array_equal(out[1], [-1.0, 0.0, 1.0])
    z = np.array([3 + 4j])
    assert np.allclose(backprop(abs, z, A=np.ones(1))[1], [0.6 - 0.8j])


MATMUL_SHAPES = [
    ((2, 3), (3, 4)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((3,), (3,)),
    ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (1, 3, 4)),
    ((3,), (5, 3, 2)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes):
    rng = np.random.default_rng(1)
    x = rng.normal(size=shapes[0])
    y = rng.normal(size=shapes[1])
    r = x @ y
    S = rng.normal(size=np.shape(r)) if np.ndim(r) else 1.0
    g = check_grad(operator.matmul, x, y, sensitivity=S)
    assert g[0].shape == x.shape and g[1].shape == y.shape


def test_imatmul_keeps_shape_and_does_not_mutate():
    imatmul = UNSHARED_IN_PLACE[operator.imatmul]  # ``a @= b`` on an array nothing else sees
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 3))
    y = rng.normal(size=(3, 3))
    x0 = x.copy()
    S = rng.normal(size=(3, 3))
    g = check_grad(imatmul, x, y, sensitivity=S)
    assert np.allclose(g[0], S @ y.T) and np.allclose(g[1], x.T @ S)
    r = lookup_transform(imatmul)(x, y)
    assert np.array_equal(x, x0) and np.allclose(r.primal, x0 @ y)
    with pytest.raises(ValueError):  # as NumPy: @= cannot change the shape
        lookup_transform(imatmul)(rng.normal(size=(2, 3)), rng.normal(size=(3, 4)))


def test_matmul_complex():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))
    y = rng.normal(size=(3,))
    out = backprop(operator.matmul, x, y, A=np.array([1.0, 1j]))
    assert np.allclose(out[1], np.outer([1.0, 1j], y))  # no conjugation
    assert not np.iscomplexobj(out[2])  # y is real


# ---------------------------------------------------------------------------
# sequences


def test_tuple_concatenation():
    out = backprop(operator.add, (1.0, 2.0), (3.0,), A=(10.0, 20.0, 30.0))
    assert out == ((), (10.0, 20.0), (30.0,))
    out = backprop(operator.add, (1.0, 2.0), (3.0,), A=OneHot(2, 5.0, 3))
    assert out[1] is gen_zero and out[2].to_list() == [5.0]
    out = backprop(operator.add, (1.0, 2.0), (3.0,), A=OneHot(1, 5.0, 3))
    assert out[1].to_list() == [gen_zero, 5.0] and out[2] is gen_zero
    out = backprop(operator.add, (1.0, 2.0), (3.0,), A=TupleAccumulator([1.0, gen_zero, 2.0]))
    assert out == ((), (1.0, gen_zero), (2.0,))
    assert backprop(operator.add, (1.0,), (2.0,), A=gen_zero) == ((), gen_zero, gen_zero)
    assert backprop(operator.concat, (1.0,), (2.0,), A=(1.0, 2.0)) == ((), (1.0,), (2.0,))


def test_tuple_repetition():
    out = backprop(operator.mul, (1.0, 2.0), 3, A=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0))
    assert out == ((), (9.0, 12.0), gen_zero)
    out = backprop(operator.mul, 2, (1.0,), A=(1.0, 2.0))
    assert out == ((), gen_zero, (3.0,))
    assert backprop(operator.mul, (1.0,), 0, A=()) == ((), gen_zero, gen_zero)


def test_list_concatenation_takes_the_result_entry():
    x, y = [1.0, 2.0], [3.0]
    r = lookup_transform(operator.add)(x, y)
    assert r.primal == [1.0, 2.0, 3.0]
    Abox = BoxSensitivities()
    Abox[r.primal] = [1.0, gen_zero, 3.0]
    out = r.backprop(gen_zero, Abox)
    # the parts as tuples, also for lists: a list made by the rule would be, differentiated
    # again, a mutable value of its own (third derivatives lost a term); the caller hands
    # them over into the arguments' entries, and users see lists
    assert out == ((), (1.0, gen_zero), (3.0,))
    assert r.primal not in Abox  # the result did not exist before the operation
    # a sensitivity handed in directly is added too
    r = lookup_transform(operator.add)(x, y)
    out = r.backprop([1.0, 1.0, 1.0], BoxSensitivities())
    assert out == ((), (1.0, 1.0), (1.0,))


def test_list_iadd_restores_the_layout():
    x, y = [1.0, 2.0], (3.0, 4.0)
    r = lookup_transform(operator.iadd)(x, y)
    assert r.primal is x and x == [1.0, 2.0, 3.0, 4.0]
    Abox = BoxSensitivities()
    Abox[x] = [1.0, 2.0, 3.0, 4.0]
    out = r.backprop(gen_zero, Abox)
    assert out == ((), gen_zero, (3.0, 4.0))
    assert Abox[x] == [1.0, 2.0]
    # x += x
    x = [1.0, 2.0]
    r = lookup_transform(operator.iadd)(x, x)
    assert x == [1.0, 2.0, 1.0, 2.0]
    Abox = BoxSensitivities()
    Abox[x] = [1.0, 2.0, 3.0, 4.0]
    out = r.backprop(gen_zero, Abox)
    assert Abox[x] == [1.0, 2.0] and out[2] == (3.0, 4.0)  # (a tuple: see above)


def test_list_repetition():
    x = [1.0, 2.0]
    r = lookup_transform(operator.mul)(x, 2)
    Abox = BoxSensitivities()
    Abox[r.primal] = [1.0, 2.0, 3.0, 4.0]
    assert r.backprop(gen_zero, Abox) == ((), (4.0, 6.0), gen_zero)  # (a tuple: see above)
    r = lookup_transform(operator.imul)(x, 2)
    assert r.primal is x and len(x) == 4
    Abox = BoxSensitivities()
    Abox[x] = [1.0, 2.0, 3.0, 4.0]
    assert r.backprop(gen_zero, Abox) == ((), gen_zero, gen_zero)
    assert Abox[x] == [4.0, 6.0]


def test_list_concatenation_through_grad():
    assert dplus.grad(operator.add, sensitivity=[1.0, 2.0, 3.0])([0.0], [0.0, 0.0]) == (
        [1.0],
        [2.0, 3.0],
    )


# ---------------------------------------------------------------------------
# user objects: their special methods are differentiated


class Meters:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        if isinstance(other, Meters):
            return self.v + other.v
        if isinstance(other, (int, float)):
            return self.v + other
        return NotImplemented

    def __radd__(self, other):
        return other + self.v

    def __neg__(self):
        return -self.v


def _meters_add_plus(self, other):
    def bp(A, Abox):
        return ((), {"v": A}, {"v": A} if isinstance(other, Meters) else A)

    return ProcResult(Meters.__add__(self, other), bp)


register_primitive(Meters.__add__, _meters_add_plus)
register_primitive(
    Meters.__radd__,
    lambda self, other: ProcResult(other + self.v, lambda A, Abox: ((), {"v": 2 * A}, A)),
)
register_primitive(
    Meters.__neg__, lambda self: ProcResult(-self.v, lambda A, Abox: ((), {"v": -A}))
)


def test_user_objects_dispatch_to_special_methods():
    a, b = Meters(2.0), Meters(3.0)
    r = lookup_transform(operator.add)(a, b)
    assert r.primal == 5.0 and r.backprop(1.0, BoxSensitivities()) == ((), {"v": 1.0}, {"v": 1.0})
    r = lookup_transform(operator.add)(a, 1.5)
    assert r.primal == 3.5 and r.backprop(1.0, BoxSensitivities()) == ((), {"v": 1.0}, 1.0)
    # float + Meters: float.__add__ gives NotImplemented, then Meters.__radd__ (swapped back)
    r = lookup_transform(operator.add)(1.5, a)
    assert r.primal == 3.5 and r.backprop(1.0, BoxSensitivities()) == ((), 1.0, {"v": 2.0})
    # "x" + Meters: __add__ is not tried on str; __radd__ raises TypeError as Python would
    r = lookup_transform(operator.iadd)(a, b)  # no __iadd__: falls back to __add__
    assert r.primal == 5.0
    r = lookup_transform(operator.neg)(a)
    assert r.primal == -2.0 and r.backprop(1.0, BoxSensitivities()) == ((), {"v": -1.0})
    with pytest.raises(TypeError):
        lookup_transform(operator.sub)(a, b)


@SETTINGS
@given(
    x=floats(-10, -0.1),
    y=floats(-3, 3).filter(lambda v: abs(v - round(v)) > 0.05),
    A=st.builds(complex, floats(-2, 2), floats(-2, 2)),
)
def test_pow_inline_lambdas_project_for_real_arguments(x, y, A):
    # the float fast path guards the argument types only: (-2.0) ** 0.5 is complex there
    rule = inline_rule_for(operator.pow)
    r = x**y
    gx, gy = (g(A, r, x, y) for g in rule.grads)
    assert type(gx) is float and type(gy) is float
    assert_close(gx, expected_sens(operator.pow, (x, y), A, 0), 1e-6, 1e-8)
    assert_close(gy, expected_sens(operator.pow, (x, y), A, 1), 1e-6, 1e-8)


# ---------------------------------------------------------------------------
# second derivatives: the rules' gradient code is itself differentiated


@pytest.mark.parametrize(
    "fn", [operator.mul, operator.truediv, operator.pow], ids=lambda f: f.__name__
)
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


def test_second_derivatives_through_the_projections():
    assert dplus.grad1(dplus.grad1(abs))(-2.0) == 0.0
    # through the complex path of a rule: d/da Re(d/dz z**3 at z = a + 1j) = Re(6 (a + 1j)) = 6a
    g = dplus.grad(lambda a: dplus.grad(operator.pow)(operator.add(a, 1j), 3)[0])(0.5)
    assert_close(g[0], 3.0, 1e-12, 1e-12)
    # mixed real/complex multiplication
    # d/da (a * b) = Re(b) for a real a; its gradient in b is 1 (dL/dx - i dL/dy)
    assert dplus.grad(lambda a, b: dplus.grad(operator.mul)(a, b)[0])(2.0, 3j) == (0.0, 1.0)
