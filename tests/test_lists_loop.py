"""``for a, b in zip(xs, ys)`` run over the lists themselves (``reverse.loop_over_lists``).

When the lists hold numbers and the loop body is float arithmetic whose assigned names
stay numbers, the guard is tested once on entry, the forward records copies of the lists
instead of the list of tuples ``zip`` makes, and the reverse hands each list its column
of sensitivities. Everything here is compared with the general path, with exact values
and with finite differences; values that must fail the entry test (objects, tuples,
powers that may turn complex) take the guarded loop.
"""

from __future__ import annotations

import copy
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, check_fd, close
from test_fast_paths import Scaled  # (objects never on the lists path)
from test_fast_paths import loop_over_rows as nested

import dplus
from dplus.transform.transformer import general_paths_only

SETTINGS = settings(max_examples=30, deadline=None)
floats = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)
LISTS_PATH = "_dp_all_numbers("


def dot(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s += x * y
    return s


def weighted(xs, ys, c):
    # a column (sin x, recorded per iteration), an invariant (c) and a carried name (s)
    s = 0.0
    for x, y in zip(xs, ys):
        s = s * 0.5 + c * math.sin(x) * y
    return s * s


def three(xs, ys, zs):
    s = 1.0
    for x, y, z in zip(xs, ys, zs):
        t = x * y - z
        s = s + t * t
    return s


def second_unused(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s = s + x * x
    return s


def same_list_twice(xs):
    s = 0.0
    for a, b in zip(xs, xs):
        s = s + a * b * a
    return s


def mutated_after(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s = s + x * y
    xs[0] = 100.0  # the reverse must read the values the loop saw
    ys.append(1.0)
    return s * xs[0]


def unused_result(xs, ys, c):
    s = 0.0
    for x, y in zip(xs, ys):
        s = s + x * y
    return c * c


def whole_power(xs, ys):
    s = 1.0
    for x, y in zip(xs, ys):
        s = (s * x + y) ** 2 * 0.1
    return s


def any_power(xs, ys, p):
    # ``s ** p`` of a negative s is complex: tested every iteration, never once
    s = 1.0
    for x, y in zip(xs, ys):
        s = s**p * x + y
    return s


def test_the_lists_path_is_generated_where_the_guard_can_be_tested_once():
    for f in (
        dot,
        weighted,
        three,
        second_unused,
        same_list_twice,
        mutated_after,
        unused_result,
        whole_power,
        nested,
    ):
        assert LISTS_PATH in dplus.show(f), f.__name__
    assert LISTS_PATH not in dplus.show(any_power)
    # sensitivities that depend on their own iteration only: comprehensions, in order;
    # an adjoint carried from iteration to iteration (s * 0.5): a loop, last iteration first
    for f in (dot, three, second_unused, same_list_twice):
        assert "_dp_Abox, False)" in dplus.show(f), f.__name__
    for f in (weighted, whole_power):
        assert "_dp_Abox, True)" in dplus.show(f), f.__name__


def test_exact_values():
    xs, ys = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]  # zip stops at xs: ys[3] gets zero
    assert dplus.grad(dot)(xs, ys) == ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0, 0.0])
    assert dplus.grad(same_list_twice)([1.0, 2.0]) == ([3.0, 12.0],)
    assert dplus.grad(second_unused)([1.0, -2.0], [5.0, 6.0]) == ([2.0, -4.0], [0.0, 0.0])
    assert dplus.grad(unused_result)([1.0], [2.0], 3.0) == ([0.0], [0.0], 6.0)
    # s * xs[0] with xs[0] written after the loop: the loop's values are the ones read
    assert dplus.grad(mutated_after)([2.0, 3.0], [5.0, 7.0]) == ([500.0, 700.0], [200.0, 300.0])
    assert dplus.grad(dot)([], []) == ([], [])


@SETTINGS
@given(
    xs=st.lists(floats, min_size=0, max_size=6), extra=st.integers(0, 2), c=floats, data=st.data()
)
def test_agrees_with_the_general_path_and_finite_differences(xs, extra, c, data):
    n = len(xs)
    ys = data.draw(st.lists(floats, min_size=n + extra, max_size=n + extra))
    zs = data.draw(st.lists(floats, min_size=n, max_size=n))
    cases = [
        (dot, (xs, ys)),
        (weighted, (xs, ys, c)),
        (three, (xs, ys, zs)),
        (second_unused, (xs, ys)),
        (same_list_twice, (xs,)),
        (unused_result, (xs, ys, c)),
        (whole_power, (xs, ys)),
        (nested, ([xs, zs], ys)),
    ]
    for f, args in cases:
        fast, general = both_ways(f, *copy.deepcopy(args))
        close(fast, general)
        check_fd(f, *copy.deepcopy(args))


