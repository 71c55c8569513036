"""Python ``__getitem__`` / ``__setitem__`` / ``__delitem__`` and properties at second order.

The container rules ran these through ``runtime.ops.call`` (generated code's way of calling a
callee); in rule code differentiated again that lost the sensitivity: Hessians of 0.0 without
an error. They call the method's transform now, as ``callmethod`` does.
"""

import pytest

import dplus
from dplus import define_dplus
from tests.path_helpers import check_fd, fd_hessian


class Pair:
    def __init__(self, a, b):
        self.a = a
        self.b = b

    @define_dplus
    def __getitem__(self, i):
        return self.a * self.a if i == 0 else self.b

    @property
    @define_dplus
    def area(self):
        return self.a * self.b


class Store:
    def __init__(self):
        self.d = {}

    @define_dplus
    def __setitem__(self, k, v):
        self.d[k] = v * v

    @define_dplus
    def __getitem__(self, k):
        return self.d[k] * 2.0

    @define_dplus
    def __delitem__(self, k):
        del self.d[k]


def through_getitem(x, y):
    p = Pair(x, y)
    return p[0] * p[1]


def through_property(x, y):
    p = Pair(x, y)
    return p.area * p.area + p.a


def through_setitem(x, y):
    s = Store()
    s["a"] = x * y
    s["b"] = x
    del s["b"]
    return s["a"] * x


@pytest.mark.parametrize("f", [through_getitem, through_property, through_setitem])
@pytest.mark.parametrize("point", [(0.4, 1.5), (-1.2, 0.7), (2.0, -0.3)])
def test_first_and_second_order(f, point):
    check_fd(f, *point)
    hessian = dplus.hessian(f)(*point)
    for row, expected in zip(hessian, fd_hessian(f, list(point))):
        assert row == pytest.approx(expected, rel=1e-5, abs=1e-6)
