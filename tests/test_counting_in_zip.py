"""``zip(itertools.count(), xs)``, the counter idiom, read lazily by ``zip``: its integers
were refused ("sensitivity reached the elements of ... (count)") as soon as an index
multiplied a differentiable value. A count of integers from constant start and step is a
counter, as ``range`` is: its elements carry no sensitivity. A count of floats
(``count(0.5, 0.25)``, which may start from a differentiable value) is still refused by name
where a sensitivity reaches its elements. First and second order against central
differences, both paths, at several points.
"""

from __future__ import annotations

import itertools

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus.errors import NonDifferentiableError


def counted(x, y):
    xs = [x, y * x, x * x - y]
    acc = 0.0
    for i, v in zip(itertools.count(), xs):
        acc = acc + i * v
    for i, v in zip(itertools.count(-3, 2), xs):
        acc = acc + i * v * y
    weights = [k * v for k, v in zip(itertools.count(1), xs)]
    return acc + sum(weights)


def counted_in_floats(x):
    acc = 0.0
    for t, v in zip(itertools.count(0.5, 0.25), [x, x * x]):
        acc = acc + t * v
    return acc


@pytest.mark.parametrize("point", [(1.3, -0.4), (-0.7, 2.1)])
def test_a_counter_zipped_with_a_list(point):
    check_first_order(counted, *point)
    check_second_order(counted, *point)


def test_a_count_of_floats_is_refused_by_name():
    with pytest.raises(NonDifferentiableError, match=r"zip\(\).*count"):
        dplus.grad(counted_in_floats)(1.2)