@SETTINGS
@given(xs=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=4), p=st.floats(0.5, 2.5))
def test_a_power_that_may_be_complex_keeps_its_guard_and_agrees(xs, p):
    fast, general = both_ways(any_power, list(xs), list(xs), p)
    close(fast, general)
    check_fd(any_power, list(xs), list(xs), p)


def test_values_the_entry_test_refuses_take_the_guarded_loop():
    xs, ys = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
    # ints are numbers: the lists path, with the general path's sensitivities
    fast, general = both_ways(dot, [1, 2.0, 3], [4.0, 5, 6.0])
    close(fast, general)
    assert fast == ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    # tuples, objects, a non-number carried value: the loop with a guard per iteration
    fast, general = both_ways(dot, tuple(xs), tuple(ys))
    close(fast, general)
    assert fast == ((4.0, 5.0, 6.0), (1.0, 2.0, 3.0))
    objs = [1.0, Scaled(2.0), 3.0]
    fast, general = both_ways(dot, objs, list(ys))
    close(fast[1], general[1])
    assert fast[1] == [1.0, 4.0, 3.0]
    assert fast[0][1] == {"a": 10.0} and general[0][1] == {"a": 10.0}
    fast, general = both_ways(nested, [[1.0, True], [2.0, 3.0]], [4.0, 5.0])
    close(fast, general)


DOT, WEIGHTED, THREE = (
    dplus.define_dplus(dot),
    dplus.define_dplus(weighted),
    dplus.define_dplus(three),
)


def test_called_from_differentiated_code():
    # (loops over lists are not differentiated twice yet: higher.py says so with an error)
    def g(xs, ys):
        return DOT(xs, ys) * WEIGHTED(xs, ys, 2.0) + THREE(xs, ys, xs)

    xs, ys = [0.3, -0.7, 1.1], [0.9, 0.2, -0.4]
    fast, general = both_ways(g, list(xs), list(ys))
    close(fast, general)
    check_fd(g, list(xs), list(ys))


def test_the_general_path_of_a_list_grown_after_zip():
    # (the zip rule's sensitivity is for the list as zip read it: handed over at that length)
    with general_paths_only():
        assert dplus.grad(mutated_after)([2.0, 3.0], [5.0, 7.0]) == ([500.0, 700.0], [200.0, 300.0])
        check_fd(mutated_after, [2.0, 3.0], [5.0, 7.0])


def test_a_list_stored_into_a_slot_that_already_has_a_sensitivity():
    """The reverse of ``xs[i] = [a, b]`` when the slot's sensitivity arrived by the list
    read (not through the stored list itself): the stored numbers still get it."""

    def f(x, y):
        xs = [[0.0, 0.0], [1.0, 2.0]]
        for k in range(3):
            xs[k % 2] = [x * y + k, x - y]
            row = xs[k % 2]
            a = row[0] * 2.0 + row[1] * row[1]
            y = y + a * 0.1
        return xs[0][0] * xs[1][1] + y

    for x, y in [(0.3, -1.2), (1.5, 0.25), (-2.0, 0.7)]:
        fast, general = both_ways(f, x, y)
        close(fast, general)
        h = 1e-6
        assert abs(fast[0] - (f(x + h, y) - f(x - h, y)) / (2 * h)) < 1e-5
        assert abs(fast[1] - (f(x, y + h) - f(x, y - h)) / (2 * h)) < 1e-5


def test_unpacking_an_empty_list():
    def f(x, xs):
        [] = xs
        return x * x

    fast, general = both_ways(f, 3.0, [])
    assert fast == general == (6.0, [])


def unpack_rows_twice(rows, w):
    rows = [list(r) for r in rows]
    total = 0.0
    for k in range(len(rows)):
        a, b = rows[k]
        c, d = rows[k]  # the same list again: its entry exists, the parts are added
        rows[k] = [a * w + d, b - c * w]
        e, f = rows[k]
        total += e * f + a
        if k % 2:
            g, h = rows[k]  # h's sensitivity is zero: the general call
            total += g
    return total


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-2, 2), st.floats(-2, 2)), min_size=1, max_size=5),
    st.floats(-2, 2),
)
def test_unpacking_a_list_of_floats_inline_agrees_with_the_general_path(rows, w):
    fast, general = both_ways(unpack_rows_twice, rows, w)
    close(fast, general)
    h = 1e-6
    fd = (unpack_rows_twice(rows, w + h) - unpack_rows_twice(rows, w - h)) / (2 * h)
    assert abs(fast[1] - fd) <= 1e-5 * max(1.0, abs(fd))
    for i in range(len(rows)):
        for j in range(2):
            up = [list(r) for r in rows]
            down = [list(r) for r in rows]
            up[i][j] += h
            down[i][j] -= h
            fd = (unpack_rows_twice(up, w) - unpack_rows_twice(down, w)) / (2 * h)
            assert abs(fast[0][i][j] - fd) <= 1e-5 * max(1.0, abs(fd))
