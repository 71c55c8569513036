"""Lazy iterators inside lazy iterators, in a loop that writes into what they read (stop 37,
issues #18 and #26; found while testing the DEAP corpus, the reproductions written anew).

A loop over ``zip``/``enumerate``/``reversed``/``map`` whose body may write into a list runs
over Python's live iterator. The iterator given to it as an argument
(``enumerate(zip(xs, ys))``, ``zip(reversed(xs), ys)``, ``enumerate(map(f, xs))``, or a
``zip`` kept in a variable) was made at once, reading the lists before the body changed
them: a wrong primal and a wrong gradient without an error. Each inner iterator is now live
too, and each item's sensitivity goes through the outer iterator to the position the inner
one read. At the second order these loops are refused by name: each changes a list before
its iterator reads it (tests/test_live_iteration_again.py), or is a ``map`` or kept.
"""

from __future__ import annotations

import copy

import pytest
from path_helpers import check_first_order

import dplus
from dplus import NonDifferentiableError


@dplus.define_dplus
def double_at(xs, i):
    xs[i] = xs[i] * 2.0
    return 0


def enumerate_of_zip(x0, x1, x2):
    xs = [x0, x1, x2]
    total = 0.0
    for i, (x, y) in enumerate(zip(xs, [1.0, 2.0, 3.0])):
        total += x * y + double_at(xs, min(i + 1, 2))
    return total


def enumerate_of_reversed(x0, x1, x2):
    xs = [x0, x1, x2]
    total = 0.0
    for i, x in enumerate(reversed(xs)):
        total += x * (i + 1.0)
        xs[0] = xs[0] * 3.0
    return total


def zip_of_reversed(x0, x1, x2):
    xs = [x0, x1, x2]
    ys = [1.0, 2.0, 3.0]
    total = 0.0
    for a, b in zip(reversed(xs), ys):
        total += a * b
        xs[0] = xs[0] * xs[1]
    return total


def enumerate_of_map(x0, x1, x2):
    xs = [x0, x1, x2]
    total = 0.0
    for i, v in enumerate(map(lambda u: u * u, xs)):
        total += v * (i + 1.0)
        if i + 1 < 3:
            xs[i + 1] = xs[i + 1] + xs[i]
    return total


def zip_kept_in_a_variable(x0, x1, x2):
    xs = [x0, x1, x2]
    pairs = zip(xs, (1.0, 2.0, 3.0))
    total = 0.0
    for i, (a, b) in enumerate(pairs):
        total += a * b * (i + 2.0)
        xs[2] = xs[2] + a
    return total


def zip_partly_taken_first(x0, x1, x2):
    xs = [x0, x1, x2]
    pairs = zip(xs, (1.0, 2.0, 3.0))
    first = next(pairs)
    total = first[0] * 5.0
    for i, (a, b) in enumerate(pairs):
        total += a * b * (i + 2.0)
        xs[2] = xs[2] * a
    return total


def appending_while_zipping_with_itself_reversed(x0, x1, x2):
    xs = [x0, x1, x2]
    out = []
    for i, (a, b) in enumerate(zip(xs, xs[::-1])):
        out.append(a * b + i)
        xs[-1] = xs[-1] + 1.0 * a
    return sum(out)


NESTED = [
    enumerate_of_zip,
    enumerate_of_reversed,
    zip_of_reversed,
    enumerate_of_map,
    zip_kept_in_a_variable,
    zip_partly_taken_first,
    appending_while_zipping_with_itself_reversed,
]
POINTS = [(0.3, -0.7, 1.1), (1.25, 0.4, -0.9), (-0.6, 1.7, 0.8)]


@pytest.mark.parametrize("f", NESTED)
@pytest.mark.parametrize("point", POINTS)
def test_first_order_as_python_runs_it(f, point):
    before = copy.deepcopy(point)
    assert dplus.dplus(f)(*point).primal == f(*point)
    check_first_order(f, *point)
    assert point == before


@pytest.mark.parametrize("f", NESTED)
def test_second_order_is_refused_by_name(f):
    with pytest.raises(
        NonDifferentiableError,
        match=r"(zip|enumerate|reversed|map)\(\) (iterated lazily|that changes)",
    ):
        dplus.hessian(f)(*POINTS[0])
