"""A generator expression kept in a variable or passed on (stop 35 and 36, FINDINGS G1).

Inside differentiated code a generator expression was a list, evaluated at once. Python's
generator is exhausted after one reading, so ``g = (...); sum(g) + sum(g)`` read it twice
and got its values twice under ``grad``: the result and the gradient changed, silently.
Stop 35 refused a kept one read more than once; since stop 36, at the first order, a
generator expression not consumed at once by a builtin is Python's lazy generator
(``transform.normalize.generator_expressions``): read twice, read in part, read after the
variables it reads changed, or passed to a function, it gives what Python gives. When the
function is differentiated again a generator expression still runs to completion into a
list, so a kept one read more than once is refused there, naming it; one given to a function
of the program is an iterator over its values there, read once as Python's (stop 37), as a
generator function's generator is (tests/test_generators_higher_order.py).
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
@pytest.mark.parametrize("x", POINTS)
def test_a_generator_expression_read_again_is_python_s_at_the_first_order(f, x):
    check_first_order(f, x)


@pytest.mark.parametrize("f", [read_twice, read_in_a_loop, read_by_a_nested_function])
def test_a_generator_expression_that_may_be_read_again_is_refused_at_the_second_order(f):
    f(1.5)  # the plain program runs
    with pytest.raises(UnsupportedSyntaxError) as info:
        dplus.hessian(f)(1.5)
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


@pytest.mark.parametrize("x", POINTS)
def test_a_generator_expression_read_twice_by_the_function_it_is_passed_to(x):
    assert dplus.lift_dplus(passed_and_read_twice_by_the_callee)(x).primal == (
        passed_and_read_twice_by_the_callee(x)
    )
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_first_order(passed_and_read_twice_by_the_callee, x)


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


# -- laziness the program can see, at the first order (every case: the plain call's primal,
# both paths, finite differences)


def read_twice_by_a_nested_callee(x):
    def twice(g):
        return sum(g) + 10.0 * sum(g)

    return twice(v * x for v in (1.0, 2.0, x))


def reads_a_variable_changed_after(x):
    a = x
    g = (v * a for v in (1.0, 2.0))
    a = 3.0 * x  # Python's generator reads a when it makes each element
    return sum(g)


def stops_before_an_element_that_raises(x):
    xs = [1.0, 2.0, 0.0]
    return float(any(x * x / v > 0.01 for v in xs)) * x + sum(x / v for v in xs[:2])


def taken_with_next(x):
    g = (math.sin(v * x) for v in (1.0, 2.0, 3.0))
    first = next(g)
    return first + 2.0 * sum(g)


def stops_at_a_break(x):
    total = 0.0
    for e in (x / v for v in (1.0, 2.0, 0.0)):
        if e < 0.9 * x:
            break
        total += e * e
    return total


def zipped_with_a_shorter_list(x):
    return sum(a * b for a, b in zip((x, 2.0), (x * v for v in (1.0, 2.0, 3.0, 0.0))))


def interleaved_side_effects(x):
    seen = []

    def note(v):
        seen.append(v)
        return v * x

    g = (note(v) for v in (1.0, 2.0))
    seen.append(-1.0)
    total = sum(g)
    return total * seen[0] + seen[-1]


def nested_generators(x):
    def count(g):
        return sum(1.0 for _ in g)

    return sum(count(v * w for w in (x, 2.0)) * v * x for v in (1.0, x))


def inside_a_lambda(x):
    twice = lambda g: sum(g) + sum(g)
    scaled = lambda t: twice(v * t for v in (1.0, x))
    return scaled(x) + scaled(2.0)


def inside_a_comprehension(x):
    def first_and_rest(g):
        return next(g) + 0.5 * sum(g)

    return sum([first_and_rest(v * t for v in (1.0, x, 3.0)) for t in (x, 2.0)])


def in_a_while_test(x):
    n = 0.0
    while any(v * x > n for v in (1.0, 2.0)):
        n += 1.0
    return n * x


def as_a_default(x):
    def f(t, g=(v * x for v in (1.0, 2.0))):
        return t * sum(g)

    return f(x) + f(2.0)  # the default generator is read once: the second call sees it empty


def a_list_grown_after(x):
    xs = [x, 2.0]
    g = (v * v for v in xs)
    xs.append(x * 3.0)  # Python's generator reads the list as it is when it gets there
    return sum(g)


def shadowed_sum(x):
    def sum(g):  # (not the builtin: the generator is not consumed at once)
        total = 0.0
        for v in g:
            total += v
        for v in g:
            total += 100.0 * v
        return total

    return sum(v * x for v in (1.0, x))


LAZY = [
    read_twice_by_a_nested_callee,
    reads_a_variable_changed_after,
    stops_before_an_element_that_raises,
    taken_with_next,
    stops_at_a_break,
    zipped_with_a_shorter_list,
    interleaved_side_effects,
    nested_generators,
    inside_a_lambda,
    inside_a_comprehension,
    in_a_while_test,
    as_a_default,
    a_list_grown_after,
    shadowed_sum,
]


@pytest.mark.parametrize("f", LAZY)
@pytest.mark.parametrize("x", POINTS)
def test_laziness_the_program_sees_is_python_s_at_the_first_order(f, x):
    check_first_order(f, x)


def test_an_endless_generator_expression_zipped_with_a_list_ends():
    def f(x):
        import itertools

        endless = (x * x if i else x for i in itertools.count())
        return sum(a * b for a, b in zip((x, 2.0), endless))

    for x in POINTS:
        assert dplus.lift_dplus(f)(x).primal == f(x)
        assert dplus.grad1(f)(x) == pytest.approx(2.0 * x + 4.0 * x)


# -- the iterators of zip, enumerate, reversed, map and filter kept or passed on


def zip_of_tuples_read_twice(x):
    z = zip((x, 2.0), (1.0, x))
    return sum(a * b for a, b in z) + 10.0 * sum(a * b for a, b in z)


def enumerate_read_twice(x):
    e = enumerate((x, 2.0 * x))
    return sum(i * v for i, v in e) + 10.0 * sum(i * v for i, v in e)


def reversed_taken_with_next(x):
    r = reversed((x, 2.0, x * x))
    last = next(r)
    return last + 10.0 * sum(r)


def zip_passed_to_a_function_reading_twice(x):
    def twice(pairs):
        return sum(a * b for a, b in pairs) + 10.0 * sum(a * b for a, b in pairs)

    return twice(zip([x, 2.0], (1.0, x)))


def map_passed_to_a_function_reading_in_part(x):
    def first(values):
        return next(values)

    return first(map(lambda v: v * x, (1.0, 2.0))) + first(map(math.sin, [x, 0.0]))


def any_stops_a_map_before_it_raises(x):
    return float(any(map(lambda v: x * x / v > 0.01, [1.0, 0.0]))) * x


def filter_read_twice(x):
    def twice(g):
        return sum(g) + 10.0 * sum(g)

    return twice(filter(None, [x, 0.0, 2.0 * x]))


ITERATORS = [
    zip_of_tuples_read_twice,
    enumerate_read_twice,
    reversed_taken_with_next,
    zip_passed_to_a_function_reading_twice,
    map_passed_to_a_function_reading_in_part,
    any_stops_a_map_before_it_raises,
    filter_read_twice,
]


@pytest.mark.parametrize("f", ITERATORS)
@pytest.mark.parametrize("x", POINTS)
def test_kept_or_passed_on_iterators_are_python_s_at_the_first_order(f, x):
    check_first_order(f, x)


@pytest.mark.parametrize("f", [zip_of_tuples_read_twice, enumerate_read_twice])
def test_a_kept_iterator_read_twice_is_refused_at_the_second_order(f):
    with pytest.raises(UnsupportedSyntaxError) as info:
        dplus.hessian(f)(1.5)
    assert "kept in 'z'" in str(info.value) or "kept in 'e'" in str(info.value)


def nested_def_in_a_generator(x, y):
    def g(n):
        yield x

        def h(items):
            return [y * i for i in items]

        yield from h(range(n))
        yield 100.0

    return sum(g(3))


def test_a_def_inside_a_generator_function():
    # (its locals were taken for the generator's: UnboundLocalError inside dplus)
    for x, y in [(1.5, 2.0), (-0.3, 0.7)]:
        check_first_order(nested_def_in_a_generator, x, y)


def read_twice_through_a_keyword(x):
    def twice(g=()):
        return sum(g) + 10.0 * sum(g)

    return twice(g=(v * x * x for v in (1.0, 2.0)))


def read_twice_by_a_method(x):
    class Reader:
        def twice(self, g):
            return sum(g) + 10.0 * math.sin(sum(g))

    return Reader().twice(math.cos(v * x) for v in (1.0, 2.0))


@pytest.mark.parametrize(
    "f",
    [
        read_twice_by_a_nested_callee,
        inside_a_lambda,
        inside_a_comprehension,
        shadowed_sum,
        read_twice_through_a_keyword,
        read_twice_by_a_method,
    ],
)
@pytest.mark.parametrize("x", POINTS)
def test_a_generator_expression_read_twice_by_a_callee_at_the_second_order(f, x):
    # (stop 37: given to a function of the program, an iterator over its values, read once)
    check_second_order(f, x)


@pytest.mark.parametrize(
    "f", [reads_a_variable_changed_after, a_list_grown_after, interleaved_side_effects]
)
def test_a_generator_expression_whose_laziness_shows_is_refused_at_the_second_order(f):
    f(1.5)
    with pytest.raises(UnsupportedSyntaxError, match="generator expression"):
        dplus.hessian(f)(1.5)


# -- two generators taken together by one rule, sharing a variable (stop 36, found by the
# fuzzer on styles4): their resumptions are reversed in the reverse of the order they ran


def zipped_generators_sharing_a_variable(x1, x2):
    def gen(n):
        nonlocal x2
        for i in range(n):
            yield x2 * i
        x2 = x1 * 2.0  # written while the other generator is still to read it
        yield x1

    s = 0.0
    for a, b in zip(gen(2), gen(3)):
        s += a * b
    return s


def summed_zip_of_generators_sharing_a_variable(x1, x2):
    def gen(n):
        nonlocal x2
        for i in range(n):
            yield x2 * i + x1
        x2 = x1 * x2
        yield x1 * x2

    return sum(a * b for a, b in zip(gen(2), gen(3))) + sum(map(lambda a, b: a - b, gen(1), gen(2)))


@pytest.mark.parametrize(
    "f", [zipped_generators_sharing_a_variable, summed_zip_of_generators_sharing_a_variable]
)
@pytest.mark.parametrize("args", [(0.7, 1.3), (-0.4, 0.9), (1.6, -0.5)])
def test_generators_taken_together_sharing_a_variable(f, args):
    check_first_order(f, *args)
