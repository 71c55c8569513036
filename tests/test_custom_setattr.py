"""A class with its own ``__setattr__`` (stop 36, found by styles4).

``obj.name = v`` was taken as storing ``v``; a ``__setattr__`` that stores something else
(``object.__setattr__(self, name, 2.0 * value)``) gave a silently wrong gradient, on the
fast and the general path. Now the rule checks what was stored: the value itself (a
``__setattr__`` that logs, validates or counts, then stores it) is differentiated as
before; anything else is refused, naming the class and the attribute.
"""

from __future__ import annotations

import pytest
from path_helpers import check_first_order, check_second_order, general_paths_only

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


@pytest.mark.parametrize("fast", [True, False])
def test_a_setattr_storing_another_value_is_refused_naming_it(fast):
    with pytest.raises(dplus.NonDifferentiableError) as info:
        if fast:
            dplus.grad(doubled)(1.5)
        else:
            with general_paths_only():
                dplus.grad(doubled)(1.5)
    assert "'Doubler' has its own __setattr__" in str(info.value)
    assert "'v'" in str(info.value)


@pytest.mark.parametrize("f", [counted, slotted])
@pytest.mark.parametrize("x", [0.3, -1.2, 2.1])
def test_a_setattr_storing_the_value_is_differentiated(f, x):
    check_first_order(f, x)
    check_second_order(f, x)
