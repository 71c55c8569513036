"""Rules for functools.reduce and itertools (primitives/functional.py)."""

import copy
import functools
import itertools
import math
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rules_fd_helpers import get_leaf, leaves, set_leaf

import dplus
from dplus import (
    BoxSensitivities,
    D,
    NonDifferentiableError,
    UnknownTransformError,
    gen_zero,
    grad,
    lift_dplus,
)
from dplus.runtime.closures import PlusInfo, register_plus_code
from dplus.runtime.linear import coerce_zero, dot
from dplus.runtime.registry import lookup_transform
from dplus.runtime.result import ProcResult

mul = operator.mul

# ---------------------------------------------------------------------------
# helpers (as in test_rules_builtins)


def direct(fn, *args, A=1.0, **kwargs):
    r = lookup_transform(fn)(*args, **kwargs)
    out = r.backprop(A, BoxSensitivities())
    pos = tuple(coerce_zero(s, a) for s, a in zip(out[1 : 1 + len(args)], args))
    if kwargs:
        assert len(out) == 2 + len(args)
        return r.primal, pos, {k: coerce_zero(v, kwargs[k]) for k, v in out[-1].items()}
    assert len(out) == 1 + len(args)
    return r.primal, pos


def _leaves(x):
    return leaves(x, (float,))


_get = get_leaf
_set = set_leaf


def fd_check(f, args, g, sens=1.0, h=1e-6, rtol=1e-5, atol=1e-6):
    """Compare the gradient ``g`` with central differences of dot(sens, f(*args)) at every float leaf."""

    def L(a):
        out = f(*copy.deepcopy(a))
        if not isinstance(out, (int, float)):
            out = list(out)
        return dot(sens, out)

    for path in _leaves(args):
        x = _get(args, path)
        num = (L(_set(args, path, x + h)) - L(_set(args, path, x - h))) / (2 * h)
        assert math.isclose(_get(g, path), num, rel_tol=rtol, abs_tol=atol), (
            path,
            _get(g, path),
            num,
        )


floats = st.floats(-3.0, 3.0, allow_nan=False)
small_lists = st.lists(floats, min_size=1, max_size=6)


def plus_closure(y):
    """A hand-written plus-function closing over ``y``: (a, b) -> a * b * y."""

    def times_y_plus(a, b):
        return ProcResult(a * b * y, lambda A, Abox: ((A * a * b,), A * b * y, A * a * y))

    return times_y_plus


register_plus_code(plus_closure(1.0).__code__, PlusInfo(None, ("y",), None))


def unknown_add(a, b):  # a plain Python function dplus knows nothing about
    return a + b


# ---------------------------------------------------------------------------
# functools.reduce


def test_reduce_exact():
    assert grad(functools.reduce)(mul, [2.0, 3.0, 4.0]) == ((), [12.0, 8.0, 6.0])
    assert grad(functools.reduce)(lift_dplus(mul), [2.0, 3.0, 4.0], 1.0) == (
        (),
        [12.0, 8.0, 6.0],
        24.0,
    )
    assert grad(functools.reduce)(mul, [5.0]) == ((), [1.0])
    assert grad(functools.reduce)(mul, (), 5.0) == ((), (), 1.0)
    assert grad(functools.reduce)(operator.add, range(4), 0.5) == ((), None, 1.0)
    with pytest.raises(TypeError):
        lookup_transform(functools.reduce)(mul, [])


def test_reduce_closure_sensitivity():
    # f(a, b) = a*b*y with y closed over; reduce over [2, 3, 4] is 24 y^2: d/dy = 48 y,
    # summed over the two calls (120 + 120 at y = 5)
    assert grad(functools.reduce)(plus_closure(5.0), [2.0, 3.0, 4.0]) == (
        (240.0,),
        [300.0, 200.0, 150.0],
    )


def test_reduce_threads_mutable_accumulators():
    # the accumulator is a list built by concatenation: its sensitivity travels through Abox
    (f, xs, init) = D(functools.reduce)(operator.add, [[1.0], [2.0, 3.0]], [])([1.0, 2.0, 3.0])
    assert xs == [[1.0], [2.0, 3.0]] and init == []


def test_reduce_unknown_function_default_policy():
    r = lookup_transform(functools.reduce)(unknown_add, [1.0, 2.0])
    assert r.primal == 3.0
    assert r.backprop(gen_zero, BoxSensitivities())[2] == [gen_zero, gen_zero]
    with pytest.raises(UnknownTransformError, match="unknown_add"):
        lookup_transform(functools.reduce)(unknown_add, [1.0, 2.0]).backprop(
            1.0, BoxSensitivities()
        )


