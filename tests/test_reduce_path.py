"""``functools.reduce`` with a function made by differentiated code (issue #21): its first-order
fast path (``primitives.functional_reduce._reduce_of_plus_function``) gives exactly what the general
rule (``reduce_recorded``, through ``Calls``) gives, on every input it accepts, and is not
taken for the others. Every function here is differentiated with fast paths and inside
``general_paths_only()`` (which also switches the rule's fast path off); the two gradients
must be equal, not only close, and match central finite differences.
"""

from __future__ import annotations

import copy
import functools
import math
import operator
from functools import reduce

import pytest
from dplus.primitives import functional_reduce as functional
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import close, fd_gradient, fd_hessian

import dplus
from dplus import define_dplus
from dplus.transform.transformer import general_paths_only

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


@pytest.fixture
def fast_calls(monkeypatch):
    """How many times the fast path ran."""
    count = [0]
    inner = functional._reduce_of_plus_function

    def counting(args):
        count[0] += 1
        return inner(args)

    monkeypatch.setattr(functional, "_reduce_of_plus_function", counting)
    return count


def both_paths_equal(f, *args):
    """The gradient on both paths (equal exactly), the arguments untouched, the primal unchanged."""
    before = copy.deepcopy(args)
    value = f(*copy.deepcopy(args))
    r = dplus.lift_dplus(f)(*args)
    assert r.primal == value or (value != value and r.primal != r.primal)
    fast = dplus.grad(f)(*args)
    assert args == before
    with general_paths_only():
        general = dplus.grad(f)(*args)
    assert repr(fast) == repr(general), (fast, general)
    return fast


@define_dplus
def horner(cs, x):
    return reduce(lambda acc, c: acc * x + c, reversed(cs), 0.0)


@define_dplus
def horner_no_initial(cs, x):
    return reduce(lambda acc, c: acc * x + c, cs)


def test_horner_fast_equals_general_and_fd(fast_calls):
    cs = [0.3, -1.2, 0.7, 2.0, -0.4]
    g = both_paths_equal(lambda x, c0, c1, c2: horner([c0, c1, c2, 0.5], x), 0.7, 0.3, -1.2, 2.0)
    close(
        g,
        fd_gradient(lambda x, c0, c1, c2: horner([c0, c1, c2, 0.5], x), (0.7, 0.3, -1.2, 2.0)),
        1e-6,
    )
    gc, gx = both_paths_equal(horner, cs, 0.9)
    assert fast_calls[0] == 4  # both gradients with fast paths, and the lift
    h = 1e-6
    for i in range(len(cs)):
        up, down = list(cs), list(cs)
        up[i] += h
        down[i] -= h
        assert math.isclose(gc[i], (horner(up, 0.9) - horner(down, 0.9)) / (2 * h), abs_tol=1e-6)
    assert math.isclose(gx, (horner(cs, 0.9 + h) - horner(cs, 0.9 - h)) / (2 * h), abs_tol=1e-6)


@SETTINGS
@given(st.lists(floats, min_size=0, max_size=6), floats)
def test_horner_random(cs, x):
    both_paths_equal(horner, cs, x)
    if cs:
        both_paths_equal(horner_no_initial, cs, x)


def test_initial_absent_one_item_and_empty(fast_calls):
    assert both_paths_equal(horner_no_initial, [1.5], 2.0) == ([1.0], 0.0)
    assert both_paths_equal(horner, [], 2.0) == ([], 0.0)
    with pytest.raises(TypeError) as fast_error:
        dplus.grad(horner_no_initial)([], 2.0)
    with general_paths_only(), pytest.raises(TypeError) as general_error:
        dplus.grad(horner_no_initial)([], 2.0)
    assert str(fast_error.value) == str(general_error.value)


def test_nested_def_and_several_captures(fast_calls):
    def f(xs, a, b):
        def step(acc, x):
            return acc * a + math.sin(x * b)

        return reduce(step, xs, 1.0)

    g = both_paths_equal(f, [0.1, -0.5, 0.9], 0.8, 1.3)
    close(g[1:], fd_gradient(lambda a, b: f([0.1, -0.5, 0.9], a, b), (0.8, 1.3)), 1e-6)
    assert fast_calls[0] > 0


def test_closure_sensitivity_zero_in_some_calls(fast_calls):
    # the captured x gets a sensitivity only in the calls taking the first branch
    def f(cs, x):
        return reduce(lambda acc, c: acc * x + c if c > 0 else acc + c, cs, 0.5)

    both_paths_equal(f, [1.0, -2.0, 3.0, -0.5, 0.25], 0.6)
    both_paths_equal(f, [-1.0, -2.0], 0.6)
    assert fast_calls[0] > 0


def test_captured_list_and_list_accumulator(fast_calls):
    def f(xs, w):
        return sum(reduce(lambda acc, x: acc + [x * w[len(acc) % 2]], xs, []))

    def g(xs, w):
        # the accumulator is the same list every call (mutated and returned: aliasing)
        return sum(reduce(lambda acc, x: (acc.append(x * w[0]), acc)[1], xs, [w[1]]))

    both_paths_equal(f, [0.5, 1.5, -2.0], [0.3, 0.7])
    both_paths_equal(g, [0.5, 1.5, -2.0], [0.3, 0.7])
    assert fast_calls[0] > 0


