"""Derivatives of orders one to four (SPEC sections 2, 3 and 8), against closed forms.

Each order is ``grad1`` applied to the previous one: dplus differentiates the code it
generated for the previous order. The transforms are cached per code object, so the
first input pays for the transformation and the others only run.
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dplus
from dplus import D, grad, grad1

ORDERS = (1, 2, 3, 4)
xs = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False, allow_infinity=False)
few = settings(max_examples=8, deadline=None)


def nth(f, n):
    for _ in range(n):
        f = grad1(f)
    return f


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def _sin_k(x, k):
    return math.sin(x + k * math.pi / 2)


def poly(x):
    return 3 * x**4 - 2 * x**3 + x * x - 5 * x + 1


def poly_k(x, k):
    return [
        3 * x**4 - 2 * x**3 + x * x - 5 * x + 1,
        12 * x**3 - 6 * x**2 + 2 * x - 5,
        36 * x**2 - 12 * x + 2,
        72 * x - 12,
        72.0,
    ][k]


def branchy(x):
    """A loop, an ``if`` and a closure over ``x`` and a local."""
    scale = 2.0

    def term(k):
        if k % 2 == 0:
            return scale * x**k
        return math.sin(k * x)

    total = 0.0
    for k in range(4):
        if x > 0:
            total = total + term(k)
        else:
            total = total - term(k)
    return total


def branchy_k(x, k):
    # sum over k of term(k) = 2 + sin(x) + 2 x^2 + sin(3x), negated for x <= 0
    poly_part = [2.0 + 2 * x * x, 4 * x, 4.0, 0.0, 0.0][k]
    value = poly_part + _sin_k(x, k) + 3**k * _sin_k(3 * x, k)
    return value if x > 0 else -value


def while_power(x):
    """A while loop, a rebound local, an early exit."""
    acc = 1.0
    n = 0
    while True:
        acc = acc * x
        n += 1
        if n == 5:
            break
    return acc


def while_power_k(x, k):
    return [x**5, 5 * x**4, 20 * x**3, 60 * x**2, 120 * x][k]


def tuple_loop(x):
    """A loop over a tuple whose elements depend on x."""
    p = (x, x * x, math.sin(x))
    s = 0.0
    for v in p:
        s = s + v * v
    return s


def tuple_loop_k(x, k):
    # x^2 + x^4 + sin(x)^2
    return [
        x * x + x**4 + math.sin(x) ** 2,
        2 * x + 4 * x**3 + math.sin(2 * x),
        2 + 12 * x * x + 2 * math.cos(2 * x),
        24 * x - 4 * math.sin(2 * x),
        24 - 8 * math.cos(2 * x),
    ][k]


def nonlocal_power(x):
    """A captured variable rebound through nonlocal, and a late-bound closure."""
    acc = x

    def step():
        nonlocal acc
        acc = acc * x

    for _ in range(3):
        step()
    k = 1.0
    late = lambda y: y * k
    k = x
    return late(acc)  # x^5


def nonlocal_power_k(x, k):
    return [x**5, 5 * x**4, 20 * x**3, 60 * x**2, 120 * x][k]


def tuple_ops(x):
    """Tuple repetition, concatenation, slicing and indexing."""
    p = (x, x * x) * 2 + (math.sin(x),)
    q = p[1:4]
    return p[0] * q[0] + q[-1] * p[4]  # x^3 + x^2 sin(x)


def tuple_ops_k(x, k):
    s, c = math.sin(x), math.cos(x)
    return [
        x**3 + x * x * s,
        3 * x * x + 2 * x * s + x * x * c,
        6 * x + 2 * s + 4 * x * c - x * x * s,
        6 + 6 * c - 6 * x * s - x * x * c,
        -12 * s - 8 * x * c + x * x * s,
    ][k]


CASES = [
    ("sin", math.sin, _sin_k),
    ("exp", math.exp, lambda x, k: math.exp(x)),
    ("poly", poly, poly_k),
    ("branchy", branchy, branchy_k),
    ("while_power", while_power, while_power_k),
    ("tuple_loop", tuple_loop, tuple_loop_k),
    ("nonlocal_power", nonlocal_power, nonlocal_power_k),
    ("tuple_ops", tuple_ops, tuple_ops_k),
]


# Right at order four too, but transforming these takes 15-40 s each on an idle core (their
# rules' own code, differentiated three times over; tuple_ops about 40 s): CI's 20 minutes
# keep order four of sin, exp and while_power (a loop). `DPLUS_SLOW_TESTS=1` runs them all.
SLOW = (
    set()
    if os.environ.get("DPLUS_SLOW_TESTS")
    else {("tuple_ops", 4), ("poly", 4), ("branchy", 4), ("nonlocal_power", 4), ("tuple_loop", 4)}
)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name,f,closed", CASES, ids=[c[0] for c in CASES])
def test_orders_one_to_four_match_closed_forms(name, f, closed, order):
    if (name, order) in SLOW:
        pytest.skip("15-40 s to transform: run with DPLUS_SLOW_TESTS=1")
    g = nth(f, order)

    @few
    @given(xs)
    def check(x):
        assume(abs(x) > 1e-3)  # branchy has a jump at 0
        got = g(x)
        assert close(got, closed(x, order), 1e-8), (name, order, x, got, closed(x, order))

    check()


@pytest.mark.parametrize("name,f,closed", CASES[2:-1], ids=[c[0] for c in CASES[2:-1]])
def test_fourth_order_is_the_finite_difference_of_the_third(name, f, closed):
    if (name, 4) in SLOW:
        pytest.skip("15-40 s to transform: run with DPLUS_SLOW_TESTS=1")
    g3, g4 = nth(f, 3), nth(f, 4)
    for x in (-1.3, -0.4, 0.35, 1.1):
        h = 1e-5
        fd = (g3(x + h) - g3(x - h)) / (2 * h)
        assert abs(g4(x) - fd) <= 1e-4 * max(1.0, abs(fd))


def test_spec_nesting_examples_to_order_four():
    assert grad1(grad1(math.cos))(0.0) == -1.0
    assert nth(math.cos, 3)(0.0) == 0.0
    assert nth(math.cos, 4)(0.0) == 1.0
    assert D(grad(lambda x, y: x * y))(3.0, 4.0)((1.0, 0.0)) == (0.0, 1.0)


def f_xyy(x, y):
    return x * y * y * math.sin(x)


grad_f_xyy = grad(f_xyy)  # gradient functions made outside, called inside (docs/higher-order.md)


def f_y(x, y):
    return grad_f_xyy(x, y)[1]


grad_f_y = grad(f_y)


def f_yy(x, y):
    return grad_f_y(x, y)[1]


def test_mixed_partials_of_order_three():
    # f = x y^2 sin(x): d/dx d/dy d/dy = 2 (sin x + x cos x), d/dy d/dy d/dy = 0
    for x, y in ((0.3, 1.7), (-1.1, 0.4)):
        got = grad(f_yy)(x, y)
        assert close(got[0], 2 * (math.sin(x) + x * math.cos(x)))
        assert close(got[1], 0.0)


def test_mixed_partials_with_grad_called_inside():
    def fy(x, y):
        return grad(f_xyy)(x, y)[1]

    def fyy(x, y):
        return grad(fy)(x, y)[1]

    for x, y in ((0.3, 1.7), (-1.1, 0.4)):
        got = grad(fyy)(x, y)
        assert close(got[0], 2 * (math.sin(x) + x * math.cos(x)))
        assert close(got[1], 0.0)


def fourth_power(y):
    return y**4


def g_uses_grad1_inside(x):
    return grad1(fourth_power)(x) * x  # 4 x^4


def test_grad1_called_inside_to_order_three():
    # (order four through grad1 called inside still meets a dict in the rules' own code)
    g = g_uses_grad1_inside
    for k, expected in enumerate((16 * 0.7**3, 48 * 0.7**2, 96 * 0.7), start=1):
        g = grad1(g)
        assert close(g(0.7), expected), (k, g(0.7), expected)


def test_a_closure_returned_at_order_three_is_a_plus_function():
    @dplus.define_dplus
    def outer(x):
        def inner(y):
            return x * y * y

        return inner

    def use(x):
        return outer(x)(x)  # x^3

    assert close(nth(use, 3)(0.7), 6.0)
    r = dplus.lift_dplus(outer)(2.0)
    assert dplus.runtime.closures.is_plus_function(r.primal)


def cubes(p):
    s = 0.0
    for v in p:
        s = s + v * v * v
    return s


def test_hessian_of_a_loop_over_a_tuple_runs_each_row_apart():
    # the second-order backprop runs once per row: nothing may carry over between runs
    for p in ((0.5, 2.0), (-1.0, 0.25, 3.0)):
        block = dplus.hessian(cubes)(p)[0]  # one argument: block[k][0][l] = d2f / dp_k dp_l
        n = len(p)
        got = [[block[k][0][l] for l in range(n)] for k in range(n)]
        assert got == [[6 * p[k] if k == l else 0.0 for l in range(n)] for k in range(n)]


def test_hessian_of_a_loop_over_a_list_as_of_a_tuple():
    # (refused before the box-sensitivity map was differentiable again)
    for p in ([0.5, 2.0], [-1.0, 0.25, 3.0]):
        block = dplus.hessian(cubes)(p)[0]
        n = len(p)
        got = [[block[k][0][l] for l in range(n)] for k in range(n)]
        assert got == [[6 * p[k] if k == l else 0.0 for l in range(n)] for k in range(n)]


def mixed(x):
    """A tuple loop, a branch, a nonlocal accumulator, a late-bound closure and math calls."""
    p = (x, math.cos(x), x * x)
    acc = 0.0

    def bump(v):
        nonlocal acc
        acc = acc + v * math.sin(v)

    for v in p:
        if v > 0.3:
            bump(v)
        else:
            bump(v * v)
    scale = 1.5
    f = lambda t: t * scale + acc
    return f(x) * math.exp(-x)


@settings(max_examples=10, deadline=None)
@given(st.floats(min_value=-1.5, max_value=1.5))
def test_third_order_of_a_mixed_function_is_the_finite_difference_of_the_second(x):
    g2 = nth(mixed, 2)
    g3 = grad1(g2)
    h = 1e-5
    # the branches switch where an element crosses 0.3: keep finite differences off the kinks
    assume(all(abs(v - 0.3) > 1e-3 for v in (x - h, x + h, math.cos(x), x * x)))
    fd = (g2(x + h) - g2(x - h)) / (2 * h)
    assert abs(g3(x) - fd) <= 1e-5 * max(1.0, abs(fd))