def test_reduce_generator_raises_only_when_reached():
    r = lookup_transform(functools.reduce)(mul, (v for v in [2.0, 3.0]))
    assert r.primal == 6.0
    with pytest.raises(NonDifferentiableError, match=r"reduce\(\).*generator"):
        r.backprop(1.0, BoxSensitivities())


@settings(max_examples=40, deadline=None)
@given(small_lists, floats)
def test_reduce_fd(xs, init):
    g = grad(functools.reduce)(mul, xs, init)[1:]
    fd_check(lambda a, b: functools.reduce(mul, a, b), (xs, init), g)
    g = grad(functools.reduce)(lift_dplus(operator.sub), xs)[1:]
    fd_check(lambda a: functools.reduce(operator.sub, a), (xs,), g)


# ---------------------------------------------------------------------------
# itertools.accumulate


def test_accumulate_exact():
    assert D(itertools.accumulate)([1.0, 2.0, 3.0])([1.0, 1.0, 1.0]) == ([3.0, 2.0, 1.0],)
    assert direct(itertools.accumulate, [1.0, 2.0], initial=10.0, A=[1.0, 2.0, 4.0]) == (
        [10.0, 11.0, 13.0],
        ([6.0, 4.0],),
        {"initial": 7.0},
    )
    assert D(itertools.accumulate)([1.0, 2.0, 3.0], mul)([1.0, 1.0, 1.0]) == ([9.0, 4.0, 2.0], ())
    assert direct(
        itertools.accumulate, [1.0, 2.0, 3.0], mul, initial=2.0, A=[1.0, 1.0, 1.0, 1.0]
    ) == ([2.0, 2.0, 4.0, 12.0], ([18.0, 8.0, 4.0], ()), {"initial": 10.0})
    assert direct(itertools.accumulate, [2.0, 3.0], func=lift_dplus(mul), A=[0.0, 1.0]) == (
        [2.0, 6.0],
        ([3.0, 2.0],),
        {"func": ()},
    )
    assert direct(itertools.accumulate, [], A=[]) == ([], ([],))
    assert direct(itertools.accumulate, [], initial=1.0, A=[5.0]) == (
        [1.0],
        ([],),
        {"initial": 5.0},
    )


def test_accumulate_closure_and_non_numbers():
    # out = [2, 2*3*y]; sens [0, 1]: d/dy = 6, d/dx0 = 3y, d/dx1 = 2y
    assert grad(itertools.accumulate, sensitivity=[0.0, 1.0])([2.0, 3.0], plus_closure(5.0)) == (
        [15.0, 10.0],
        (6.0,),
    )
    # default addition of tuples (concatenation) goes through operator.add's rule
    assert D(itertools.accumulate)([(1.0,), (2.0,)])([(1.0,), (10.0, 20.0)]) == (
        [(11.0,), (20.0,)],
    )


@settings(max_examples=40, deadline=None)
@given(small_lists, floats)
def test_accumulate_fd(xs, init):
    sens = [1.0 + 0.5 * i for i in range(len(xs))]
    g = grad(itertools.accumulate, sensitivity=sens)(xs)
    fd_check(lambda a: itertools.accumulate(a), (xs,), g, sens)
    g = grad(itertools.accumulate, sensitivity=sens)(xs, mul)[:1]
    fd_check(lambda a: itertools.accumulate(a, mul), (xs,), g, sens)
    sens2 = [0.5] + sens
    r = lookup_transform(itertools.accumulate)(xs, operator.sub, initial=init)
    out = r.backprop(sens2, BoxSensitivities())
    g = (coerce_zero(out[1], xs), coerce_zero(out[3]["initial"], init))
    fd_check(lambda a, b: itertools.accumulate(a, operator.sub, initial=b), (xs, init), g, sens2)


# ---------------------------------------------------------------------------
# chain, chain.from_iterable, product, repeat, islice, starmap


def test_chain_exact():
    assert D(itertools.chain)([1.0, 2.0], (3.0,), range(2))([1.0, 2.0, 3.0, 4.0, 5.0]) == (
        [1.0, 2.0],
        (3.0,),
        None,
    )
    assert D(itertools.chain.from_iterable)([[1.0, 2.0], (3.0,)])([1.0, 2.0, 3.0]) == (
        [[1.0, 2.0], (3.0,)],
    )
    assert D(itertools.chain)()([]) == ()
    with pytest.raises(dplus.DplusError, match="infinite"):
        lookup_transform(itertools.chain)([1.0], itertools.count())
    r = lookup_transform(itertools.chain)([1.0], iter([2.0]))
    assert r.primal == [1.0, 2.0]
    assert r.backprop([1.0, 0.0], BoxSensitivities())[1] == [1.0]
    with pytest.raises(NonDifferentiableError, match=r"chain\(\).*iterables\[1\]"):
        lookup_transform(itertools.chain)([1.0], iter([2.0])).backprop(
            [1.0, 1.0], BoxSensitivities()
        )


