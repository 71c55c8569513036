"""A differentiable value that one function writes to a module global and another function
reads carries its sensitivity (before: the reader read a constant, a silently wrong gradient)."""

from __future__ import annotations

import math

import pytest
from path_helpers import close, fd_gradient

import dplus
from dplus.transform.transformer import general_paths_only

best = 0.0
calls = 0
scale = 2.0


@dplus.define_dplus
def reader(x):
    return best * x + math.sin(best)


@dplus.define_dplus
def writer_then_reader(x):
    global best, calls
    calls += 1
    best = x * x
    return reader(x) + best


def nested_reader(x):
    def inner(y):
        return best * y

    return inner(x)


dplus.define_dplus(nested_reader)


@dplus.define_dplus
def writer_then_nested_reader(x, y):
    global best
    best = math.exp(x) * y
    return nested_reader(y) * scale


def shadowing_reader(x):
    best = 3.0  # a local of its own: not the global
    return best * x


dplus.define_dplus(shadowing_reader)


@dplus.define_dplus
def writer_then_shadowing_reader(x):
    global best
    best = x * 5.0
    return shadowing_reader(x) + best


def plain(f, *args):
    """f's value with the module's globals restored after (the plain call writes them too)."""
    global best, calls
    saved = best, calls
    try:
        return f(*args)
    finally:
        best, calls = saved


@pytest.mark.parametrize(
    "f,points",
    [
        (writer_then_reader, [(0.3,), (-1.2,), (0.9,)]),
        (writer_then_nested_reader, [(0.2, 0.7), (-0.4, 1.3)]),
        (writer_then_shadowing_reader, [(0.5,), (-2.0,)]),
    ],
)
def test_first_and_second_order(f, points):
    for args in points:
        g = dplus.grad(f)(*args)
        with general_paths_only():
            close(dplus.grad(f)(*args), g)
        close(g, fd_gradient(lambda *a: plain(f, *a), args), tol=1e-5)
        if len(args) == 1:
            d2 = dplus.grad1(dplus.grad1(f))(args[0])
            eps = 1e-5
            fd2 = (dplus.grad1(f)(args[0] + eps) - dplus.grad1(f)(args[0] - eps)) / (2 * eps)
            assert d2 == pytest.approx(fd2, rel=1e-5, abs=1e-7)


def test_the_write_happens_once_per_call_as_in_python():
    global calls
    before = calls
    dplus.grad(writer_then_reader)(0.5)
    assert calls == before + 1
    assert best == 0.25
