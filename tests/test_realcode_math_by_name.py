"""Math functions imported by name (``from math import cos``) in a loop over ``zip`` or
``enumerate`` (stop 37, issues #18 and #26; found on DEAP's benchmark functions, the
reproductions written anew).

A loop over ``zip(xs, ys)`` whose body may write into a list is iterated as Python iterates
it, lazily over the live lists, and that form is refused at the second order. A body that
called ``cos`` imported by name counted as such a body (any call but a builtin's or a
``math.``/``cmath.`` attribute's), so ``sum(... cos(x) ... for x, y in zip(xs, ys))`` had
no Hessian. A name bound to a ``math`` or ``cmath`` function is now a pure call; a name bound
to anything else (a Python function that may write into the lists) still makes the loop live.
"""

from __future__ import annotations

import functools
import operator
from math import cos, exp, pi, sin, sqrt

import pytest
from path_helpers import check_first_order, check_second_order

import dplus


def pairs_sum(x0, x1, x2, x3):
    xs = [x0, x1, x2, x3]
    return sum(
        x * x + 2.0 * y * y - 0.3 * cos(3.0 * pi * x) - 0.4 * cos(4.0 * pi * y)
        for x, y in zip(xs[:-1], xs[1:])
    )


def product_of_cosines(x0, x1, x2, x3):
    xs = [x0, x1, x2, x3]
    prod = functools.reduce(operator.mul, (cos(x / sqrt(i + 1.0)) for i, x in enumerate(xs)), 1.0)
    return sum(x * x for x in xs) / 40.0 - prod


def loop_over_enumerate(x0, x1, x2, x3):
    xs = [x0, x1, x2, x3]
    total = 0.0
    for i, x in enumerate(xs):
        total += (10.0 ** (i / 3.0) * x) ** 2 - 10.0 * cos(2.0 * pi * x)
    return total


def loop_over_zip(x0, x1, x2, x3):
    xs = [x0, x1, x2, x3]
    f1 = 0.0
    for x, y in zip(xs[:-1], xs[1:]):
        f1 += -10.0 * exp(-0.2 * sqrt(x * x + y * y)) + sin(x * y)
    return f1


FUNCTIONS = [pairs_sum, product_of_cosines, loop_over_enumerate, loop_over_zip]
POINTS = [(0.3, -0.7, 1.1, 0.45), (-1.2, 0.8, 0.25, -0.6), (0.9, 1.4, -0.35, 0.7)]


@pytest.mark.parametrize("f", FUNCTIONS)
@pytest.mark.parametrize("point", POINTS)
def test_first_order(f, point):
    check_first_order(f, *point)


@pytest.mark.parametrize("f", FUNCTIONS)
@pytest.mark.parametrize("point", POINTS[:2])
def test_second_order(f, point):
    check_second_order(f, *point)


# a loop that does write into the list it zips still runs as Python runs it


def cos_then_write(x0, x1, x2):
    xs = [x0, x1, x2]
    total = 0.0
    for i, x in enumerate(xs):
        total += cos(x) * x
        if i + 1 < len(xs):
            xs[i + 1] = xs[i + 1] + x  # read by the next step of the same loop
    return total + xs[-1]


@dplus.define_dplus
def bump(xs, i):
    xs[i] = xs[i] * 2.0
    return 0.0


cosine = bump  # (a global named like a math function, bound to a function that writes)


def call_that_writes(x0, x1, x2):
    xs = [x0, x1, x2]
    total = 0.0
    for i, (x, y) in enumerate(zip(xs, [1.0, 2.0, 3.0])):
        total += x * y + cosine(xs, min(i + 1, 2))
    return total


@pytest.mark.parametrize("f", [cos_then_write, call_that_writes])
@pytest.mark.parametrize("point", [(0.3, -0.7, 1.1), (1.2, 0.5, -0.8)])
def test_loops_that_write_what_they_read_run_as_python(f, point):
    check_first_order(f, *point)
