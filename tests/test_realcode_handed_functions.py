"""Functions defined in differentiated code, handed inside a list, tuple, dict or object to a
function dplus runs as it is (stop 37, issues #18 and #26; found on an explicit Runge-Kutta
integrator taking a list of derivative functions, the reproductions written anew).

Under the default policy the undecorated integrator runs natively, and the functions in the
list were the differentiated versions, returning dplus's pair of value and backprop: a raw
``TypeError`` further on (``unsupported operand type(s) for *: 'float' and 'ProcResult'``), or
whatever the integrator made of the pair. Such a call is now refused before it runs, naming
the function and what it was given. Differentiated from source (``transform_from_source``),
the same integrator is right at first and second order, its aliased rows included.
"""

from __future__ import annotations

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus import UnknownTransformError


def integrate(start, derivatives, h, steps, tableau):
    """An explicit Runge-Kutta integrator over lists, as often written: ``derivatives`` is a
    list of functions ``f_k(t, state)``; ``tableau`` is (nodes, rows of weights, weights)."""
    nodes, rows, weights = tableau
    m, n = len(derivatives), len(nodes)
    t = start[0]
    state = list(start[1])
    for _ in range(steps):
        slopes = [[0.0] * m] * n  # (n references to one row, as Python makes it)
        for j in range(n):
            for k in range(m):
                probe = [
                    state[q] + h * sum(rows[j - 1][o] * slopes[o][q] for o in range(j))
                    for q in range(m)
                ]
                slopes[j][k] = derivatives[k](t + h * nodes[j], probe)
        state = [state[q] + h * sum(weights[j] * slopes[j][q] for j in range(n)) for q in range(m)]
        t = t + h
    return state


HEUN = ([0.0, 1.0], [[1.0]], [0.5, 0.5])
RK4 = ([0.0, 0.5, 0.5, 1.0], [[0.5], [0.0, 0.5], [0.0, 0.0, 1.0]], [1 / 6, 1 / 3, 1 / 3, 1 / 6])


def oscillator(k, c):
    def position(t, z):
        return z[1]

    def velocity(t, z):
        return -k * z[0] - c * z[1] + 0.1 * t

    end = integrate([0.0, [1.0, 0.0]], [position, velocity], 0.1, 4, RK4)
    return end[0] + 0.5 * end[1]


def growth(a, b):
    end = integrate(
        [0.0, [a, b]], [lambda t, z: a * z[1], lambda t, z: -b * z[0] * z[1]], 0.2, 3, HEUN
    )
    return end[0] * end[1]


POINTS = [(1.3, 0.4), (0.6, 0.9), (2.1, 0.25)]


@pytest.mark.parametrize("f", [oscillator, growth])
def test_refused_by_name_when_the_integrator_runs_as_it_is(f):
    with pytest.raises(UnknownTransformError) as info:
        dplus.grad(f)(*POINTS[0])
    message = str(info.value)
    assert "test_realcode_handed_functions.integrate" in message
    assert "inside a list, tuple, dict or object" in message
    assert "ProcResult" not in message


@pytest.mark.parametrize("f", [oscillator, growth])
@pytest.mark.parametrize("point", POINTS)
def test_first_order_from_source(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_first_order(f, *point)


@pytest.mark.parametrize("f", [oscillator, growth])
@pytest.mark.parametrize("point", POINTS[:2])
def test_second_order_from_source(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_second_order(f, *point)


# the other holders: a tuple, a dict, an object's attribute


class Model:
    def __init__(self, rate):
        self.rate = rate


def run_in_tuple(pair, x):
    return pair[0](x) + pair[1](x)


def run_in_dict(table, x):
    return table["f"](x)


def run_in_object(model, x):
    return model.rate(x)


def handed_in_tuple(a, x):
    return run_in_tuple((lambda u: a * u, lambda u: u * u), x)


def handed_in_dict(a, x):
    return run_in_dict({"f": lambda u: a * u * u}, x)


def handed_in_object(a, x):
    return run_in_object(Model(lambda u: a + u), x)


@pytest.mark.parametrize("f", [handed_in_tuple, handed_in_dict, handed_in_object])
def test_other_holders_are_refused_by_name(f):
    with pytest.raises(UnknownTransformError, match="inside a list, tuple, dict or object"):
        dplus.grad(f)(1.5, 0.5)


@pytest.mark.parametrize("f", [handed_in_tuple, handed_in_dict, handed_in_object])
def test_other_holders_from_source(f):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_first_order(f, 1.5, 0.5)
        check_second_order(f, 1.5, 0.5)


def count_entries(items):
    return len(items)


def plain_values_in_a_list_are_not_refused(a, x):
    return count_entries([a, x, 2.0]) * a * x


def test_lists_of_numbers_given_to_undecorated_code_still_run():
    check_first_order(plain_values_in_a_list_are_not_refused, 1.5, 0.5)
