"""``functools.cache`` / ``lru_cache`` on a function defined inside the differentiated function,
at the second and third order: Hessians against central differences of dplus's first-order
gradient on random inputs, the third derivative against differences of the second, and the
cache behaving as Python's (which calls compute, what ``cache_info`` says, evictions, keys
that are equal but not identical) under every order."""

from __future__ import annotations

import functools
import random

import pytest
from path_helpers import check_first_order, check_second_order, close

import dplus
from dplus import grad1
from dplus.transform.transformer import general_paths_only

_rng = random.Random(2038)
INPUTS = [(_rng.uniform(-2.0, 2.0), _rng.uniform(-2.0, 2.0)) for _ in range(4)]
CALLS: list = []


def cached_twice(x, y):
    @functools.cache
    def scaled(n):
        CALLS.append(n)
        return x * n * y * x

    return scaled(2) + scaled(2) * scaled(3) + scaled(3) * x


def cached_recursion(x, y):
    @functools.cache
    def fib(n):
        CALLS.append(n)
        return x if n < 2 else fib(n - 1) * y + fib(n - 2) * x

    return fib(6) * (fib.cache_info().hits + 1)


def evicting(x, y):
    @functools.lru_cache(maxsize=1)
    def sq(n):
        CALLS.append(n)
        return x * x * n + y

    # 2 miss, 3 miss (evicts 2), 2 miss again (a computation of its own), 2 hit
    return sq(2) + sq(3) * y + sq(2) * sq(2) * x


def bare_lru_cache(x, y):
    @functools.lru_cache
    def sq(n):
        CALLS.append(n)
        return x * y * n

    return sq(1) * sq(1) + sq(2)


def equal_keys(x, y):
    @functools.cache
    def f(k):
        CALLS.append(k)
        return x * k + y * y

    # 1 and 1.0 are different keys for Python's cache (an int alone is its own key); True
    # and 1.0 are the same: f(True) returns f(1.0)'s value
    return f(1) * x + f(1.0) * y + f(True) * f(1.0)


def typed_keys(x, y):
    @functools.lru_cache(maxsize=None, typed=True)
    def f(k):
        CALLS.append(k)
        return x * y * k

    return f(2) + f(2.0) * x + f(2) * y


def keyword_keys(x, y):
    @functools.cache
    def f(k, scale=1.0):
        CALLS.append(k)
        return x * k * scale + y

    return f(2) + f(k=2) * x + f(2, scale=y) + f(2) * f(2, scale=y)


def cleared(x, y):
    @functools.cache
    def f(n):
        CALLS.append(n)
        return x * x * n

    a = f(2) * y
    f.cache_clear()
    b = f(2) * x  # computed again: its own sensitivities
    return a + b + f(2) * f.cache_info().misses


def cached_container(x, y):
    @functools.cache
    def pair(n):
        CALLS.append(n)
        return [x * n, y * n]

    p = pair(2)
    q = pair(2)  # the same list: Python returns it again
    q.append(x * y)
    return p[0] * p[1] + sum(q) + len(pair(2)) * x


def cached_in_loop(x, y):
    @functools.lru_cache(maxsize=2)
    def term(k):
        CALLS.append(k)
        return x ** (k % 3) * y

    s = 0.0
    for i in range(7):
        s = s + term(i % 4) * x
    return s


def cached_reads_rebound_variable(x, y):
    scale = x

    @functools.cache
    def f(n):
        return scale * n * y

    first = f(2)
    scale = y * y  # the cached value keeps the old scale, as in Python
    return first + f(2) * x + f(3)


CACHED = [
    cached_twice,
    cached_recursion,
    evicting,
    bare_lru_cache,
    equal_keys,
    typed_keys,
    keyword_keys,
    cleared,
    cached_container,
    cached_in_loop,
    cached_reads_rebound_variable,
]


@pytest.mark.parametrize("f", CACHED)
def test_first_order(f):
    for args in INPUTS:
        check_first_order(f, *args)


@pytest.mark.parametrize("f", CACHED)
def test_second_order(f):
    for args in INPUTS:
        check_second_order(f, *args)


