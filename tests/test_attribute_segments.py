"""Attribute reads and writes of plain instances inside fast segments (issue #21):
``v = obj.name`` read in the segment's guard, ``obj.name = v`` assigned in its forward,
when ``PLAIN_ATTRIBUTES`` finds the class plain for those names (no ``__getattribute__``,
``__getattr__``, ``__setattr__``, property, descriptor or class attribute of the name).

Every function here is differentiated as usual and inside ``general_paths_only()``; the
two must agree, with each other and with central finite differences, on values where the
fast path runs and on every adversarial shape that must take the general one: aliasing,
subclasses with properties, attribute hooks, descriptors, ``__slots__``, attributes
deleted, added or holding other types mid-loop, class attributes shadowed and uncovered,
methods rebound on the instance, ``self`` changed by a callee.
"""

from __future__ import annotations

import contextlib
import copy
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, close, fd_gradient

import dplus
from dplus import define_dplus
from dplus.errors import NonDifferentiableError
from dplus.transform.transformer import general_paths_only

SETTINGS = settings(max_examples=15, deadline=None)
floats = st.floats(-1.5, 1.5, allow_nan=False, allow_infinity=False)


def agree(f, *args, second_order=True):
    """Both paths, finite differences, arguments unchanged; the Hessian on both paths."""
    before = copy.deepcopy(args)
    fast, general = both_ways(f, *args)
    assert args == before
    close(fast, general, tol=1e-10)
    close(fast, fd_gradient(f, args), tol=1e-5)
    if second_order:
        h = dplus.hessian(f)(*args)
        with general_paths_only():
            close(dplus.hessian(f)(*args), h, tol=1e-9)
    return fast


def takes_fast_attributes(f) -> bool:
    return "PLAIN_ATTRIBUTES" in dplus.show(f)


# --------------------------------------------------------------------------
# plain classes: the fast path runs


class Body:
    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt):
        a = -math.sin(self.x) - 0.1 * self.v
        self.x += dt * self.v
        self.v = self.v + dt * a


class SlotBody:
    __slots__ = ("x", "v")

    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt):
        a = -math.sin(self.x) - 0.1 * self.v
        self.x += dt * self.v
        self.v = self.v + dt * a


def simulate(cls):
    def run(x, v):
        b = cls(x, v)
        for _ in range(5):
            b.step(0.1)
        return b.x * b.x + b.v

    return run


@given(floats, floats)
@SETTINGS
def test_methods_on_plain_and_slotted_instances(x, v):
    for cls in (Body, SlotBody):
        assert takes_fast_attributes(cls.step)
        agree(simulate(cls), x, v, second_order=False)


def test_methods_on_plain_instances_at_second_order():
    agree(simulate(Body), 0.3, -0.7)
    agree(simulate(SlotBody), -0.4, 0.2)


# --------------------------------------------------------------------------
# aliasing: two names for one object, an object in a list and as ``self``


def aliased(x, y):
    a = Body(x, y)
    b = a
    a.x = a.x * y
    r = b.x * 2.0  # (a read after an assignment of the name: a segment of its own)
    b.v = r + a.v * x
    return a.v * b.x + r


def aliased_maybe(x, y, same):
    a = Body(x, y)
    b = a if same else Body(y, x)
    t = a.x * b.v  # both read in one guard
    a.v = t * 3.0
    b.x = t + a.v
    return a.x * a.v + b.x * b.v


@define_dplus
def bump_all(bodies, k):
    for b in bodies:
        b.x = b.x * k + b.v


def in_a_list_and_as_self(x, y):
    bodies = [Body(x, y), Body(y, x)]
    first = bodies[0]
    bump_all(bodies, x)
    first.step(0.2)  # the same object the list holds
    bump_all(bodies, y)
    return bodies[0].x * bodies[1].v + first.v


@given(floats, floats)
@SETTINGS
def test_aliases_take_each_write(x, y):
    agree(aliased, x, y, second_order=False)
    agree(in_a_list_and_as_self, x, y, second_order=False)
    for same in (True, False):
        fast, general = both_ways(aliased_maybe, x, y, same)
        close(fast, general, tol=1e-10)
        fd = fd_gradient(lambda a, b, same=same: aliased_maybe(a, b, same), (x, y))
        close(fast[:2], fd, tol=1e-5)