def test_product_exact():
    assert D(itertools.product)([1.0, 2.0], (3.0,))([(1.0, 2.0), (3.0, 4.0)]) == (
        [1.0, 3.0],
        (6.0,),
    )
    assert D(lambda xs: itertools.product(xs, repeat=2))([1.0, 2.0])(
        [(1.0, 2.0), (3.0, 4.0), (5.0, 6.0), (7.0, 8.0)]
    ) == ([12.0, 24.0],)
    primal, pos, kw = direct(itertools.product, [1.0], repeat=0, A=[()])
    assert primal == [()] and pos == ([0.0],) and kw == {"repeat": 0}


def test_repeat_exact():
    assert D(itertools.repeat)(2.0, 3)([1.0, 2.0, 3.0]) == (6.0, 0)
    assert direct(itertools.repeat, 2.0, times=2, A=[1.0, 1.0]) == (
        [2.0, 2.0],
        (2.0,),
        {"times": 0},
    )
    r = lookup_transform(itertools.repeat)(2.0)
    assert type(r.primal) is itertools.repeat
    assert r.backprop(5.0, BoxSensitivities()) == ((), 5.0)


def test_islice_exact():
    assert D(itertools.islice)([1.0, 2.0, 3.0, 4.0], 1, None, 2)([1.0, 2.0]) == (
        [0.0, 1.0, 0.0, 2.0],
        0,
        None,
        0,
    )
    assert D(itertools.islice)((1.0, 2.0, 3.0), 2)([1.0, 2.0]) == ((1.0, 2.0, 0.0), 0)
    assert D(itertools.islice)(itertools.repeat(5.0), 3)([1.0, 2.0, 3.0]) == (6.0, 0)
    # a count of integers is a counter, as range is: no sensitivity (tests/test_counting_in_zip.py)
    r = lookup_transform(itertools.islice)(itertools.count(), 3)
    assert r.primal == [0, 1, 2]
    assert r.backprop([1.0, 0.0, 0.0], BoxSensitivities())[1] is gen_zero
    r = lookup_transform(itertools.islice)(itertools.count(0.5), 3)
    assert r.primal == [0.5, 1.5, 2.5]
    with pytest.raises(NonDifferentiableError, match=r"islice\(\).*count"):
        r.backprop([1.0, 0.0, 0.0], BoxSensitivities())
    with pytest.raises(ValueError):
        lookup_transform(itertools.islice)([1.0], -1)


def test_starmap_exact():
    assert D(itertools.starmap)(mul, [(1.0, 2.0), [3.0, 4.0]])([1.0, 10.0]) == (
        (),
        [(2.0, 1.0), [40.0, 30.0]],
    )
    assert D(itertools.starmap)(plus_closure(2.0), [(1.0, 2.0), (3.0, 4.0)])([1.0, 1.0]) == (
        (14.0,),
        [(4.0, 2.0), (8.0, 6.0)],
    )
    r = lookup_transform(itertools.starmap)(unknown_add, [(1.0, 2.0)])
    assert r.primal == [3.0]
    with pytest.raises(UnknownTransformError):
        r.backprop([1.0], BoxSensitivities())


@settings(max_examples=40, deadline=None)
@given(small_lists, small_lists, st.integers(0, 3), st.integers(1, 3))
def test_iter_tools_fd(xs, ys, start, step):
    s = [0.5 + i for i in range(len(xs) + len(ys))]
    g = grad(itertools.chain, sensitivity=s)(xs, tuple(ys))
    fd_check(lambda a, b: itertools.chain(a, b), (xs, tuple(ys)), g, s)
    sp = [(1.0 + i, 2.0 - i) for i in range(len(xs) * len(ys))]
    g = grad(itertools.product, sensitivity=sp)(xs, ys)
    fd_check(lambda a, b: itertools.product(a, b), (xs, ys), g, sp)
    n = len(range(len(xs))[start::step])
    si = [1.0 + i for i in range(n)]
    g = grad(itertools.islice, sensitivity=si)(xs, start, None, step)[:1]
    fd_check(lambda a: itertools.islice(a, start, None, step), (xs,), g, si)
    pairs = list(zip(xs, ys))
    ss = [1.0 - 0.5 * i for i in range(len(pairs))]
    g = grad(itertools.starmap, sensitivity=ss)(operator.sub, pairs)[1:]
    fd_check(lambda p: itertools.starmap(operator.sub, p), (pairs,), g, ss)


