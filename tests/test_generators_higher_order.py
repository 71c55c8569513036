"""Generators differentiated again (second and third order; issues #18, #20, #28).

Differentiated again, a generator function runs to completion where it is called and gives
an iterator over the list of its values (``iter(values)``, a ``runtime.routers.ListIterator``):
as Python's generator, it gives its values once, to whoever reads it first, and ``next``
takes one. Before, it gave the list itself, so a generator read twice by the function it was
passed to gave its values twice (a wrong second derivative, silently). Each construct is
checked against central finite differences of the order below, on several inputs.
"""

from __future__ import annotations

import math
import random

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus.errors import DplusError, NonDifferentiableError, UnsupportedSyntaxError

POINTS = [0.3, 1.1, -0.7] + [random.Random(2026).uniform(-2.0, 2.0) for _ in range(2)]


def _derivative(f, order):
    for _ in range(order):
        f = dplus.grad1(f)
    return f


def check_third_order(f, x, eps=1e-4):
    """The third derivative against central differences of dplus's second."""
    second = _derivative(f, 2)
    fd = (second(x + eps) - second(x - eps)) / (2 * eps)
    assert _derivative(f, 3)(x) == pytest.approx(fd, rel=1e-5, abs=1e-5)


def read_twice_by_the_callee(x):
    def gen():
        yield x * x * x
        yield x * 2.0

    def consume(g):
        return sum(g) + 10.0 * sum(g)  # Python: the second sum is 0.0

    return consume(gen())


def next_then_a_loop(x):
    def gen():
        for k in range(4):
            yield math.sin(x * (k + 1))

    g = gen()
    first = next(g)
    total = first * x * x
    for v in g:  # the three values next() left
        total += v * v * x
    return total


def passed_to_two_functions(x):
    def gen():
        yield x * x * x
        yield math.exp(x)
        yield x

    def first(g):
        return next(g) * 3.0

    def rest(g):
        return sum(g) * x

    g = gen()
    return first(g) + rest(g)


def next_then_sum_twice(x):
    def gen():
        yield x * x
        yield math.sin(x)
        yield x * x * x

    g = gen()
    a = next(g)
    return a * sum(g) + sum(g)


def of_lists(x):
    def gen():
        yield [x, x * x]
        yield [x * x * x, 1.0]

    total = 0.0
    for a, b in gen():
        total += a * b
    return total


def of_dicts(x):
    def gen():
        yield {"a": x * x, "b": 2.0}
        yield {"a": math.sin(x), "b": x}

    return sum(d["a"] * d["b"] for d in gen())


def made_in_a_loop(x):
    total = 0.0
    for k in range(3):

        def gen(k):
            yield x * k
            yield x * x * x

        g = gen(k)
        total += sum(g) * x + sum(g)
    return total


def taken_as_a_list_twice(x):
    def gen():
        yield x * x * x
        yield math.sin(x)

    g = gen()
    values = list(g)
    return values[0] * values[1] + len(list(g)) + sum(tuple(g))


def max_sorted_enumerate(x):
    def gen():
        yield x * x * x
        yield math.sin(x)
        yield x

    total = max(gen()) * x + sum(sorted(gen()))
    for i, v in enumerate(gen()):
        total += v * (i + 1) * x
    return total


def through_yield_from(x):
    def inner():
        yield x * x
        yield x * x * x

    def gen():
        yield from inner()
        yield x

    return sum(gen()) * x


def bound_twice_before_the_definition(x):
    y = x * x
    y = y * x  # (all before the generator function: it reads this y, as Python's)

    def gen():
        yield y * 2.0
        yield math.cos(y)

    return sum(gen()) * x


def zipped(x):
    def gen():
        yield x * x * x
        yield math.sin(x)

    total = 0.0
    for a, b in zip(gen(), [1.0, 2.0]):
        total += a * b * x
    return total


def two_zipped(x):
    # (zip's rule takes the generators' values through its own iteration, which the next
    # order's zip takes again: each value's sensitivity goes to its place in the values)
    def gen(n):
        for i in range(n):
            yield x * (i + 1.5)
        yield from [x * x, math.cos(x)]

    return sum(a * b for a, b in zip(gen(2), gen(3)))


