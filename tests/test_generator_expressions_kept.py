"""A generator expression kept in a variable (stop 35, FINDINGS G1).

Inside differentiated code a generator expression is a list, evaluated at once. Python's
generator is exhausted after one reading, so ``g = (...); sum(g) + sum(g)`` read it twice
and got its values twice under ``grad``: the result and the gradient changed, silently.
Such a function is now refused when the variable may be read more than once; read once, it
is differentiated as before. A generator function's generator read twice at the second
order gives its values once, as Python's (there it runs to completion into an iterator over
its values: tests/test_generators_higher_order.py). Still open (strict xfail below): a
generator expression read twice by the function it is passed to.
"""

from __future__ import annotations

import math

import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus.errors import UnsupportedSyntaxError

POINTS = [0.3, 1.1, -0.7, 2.4]


def read_twice(x):
    g = (v * x for v in (1.0, 2.0, x))
    a = sum(g)
    b = sum(g)  # Python: 0.0, the generator is exhausted
    return a + 10.0 * b


def read_in_a_loop(x):
    g = (v * x for v in (1.0, 2.0))
    total = 0.0
    for _ in range(3):
        total += sum(g)  # Python: only the first sum sees the values
    return total


def read_by_a_nested_function(x):
    g = (math.sin(v * x) for v in (1.0, 2.0))

    def total():
        return sum(g)

    return total() + total()


@pytest.mark.parametrize("f", [read_twice, read_in_a_loop, read_by_a_nested_function])
def test_a_generator_expression_that_may_be_read_again_is_refused_naming_it(f):
    f(1.5)  # the plain program runs
    with pytest.raises(UnsupportedSyntaxError) as info:
        dplus.grad(f)(1.5)
    message = str(info.value)
    assert "generator expression kept in 'g'" in message and f"'{f.__name__}'" in message
    assert "Make it a list" in message


def read_once(x):
    g = (v * x * x for v in (1.0, 2.0, x))
    return sum(g) * math.cos(x)


def made_and_read_in_one_loop(x):
    total = 0.0
    for k in range(3):
        g = (v * x + k for v in (1.0, x))
        total += max(g) * x
    return total


def reassigned(x):
    g = (v * x for v in (1.0, 2.0))
    a = sum(g)
    g = (v * x * x for v in (3.0, x))
    return a + sum(g)


def consumed_by_a_loop_once(x):
    g = (math.exp(v * x) for v in (0.5, 1.0))
    total = 0.0
    for e in g:
        total += e * x
    return total


@pytest.mark.parametrize(
    "f", [read_once, made_and_read_in_one_loop, reassigned, consumed_by_a_loop_once]
)
@pytest.mark.parametrize("x", POINTS)
def test_a_generator_expression_read_once_is_differentiated(f, x):
    check_first_order(f, x)
    check_second_order(f, x)


def _consume_twice(it):
    return sum(it) + 10.0 * sum(it)


def passed_and_read_twice_by_the_callee(x):
    return _consume_twice(v * x for v in (1.0, 2.0))


@pytest.mark.xfail(strict=True, reason="G1 (open): the callee reads the list twice")
def test_a_generator_expression_read_twice_by_the_function_it_is_passed_to():
    x = 1.5
    assert dplus.lift_dplus(passed_and_read_twice_by_the_callee)(x).primal == (
        passed_and_read_twice_by_the_callee(x)
    )


def generator_read_twice(x):
    def gen():
        yield x * x
        yield 3.0 * x

    it = gen()
    return sum(it) + 10.0 * sum(it)


def test_a_generator_read_twice_gives_its_values_once_at_the_second_order():
    x = 1.5
    assert dplus.grad1(generator_read_twice)(x) == pytest.approx(2 * x + 3.0)  # lazy: right
    # (differentiated again: an iterator over its values, exhausted by the first sum)
    assert dplus.grad1(dplus.grad1(generator_read_twice))(x) == pytest.approx(2.0)


@dplus.define_dplus  # (a plain module function is called as it is, not differentiated)
def _module_generator(x):
    yield x * x
    yield 3.0 * x


def module_generator_read_twice(x):
    it = _module_generator(x)
    return sum(it) + 10.0 * sum(it)


def test_a_module_generator_read_twice_at_the_second_order():
    x = 1.5
    assert dplus.grad1(module_generator_read_twice)(x) == pytest.approx(2 * x + 3.0)
    assert dplus.grad1(dplus.grad1(module_generator_read_twice))(x) == pytest.approx(2.0)


def generator_read_once(x):
    def gen(n):
        for i in range(n):
            yield math.sin(x * (i + 1))

    it = gen(3)
    total = 0.0
    for v in it:
        total += v * x
    return total + sum(gen(2))


@pytest.mark.parametrize("x", POINTS)
def test_a_generator_read_once_works_at_the_second_order(x):
    check_first_order(generator_read_once, x)
    check_second_order(generator_read_once, x)