def test_selections_pairwise_zip_longest_exact():
    assert D(itertools.compress)([1.0, 2.0, 3.0], [1, 0, 1])([1.0, 2.0]) == (
        [1.0, 0.0, 2.0],
        [0, 0, 0],
    )
    assert D(itertools.takewhile)(lambda v: v < 3, (1.0, 2.0, 3.0, 1.0))([1.0, 2.0]) == (
        (),
        (1.0, 2.0, 0.0, 0.0),
    )
    assert D(itertools.dropwhile)(lambda v: v < 2, [1.0, 2.0, 3.0, 1.0])([1.0, 2.0, 3.0]) == (
        (),
        [0.0, 1.0, 2.0, 3.0],
    )
    assert D(itertools.pairwise)([1.0, 2.0, 3.0])([(1.0, 2.0), (3.0, 4.0)]) == ([1.0, 5.0, 4.0],)
    assert direct(
        itertools.zip_longest,
        [1.0, 2.0, 3.0],
        (5.0,),
        fillvalue=0.5,
        A=[(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)],
    ) == ([(1.0, 5.0), (2.0, 0.5), (3.0, 0.5)], ([1.0, 3.0, 5.0], (2.0,)), {"fillvalue": 10.0})


@settings(max_examples=40, deadline=None)
@given(small_lists, small_lists)
def test_pairwise_zip_longest_fd(xs, ys):
    sp = [(1.0 + i, 2.0 - i) for i in range(len(xs) - 1)]
    g = grad(itertools.pairwise, sensitivity=sp)(xs)
    fd_check(lambda a: itertools.pairwise(a), (xs,), g, sp)
    sz = [(1.0 + i, 0.5 * i) for i in range(max(len(xs), len(ys)))]
    r = lookup_transform(itertools.zip_longest)(xs, ys, fillvalue=0.25)
    out = r.backprop(sz, BoxSensitivities())
    g = (out[1], out[2], out[3]["fillvalue"])
    fd_check(
        lambda a, b, c: itertools.zip_longest(a, b, fillvalue=c),
        (xs, ys, 0.25),
        coerce_zero(g, (xs, ys, 0.25)),
        sz,
    )


# ---------------------------------------------------------------------------
# through the source transformer: defs and lambdas calling the tools

from dplus.gradcheck import check_grad  # noqa: E402


def g_reduce(xs, y):
    return functools.reduce(lambda acc, x: acc * y + x, xs, 0.0)


def g_accumulate(xs):
    return sum(itertools.accumulate(xs, lambda a, b: a * b)) + sum(itertools.accumulate(xs))


def g_chain(xs, ys):
    return sum(x * x for x in itertools.chain(xs, ys))


def g_product(xs, ys):
    return sum(a * b for a, b in itertools.product(xs, ys))


def g_starmap(xs, ys):
    return sum(itertools.starmap(lambda a, b: a * b - a, zip(xs, ys)))


def g_islice(xs):
    return sum(itertools.islice(xs, 1, None, 2))


def g_repeat(xs, y):
    return sum(map(operator.mul, xs, itertools.repeat(y))) + sum(itertools.repeat(y, 3))


def g_pairwise(xs):
    return sum(b - a * a for a, b in itertools.pairwise(xs))


def test_transformed_exact():
    assert grad(g_reduce)([1.0, 2.0, 3.0], 1.5) == ([2.25, 1.5, 1.0], 5.0)
    assert grad(g_accumulate)([1.0, 2.0, 3.0]) == ([12.0, 6.0, 3.0],)
    assert grad(g_repeat)([1.0, 2.0], 3.0) == ([3.0, 3.0], 6.0)
    assert grad(g_islice)([1.0, 2.0, 3.0, 4.0]) == ([0.0, 1.0, 0.0, 1.0],)
    with pytest.raises(UnknownTransformError, match="unknown_add"):
        grad(lambda xs: functools.reduce(unknown_add, xs))([1.0, 2.0])


@settings(max_examples=40, deadline=None)
@given(small_lists, st.lists(floats, min_size=1, max_size=4), floats)
def test_transformed_fd(xs, ys, y):
    check_grad(g_reduce, xs, y)
    check_grad(g_accumulate, xs)
    check_grad(g_chain, xs, tuple(ys))
    check_grad(g_product, xs, tuple(ys))
    check_grad(g_starmap, xs, ys)
    check_grad(g_islice, xs)
    check_grad(g_repeat, xs, y)
    check_grad(g_pairwise, xs)


def test_float_fast_path_falls_back_when_needed():
    assert direct(functools.reduce, mul, [2.0, 3.0], A=2) == (6.0, ((), [6.0, 4.0]))
    assert direct(functools.reduce, mul, [2, 3.0], A=1.0) == (6.0, ((), [3.0, 2]))
    assert direct(itertools.starmap, mul, [(2.0, 3.0), (1, 2.0)], A=[1.0, 2.0]) == (
        [6.0, 2.0],
        ((), [(3.0, 2.0), (4.0, 2)]),
    )
