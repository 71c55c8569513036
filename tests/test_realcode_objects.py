"""Objects as real programs write them (stop 37, issues #18 and #26), found on
pyperformance's raytrace and chaos benchmarks; the reproductions are written anew here.

- An undecorated class's operator methods (``u - v`` running ``Vec.__sub__``) were lifted
  through the public ``lift_dplus``, whose wrapper coerces sensitivities for users and has no
  derivative: at the second order every such operator was refused, the message naming
  ``dplus.api.coerce_sensitivities``.
- An object holding another object made in the differentiated code (``Holder(V(a)).v.x``)
  had no second derivative: the constructor's code, differentiated again, calls
  ``cls.__new__(cls)``, which had no rule, and the default policy refused it ("no derivative is
  known for object.__new__"). ``object.__new__`` makes an empty instance: zero derivative.
- An object called as a function (``spline(u)``, its class's Python ``__call__``) was refused
  by ``transform_from_source``, which transformed only functions, and the refusal named the
  object by its repr (the whole control polygon) instead of the ``__call__`` to decorate.

Every function is checked on both paths against central differences, first and second order.
"""

from __future__ import annotations

import math

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus import UnknownTransformError, define_dplus

# --------------------------------------------------------------------------
# a vector class whose operator methods are not decorated (its named methods are: the
# default policy does not transform them)


class Vec:
    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y, self.z + other.z)

    def __sub__(self, other):
        return self + other * -1.0

    def __mul__(self, k):
        return Vec(self.x * k, self.y * k, self.z * k)

    __rmul__ = __mul__

    def __truediv__(self, k):
        return Vec(self.x / k, self.y / k, self.z / k)

    def __neg__(self):
        return Vec(-self.x, -self.y, -self.z)

    @define_dplus
    def dot(self, other):
        return self.x * other.x + self.y * other.y + self.z * other.z

    @define_dplus
    def length(self):
        return math.sqrt(self.dot(self))

    @define_dplus
    def unit(self):
        return self / self.length()


class Spot:
    """A position: position - position is a Vec, position + Vec a position."""

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z

    def is_spot(self):
        return True

    def __sub__(self, other):
        if isinstance(other, Spot) and other.is_spot():
            return Vec(self.x - other.x, self.y - other.y, self.z - other.z)
        return Spot(self.x - other.x, self.y - other.y, self.z - other.z)

    def __add__(self, v):
        return Spot(self.x + v.x, self.y + v.y, self.z + v.z)


def difference_and_length(a, b):
    u = Vec(a, b, 1.0)
    w = u - Vec(b, 1.0, a * b)
    return w.length() + w.x


def mirror(a, b):
    # a direction reflected about a unit normal: d - 2 (d.n) n
    d = Vec(a, b, -1.0)
    n = Vec(b, 1.0, a).unit()
    r = d - 2.0 * d.dot(n) * n
    return r.x + 2.0 * r.y - (-r).z


def spots(a, b):
    p = Spot(a, 1.0, b)
    q = p + Vec(b, a, 0.5) * 0.3
    v = q - Spot(0.2, b, a)
    return v.dot(v) + (q - v).x


def accumulate(a, b):
    total = Vec(0.0, 0.0, 0.0)
    for k in range(3):
        total = total + Vec(a, b, a * b) / (k + 1.0)
    return total.length()


OPERATORS = [difference_and_length, mirror, spots, accumulate]
POINTS = [(0.7, -1.3), (1.9, 0.4), (-0.6, 2.2)]


@pytest.mark.parametrize("f", OPERATORS)
@pytest.mark.parametrize("point", POINTS)
def test_operator_methods_first_order(f, point):
    check_first_order(f, *point)


@pytest.mark.parametrize("f", OPERATORS)
@pytest.mark.parametrize("point", POINTS)
def test_operator_methods_second_order(f, point):
    check_second_order(f, *point)


# --------------------------------------------------------------------------
# an object called as a function


class Bezier:
    def __init__(self, points):
        self.points = points

    def __call__(self, u):
        # de Casteljau: repeated linear interpolation of the control points
        pts = list(self.points)
        while len(pts) > 1:
            pts = [(1.0 - u) * p + u * q for p, q in zip(pts[:-1], pts[1:])]
        return pts[0]

    def __repr__(self):
        return f"Bezier({self.points!r})"


def curve_point(a, u):
    curve = Bezier([0.0, a, 2.0 * a * a, 1.0])
    return curve(u) + curve(0.5 * u) * a


CURVE_POINTS = [(0.7, 0.3), (1.4, 0.8), (-0.5, 0.55)]


@pytest.mark.parametrize("point", CURVE_POINTS)
def test_called_object_under_transform_from_source_first_order(point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_first_order(curve_point, *point)


@pytest.mark.parametrize("point", CURVE_POINTS)
def test_called_object_under_transform_from_source_second_order(point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_second_order(curve_point, *point)


class Quadratic:
    def __init__(self, c):
        self.c = c

    def __call__(self, u):
        return self.c * u * u

    def __repr__(self):
        return "Quadratic(" + "c" * 500 + ")"  # (a long repr: not what the message shows)


def quadratic_of_object(c, u):
    return Quadratic(c)(u)


def test_an_undecorated_called_object_is_refused_naming_its_call_method():
    with pytest.raises(UnknownTransformError) as info:
        dplus.grad(quadratic_of_object)(1.5, 0.5)
    message = str(info.value)
    assert "Quadratic object, whose __call__ is" in message
    assert "Quadratic.__call__" in message and "test_realcode_objects.py" in message
    assert "ccccc" not in message


# --------------------------------------------------------------------------
# objects holding objects, at the second order


class Cell:
    def __init__(self, x):
        self.x = x


class Holder:
    def __init__(self, v):
        self.v = v


class Beam:
    def __init__(self, origin, direction):
        self.origin = origin
        self.direction = direction.unit()


class Target:
    def __init__(self, r):
        self.r = r

    @define_dplus
    def hit(self, beam):
        v = beam.origin.dot(beam.direction)
        return v * self.r + beam.direction.x


def held_object(a, b):
    return Holder(Cell(a * b)).v.x * a


def held_object_kept(a, b):
    h = Holder(Cell(a))
    k = Holder(h)
    return h.v.x * k.v.v.x * b


def beam_passed_at_once(a, b):
    return Target(a).hit(Beam(Vec(a, b, 0.5), Vec(b, 1.0, a)))


def beams_in_a_loop(a, b):
    total = 0.0
    for target in [Target(a), Target(b), Target(a * b)]:
        t = target.hit(Beam(Vec(a, b, 1.0), Vec(b, 1.0, 0.3)))
        if t > 100.0:
            break
        total += t
    return total


HELD = [held_object, held_object_kept, beam_passed_at_once, beams_in_a_loop]


@pytest.mark.parametrize("f", HELD)
@pytest.mark.parametrize("point", POINTS)
def test_objects_holding_objects_first_order(f, point):
    check_first_order(f, *point)


@pytest.mark.parametrize("f", HELD)
@pytest.mark.parametrize("point", POINTS)
def test_objects_holding_objects_second_order(f, point):
    check_second_order(f, *point)
