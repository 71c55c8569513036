"""``obj.m(...)`` in differentiated code calls what Python calls: ``runtime.calls.callmethod``
caches a class's method transform by (class, name), and the cache must not outlive the
function it was made for. A function the instance holds under the method's name (rebound on
the instance) and a method replaced on the class mid-run were called as the old method:
another primal under ``grad`` than without it, and a wrong gradient on both paths."""

from __future__ import annotations

import pytest
from path_helpers import both_ways, close, fd_gradient

import dplus
from dplus import define_dplus


class Walker:
    def __init__(self, x):
        self.x = x

    @define_dplus
    def step(self, a):
        self.x = self.x * a + 1.5


class Runner(Walker):
    @define_dplus
    def step(self, a):
        self.x = self.x * a * a


@define_dplus
def triple_step(self, a):
    self.x = self.x * a * 3.0


ORIGINAL_STEP = Walker.step


def rebound_on_instance(a, x0):
    p = Walker(x0)
    p.step(a)
    p.step = lambda b: setattr(p, "x", p.x * b * 3.0)
    p.step(a)
    del p.step  # the class's method again
    p.step(a)
    return p.x


def replaced_on_class(a, x0):
    p = Walker(x0)
    p.step(a)
    Walker.step = triple_step
    try:
        p.step(a)
    finally:
        Walker.step = ORIGINAL_STEP
    p.step(a)
    return p.x


def subclass_and_class(a, x0):
    ps = [Walker(x0), Runner(x0), Walker(x0 * 0.5)]
    for _ in range(3):
        for p in ps:
            p.step(a)
    return ps[0].x + ps[1].x + ps[2].x


@pytest.mark.parametrize("f", [rebound_on_instance, replaced_on_class, subclass_and_class])
@pytest.mark.parametrize("args", [(0.7, 1.3), (-1.1, 0.4), (1.6, -2.0)])
def test_the_method_python_calls(f, args):
    assert dplus.lift_dplus(f)(*args).primal == f(*args)
    fast, general = both_ways(f, *args)
    close(fast, general, tol=1e-12)
    close(fast, fd_gradient(f, args), tol=1e-5)
