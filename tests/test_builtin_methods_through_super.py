"""Subclasses of list, dict and Counter that override a method in Python.

Where the program calls the method, the override runs and is differentiated from its source;
the builtin it reaches through ``super()`` (or ``list.append(self, v)``) is the builtin's rule,
found by the identity of its C descriptor along the MRO, not by name on the instance's class
(which finds the override again: a recursion, or the override applied twice — a wrong primal
and a doubled gradient, both silent before).
"""

import collections

import pytest

import dplus
from dplus.runtime.registry import lookup_transform
from tests.path_helpers import check_fd, fd_hessian


class DoublingList(list):
    def append(self, value):
        super().append(value * 2.0)


class ExplicitDoublingList(list):
    def append(self, value):
        list.append(self, value * 2.0)


class LoggingCounter(collections.Counter):
    def update(self, other):
        super().update(other)


class ScaledDict(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 3.0)


class PlainSubclass(list):
    pass


def through_list_override(x, y):
    xs = DoublingList()
    xs.append(x * y)
    xs.append(x)
    return xs[0] * xs[1]


def through_explicit_builtin(x, y):
    xs = ExplicitDoublingList()
    xs.append(x * y)
    xs.append(x)
    xs.append(y)
    return xs[0] * xs[1] + xs[2] * x


def through_counter_override(x, y):
    c = LoggingCounter({"a": x})
    c.update({"a": x * y, "b": y})
    return c["a"] * c["b"]


def through_plain_counter(x, y):
    c = collections.Counter({"a": x})
    c.update({"a": x * y})
    c.update({"b": y * y})
    return c["a"] * c["b"] + c.total()


def through_plain_subclass(x, y):
    xs = PlainSubclass()
    xs.append(x * y)
    xs.append(x)
    return xs[0] * xs[1]


def through_dict_override(x, y):
    d = ScaledDict()
    d["k"] = x * y
    return d["k"] * x


POINTS = [(0.7, -1.3), (2.0, 0.5), (-1.1, 3.2), (0.05, 0.9)]
FIRST_ORDER = [
    through_list_override,
    through_explicit_builtin,
    through_counter_override,
    through_plain_counter,
    through_plain_subclass,
]


@pytest.mark.parametrize("f", FIRST_ORDER)
@pytest.mark.parametrize("point", POINTS)
def test_primal_unchanged_and_gradient_matches_finite_differences(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        assert dplus.lift_dplus(f)(*point).primal == f(*point)
        check_fd(f, *point)


@pytest.mark.parametrize("f", [through_plain_counter, through_plain_subclass])
@pytest.mark.parametrize("point", POINTS[:2])
def test_second_order_matches_finite_differences(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        hessian = dplus.hessian(f)(*point)
        expected = fd_hessian(f, list(point))
    for row, expected_row in zip(hessian, expected):
        assert row == pytest.approx(expected_row, rel=1e-4, abs=1e-5)


class Base:
    def __init__(self, a):
        self.a = a * 2.0

    def energy(self):
        return self.a * self.a


class Child(Base):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b

    def energy(self):
        return super().energy() + self.b * self.a


def through_super_init(x, y):
    return Child(x, y).energy()


@pytest.mark.parametrize("f", [through_list_override, through_counter_override, through_super_init])
@pytest.mark.parametrize("point", POINTS[:3])
def test_second_order_through_super(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_fd(f, *point)
        hessian = dplus.hessian(f)(*point)
        expected = fd_hessian(f, list(point))
    for row, expected_row in zip(hessian, expected):
        assert row == pytest.approx(expected_row, rel=1e-4, abs=1e-5)


def test_builtin_dunder_through_super_is_refused_not_wrong():
    # dict.__setitem__ reached through super() has no rule: refused by the policy, by name
    with dplus.current_unknown_transform(dplus.transform_from_source):
        with pytest.raises(dplus.UnknownTransformError, match="dict.__setitem__"):
            dplus.grad(through_dict_override)(0.7, -1.3)


def test_bound_builtin_of_a_subclass_finds_the_builtin_rule():
    assert lookup_transform(PlainSubclass().append) is not None
    xs = DoublingList()
    builtin_append = super(DoublingList, xs).append
    assert lookup_transform(builtin_append) is not None
    assert lookup_transform(collections.Counter().get) is not None
