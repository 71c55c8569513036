"""Lists that never leave a function become their elements (dplus/scalarize.py).

Each function is checked against the general path (``general_paths_only()`` turns the
rewrite off), against finite differences, and by reading the generated code: what may
be replaced is, and what must stay a list does.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, check_fd, close

import dplus
from dplus.transform.transformer import generated_source

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


def replaced(f, name):
    """Whether the display of ``name`` is gone from ``f``'s generated forward code."""
    code = [line for line in generated_source(f).splitlines() if not line.lstrip().startswith("#")]
    return not any(line.lstrip().startswith(f"{name} = [") for line in code)


# --------------------------------------------------------------------------
# replaced


def unpacked(x, y):
    p = [x * y, x + y, 2.0]
    a, b, c = p
    return a * b + c * x


def indexed_and_copied(x, y):
    p = [x, y * y]
    q = p  # another name for the same elements
    return q[0] * p[-1] + q[1]


def element_rebound_before_the_read(x, y):
    p = [x, y]
    x = x * 3.0  # the list holds the old x
    a, b = p
    return a * b + x


def in_a_loop(xs, c):
    s = 0.0
    for x in xs:
        v = [x * c, x - c]
        s = s + v[0] * v[1]
    return s


def read_in_a_later_branch(x, flag):
    p = [x * x, x]
    if flag:
        return p[0] + p[1]
    return p[1]


SCALARIZED = [
    (unpacked, "p", lambda x, y: (x, y)),
    (indexed_and_copied, "p", lambda x, y: (x, y)),
    (element_rebound_before_the_read, "p", lambda x, y: (x, y)),
    (in_a_loop, "v", lambda x, y: ([x, y, x * y], y)),
    (read_in_a_later_branch, "p", lambda x, y: (x, y > 0.0)),
]


@pytest.mark.parametrize("f,name,make", SCALARIZED, ids=[f.__name__ for f, _, _ in SCALARIZED])
@SETTINGS
@given(x=floats, y=floats)
def test_replaced_lists_agree_with_the_general_path_and_finite_differences(f, name, make, x, y):
    assert replaced(f, name)  # (general_paths_only() keeps every list: both_ways compares the two)
    args = make(x, y)
    assert f(*args) == pytest.approx(f(*make(x, y)))
    fast, general = both_ways(f, *args)
    close(fast, general)
    if all(isinstance(a, (int, float, list)) and not isinstance(a, bool) for a in args):
        check_fd(f, *args)


# --------------------------------------------------------------------------
# kept: the list is seen as a list


def returned(x):
    p = [x, x * x]
    return sum(p) if False else p[0] * p[1] + len(p)


def passed_on(x):
    p = [x, 2.0 * x]
    return sum(p)


def mutated(x):
    p = [x, 1.0]
    p[1] = x * x
    return p[0] * p[1]


def iterated(x):
    p = [x, 3.0]
    s = 0.0
    for v in p:
        s = s + v * x
    return s


def indexed_by_a_variable(x, i):
    p = [x, x * x]
    return p[i]


def alias_bound_in_a_branch(x, flag):
    p = [x, x * 2.0]
    if flag:
        q = p
    return q[0] + q[1]


def out_of_range(x):
    p = [x, x]
    return p[2]


def wrong_count(x):
    p = [x, x]
    a, b, c = p
    return a


def read_before_bound(x, flag):
    if flag:
        y = p[0]  # noqa: F821 (unbound: UnboundLocalError, as in Python)
        return y
    p = [x, x]
    return p[0]


def test_lists_seen_as_lists_are_kept():
    for f in (
        returned,
        passed_on,
        mutated,
        iterated,
        indexed_by_a_variable,
        alias_bound_in_a_branch,
        out_of_range,
        wrong_count,
        read_before_bound,
    ):
        assert not replaced(f, "p"), f.__name__
    for f, args in [
        (returned, (1.5,)),
        (passed_on, (1.5,)),
        (mutated, (1.5,)),
        (iterated, (1.5,)),
        (indexed_by_a_variable, (1.5, 1)),
    ]:
        fast, general = both_ways(f, *args)
        close(fast, general)


def test_errors_are_those_of_python():
    with pytest.raises(IndexError):
        dplus.grad(out_of_range)(1.0)
    with pytest.raises(ValueError):
        dplus.grad(wrong_count)(1.0)
    with pytest.raises(UnboundLocalError):
        dplus.grad(read_before_bound)(1.0, True)
    with pytest.raises(UnboundLocalError):
        dplus.grad(alias_bound_in_a_branch)(1.0, False)
    assert dplus.grad(alias_bound_in_a_branch)(1.0, True) == (3.0, None)


