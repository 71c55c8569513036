"""Classes whose construction is not ``__new__(cls)`` then ``__init__`` (stop 39, realcode9,
issues #18 and #26), found on astropy: ``Unit(other, parse_strict="silent")`` goes through
the metaclass's ``__call__``, which takes a keyword ``__init__`` does not (a raw
``TypeError``), and ``Unit(represents)`` inside ``Unit.__init__`` recursed without end (a raw
``RecursionError``; astropy's ``NFW`` and ``BlackBody`` models).

dplus constructed every class with a Python ``__init__`` as ``cls.__new__(cls)`` then the
``__init__`` differentiated. Where calling the class is something else, that ran
different code: a metaclass's ``__call__`` that changes the instance was skipped (a wrong
primal and gradient, silently: 4.0 [12.0] below), a ``__new__`` taking arguments was
called without them (a raw ``TypeError``), a tuple subclass was made empty (a raw
``IndexError``). A ``__new__`` written in Python is now differentiated with ``__init__``;
any other such class is the policy's: run as it is and refused by name where its result
needs a derivative. The reproductions are written anew here.
"""

from __future__ import annotations

import collections

import pytest

import dplus
from dplus import UnknownTransformError, current_unknown_transform, transform_from_source
from tests.path_helpers import both_ways, check_fd


class Tripling(type):
    def __call__(cls, *args):
        made = super().__call__(*args)
        made.v = made.v * 3.0
        return made


class Tripled(metaclass=Tripling):
    def __init__(self, v):
        self.v = v


class Parsing(type):  # astropy's _UnitMetaClass: a keyword only the metaclass takes
    def __call__(cls, value, parse_strict="raise"):
        return super().__call__(value)


class Parsed(metaclass=Parsing):
    def __init__(self, value):
        self.value = value


class Interned:
    made: dict = {}

    def __new__(cls, key, v):
        if key not in cls.made:
            cls.made[key] = super().__new__(cls)
            cls.made[key].count = 0
        return cls.made[key]

    def __init__(self, key, v):
        self.count += 1
        self.v = v


class Pair(tuple):
    def __init__(self, items):
        self.label = "pair"


def through_metaclass(x):
    return Tripled(x).v * x


def through_metaclass_keyword(x):
    return Parsed(x, parse_strict="silent").value * x


def through_interning(x):
    Interned.made.clear()
    a = Interned("k", x)
    b = Interned("k", 2.0 * x)
    return a.v * b.v * a.count


def through_tuple_subclass(x):
    p = Pair((x, 2.0 * x))
    return p[0] * p[1]


@pytest.mark.parametrize(
    "f", [through_metaclass, through_metaclass_keyword, through_tuple_subclass]
)
@pytest.mark.parametrize("policy", [None, transform_from_source])
def test_special_construction_is_refused_not_run_otherwise(f, policy):
    expected = f(2.0)
    with current_unknown_transform(policy or dplus.error_non_zero_sensitivity_transform):
        with pytest.raises(
            UnknownTransformError,
            match="no derivative is known for .*(Tripled|Parsed|Interned|Pair).*not a plain __init__",
        ):
            dplus.grad(f)(2.0)
    assert f(2.0) == expected


@pytest.mark.parametrize("x", [2.0, -0.7, 1.3])
def test_a_new_written_in_python_is_differentiated_with_init(x):
    # (plus_functions._construct_through_new: __new__ then __init__, each through its
    # transform, as type.__call__ runs them; the cached instance is initialised twice)
    assert dplus.grad(through_interning)(x) == pytest.approx((16.0 * x,))
    assert dplus.hessian(through_interning)(x)[0] == pytest.approx((16.0,))


def constant_made_specially(x):
    tag = Parsed("m", parse_strict="silent")  # (a unit-like constant: no sensitivity)
    return x * x * len(tag.value)


def test_special_construction_of_a_constant_runs_as_it_is():
    fast, general = both_ways(constant_made_specially, 1.5)
    assert fast == general == (3.0,)
    check_fd(constant_made_specially, 1.5)


class Tally(collections.Counter):
    def __init__(self, first):
        super().__init__()
        self["a"] = first


class Rows(list):
    def __init__(self, first):
        self.append(first)


def through_allocating_new(x):
    t = Tally(x * x)
    r = Rows(x)
    r.append(3.0 * x)
    return t["a"] * r[0] + r[1]


def test_classes_whose_new_only_allocates_are_still_differentiated():
    for x in (0.5, 1.7, -2.0):
        fast, general = both_ways(through_allocating_new, x)
        assert fast == general
        assert fast[0] == pytest.approx(3 * x * x + 3.0)
        check_fd(through_allocating_new, x)
    h = dplus.grad(lambda x: dplus.grad(through_allocating_new)(x)[0])(1.7)
    assert h[0] == pytest.approx(6 * 1.7)
