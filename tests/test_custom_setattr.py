"""A class with its own ``__setattr__`` (stop 36, found by styles4).

``obj.name = v`` was taken as storing ``v``; a ``__setattr__`` that stores something else
(``object.__setattr__(self, name, 2.0 * value)``) gave a silently wrong gradient, on the
fast and the general path. Stop 36 refused a ``__setattr__`` storing anything other than
the value; probe2 (stop 39) found the rest still wrong: the method ran natively, so what
else it did with the value (appending it to a log the result sums) had no sensitivity,
silently. Now the class's ``__setattr__`` is differentiated from source, like ``__init__``
(which calls it for every ``self.x = ...``), under any policy; ``super().__setattr__``
inside it is ``object.__setattr__`` of the instance, not of the ``super`` object.
"""

from __future__ import annotations

import dataclasses

import pytest
from path_helpers import check_first_order, check_second_order

import dplus


class Doubler:
    def __init__(self, v):
        self.v = v

    def __setattr__(self, name, value):
        object.__setattr__(self, name, 2.0 * value)


class Counting:
    writes = 0

    def __init__(self, v):
        self.v = v

    def __setattr__(self, name, value):
        type(self).writes += 1
        super().__setattr__(name, value)


class SlottedPassThrough:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __setattr__(self, name, value):
        if not isinstance(value, float):
            raise TypeError("floats only")
        object.__setattr__(self, name, value)


class Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(value)
        object.__setattr__(self, name, value)


class Params:
    """A parameter container: attributes kept in a dict, read through ``__getattr__``."""

    def __init__(self, **kw):
        object.__setattr__(self, "_d", dict(kw))

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self._d[name] = value


def logged_sum(x, y):
    h = Logged()
    h.a = x * x
    h.a = h.a * y
    return sum(h.log) + h.a


def params(x, y):
    p = Params(w=x, c=y)
    p.w = p.w * p.c
    p.z = p.w + 1.0
    return p.z * p.c


def doubled(x):
    d = Doubler(1.0)
    d.v = x * x
    return d.v


def counted(x):
    c = Counting(x)
    c.v = c.v * x + 1.0
    return c.v * c.v


def slotted(x):
    s = SlottedPassThrough(x)
    s.v = s.v * s.v
    return s.v * 3.0


@pytest.mark.parametrize("x", [0.3, -1.2])
def test_a_setattr_storing_another_value_is_differentiated(x):
    check_first_order(doubled, x)
    check_second_order(doubled, x)
    assert dplus.grad(doubled)(x)[0] == pytest.approx(4.0 * x)


@pytest.mark.parametrize("f", [logged_sum, params])
@pytest.mark.parametrize("xy", [(0.7, 1.3), (-0.4, 2.1)])
def test_what_a_setattr_does_besides_storing_carries_sensitivity(f, xy):
    # (logged_sum: d/dx of x*x + x*x*y + x*x*y was 2xy, the log's terms dropped; params reads
    # through __getattr__, which the default policy leaves unknown)
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_first_order(f, *xy)
        check_second_order(f, *xy)


@pytest.mark.parametrize("f", [counted, slotted])
@pytest.mark.parametrize("x", [0.3, -1.2, 2.1])
def test_a_setattr_storing_the_value_is_differentiated(f, x):
    check_first_order(f, x)
    check_second_order(f, x)


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: float


def frozen_write_caught(x):
    # (a frozen dataclass's __setattr__ is made by exec: no source; run as it is, it raises
    # FrozenInstanceError, which the program catches, as without grad)
    f = Frozen(x * x)
    try:
        f.k = 2.0
    except dataclasses.FrozenInstanceError:
        pass
    return f.k * x


@pytest.mark.parametrize("x", [0.7, -1.3])
def test_a_setattr_without_source_runs_as_it_is(x):
    check_first_order(frozen_write_caught, x)
    check_second_order(frozen_write_caught, x)