# one argument each, the cache inside (a function the differentiated one calls must be
# @define_dplus: these are differentiated themselves)
def cached_twice_1(x):
    @functools.cache
    def scaled(n):
        return x * n * x

    return scaled(2) + scaled(2) * scaled(3) + scaled(3) * x


def evicting_1(x):
    @functools.lru_cache(maxsize=1)
    def sq(n):
        return x * x * n + 0.3

    return sq(2) + sq(3) * x + sq(2) * sq(2) * x


def equal_keys_1(x):
    @functools.cache
    def f(k):
        return x * k * x

    return f(1) * x + f(1.0) * 0.5 + f(True) * f(1.0)


def cleared_1(x):
    @functools.cache
    def f(n):
        return x * x * n

    a = f(2) * x
    f.cache_clear()
    return a + f(2) * x * x + f(2) * f.cache_info().misses


def cached_in_loop_1(x):
    @functools.lru_cache(maxsize=2)
    def term(k):
        return x ** (k % 3) * 1.3

    s = 0.0
    for i in range(7):
        s = s + term(i % 4) * x
    return s


THIRD = [cached_twice_1, evicting_1, equal_keys_1, cleared_1, cached_in_loop_1]


@pytest.mark.parametrize("k", range(len(THIRD)))
def test_third_order(k):
    one = THIRD[k]
    second = grad1(grad1(one))
    third = grad1(second)
    for x in (-1.3, 0.4, 1.7):
        h = 1e-4
        fd = (second(x + h) - second(x - h)) / (2 * h)
        close(third(x), fd, tol=1e-5)


@pytest.mark.parametrize("f", CACHED)
def test_the_cache_computes_as_python_does_at_every_order(f):
    CALLS.clear()
    value = f(1.3, 0.7)
    plain = list(CALLS)
    for run in (
        lambda: dplus.grad(f)(1.3, 0.7),
        lambda: dplus.hessian(f)(1.3, 0.7),
    ):
        CALLS.clear()
        run()
        assert CALLS == plain
    CALLS.clear()
    with general_paths_only():
        dplus.hessian(f)(1.3, 0.7)
    assert CALLS == plain
    value_again, _ = dplus.value_and_grad(f)(1.3, 0.7)
    assert value_again == value


def test_cache_info_as_python_reports_it():
    def f(x):
        @functools.lru_cache(maxsize=2)
        def g(n):
            return x * n

        s = g(1) + g(2) + g(1) + g(3) + g(2) + g(2)
        info = g.cache_info()
        INFO.append((info.hits, info.misses, info.maxsize, info.currsize))
        INFO.append(g.cache_parameters())
        return s * x

    INFO: list = []
    f(1.5)
    plain = list(INFO)
    for run in (dplus.grad(f), grad1(grad1(f)), grad1(grad1(grad1(f)))):
        INFO.clear()
        run(1.5)
        assert INFO == plain


def test_bad_maxsize_raises_as_python_does():
    def f(x):
        @functools.lru_cache("big")
        def g(n):
            return x * n

        return g(1)

    with pytest.raises(TypeError):
        f(1.0)
    with pytest.raises(TypeError):
        dplus.grad(f)(1.0)
    with pytest.raises(TypeError):
        grad1(grad1(f))(1.0)


def test_unhashable_argument_raises_as_python_does():
    def f(x):
        @functools.cache
        def g(v):
            return v[0] * x

        return g([x])

    with pytest.raises(TypeError, match="unhashable"):
        f(1.0)
    with pytest.raises(TypeError, match="unhashable"):
        grad1(grad1(f))(1.0)


@functools.cache
@dplus.define_dplus
def module_cached(k):
    return k * k * 3.0


def calls_module_cached(x):
    return module_cached(x) * x


def test_a_module_level_cache_is_refused_by_name_with_a_fix():
    # its cache outlives the call (a hit may come from an earlier call of the program)
    for run in (dplus.grad(calls_module_cached), grad1(grad1(calls_module_cached))):
        with pytest.raises(dplus.DplusError, match=r"functools.cache.*nested @functools.cache def"):
            run(1.5)
    assert calls_module_cached(2.0) == 24.0  # (plain calls are untouched)
