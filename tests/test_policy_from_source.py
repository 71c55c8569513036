"""The shipped policy that transforms undecorated pure-Python helpers from their source
(issue #23; issue #26: a lifted helper behaves as a decorated one)."""

from __future__ import annotations

import math
import threading

import _policy_module as m
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import current_unknown_transform, grad, transform_from_source


@settings(max_examples=20, deadline=None)
@given(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0))
def test_undecorated_helpers_and_methods_are_differentiated(x, w):
    with current_unknown_transform(transform_from_source):
        g = grad(m.uses_helpers)(x, w)
    assert g[0] == pytest.approx(3 * x * x + w * math.cos(x), rel=1e-9, abs=1e-12)
    assert g[1] == pytest.approx(math.sin(x), rel=1e-9, abs=1e-12)


def test_a_list_grown_after_a_lifted_helper_read_it():
    row = [1.5, 2.0]
    with current_unknown_transform(transform_from_source):
        assert grad(m.grows_after_count)(row) == ([2.0, 0.0],)  # shaped like the list at the call
    assert row == [1.5, 2.0, 0.0]  # mutated as the plain call mutates it


def test_builtins_fall_back_to_the_default_policy():
    with current_unknown_transform(transform_from_source):
        assert grad(m.calls_a_builtin_helper)(3.0) == (7.0,)  # math.fsum has a rule
        with pytest.raises(dplus.UnknownTransformError, match="hex"):
            grad(lambda x: float.fromhex(x.hex()) * x)(2.0)


def test_a_lifted_helper_is_registered_as_a_decorated_one():
    with current_unknown_transform(transform_from_source):
        grad(m.cube)(1.0)
    assert dplus.runtime.registry.lookup_transform(m.square) is not None
    assert grad(m.cube)(2.0) == (12.0,)  # stays differentiable afterwards, as if decorated


def test_set_for_program_and_threads():
    seen = []
    try:
        current_unknown_transform.set_for_program(transform_from_source)
        worker = threading.Thread(target=lambda: seen.append(current_unknown_transform()))
        worker.start()
        worker.join()
        assert seen == [transform_from_source]
        with current_unknown_transform(dplus.error_unknown_transform):
            assert current_unknown_transform() is dplus.error_unknown_transform
        assert current_unknown_transform() is transform_from_source
    finally:
        current_unknown_transform.set_for_program(dplus.error_non_zero_sensitivity_transform)
    assert current_unknown_transform() is dplus.error_non_zero_sensitivity_transform