def test_aliases_at_second_order():
    agree(aliased, 0.4, -0.3)
    agree(in_a_list_and_as_self, 0.4, 0.6)


# --------------------------------------------------------------------------
# classes that are not plain for the name: the general path


class WithProperty(Body):
    """A subclass overriding the attribute ``x`` with a property."""

    @property
    @define_dplus
    def x(self):
        return 2.0 * self._x

    @x.setter
    @define_dplus
    def x(self, value):
        self._x = 0.5 * value


class WithGetattr:
    def __init__(self, x, v):
        self.x = x
        self._hidden = v

    @define_dplus
    def __getattr__(self, name):
        if name == "v":
            return 3.0 * self._hidden
        raise AttributeError(name)

    @define_dplus
    def step(self, dt):
        self.x = self.x + dt * self.v


class WithGetattribute(Body):
    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        return 2.0 * value if name == "v" else value


class CountingGetattribute(Body):
    reads = 0

    def __getattribute__(self, name):
        type(self).reads += 1
        return object.__getattribute__(self, name)


class WithSetattr(Body):
    @define_dplus
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


class Doubling:
    """A data descriptor: stores twice what is assigned."""

    def __set_name__(self, owner, name):
        self.key = "_" + name

    @define_dplus
    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.key)

    @define_dplus
    def __set__(self, obj, value):
        setattr(obj, self.key, value)


class WithDescriptor(Body):
    v = Doubling()


class WithClassAttribute(Body):
    x = 0.25


@pytest.mark.parametrize("cls", [WithProperty, WithGetattr, WithSetattr, WithDescriptor])
def test_classes_with_attribute_code_take_the_general_path(cls):
    run = simulate(cls)
    for x, v in ((0.3, -0.2), (-1.1, 0.7)):
        agree(run, x, v, second_order=False)


@pytest.mark.parametrize("general_only", [False, True])
def test_a_python_getattribute_that_changes_the_value_is_refused(general_only):
    # (was silently wrong on both paths: 2 * v taken for the instance's own v)
    ctx = general_paths_only() if general_only else contextlib.nullcontext()
    with ctx, pytest.raises(NonDifferentiableError, match=r"WithGetattribute.__getattribute__"):
        dplus.grad(simulate(WithGetattribute))(0.3, -0.2)
    with pytest.raises(NonDifferentiableError, match=r"__getattribute__"):
        dplus.hessian(simulate(WithGetattribute))(0.3, -0.2)


def test_a_python_getattribute_takes_the_general_path():
    from dplus.runtime.ops import helper_named

    PLAIN_ATTRIBUTES = helper_named("PLAIN_ATTRIBUTES")  # (the table generated code reads)

    assert not PLAIN_ATTRIBUTES[CountingGetattribute, ("x", "v"), ("x", "v")]
    assert PLAIN_ATTRIBUTES[Body, ("x", "v"), ("x", "v")]
    run = simulate(CountingGetattribute)
    for x, v in ((0.3, -0.2), (-1.1, 0.7)):
        agree(run, x, v, second_order=x > 0)


def test_a_class_attribute_shadowed_and_uncovered():
    def f(x, v):
        b = WithClassAttribute(x, v)
        b.step(0.1)  # the instance's own x
        del b.x  # the class attribute shows through
        b.step(0.1)
        b.x = b.x * v  # the instance's again
        b.step(0.1)
        return b.x + b.v * x

    for x, v in ((0.3, -0.2), (-1.1, 0.7)):
        agree(f, x, v, second_order=False)


# --------------------------------------------------------------------------
# attributes changed mid-loop


class Holder:
    pass


def values_change_type(x, y):
    h = Holder()
    h.a = x
    h.b = y
    total = 0.0
    for i in range(6):
        t = h.a * h.b + x
        total += t * t
        if i == 1:
            h.b = 2  # an int
        elif i == 2:
            h.b = [y]  # no number: the guard fails, the general path runs
            total += h.b[0] * x
            h.b = y * 3.0
        elif i == 3:
            del h.a  # deleted, then added again
            h.a = total * 0.1
        h.a = t * 0.5
    return total


