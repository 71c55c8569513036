"""Properties, ``functools.cached_property``, property setters, and ``staticmethod`` /
``classmethod`` called through an instance, in classes defined at module level (their
functions marked ``@define_dplus``) and in classes defined inside the differentiated
function, at first, second and third order, against central finite differences on several
inputs (first order with the fast paths and with the general path only:
``path_helpers.check_first_order``; second order: the Hessian against differences of the
gradient).

Found by pylang5: a property's setter, and a module-level ``cached_property``, gave wrong
first-order gradients without an error (the setter's writes and the cached value were not
followed); a ``staticmethod`` called through an instance raised a raw ``TypeError``; a
``cached_property`` of a local class raised one."""

from __future__ import annotations

import functools
import math

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus import define_dplus

XS = [-0.8, 0.35, 0.9, 1.4]


class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    @property
    @define_dplus
    def norm(self):
        return math.hypot(self.x, self.y)

    @functools.cached_property
    @define_dplus
    def energy(self):
        return self.x * self.x * self.y

    @define_dplus
    def scaled(self, k):
        return self.norm * k + self.energy

    @staticmethod
    @define_dplus
    def square(u):
        return u * u

    @classmethod
    @define_dplus
    def weight(cls, u):
        return cls.W * u

    W = 3.0


class Stored:
    def __init__(self, a):
        self.a = a  # (through the setter)

    @property
    @define_dplus
    def a(self):
        return self._a

    @a.setter
    @define_dplus
    def a(self, v):
        self._a = v * 2.0


def module_property(x):
    v = Vec(x * x, x + 2.0)
    return v.norm * x


def module_property_in_a_method(x):
    v = Vec(math.sin(x), x)
    return v.scaled(x) + v.norm


def module_cached_property_read_twice(x):
    v = Vec(x, math.exp(0.3 * x))
    return v.energy * x + v.energy * v.energy


def module_cached_property_two_instances(x):
    v, w = Vec(x, 1.5), Vec(x * x, x)
    return v.energy * w.energy + v.energy


def module_static_and_class_methods_through_an_instance(x):
    v = Vec(x, x)
    return v.square(x) + v.weight(x * x) + Vec.square(v.x)


def module_setter(x):
    s = Stored(x)
    s.a = s.a * x
    s.a += math.sin(x)
    return s.a * x


def local_property_reading_the_function(x):
    k = math.sin(x)

    class V:
        def __init__(self, a):
            self.a = a

        @property
        def scaled(self):
            return self.a * k

    v = V(x)
    k = k * 2.0  # (the property reads k when it runs)
    return v.scaled * v.scaled + V(x * x).scaled


def local_property_read_by_a_method_and_natively(x):
    class V:
        def __init__(self, a, b):
            self.a = a
            self.b = b

        @property
        def norm(self):
            return math.hypot(self.a, self.b)

        def f(self, u):
            return self.norm * u + self.norm

    v = V(x * x, x + 1.0)
    return v.f(x) + v.norm * sum(w.norm for w in [v, V(2.0, x)])


def local_cached_property(x):
    k = x + 1.0

    class L:
        def __init__(self, a):
            self.a = a

        @functools.cached_property
        def twice(self):
            return 2.0 * self.a * k

    obj = L(x)
    return obj.twice * x + obj.twice


def local_static_method_through_an_instance(x):
    class S:
        @staticmethod
        def st(u):
            return u * u

    return S().st(x) + S.st(x * x)


def local_setter(x):
    class Local:
        def __init__(self, a):
            self.a = a

        @property
        def a(self):
            return self._a

        @a.setter
        def a(self, v):
            self._a = v * v

        def bump(self, u):
            self.a = self.a + u

    obj = Local(x)
    obj.bump(x)
    return obj.a


FIRST_ORDER = [
    module_property,
    module_property_in_a_method,
    module_cached_property_read_twice,
    module_cached_property_two_instances,
    module_static_and_class_methods_through_an_instance,
    module_setter,
    local_property_reading_the_function,
    local_property_read_by_a_method_and_natively,
    local_cached_property,
    local_static_method_through_an_instance,
    local_setter,
]
SECOND_ORDER = [f for f in FIRST_ORDER if f is not local_setter]
THIRD_ORDER = SECOND_ORDER


@pytest.mark.parametrize("f", FIRST_ORDER)
@pytest.mark.parametrize("x", XS)
def test_first_order(f, x):
    check_first_order(f, x)


@pytest.mark.parametrize("f", SECOND_ORDER)
@pytest.mark.parametrize("x", XS)
def test_second_order(f, x):
    check_second_order(f, x)


@pytest.mark.parametrize("f", THIRD_ORDER)
@pytest.mark.parametrize("x", [-0.45, 1.2])
def test_third_order(f, x):
    second = dplus.grad1(dplus.grad1(f))
    h = 1e-4
    fd = (second(x + h) - second(x - h)) / (2 * h)
    assert dplus.grad1(second)(x) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_a_local_setter_is_refused_at_second_order_by_name():
    with pytest.raises(dplus.UnsupportedSyntaxError) as info:
        dplus.hessian(local_setter)(0.8)
    msg = str(info.value)
    assert "'Local'" in msg and "the method 'a' has a decorator" in msg and "module level" in msg


def test_the_program_runs_as_python_runs_it():
    # (the cached value is stored in the instance as Python stores it; a setter's write too)
    v = Vec(0.5, 2.0)
    dplus.grad1(lambda x: Vec(x, 2.0).energy * x)(0.5)
    assert "energy" not in vars(v)
    _ = v.energy
    assert vars(v)["energy"] == 0.5
    for f in FIRST_ORDER:
        assert dplus.lift_dplus(f)(0.7).primal == f(0.7)
