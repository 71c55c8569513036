"""The foundations: the linear interface, BoxSensitivities, the registry and the policies."""

import operator
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import (
    Box,
    BoxSensitivities,
    ProcResult,
    add,
    coerce_zero,
    current_unknown_transform,
    dot,
    gen_zero,
    scale,
    zero,
)
from dplus.runtime.conformance import conforms
from dplus.runtime.linear import is_zero_sensitivity

small = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)


def structures(leaf=small):
    """Nested tuples, lists and dicts of floats (sensitivities of a common shape)."""
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner),
            st.lists(inner, min_size=1, max_size=3),
            st.dictionaries(st.sampled_from("abc"), inner, min_size=1, max_size=3),
        ),
        max_leaves=8,
    )


def same_shape(v, seed):
    """A value shaped like ``v`` whose leaves are ``seed`` transformed."""
    if isinstance(v, tuple):
        return tuple(same_shape(e, seed) for e in v)
    if isinstance(v, list):
        return [same_shape(e, seed) for e in v]
    if isinstance(v, dict):
        return {k: same_shape(e, seed) for k, e in v.items()}
    return seed(v)


def approx(u, v, tol=1e-9):
    if isinstance(u, (tuple, list)):
        return (
            type(u) is type(v) and len(u) == len(v) and all(approx(a, b, tol) for a, b in zip(u, v))
        )
    if isinstance(u, dict):
        return u.keys() == v.keys() and all(approx(u[k], v[k], tol) for k in u)
    return abs(u - v) <= tol * max(1.0, abs(u), abs(v))


@settings(max_examples=60, deadline=None)
@given(structures())
def test_vector_space_laws(u):
    v = same_shape(u, lambda x: 2.0 * x - 1.0)
    w = same_shape(u, lambda x: 0.5 * x + 3.0)
    assert approx(add(u, v), add(v, u))  # commutative
    assert approx(add(add(u, v), w), add(u, add(v, w)))  # associative
    assert approx(add(u, zero(u)), u)  # the concrete zero is the identity
    assert approx(scale(add(u, v), 3.0), add(scale(u, 3.0), scale(v, 3.0)))  # distributive
    assert approx(scale(scale(u, 2.0), 0.5), u)
    assert abs(dot(u, v) - dot(v, u)) <= 1e-9 * max(1.0, abs(dot(u, v)))  # symmetric
    assert abs(dot(add(u, w), v) - (dot(u, v) + dot(w, v))) <= 1e-6 * max(
        1.0, abs(dot(u, v)) + abs(dot(w, v))
    )


@settings(max_examples=60, deadline=None)
@given(structures())
def test_gen_zero_is_the_identity_everywhere(u):
    assert add(gen_zero, u) == u and add(u, gen_zero) == u
    assert scale(gen_zero, 5.0) is gen_zero
    assert dot(gen_zero, u) == 0.0
    assert coerce_zero(gen_zero, u) == zero(u)
    assert is_zero_sensitivity(zero(u))


@settings(max_examples=60, deadline=None)
@given(structures())
def test_coerce_zero_replaces_gen_zero_inside_nested_structures(u):
    holey = same_shape(u, lambda x: gen_zero if x < 0 else x)
    coerced = coerce_zero(holey, u)
    assert approx(coerced, same_shape(u, lambda x: 0.0 if x < 0 else x))

    def leaves(v):
        if isinstance(v, (tuple, list)):
            return [x for e in v for x in leaves(e)]
        if isinstance(v, dict):
            return [x for e in v.values() for x in leaves(e)]
        return [v]

    assert gen_zero not in leaves(coerced)


def test_zero_conforms_to_every_kind_of_value():
    assert zero(2.5) == 0.0 and type(zero(3)) is int and zero(1j) == 0j
    assert (
        zero(True) is None and zero("s") is None and zero(None) is None and zero(range(3)) is None
    )
    assert zero((1.0, [2.0, {"a": 3.0}])) == (0.0, [0.0, {"a": 0.0}])
    assert zero(Box(1.0)) == Box(0.0)
    assert zero(ProcResult(1.0, lambda A, B: ((), A))).primal == 0.0
    assert (zero(np.ones(3)) == 0).all()


