"""Calls of small define_dplus functions are inlined (dplus/inline.py).

Every inlined function is checked against the general path (``general_paths_only()``
turns inlining off, so the same call is then a call) and against finite differences;
the generated code is read to check that what should be inlined is, and what must not
be is not.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, close

import dplus
from dplus.transform.transformer import generated_source

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)

SCALE = 0.3


def fd(f, args, i, h=1e-6):
    """Central difference of ``f`` in argument ``i`` (a number) or each element of a list."""

    def at(k, d):
        a = [list(x) if isinstance(x, list) else x for x in args]
        if k is None:
            a[i] += d
        else:
            a[i][k] += d
        return f(*a)

    if isinstance(args[i], list):
        return [(at(k, h) - at(k, -h)) / (2 * h) for k in range(len(args[i]))]
    return (at(None, h) - at(None, -h)) / (2 * h)


def inlined(f):
    return "_dplus_inline_" in generated_source(f)


# --------------------------------------------------------------------------
# inlined


@dplus.define_dplus
def force(x, y):
    fx = -x + SCALE * math.sin(2.0 * y)
    fy = -y + SCALE * math.cos(2.0 * x)
    return fx, fy


def steps(x, y, n):
    for _ in range(n):
        fx, fy = force(x, y)
        x = x + 0.1 * fx
        y = y + 0.1 * fy
    return x * y


@dplus.define_dplus
def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return [
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ]


def rotate(q, v):
    qc = [q[0], -q[1], -q[2], -q[3]]
    r = qmul(qmul(q, [0.0, v[0], v[1], v[2]]), qc)  # a call as an argument: inlined too
    return r[1] + 2.0 * r[2] + 3.0 * r[3]


@dplus.define_dplus
def push_scaled(out, v):
    out.append(v * SCALE)  # mutates its argument: the caller sees it
    return len(out)


def appends(x, y):
    out = [x]
    k = push_scaled(out, y)
    push_scaled(out, x * y)  # a call as a statement
    return sum(out) * k


@dplus.define_dplus
def square(v):
    return v * v


def returns_a_call(x):
    if x > 0.0:
        return square(x + 1.0)
    return square(x) * 2.0


@SETTINGS
@given(x=floats, y=floats, n=st.integers(0, 5))
def test_an_inlined_function_in_a_loop(x, y, n):
    assert inlined(steps)
    fast, general = both_ways(steps, x, y, n)
    close(fast, general)
    close(fast, (fd(steps, (x, y, n), 0), fd(steps, (x, y, n), 1), fast[2]), 1e-5)


@SETTINGS
@given(q=st.lists(floats, min_size=4, max_size=4), v=st.lists(floats, min_size=3, max_size=3))
def test_inlined_calls_as_arguments_of_inlined_calls(q, v):
    assert generated_source(rotate).count("_dplus_inline_qmul") >= 2
    fast, general = both_ways(rotate, q, v)
    close(fast, general)
    close(fast, (fd(rotate, (q, v), 0), fd(rotate, (q, v), 1)), 1e-5)
    assert len(q) == 4 and len(v) == 3


@SETTINGS
@given(x=floats, y=floats)
def test_inlined_mutation_of_an_argument_and_calls_as_statements(x, y):
    assert inlined(appends)
    assert appends(x, y) == pytest.approx(dplus.dplus(appends)(x, y).primal)
    fast, general = both_ways(appends, x, y)
    close(fast, general)
    close(fast, (fd(appends, (x, y), 0), fd(appends, (x, y), 1)), 1e-5)


@SETTINGS
@given(x=floats)
def test_inlined_return_of_a_call(x):
    assume(abs(x) > 1e-3)  # the function jumps at 0
    assert inlined(returns_a_call)
    fast, general = both_ways(returns_a_call, x)
    close(fast, general)
    assert math.isclose(fast[0], fd(returns_a_call, (x,), 0), rel_tol=1e-5, abs_tol=1e-5)


# --------------------------------------------------------------------------
# the guards: a rebound global, a new rule


@dplus.define_dplus
def law_a(v):
    return v * v


@dplus.define_dplus
def law_b(v):
    return v * v * v


law = law_a


def uses_law(x):
    y = law(x)
    return y + x


def test_a_rebound_global_is_called_instead_of_the_inlined_body():
    global law
    assert inlined(uses_law)
    g = dplus.grad(uses_law)
    assert g(2.0) == (5.0,)
    law = law_b
    try:
        assert g(2.0) == (13.0,)  # 3 x^2 + 1: the same transform, the guard fails
        assert dplus.grad(uses_law)(2.0) == (13.0,)
    finally:
        law = law_a
    assert g(2.0) == (5.0,)


@dplus.define_dplus
def smooth_step(v):
    return v * v * 0.5


def uses_smooth_step(x):
    s = smooth_step(x)
    return s * 3.0


def test_a_rule_registered_later_replaces_the_inlined_body():
    assert inlined(uses_smooth_step)
    g = dplus.grad(uses_smooth_step)
    assert g(2.0) == (6.0,)

    @dplus.register_backprop(smooth_step)
    def smooth_step_backprop(v):
        return lambda A, Abox: ((), A * 100.0)  # deliberately not the derivative

    try:
        assert g(2.0) == (300.0,)  # transformed before the rule: the guard fails now
        assert dplus.grad(uses_smooth_step)(2.0) == (300.0,)
    finally:
        dplus.define_dplus(smooth_step)
    # the guard of the first transform stays off: it calls the function (derived again)
    assert g(2.0) == (6.0,)


@dplus.define_dplus  # (the test calls it from a lambda, with keywords)
def law_with_defaults(x, k=2.0, *rest, scale=1.0, **extra):
    y = law(x)
    return y * k * scale + sum(rest) + extra.get("shift", 0.0)


def law_with_varargs(x, *rest):
    y = law(x)
    return y + sum(rest)


def swap_law_now():
    global law
    law = law_b


def rebinds_during(x):
    y = law(x)
    swap_law_now()  # an unknown function: no sensitivity reaches it
    return y + law(x)


@SETTINGS
@given(x=floats, k=floats, r=floats)
def test_a_rebound_global_runs_the_transform_made_without_inlining_for_any_signature(x, k, r):
    global law
    assert inlined(law_with_defaults) and inlined(law_with_varargs)
    g1 = dplus.grad(lambda a, b, c: law_with_defaults(a, b, c, scale=0.5, shift=1.0))
    g2 = dplus.grad(law_with_varargs)
    close(g1(x, k, r), (k * 0.5 * 2.0 * x, 0.5 * x * x, 1.0))
    close(g2(x, r), (2.0 * x, 1.0))
    law = law_b
    try:
        close(g1(x, k, r), (k * 0.5 * 3.0 * x * x, 0.5 * x**3, 1.0))
        close(g2(x, r), (3.0 * x * x, 1.0))
    finally:
        law = law_a


def test_a_global_rebound_while_an_inlined_call_runs_is_an_error():
    global law
    assert inlined(rebinds_during)
    try:
        with pytest.raises(
            dplus.DplusError, match=r"\(law\) was rebound while a differentiated call"
        ):
            dplus.grad(rebinds_during)(2.0)
    finally:
        law = law_a
    law = law_b  # rebound before the call: the transform made without inlining runs
    try:
        assert dplus.grad(rebinds_during)(2.0) == (
            3.0 * 4.0 * 2.0,
        )  # law_b both times (the swap keeps it)
    finally:
        law = law_a


# --------------------------------------------------------------------------
# not inlined: each still differentiated correctly, by a call


@dplus.define_dplus
def with_default(v, k=2.0):
    return v * k


@dplus.define_dplus
def early_return(v):
    if v > 0.0:
        return v * v
    return -v


@dplus.define_dplus
def with_comprehension(v):
    return sum([v * i for i in range(3)])


@dplus.define_dplus
def with_loop(v):
    s = 0.0
    for k in range(3):
        s = s + v * k
    return s


@dplus.define_dplus
def recursive(v, n):
    if n == 0:
        return v
    return recursive(v * 1.5, n - 1)


@dplus.define_dplus
def tail_recursive(v, n):
    r = recursive(v, n)
    return r * 2.0


def _make_scaled(k):
    @dplus.define_dplus
    def scaled(v):
        return v * k

    return scaled


scaled = _make_scaled(3.0)


@dplus.define_dplus
def reads_scale(v):
    return v * SCALE


def not_inlined(x):
    a = with_default(x)
    b = early_return(x)
    c = with_comprehension(x)
    d = scaled(x)
    e = with_default(x, k=3.0)
    f = with_loop(x)
    return a + b + c + d + e + f


def shadows_a_global_of_the_callee(x):
    SCALE = 5.0
    return reads_scale(x) * SCALE


def inlines_around_recursion(x):
    y = tail_recursive(x, 2)
    return y


def not_plain(x):
    return math.sin(x)  # not a define_dplus function


@SETTINGS
@given(x=floats)
def test_functions_that_are_not_inlined_are_called(x):
    assume(abs(x) > 1e-3)  # early_return has a kink at 0
    for f in (not_inlined, shadows_a_global_of_the_callee, not_plain):
        assert not inlined(f), f
        fast, general = both_ways(f, x)
        close(fast, general)
        assert math.isclose(fast[0], fd(f, (x,), 0), rel_tol=1e-5, abs_tol=1e-4)
    # tail_recursive is inlined; the recursive call inside it stays a call
    text = generated_source(inlines_around_recursion)
    assert "_dplus_inline_tail_recursive" in text and "_dplus_inline_recursive" not in text
    close(dplus.grad(inlines_around_recursion)(x), (2.0 * 1.5**2,))


def wrong_count(x):
    return square(x, x)


def test_a_call_with_the_wrong_arguments_fails_as_in_python():
    assert not inlined(wrong_count)
    with pytest.raises(TypeError):
        dplus.grad(wrong_count)(1.0)


def walrus_arguments(x):
    y = force(x, (x := x * 2.0))  # the first argument is x before the assignment
    return y[0] + y[1] + x


@SETTINGS
@given(x=floats)
def test_arguments_are_evaluated_once_in_order(x):
    assert inlined(walrus_arguments)
    assert dplus.dplus(walrus_arguments)(x).primal == pytest.approx(walrus_arguments(x))
    fast, general = both_ways(walrus_arguments, x)
    close(fast, general)
    assert math.isclose(fast[0], fd(walrus_arguments, (x,), 0), rel_tol=1e-5, abs_tol=1e-5)


@dplus.define_dplus
def checked_step(a, limit):
    if a > limit:
        b = a * 2.0  # an effect before the raise: the branch is not atomic
        raise ValueError(b)
    return a * 3.0 + math.sin(a)


def tries_a_branching_step(x, limit):
    y = 0.0
    try:
        y = checked_step(x, limit)
    except ValueError:
        y = x * 5.0
    z = checked_step(x * 0.5, 10.0)  # outside the try: inlined
    return y + z


@SETTINGS
@given(x=floats, limit=st.sampled_from([-1.0, 0.5, 10.0]))
def test_a_branching_function_called_inside_try_is_called_not_inlined(x, limit):
    # inlined there, an exception out of its `if` would interrupt a compound statement of the
    # try's body, which dplus refuses; called, the try sees one statement that raised
    assume(abs(x - limit) > 1e-3)
    text = generated_source(tries_a_branching_step)
    assert text.count("_dplus_inline_checked_step") and "checked_step(x, limit)" in text
    fast, general = both_ways(tries_a_branching_step, x, limit)
    close(fast, general)
    assert math.isclose(
        fast[0], fd(tries_a_branching_step, (x, limit), 0), rel_tol=1e-5, abs_tol=1e-4
    )