def test_attributes_deleted_added_and_of_other_types_mid_loop():
    # (first order: at the second, getattr_plus's keyed read of the list attribute has no
    # next-order rule, on either path: a clear refusal, not this path's)
    for x, y in ((0.3, -0.2), (-0.8, 0.5)):
        agree(values_change_type, x, y, second_order=False)


def reads_a_deleted_attribute(x):
    h = Holder()
    h.a = x
    y = h.a * 2.0
    del h.a
    return y * h.a  # AttributeError, where the program raises it


def test_a_missing_attribute_raises_the_programs_error():
    with pytest.raises(AttributeError):
        reads_a_deleted_attribute(1.0)
    with pytest.raises(AttributeError):
        dplus.grad(reads_a_deleted_attribute)(1.0)
    with general_paths_only(), pytest.raises(AttributeError):
        dplus.grad(reads_a_deleted_attribute)(1.0)


def test_an_unbound_object_raises_where_the_program_does():
    def f(x):
        y = x / 0.0  # ZeroDivisionError first
        return y * NOT_DEFINED_ANYWHERE.a  # noqa: F821

    with pytest.raises(ZeroDivisionError):
        f(1.0)
    with pytest.raises(ZeroDivisionError):
        dplus.grad(f)(1.0)


# --------------------------------------------------------------------------
# methods rebound on the instance, self changed by a callee


@define_dplus
def kick(body, k):
    body.v = body.v * k
    body.x = body.x + 0.1


def rebound_and_kicked(x, v):
    b = Body(x, v)
    total = 0.0
    for i in range(4):
        total += b.x * b.v
        kick(b, x)  # changes b between the loop's reads
        total += b.x * b.v
        if i == 1:
            b.step = lambda dt: setattr(b, "x", b.x * 2.0)  # a method rebound on the instance
        b.step(0.1)
    return total


def test_a_rebound_method_and_a_callee_changing_the_object():
    for x, v in ((0.3, -0.2), (-0.6, 0.9)):
        agree(rebound_and_kicked, x, v, second_order=False)


# --------------------------------------------------------------------------
# a class changed after its first use


def test_a_property_added_to_a_subclass_later_is_a_new_class():
    class Late(Body):
        pass

    run = simulate(Late)
    agree(run, 0.2, 0.4, second_order=False)

    class Later(Late):
        @property
        @define_dplus
        def v(self):
            return self._v * 2.0

        @v.setter
        @define_dplus
        def v(self, value):
            self._v = value

    agree(simulate(Later), 0.2, 0.4, second_order=False)


# --------------------------------------------------------------------------
# element reads and writes in the segment of an attribute assignment


def element_read_after_attribute_write(xs, x):
    h = Holder()
    h.a = x
    h.a += 0.75  # read, add, assign: one segment
    i = 1
    v = xs[i]  # an element read joining after the assignment (the fuzzer's seed 41600225)
    xs[0] = v * h.a
    return xs[0] * x + v


def test_element_reads_and_writes_next_to_attribute_writes():
    for xs, x in (([0.5, -1.2], 0.3), ([2.0, 0.25], -0.7)):
        fast, general = both_ways(element_read_after_attribute_write, list(xs), x)
        close(fast, general, tol=1e-10)
        eps = 1e-6
        fd_x = (
            element_read_after_attribute_write(list(xs), x + eps)
            - element_read_after_attribute_write(list(xs), x - eps)
        ) / (2 * eps)
        close(fast[1], fd_x, tol=1e-5)


def getattr_model(x, v):
    b = WithGetattr(x, v)
    return b.x * b.v * b.v


def test_a_python_getattr_at_first_and_second_order():
    for x, v in ((0.3, -0.2), (-0.9, 1.1)):
        agree(getattr_model, x, v)
        close(dplus.grad(getattr_model)(x, v), (9.0 * v * v, 18.0 * x * v), tol=1e-12)
