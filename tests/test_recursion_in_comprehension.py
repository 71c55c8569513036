"""A function that calls itself from a comprehension, a generator expression or a lambda.

dplus checks that a function's source text compiles to the code that runs (so that an edited,
not re-imported file is not differentiated as something else). The check compiles the
definition inside a wrapper; there the function's name became the wrapper's local, so a
recursive call from a nested scope compiled as a closure and the check refused the function
as "changed since it was imported". Its name stays global now, as where it really is.
"""

import pytest

import dplus
from tests.path_helpers import check_fd, fd_hessian


@dplus.define_dplus
def tree_sum(t):
    if isinstance(t, list):
        return sum([tree_sum(c) for c in t])
    return t * t


@dplus.define_dplus
def nested_product(t, depth):
    if depth == 0:
        return t
    return sum(nested_product(t * w, depth - 1) for w in (0.5, 1.5))


@dplus.define_dplus
def through_lambda(x, n):
    step = lambda v: through_lambda(v, n - 1)
    return x if n == 0 else step(x * x) + x


def from_tree(x, y):
    return tree_sum([x, [y, x * y]])


def from_generator(x, y):
    return nested_product(x * y, 3) + y


def from_lambda(x, y):
    return through_lambda(x + y, 2)


@pytest.mark.parametrize("f", [from_tree, from_generator, from_lambda])
@pytest.mark.parametrize("point", [(0.7, -1.3), (1.5, 0.4), (-0.2, 2.1)])
def test_first_and_second_order(f, point):
    check_fd(f, *point)
    hessian = dplus.hessian(f)(*point)
    for row, expected in zip(hessian, fd_hessian(f, list(point))):
        assert row == pytest.approx(expected, rel=1e-4, abs=1e-5)