def test_arrays_and_procresults_in_the_linear_interface():
    a = np.arange(3.0)
    assert (add(a, a) == 2 * a).all() and (scale(a, 2.0) == 2 * a).all() and dot(a, a) == 5.0
    p = add(ProcResult(1.0, gen_zero), ProcResult(2.0, gen_zero))
    assert p.primal == 3.0


def test_conformance():
    assert conforms((1.0, [2.0]), (3.0, [4.0]))
    assert not conforms([1.0, 0.0], (3.0, 4.0))
    assert not conforms([1.0], [1.0, 2.0])
    assert conforms(None, "text") and not conforms(1.0, "text")
    with pytest.raises(
        dplus.SensitivityError, match="length 3 given where the result has length 2"
    ):
        dplus.runtime.conformance.check_conforms([1.0, 2.0, 3.0], [0.0, 0.0])


def test_box_sensitivities_are_keyed_by_identity_and_keep_keys_alive():
    Abox = BoxSensitivities()
    a, b = [1.0], [1.0]  # equal but distinct
    Abox.accumulate(a, 2.0)
    assert a in Abox and b not in Abox
    Abox.accumulate(a, 3.0)
    assert Abox[a] == 5.0 and Abox.get(b) is gen_zero
    key = [7.0]
    Abox[key] = 1.0
    del key  # the map keeps the key alive, so its id is never reused while it lives
    assert len(Abox) == 2 and any(k == [7.0] for k in Abox)
    assert Abox.pop(a) == 5.0 and a not in Abox


def test_registry_registering_does_not_touch_the_function_and_replaces():
    def cube(x):
        return x * x * x

    before = cube.__code__
    dplus.register_backprop(cube)(lambda x: lambda A, Abox: ((), 3.0 * x * x * A))
    assert cube.__code__ is before and cube(2.0) == 8.0
    assert dplus.grad(cube)(2.0) == (12.0,)
    dplus.register_primitive(cube, lambda x: ProcResult(cube(x), lambda A, Abox: ((), 0.0)))
    assert dplus.grad(cube)(2.0) == (0.0,)  # re-registration replaces


def test_methods_of_builtin_types_are_found_through_their_descriptors():
    from dplus.runtime.registry import lookup_transform

    xs = [1.0]
    assert lookup_transform(xs.append) is not None
    assert lookup_transform(list.append) is not None
    assert lookup_transform({}.get) is not None


def test_policy_scope_restores_on_exit_and_on_exceptions():
    default = current_unknown_transform()
    assert default is dplus.error_non_zero_sensitivity_transform
    with current_unknown_transform(dplus.error_unknown_transform):
        assert current_unknown_transform() is dplus.error_unknown_transform
    assert current_unknown_transform() is default
    with pytest.raises(RuntimeError):
        with current_unknown_transform(dplus.error_unknown_proc_transform):
            raise RuntimeError("boom")
    assert current_unknown_transform() is default


def test_policy_set_in_one_thread_does_not_leak_into_another():
    seen = []
    inside = threading.Event()
    release = threading.Event()

    def other():
        inside.wait()
        seen.append(current_unknown_transform())
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with current_unknown_transform(dplus.error_unknown_transform):
        inside.set()
        release.wait()
    t.join()
    assert seen == [dplus.error_non_zero_sensitivity_transform]


def test_policies_on_non_callables_and_callables():
    assert dplus.error_non_zero_sensitivity_transform(3.0, "x") == 3.0
    assert dplus.error_unknown_proc_transform(3.0, "x") == 3.0
    with pytest.raises(dplus.UnknownTransformError):
        dplus.error_unknown_proc_transform(len, "len")
    with pytest.raises(dplus.UnknownTransformError):
        dplus.error_unknown_transform(3.0, "x")


def test_lift_dplus_of_primitives_and_the_result_accessors():
    r = dplus.lift_dplus(operator.mul)(4.0, 2.5)
    assert dplus.primal(r) == 10.0
    assert dplus.backprop(r)(1.0, BoxSensitivities()) == ((), 2.5, 4.0)
    with pytest.raises(AttributeError):
        r.primal = 3.0  # frozen
