"""grad in one generated function for small functions of vectors (dplus/fused.py).

Parameters read only at constant positions are read once into scalars; the results are
compared with the general path (``general_paths_only()`` has no fused function) in value
and in kind (list or tuple, float or int), with finite differences, and on every input the
fused function refuses (wrong lengths, other element kinds), where the general way must
answer as it always did, Python's own errors included.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, check_fd, close

import dplus
from dplus.transform.plus_functions import plus_function_for

SETTINGS = settings(max_examples=30, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


def fused(f):
    return getattr(plus_function_for(f), "__dplus_fused__", None)


def energy(p, k):
    x, y, z = p
    return 0.5 * k * (x * x + y * y + z * z) + math.sin(x * y) * z


def ends(p, s):
    return p[0] * s + p[-1] * p[-1] - s * p[1]


def through_a_copy(p):
    q = p
    a, b = q
    return a * q[1] + b


@dplus.define_dplus
def cross_z(a, b):
    return a[0] * b[1] - a[1] * b[0]


def inlined_then_read(a, b, c):
    u = cross_z(a, b)  # inlined: its reads of a and b are reads of the parameters
    w = cross_z(b, c)
    return u * c[0] + w


def _same_kinds(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_kinds(x, y)


@SETTINGS
@given(
    p=st.lists(floats, min_size=3, max_size=3),
    k=floats,
    extra=st.lists(floats, max_size=3),
    as_tuple=st.booleans(),
)
def test_vectors_read_at_positions_agree_with_the_general_path(p, k, extra, as_tuple):
    for f in (energy, ends, through_a_copy, inlined_then_read):
        assert fused(f) is not None, f.__name__
    vec = tuple if as_tuple else list
    cases = [
        (energy, (vec(p), k)),
        (ends, (vec(p + extra), k)),
        (through_a_copy, (vec(p[:2]),)),
        (inlined_then_read, (vec(p[:2]), vec([k, 1.0]), vec(p[1:]))),
    ]
    for f, args in cases:
        fast, general = both_ways(f, *args)
        _same_kinds(fast, general)
        close(list(fast), list(general))
        if not as_tuple:
            check_fd(f, *args)


def test_inputs_the_fused_function_refuses_take_the_general_way():
    # the same errors as Python's
    with pytest.raises(ValueError):
        dplus.grad(energy)([1.0, 2.0], 1.0)  # unpacking needs exactly three
    with pytest.raises(IndexError):
        dplus.grad(ends)([1.0], 1.0)
    assert fused(energy)([1.0, 2.0], 1.0) is None and fused(ends)([1.0], 1.0) is None
    # other kinds: ints, a bool, an int weight, objects
    for f, args in [
        (energy, ([1, 2, 3], 2.0)),
        (ends, ([1.0, 2, 3.0, True], 0.5)),
        (energy, ([1.0, 2.0, 3.0], 2)),
        (through_a_copy, ([1.0, 2.0],)),
    ]:
        fast, general = both_ways(f, *args)
        _same_kinds(fast, general)
        close(list(fast), list(general))
    assert fused(energy)([1, 2, 3], 2.0) is None
    assert fused(ends)([1.0, 2, 3.0, True], 0.5) is None  # an unread element that is not a float


def rebinds(p):
    p = [p[0] * 2.0, p[1]]  # the parameter is rebound: not read at positions only
    return p[0] * p[1]


def passes_on(p):
    return sum(p) * p[0]


def test_parameters_used_otherwise_keep_the_general_way():
    assert fused(rebinds) is None and fused(passes_on) is None
    for f in (rebinds, passes_on):
        fast, general = both_ways(f, [1.5, -0.5])
        close(fast, general)


def test_the_fused_function_is_shown():
    text = dplus.show(energy)
    assert "def energy__grad(p, k):" in text and "_dp_len(p)" in text