def test_tuple_accumulator_and_int_and_complex_items(fast_calls):
    def pair(xs, t):
        return reduce(lambda acc, x: (acc[0] + x * t, acc[1] * x), xs, (0.0, 1.0))[1]

    def ints(n, x):
        return reduce(lambda acc, k: acc * x + k, range(n), 0) + 0.0 * x

    def cplx(xs, x):
        return reduce(lambda acc, c: acc * x + c, xs, 0j).real

    both_paths_equal(pair, [0.5, 1.5, -2.0], 0.4)
    both_paths_equal(ints, 5, 0.9)
    both_paths_equal(cplx, [1 + 2j, 0.5, -1j], 0.7)
    assert fast_calls[0] > 0


def test_generator_and_tuple_iterables(fast_calls):
    def gen(cs, x):
        return reduce(lambda acc, c: acc * x + c, (c * c for c in cs), 0.0)

    def tup(cs, x):
        return reduce(lambda acc, c: acc * x + c, tuple(cs), 0.0)

    both_paths_equal(gen, [0.5, 1.5, -2.0], 0.4)
    both_paths_equal(tup, [0.5, 1.5, -2.0], 0.4)


@define_dplus
def registered_step(acc, c):
    return acc * 0.5 + c


def test_functions_the_fast_path_does_not_take(fast_calls):
    def primitive(xs):
        return reduce(operator.mul, xs) + reduce(math.hypot, xs, 0.0)

    def registered(xs):
        return reduce(registered_step, xs, 1.0)

    def default_parameter(xs, x):
        return reduce(lambda acc, c, k=2.0: acc * x + k * c, xs, 0.0)

    def star(xs, x):
        return reduce(lambda *ab: ab[0] * x + ab[1], xs, 0.0)

    def partial(xs, x):
        return reduce(functools.partial(lambda y, acc, c: acc * y + c, x), xs, 0.0)

    for f, args in (
        (primitive, ([0.5, 1.5, -2.0],)),
        (registered, ([0.5, 1.5, -2.0],)),
        (default_parameter, ([0.5, 1.5, -2.0], 0.3)),
        (star, ([0.5, 1.5, -2.0], 0.3)),
        (partial, ([0.5, 1.5, -2.0], 0.3)),
    ):
        g = both_paths_equal(f, *args)
        xs = args[0]
        for i in range(len(xs)):
            up, down = list(xs), list(xs)
            up[i] += 1e-6
            down[i] -= 1e-6
            fd = (f(up, *args[1:]) - f(down, *args[1:])) / 2e-6
            assert math.isclose(g[0][i], fd, rel_tol=1e-5, abs_tol=1e-6), (f.__name__, g, fd)
    assert fast_calls[0] == 0


def test_keyword_initial_is_the_builtins_error():
    def f(xs):
        return reduce(lambda a, b: a + b, xs, initial=0.0)

    try:
        reduce(lambda a, b: a + b, [1.0], initial=0.0)
    except TypeError:
        with pytest.raises(TypeError):
            dplus.grad(f)([1.0, 2.0])
    else:  # Python 3.14 takes initial= by keyword
        both_paths_equal(f, [1.0, 2.0])


def test_function_raising_mid_way():
    def f(xs, x):
        return reduce(lambda acc, c: acc * x + 1.0 / c, xs, 0.0)

    with pytest.raises(ZeroDivisionError):
        dplus.grad(f)([1.0, 0.0], 0.5)
    with general_paths_only(), pytest.raises(ZeroDivisionError):
        dplus.grad(f)([1.0, 0.0], 0.5)


def test_second_order_does_not_see_the_fast_path(fast_calls):
    def f(x, c0, c1):
        return horner([c0, c1, 0.5, -1.0], x)

    args = (0.7, 0.3, -1.2)
    h = dplus.hessian(f)(*args)
    assert fast_calls[0] == 0  # the next order differentiates reduce_recorded
    close(h, fd_hessian(f, args), tol=1e-5)
    with general_paths_only():
        assert repr(dplus.hessian(f)(*args)) == repr(h)


def test_rows_as_items(fast_calls):
    # items that are lists (their sensitivities go into the box map) and tuples
    def lists(rows, x):
        return reduce(lambda acc, row: acc * x + row[0] * row[1], rows, 0.0)

    def tuples(rows, x):
        return reduce(lambda acc, row: acc * x + row[0] * row[1], [tuple(r) for r in rows], 0.0)

    def same_row_twice(rows, x):
        return reduce(lambda acc, row: acc * x + row[0] * row[1], [rows[0], rows[0]], 0.0)

    rows = [[0.5, 1.5], [-2.0, 0.25], [1.0, 3.0]]
    both_paths_equal(lists, rows, 0.4)
    both_paths_equal(tuples, rows, 0.4)
    both_paths_equal(same_row_twice, rows, 0.4)
    assert fast_calls[0] > 0
