"""A function dplus does not know that returns the very list, dict or object it was given.

The default policy runs such a function and refuses in the backward pass when its result
holds a sensitivity (``mutable_sensitivity_of`` reads the map for the result and what it
holds). When the result *is* an argument, that sensitivity belongs to the argument, whose
maker takes it: the call made nothing, so refusing was wrong. It showed to users as a
refusal of a helper like ``def pick(table): return table``, and at the third order as a
refusal naming dplus's own ``as_plain_callable`` (found by the fuzzer's ``--order 3``): a key
function closing over a dict (``max(d, key=lambda k: d[k] * x)``), whose rule's code, run
again one order up, hands the dict to the default policy's wrapper through
``as_plain_callable``, which returns a non-callable unchanged.

Orders 1 to 3 are checked, each against central differences of the order below, on all
entries, at several points.
"""

import itertools
import math

import pytest

import dplus


def pick(table):  # unknown to dplus: not decorated
    return table


def fill(table, value):  # unknown, and changes what it is given
    table["c"] = value
    return table


def max_key_over_dict(x, y):
    d = {"a": x, "b": y}
    return d[max(d, key=lambda k: d[k] * x)] * x * y


def max_key_over_dict_plain_key(x, y):
    d = {"a": x * x, "b": y}
    return d[max(d, key=lambda k: d[k])] * y + x


def sorted_keys_of_dict(x, y):
    d = {"a": x * y, "b": y - x, "c": x}
    order = sorted(d, key=lambda k: d[k] * y)
    return d[order[0]] * d[order[-1]] * x


def min_key_over_list_of_dicts(x, y):
    rows = [{"v": x * y}, {"v": y + 1.5}]
    best = min(rows, key=lambda r: r["v"] * x)
    return best["v"] * y * x


def helper_returns_dict(x, y):
    table = {"a": x * y, "b": y}
    return pick(table)["a"] * x + table["b"] ** 3


def helper_returns_list_then_grown(x, y):
    xs = [x * y, y]
    ys = pick(xs)
    ys.append(x * x)
    return ys[0] * ys[2] + xs[1] * y


PROGRAMS = [
    max_key_over_dict,
    max_key_over_dict_plain_key,
    sorted_keys_of_dict,
    min_key_over_list_of_dicts,
    helper_returns_dict,
    helper_returns_list_then_grown,
]
POINTS = [(1.3, 0.7), (0.6, 1.1), (-0.8, 0.45)]
EPS = 1e-5


def _differences(f, args, k):
    """d f / d args[k] by central differences (``f`` returns a number or nested tuples)."""
    up, down = list(args), list(args)
    up[k] += EPS
    down[k] -= EPS

    def diff(a, b):
        if isinstance(a, tuple):
            return tuple(diff(p, q) for p, q in zip(a, b))
        return (a - b) / (2 * EPS)

    return diff(f(*up), f(*down))


def _close(got, want, tol):
    return math.isclose(got, want, rel_tol=tol, abs_tol=tol)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("point", POINTS)
def test_orders_one_to_three(f, point):
    g = dplus.grad(f)(*point)
    for k in range(2):
        assert _close(g[k], _differences(f, point, k), 1e-6), (k, g)
    H = dplus.hessian(f)(*point)
    for j in range(2):
        column = _differences(dplus.grad(f), point, j)
        for i in range(2):
            assert _close(H[i][j], column[i], 1e-5), (i, j, H)
    for i, j in itertools.product(range(2), repeat=2):

        def entry(*a, i=i, j=j):
            return dplus.hessian(f)(*a)[i][j]

        third = dplus.grad(entry)(*point)
        for k in range(2):
            assert _close(third[k], _differences(entry, point, k), 1e-4), (i, j, k, third)


def test_a_helper_changing_the_argument_it_returns_is_still_refused():
    def f(x):
        table = {"a": x}
        return fill(table, x * x)["c"] * x

    with pytest.raises(dplus.UnknownTransformError, match="fill"):
        dplus.grad(f)(1.5)


def test_a_helper_returning_a_new_container_is_still_refused():
    def copy_of(table):
        return dict(table)

    def f(x):
        return copy_of({"a": x})["a"] * x

    with pytest.raises(dplus.UnknownTransformError, match="copy_of"):
        dplus.grad(f)(1.5)
