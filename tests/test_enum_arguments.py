"""Enum members (IntEnum and IntFlag included) are names, not quantities: they carry no
sensitivity, and an object holding them can be an argument of a differentiated function
(found passing a dask Client, which holds an ssl.TLSVersion, to a gradient)."""

from __future__ import annotations

import enum
import ssl

import pytest

import dplus


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Holder:
    def __init__(self, w):
        self.tls = ssl.TLSVersion.TLSv1_2
        self.color = Color.RED
        self.level = Level.HIGH
        self.w = w


@pytest.mark.parametrize("x,w", [(1.0, 2.0), (-0.5, 0.3)])
def test_object_with_enum_members_as_argument(x, w):
    def f(x, h):
        return x * h.w * (2.0 if h.level == Level.HIGH else 1.0)

    gx, gh = dplus.grad(f)(x, Holder(w))
    assert gx == pytest.approx(2.0 * w)
    assert gh["w"] == pytest.approx(2.0 * x)
    assert gh["tls"] is None and gh["color"] is None and gh["level"] is None


def test_int_enum_used_as_a_number_gets_no_sensitivity():
    def f(x, level):
        return x * level

    assert dplus.grad(f)(1.5, Level.HIGH) == (3.0, None)
