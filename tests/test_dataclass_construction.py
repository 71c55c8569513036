"""Constructing dataclasses and attrs classes (dplus/transform/field_classes.py): the
generated ``__init__`` runs no user code, but ``__post_init__``, an ``__init__`` written in
the class or a subclass, and attrs converters do. Each case at first and second order against
central differences, on several points."""

from __future__ import annotations

import dataclasses
import math

import attrs
import pytest

import dplus

POINTS = [(0.7, 1.3), (-0.4, 2.1), (1.9, -0.6)]


def fd(f, xs, i, h=1e-5):
    a, b = list(xs), list(xs)
    a[i] += h
    b[i] -= h
    return (f(*a) - f(*b)) / (2 * h)


def check_orders(f):
    with dplus.current_unknown_transform(dplus.transform_from_source):  # (undecorated methods)
        check_points(f)


def check_points(f):
    for xs in POINTS:
        g = dplus.grad(f)(*xs)
        for i in range(2):
            assert math.isclose(g[i], fd(f, xs, i), rel_tol=1e-6, abs_tol=1e-7), (xs, i, g)
        h = dplus.hessian(f)(*xs)
        for i in range(2):
            for j in range(2):
                want = fd(lambda *a, i=i: dplus.grad(f)(*a)[i], xs, j)
                assert math.isclose(h[i][j], want, rel_tol=1e-5, abs_tol=1e-6), (xs, i, j, h)


@dataclasses.dataclass
class Spring:
    k: float
    x0: float = 0.5

    def __post_init__(self):
        self.k2 = self.k * self.k  # a derived attribute

    @property
    def stiffness(self):
        return self.k2 + self.x0

    def energy(self, x):
        return 0.5 * self.stiffness * (x - self.x0) ** 2


def derived_attribute(a, b):
    return Spring(a, b).energy(a * b) + Spring(b).k2


@dataclasses.dataclass
class Clamped:
    lo: float
    hi: float

    def __post_init__(self):
        if self.lo > self.hi:  # a field rewritten
            self.lo, self.hi = self.hi, self.lo
        self.width = self.hi - self.lo


def rewritten_field(a, b):
    c = Clamped(hi=b * b, lo=a)  # by keyword
    return c.lo * c.width + math.sin(c.hi)


@dataclasses.dataclass(frozen=True)
class Scaled:
    x: float
    scale: dataclasses.InitVar[float] = 2.0
    history: list = dataclasses.field(default_factory=list)

    def __post_init__(self, scale):
        object.__setattr__(self, "y", self.x * scale)
        self.history.append(scale)


def frozen_with_initvar(a, b):
    s = Scaled(a, b)
    t = Scaled(a * b)
    return s.y * t.y + len(s.history) * a


@dataclasses.dataclass
class Written:
    x: float

    def __init__(self, x, w):  # kept by @dataclass: construction runs it
        self.x = x * w


class Sub(Spring):
    def __init__(self, k):  # a subclass's own __init__, of a dataclass
        super().__init__(k * 3.0, 0.25)


def written_init(a, b):
    return Written(a, b).x * Written(b, 0.5).x


def test_a_subclass_init_calling_the_generated_init_is_refused_not_wrong():
    # (the generated __init__ called as a method has no source and no rule yet: refused)
    with pytest.raises(dplus.DplusError, match="Spring.__init__"):
        dplus.grad(lambda a: Sub(a).k2)(0.7)


@attrs.define
class Private:
    _v: float  # given as v=
    w: float = 1.0


def attrs_alias(a, b):
    p = Private(v=a * b, w=a)
    return p._v * p.w


@pytest.mark.parametrize(
    "f", [derived_attribute, rewritten_field, frozen_with_initvar, written_init, attrs_alias]
)
def test_construction_runs_user_code_differentiated(f):
    check_orders(f)


def test_construction_leaves_the_program_as_it_was():
    # the factory-made list is the instance's own, as in the plain program
    s = dplus.dplus(lambda a: Scaled(a, 3.0))(0.5).primal
    assert s.history == [3.0] and s.y == 1.5


@attrs.define
class Converted:
    v: float = attrs.field(converter=lambda v: 2.0 * v)


def test_an_attrs_converter_is_refused_not_ignored():
    with pytest.raises(dplus.NonDifferentiableError, match="converter of v"):
        dplus.grad(lambda a: Converted(a).v)(1.0)