# --------------------------------------------------------------------------
# after inlining: a callee's returned list read by its caller


@dplus.define_dplus
def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def torque_z(r, f):
    t = cross(r, f)
    tx, ty, tz = t
    return tz + 0.5 * tx * ty


@SETTINGS
@given(st.lists(floats, min_size=3, max_size=3), st.lists(floats, min_size=3, max_size=3))
def test_an_inlined_callees_list_is_replaced(r, f):
    assert replaced(torque_z, "t")
    fast, general = both_ways(torque_z, list(r), list(f))
    close(fast, general)
    check_fd(torque_z, list(r), list(f))
    assert math.isfinite(torque_z(r, f))


# --------------------------------------------------------------------------
# a parameter read only at constant keys: read once, on entry


def fit_loss(params, data):
    loss = 0.0
    for x, y in data:
        pred = params["a"] * math.exp(-params["b"] * x) + params["c"]
        loss += (pred - y) ** 2
    return loss / len(data)


def reads_a_missing_key_only_sometimes(p, flag):
    if flag:
        return p["a"] * p["a"]
    return p["zz"] + p["a"]


def reads_positions_in_a_loop(w, xs):
    s = 0.0
    for x in xs:
        s = s + w[0] * x + w[-1] * x * x
    return s


class Lookup:
    """Not a dict: its reads run Python code, so they are not read once."""

    def __init__(self, d):
        self.d = d

    @dplus.define_dplus
    def __getitem__(self, k):
        return self.d[k] * 1.0


SHARED = {"a": 1.0, "b": 2.0}


def change_shared():
    SHARED["a"] = 10.0


def changes_a_parameter_it_reads(p, x):
    y = p["a"] * x
    change_shared()  # (an unknown function: it runs, unseen; p may be SHARED)
    return y + p["a"] * p["b"]


@SETTINGS
@given(
    a=floats,
    b=st.floats(0.0, 1.0),
    c=floats,
    xs=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=5),
)
def test_parameters_read_once_agree_with_the_general_path_and_finite_differences(a, b, c, xs):
    assert "_dp_holds_keys(params, ('a', 'b', 'c'))" in generated_source(fit_loss)
    params = {"a": a, "b": b, "c": c}
    data = [(x, 0.5 * x - 1.0) for x in xs]
    fast, general = both_ways(fit_loss, dict(params), list(data))
    close(fast, general)
    check_fd(fit_loss, dict(params), list(data))
    w = [a, b, c]
    fast, general = both_ways(reads_positions_in_a_loop, list(w), list(xs))
    close(fast, general)
    check_fd(reads_positions_in_a_loop, list(w), list(xs))
    # other inputs take the transform made without reading on entry
    fast, general = both_ways(fit_loss, Lookup(params), list(data))
    close(fast, general)
    fast, general = both_ways(reads_positions_in_a_loop, (a, b, c), list(xs))
    close(fast, general)


def test_keys_missing_on_entry_and_changed_parameters():
    assert dplus.grad(reads_a_missing_key_only_sometimes)({"a": 3.0}, True) == ({"a": 6.0}, None)
    with pytest.raises(KeyError):
        dplus.grad(reads_a_missing_key_only_sometimes)({"a": 3.0}, False)
    assert dplus.grad(changes_a_parameter_it_reads)({"a": 1.0, "b": 2.0}, 3.0) == (
        {"a": 5.0, "b": 1.0},
        1.0,
    )
    SHARED["a"] = 1.0  # (the call above changed it already)
    with pytest.raises(dplus.DplusError, match=r"p\['a'\] changed while a differentiated call"):
        dplus.grad(changes_a_parameter_it_reads)(SHARED, 3.0)  # read on entry, then changed


def one_read_in_a_loop(p, xs):
    s = 0.0
    for x in xs:
        s = s + p["k"] * x
    return s


def test_a_single_read_in_a_loop_is_read_once():
    assert "_dp_holds_keys(p, ('k',))" in generated_source(one_read_in_a_loop)
    fast, general = both_ways(one_read_in_a_loop, {"k": 1.5}, [1.0, 2.0, -0.5])
    close(fast, general)
    close(fast, ({"k": 2.5}, [1.5, 1.5, 1.5]))
