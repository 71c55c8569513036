"""Descriptors whose ``__get__``/``__set__`` are Python, and a user class's operator methods
(``__add__``, ``__iadd__``, ``__imul__``, ``__neg__``, ``__radd__``) at the second order,
against central finite differences on several inputs (first order with the fast paths and
with the general path only, second order: the Hessian against differences of the gradient).

Found by trust7 while adding these constructs to the fuzzer's grammar: a descriptor's
``__get__``/``__set__`` ran natively (``getattr``/``setattr``), so what they read or wrote of
the object carried no sensitivity: a wrong gradient without an error ((1, 0) for
(19.5, -5.0)); and every operator method of a module-level class raised a raw
``AttributeError: 'Acc' object has no attribute 'primal'`` at the second order (the rule
called the method's transform directly, which the next order took for a call of the
method)."""

from __future__ import annotations

import math

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus import define_dplus

POINTS = [(0.7, -1.3), (1.2, 0.4), (-0.5, 0.9)]


class Squared:
    """A data descriptor keeping its value in the instance under another name."""

    def __set_name__(self, owner, name):
        self.name = "_" + name

    @define_dplus
    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.name) * 2.0

    @define_dplus
    def __set__(self, obj, value):
        setattr(obj, self.name, value * value)


class PerInstance:
    """A data descriptor keeping every instance's value in a dict of its own."""

    def __init__(self):
        self.values = {}

    @define_dplus
    def __get__(self, obj, objtype=None):
        return self.values[id(obj)] * 3.0

    @define_dplus
    def __set__(self, obj, v):
        self.values[id(obj)] = v + 1.0


class SquareOfBase:
    """A non-data descriptor (``__get__`` only): the instance's own attribute wins."""

    @define_dplus
    def __get__(self, obj, objtype=None):
        return obj.base * obj.base


class Owner:
    d = Squared()
    s = PerInstance()
    sq = SquareOfBase()

    def __init__(self, a):
        self.d = a
        self.base = a


class logged_property(property):  # (a property subclass, named as users name them)
    pass


class Scaled:
    def __init__(self, a):
        self.a = a

    @logged_property
    @define_dplus
    def twice(self):
        return 2.0 * self.a * self.a


class Acc:
    def __init__(self, a):
        self.a = a

    @define_dplus
    def __add__(self, o):
        return Acc(self.a + o * 2.0)

    @define_dplus
    def __radd__(self, o):
        return Acc(self.a + o * o)

    @define_dplus
    def __iadd__(self, o):
        self.a = self.a + o * 2.0
        return self

    @define_dplus
    def __imul__(self, o):
        self.a = self.a * o * 0.5
        return self

    @define_dplus
    def __neg__(self):
        return Acc(-2.0 * self.a)


def data_descriptor(x, y):
    o = Owner(x)
    o.d = o.d * y
    return o.d + x


def descriptor_holding_values(x, y):
    h, k = Owner(y), Owner(x)
    h.s = x * y
    k.s = math.sin(x)
    return h.s * k.s + h.sq


def non_data_descriptor_and_instance_attribute(x, y):
    h = Owner(x)
    h.sq = y  # (the instance's own attribute: read before the descriptor)
    return h.sq * x + Owner(y).sq


def property_subclass(x, y):
    # (it was taken for a cached_property: a raw AttributeError)
    return Scaled(x * y).twice + Scaled(y).twice * x


def local_descriptor(x, y):
    class D:
        def __get__(self, obj, objtype=None):
            return obj._v * x

        def __set__(self, obj, value):
            obj._v = value + y

    class Holder:
        d = D()

    o = Holder()
    o.d = x * y
    o.d = o.d * 2.0
    return o.d


def operators(x, y):
    a = Acc(x)
    b = a + y
    c = y + (-b)
    c *= x
    return c.a * y


def inplace_operators_on_an_alias(x, y):
    a = Acc(x)
    a += y
    a *= x
    b = a
    b += 1.0
    return a.a * y


def local_inplace_operators(x, y):
    class A:
        def __init__(self, a):
            self.a = a

        def __iadd__(self, o):
            self.a = self.a + o * x
            return self

        def __imul__(self, o):
            self.a *= o
            return self

    a = A(y)
    a += x
    a *= y
    return a.a


FIRST_ORDER = [
    data_descriptor,
    descriptor_holding_values,
    non_data_descriptor_and_instance_attribute,
    property_subclass,
    local_descriptor,
    operators,
    inplace_operators_on_an_alias,
    local_inplace_operators,
]
SECOND_ORDER = [f for f in FIRST_ORDER if f is not local_descriptor]


@pytest.mark.parametrize("f", FIRST_ORDER)
@pytest.mark.parametrize("point", POINTS)
def test_first_order(f, point):
    check_first_order(f, *point)


@pytest.mark.parametrize("f", SECOND_ORDER)
@pytest.mark.parametrize("point", POINTS)
def test_second_order(f, point):
    check_second_order(f, *point)


def test_a_local_descriptor_writing_another_object_is_refused_at_second_order_by_name():
    with pytest.raises(dplus.UnsupportedSyntaxError) as info:
        dplus.hessian(local_descriptor)(0.7, -1.3)
    msg = str(info.value)
    assert "'D'" in msg and "'__set__'" in msg and "local_descriptor" in msg


def test_the_descriptors_run_as_python_runs_them():
    for f in FIRST_ORDER:
        assert dplus.lift_dplus(f)(0.7, -1.3).primal == f(0.7, -1.3)
    o = Owner(0.5)
    dplus.grad(lambda x: Owner(x).d)(0.5)
    assert vars(o)["_d"] == 0.25 and o.d == 0.5
