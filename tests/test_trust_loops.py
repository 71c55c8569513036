"""Issue #18's loop bugs: each program runs under ``grad`` exactly as in a plain call (result,
side effects, what the arguments hold afterwards), and its gradient matches central finite
differences, on the fast paths and on the general path, at first and second order."""

from __future__ import annotations

import copy

import pytest

import dplus
from dplus.transformer import general_paths_only
from path_helpers import both_ways, check_fd, close


def _leaves(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, float):
        yield v


def _direction(args):
    """A fixed direction shaped like ``args`` (floats only), for second-order checks."""
    if isinstance(args, (list, tuple)):
        out = [_direction(a) for a in args]
        return tuple(out) if isinstance(args, tuple) else out
    return 0.7 if isinstance(args, float) else 0


def check_program(f, *args, second=True):
    """Primal, argument mutation, gradient against finite differences (fast and general
    paths), and second order through the directional derivative ``grad(f) . v``."""
    plain_args = copy.deepcopy(args)
    expected = f(*plain_args)
    for general in (False, True):
        a = copy.deepcopy(args)
        if general:
            with general_paths_only():
                r = dplus.dplus(f)(*a)
        else:
            r = dplus.dplus(f)(*a)
        assert r.primal == expected, (general, r.primal, expected)
        assert a == plain_args, (general, a, plain_args)
        a = copy.deepcopy(args)
        if general:
            with general_paths_only():
                dplus.grad(f)(*a)
        else:
            dplus.grad(f)(*a)
        assert a == plain_args, (general, a, plain_args)
    fast, slow = both_ways(f, *copy.deepcopy(args))
    close(fast, slow)
    check_fd(f, *copy.deepcopy(args))
    with general_paths_only():
        check_fd(f, *copy.deepcopy(args))
    if second:
        v = _direction(args)

        def directional(*a):
            return dplus.dot(dplus.grad(f)(*a), v)

        check_fd(directional, *copy.deepcopy(args))
    return fast


# ---------------------------------------------------------------------------
# 3. an early return inside a loop with an else clause leaves the loop: the else does not run


def return_in_for_else(x):
    for i in range(3):
        if i == 1:
            return x * 2.0
    else:
        x = x * 3.0
    return x


def return_in_nested_if_for_else(x, log):
    for i in range(3):
        x = x * x + 0.5
        if i == 1:
            if x > 0.0:
                return x * 2.0
    else:
        log.append(1.0)
        x = x * 3.0
    return x


def return_in_while_else(x):
    i = 0
    while i < 3:
        i += 1
        if i == 2:
            return x * x
    else:
        x = x * 3.0
    return x + 1.0


def return_or_break_for_else(x, n):
    for i in range(4):
        x = x * 1.5
        if i == n:
            break
        if i == 2:
            return x * x
    else:
        x = x * 3.0
    return x - 1.0


def return_in_inner_loop_else(x):
    for j in range(2):
        for i in range(3):
            x = x + 0.25
            if x > 1.0:
                return x * 5.0
        else:
            x = x * 2.0
    else:
        x = x * 7.0
    return x


@pytest.mark.parametrize("x", [0.3, 1.7, -0.4])
def test_return_in_for_else(x):
    assert check_program(return_in_for_else, x) == (2.0,)


@pytest.mark.parametrize("x", [0.3, 1.2, -0.9])
def test_return_in_nested_if_for_else(x):
    check_program(return_in_nested_if_for_else, x, [])


@pytest.mark.parametrize("x", [0.3, 1.2, -0.9])
def test_return_in_while_else(x):
    check_program(return_in_while_else, x)


@pytest.mark.parametrize("x, n", [(0.3, 1), (1.2, 5), (-0.9, 0), (0.5, 3)])
def test_return_or_break_for_else(x, n):
    check_program(return_or_break_for_else, x, n)


@pytest.mark.parametrize("x", [0.1, -0.2, 0.9, -3.0])
def test_return_in_inner_loop_else(x):
    check_program(return_in_inner_loop_else, x)


# ---------------------------------------------------------------------------
# 1. the loop variable read after the loop carries the last element's sensitivity


def last_element_unused_in_body(xs, x):
    for e in xs:
        x = x + 1.0
    return e


def last_element_used_in_body(xs, x):
    for e in xs:
        x = x * e
    return e * x


def last_pair_of_zip(xs, ys, x):
    for a, b in zip(xs, ys):
        x = x * b
    return a * x


def last_of_enumerate(xs, x):
    for i, e in enumerate(xs):
        x = x * 2.0
    return e * x + i


def last_element_after_break(xs, x):
    for e in xs:
        x = x + 1.0
        if x > 2.0:
            break
    return e * x


def target_bound_before_an_empty_loop(xs, x):
    e = x * 3.0
    for e in xs:
        x = x + 1.0
    return e * x


def two_loops_same_target(xs, x):
    for e in xs:
        x = x + 1.0
    for e in xs[:1]:
        x = x * 1.5
    return e * x


@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5], [2.5, -1.25]])
def test_last_element_unused_in_body(xs):
    g = check_program(last_element_unused_in_body, xs, 1.0, second=False)
    assert g == ([0.0] * (len(xs) - 1) + [1.0], 0.0)
    check_program(last_element_unused_in_body, tuple(xs), 1.0)  # (second order: over a tuple)


@pytest.mark.parametrize("f", [last_element_used_in_body, last_of_enumerate, last_element_after_break,
                               two_loops_same_target])
@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5], [2.5, -1.25, 0.75, 1.5]])
def test_last_element_read_after_the_loop(f, xs):
    check_program(f, xs, 1.5, second=False)
    # (second order: over a tuple; enumerate and zip make lists, not differentiable twice yet)
    check_program(f, tuple(xs), 1.5, second=f is not last_of_enumerate)


@pytest.mark.parametrize("xs, ys", [([1.0, 2.0, 3.0], [0.5, 0.25, 2.0]), ([-1.5], [2.0, 3.0]), ([0.5, 4.0], [1.5, -1.0])])
def test_last_pair_of_zip(xs, ys):
    check_program(last_pair_of_zip, xs, ys, 1.5, second=False)
    check_program(last_pair_of_zip, tuple(xs), tuple(ys), 1.5, second=False)


@pytest.mark.parametrize("xs", [[], [2.0], [1.0, -3.0]])
def test_target_bound_before_the_loop(xs):
    check_program(target_bound_before_an_empty_loop, xs, 1.5, second=False)
    check_program(target_bound_before_an_empty_loop, tuple(xs), 1.5)
