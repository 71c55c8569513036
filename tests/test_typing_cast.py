"""``typing.cast`` inside differentiated code is the identity on its value.

It ran as an unknown function, so a function passed through it came back wrapped to
return primals only (the policy's ``as_plain_callable``): calling it then failed with a raw
AttributeError - found through ``dplus.checkpoint``, whose own source (differentiated when a
checkpoint is made inside differentiated code) uses ``cast``.
"""

import math
import typing

import pytest

import dplus
from tests.path_helpers import check_fd, fd_hessian


def through_cast(x, y):
    z = typing.cast(float, x * y)
    g = typing.cast(typing.Callable[[float], float], lambda u: u * z)
    return math.sin(g(z)) + z


@pytest.mark.parametrize("point", [(0.7, 1.3), (-0.4, 2.2), (1.9, -0.3)])
def test_first_and_second_order(point):
    check_fd(through_cast, *point)
    for row, expected in zip(
        dplus.hessian(through_cast)(*point), fd_hessian(through_cast, list(point))
    ):
        assert row == pytest.approx(expected, rel=1e-5, abs=1e-6)
