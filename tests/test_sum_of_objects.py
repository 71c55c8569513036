"""``sum`` of the program's objects (primitives/builtins.py ``_sum_of_objects``): each ``+``
is the objects' own ``__add__``/``__radd__``, differentiated. (Run natively before, the
result's sensitivity reached no term: a zero gradient, silently.) First and second order
against central differences on several points."""

from __future__ import annotations

import math

import pytest

import dplus

POINTS = [(0.7, 1.3), (-0.4, 2.1), (1.9, -0.6)]


class V:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __add__(self, o):
        return V(self.x + o.x * o.y, self.y + o.y)

    def __radd__(self, o):  # sum's start 0: 0 + V
        return self if o == 0 else self + o

    def __abs__(self):
        return math.hypot(self.x, self.y)


def list_from_zero(a, b):
    return abs(sum([V(a, b), V(b, a * a), V(1.0, a)]))


def tuple_with_start_keyword(a, b):
    return sum((V(a, b), V(b, 1.0)), start=V(a, 0.5)).x * b


def generator_with_start(a, b):
    return sum((V(a * k, b) for k in range(3)), V(b, b)).y * a


def fd(f, xs, i, h=1e-5):
    p, m = list(xs), list(xs)
    p[i] += h
    m[i] -= h
    return (f(*p) - f(*m)) / (2 * h)


@pytest.mark.parametrize("f", [list_from_zero, tuple_with_start_keyword, generator_with_start])
def test_sum_of_objects_first_and_second_order(f):
    for xs in POINTS:
        g = dplus.grad(f)(*xs)
        assert g == pytest.approx([fd(f, xs, i) for i in range(2)], rel=1e-6, abs=1e-8)
        h = dplus.hessian(f)(*xs)
        for i in range(2):
            want = [fd(lambda *a, i=i: dplus.grad(f)(*a)[i], xs, j) for j in range(2)]
            assert h[i] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_sum_of_objects_runs_each_add_once():
    calls = []

    class Counted(V):
        def __add__(self, o):
            calls.append(1)
            return Counted(self.x + o.x, self.y)

    def f(a):
        return sum([Counted(a, 1.0), Counted(a * a, 1.0)], Counted(0.0, 0.0)).x

    assert dplus.grad(f)(3.0) == (7.0,)
    assert len(calls) == 2
