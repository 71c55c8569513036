"""A fast segment's guard reads the segment's inputs before its statements run. An input
assigned only on some paths may be unbound there: the program then raises whatever its
statements raise first (a division by zero), and so must its gradient, on every path,
never the guard's ``UnboundLocalError`` in its place."""

from __future__ import annotations

import math

import pytest

import dplus
from dplus.transform.transformer import general_paths_only


def divides_then_reads(a):
    if a > 5:
        b = 2.0
    y = 1.0 / a
    return y * b


def in_a_loop(a, xs):
    acc = 0.0
    if a > 5:
        scale = a * 0.5
    for x in xs:
        r = math.sqrt(x)
        acc = acc + r * scale
    return acc


def in_a_branch(a):
    if a < 0:
        c = -a
    if a != 1.0:
        y = math.log(a - 1.0)
        return y * c
    return a


def outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as e:  # the kind of exception is what must agree
        return ("raises", type(e))


CASES = [
    (divides_then_reads, [(0.0,), (1.0,), (6.0,), (-2.0,)]),
    (
        in_a_loop,
        [(6.0, [4.0, -1.0]), (1.0, [-1.0]), (1.0, [4.0, 1.0]), (6.0, [1.0, 9.0]), (1.0, [])],
    ),
    (in_a_branch, [(0.5,), (-3.0,), (1.0,), (3.0,)]),
]


@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize("fn,inputs", CASES, ids=[c[0].__name__ for c in CASES])
def test_the_gradient_raises_what_the_program_raises(fn, inputs, general):
    for args in inputs:
        plain = outcome(fn, *args)
        if general:
            with general_paths_only():
                got = outcome(dplus.grad(fn), *args)
        else:
            got = outcome(dplus.grad(fn), *args)
        if plain[0] == "raises":
            assert got == plain, (fn.__name__, args)
        else:
            assert got[0] == "value", (fn.__name__, args, got)


def test_the_gradient_where_every_name_is_bound_is_right():
    g = dplus.grad(divides_then_reads)
    for a in (6.0, 7.5, 10.0):
        assert g(a)[0] == pytest.approx(-2.0 / (a * a))
    h = dplus.grad(in_a_loop)
    for a in (6.0, 8.0):
        xs = [1.0, 4.0, 9.0]
        assert h(a, xs)[0] == pytest.approx(0.5 * sum(math.sqrt(x) for x in xs))