def zip_stops_early(x):
    def gen():
        yield math.sin(x)
        yield x * x
        yield x

    it = gen()
    return sum(a * b * x for a, b in zip([x, 2.0], it)) + next(it)


def zip_of_a_list_iterator(x):
    return sum(a * b for a, b in zip(iter([x, x * x]), [x, 3.0, 1.0]))


SECOND_ORDER = [
    bound_twice_before_the_definition,
    read_twice_by_the_callee,
    next_then_a_loop,
    passed_to_two_functions,
    next_then_sum_twice,
    of_lists,
    of_dicts,
    made_in_a_loop,
    taken_as_a_list_twice,
    max_sorted_enumerate,
    through_yield_from,
]

# zip of generators or of iter(xs): the next order's rule takes the values through the first
# order's taking (primitives._list_iterators.TakingThrough)
ZIPPED = [zipped, two_zipped, zip_stops_early, zip_of_a_list_iterator]


@pytest.mark.parametrize("f", SECOND_ORDER)
@pytest.mark.parametrize("x", POINTS)
def test_a_generator_gives_its_values_once_at_the_second_order(f, x):
    check_first_order(f, x)
    check_second_order(f, x)


@pytest.mark.parametrize("f", ZIPPED)
@pytest.mark.parametrize("x", POINTS[1:2])
def test_zip_of_generators_at_the_second_order(f, x):
    check_first_order(f, x)
    check_second_order(f, x)


def test_the_reproduction_of_issue_18():
    def h(x):
        def gen():
            yield x * x
            yield x * 2.0

        def c(g):
            return sum(g) + 10.0 * sum(g)

        return c(gen())

    assert dplus.grad1(dplus.grad1(h))(1.5) == pytest.approx(2.0)


# Third order: next() and loops over a generator are differentiated; a builtin taking its
# values (sum, list, sorted, ...) is refused there, by name.
@pytest.mark.parametrize("f", [next_then_a_loop, of_lists, of_dicts])
@pytest.mark.parametrize("x", POINTS[:3])
def test_loops_and_next_over_a_generator_at_the_third_order(f, x):
    check_third_order(f, x)


@pytest.mark.parametrize("f", [read_twice_by_the_callee, passed_to_two_functions])
def test_a_builtin_taking_a_generators_values_is_refused_at_the_third_order(f):
    with pytest.raises(NonDifferentiableError) as info:
        _derivative(f, 3)(0.8)
    message = str(info.value)
    assert "third order" in message and "generator" in message
    assert "test_generators_higher_order.py, line" in message


def rebound_after_it_is_made(x):
    y = x

    def gen():
        yield y * y * y
        yield y * x

    g = gen()
    y = 2.0 * x  # Python's generator reads this y
    return sum(g)


def reads_the_loop_variable(x):
    gens = []
    for k in range(3):

        def gen():
            yield x * k  # noqa: B023  (Python's generators read k after the loop: 2 each)

        gens.append(gen())
    return sum(sum(g) for g in gens)


@pytest.mark.parametrize("f", [rebound_after_it_is_made, reads_the_loop_variable])
def test_a_generator_reading_a_variable_bound_again_is_refused_at_the_second_order(f):
    check_first_order(f, 0.9)  # lazy at the first order: right
    with pytest.raises(UnsupportedSyntaxError) as info:
        dplus.grad1(dplus.grad1(f))(0.9)
    message = str(info.value)
    assert "the generator function 'gen'" in message and f"'{f.__name__}'" in message
    assert "may bind again" in message and "as an argument" in message


def with_send(x):
    def gen():
        v = yield x
        yield v * x

    g = gen()
    a = next(g)
    return g.send(a * 2.0) * a


@pytest.mark.parametrize("f", [with_send])
def test_what_the_second_order_does_not_take_is_refused_naming_it(f):
    check_first_order(f, 0.6)
    with pytest.raises(DplusError) as info:
        dplus.grad1(dplus.grad1(f))(0.6)
    assert "generator" in str(info.value)
