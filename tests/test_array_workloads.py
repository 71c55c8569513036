"""The NumPy benchmark workloads (``benchmarks/workloads/arrays``): each hand-written
gradient agrees with central finite differences in random directions, and dplus's
gradient agrees with it on the fast and the general path, the arguments left unchanged.
Nothing is timed here."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dplus
from dplus.transform.transformer import general_paths_only

np = pytest.importorskip("numpy")
from benchmarks.workloads.arrays import ARRAY_WORKLOADS  # noqa: E402  (NumPy is optional)

IDS = [w.name for w in ARRAY_WORKLOADS]


@pytest.mark.parametrize("w", ARRAY_WORKLOADS, ids=IDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hand_written_gradient_agrees_with_finite_differences(w, seed):
    args = w.make_args()
    hand = w.hand_grad(*args)
    r = np.random.default_rng(seed)
    for k, i in enumerate(w.wrt):
        d = r.normal(size=np.shape(args[i]))
        eps = 1e-6
        up, down = list(args), list(args)
        up[i] = args[i] + eps * d
        down[i] = args[i] - eps * d
        fd = (w.primal(*up) - w.primal(*down)) / (2 * eps)
        assert abs(fd - np.sum(hand[k] * d)) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("w", ARRAY_WORKLOADS, ids=IDS)
def test_dplus_gradient_agrees_with_the_hand_written_one_on_both_paths(w):
    args = w.make_args()
    before = [a.copy() for a in args]
    hand = w.hand_grad(*args)
    fast = dplus.grad(w.primal, argnums=w.wrt)(*args)
    with general_paths_only():
        general = dplus.grad(w.primal, argnums=w.wrt)(*args)
    for got in (fast, general):
        for g, h in zip(got, hand):
            assert g.shape == h.shape
            np.testing.assert_allclose(g, h, rtol=1e-9, atol=1e-12)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


# ``_fit`` (a sensitivity made to conform to its argument) answers an array of the
# argument's own shape and float dtype at once: the same as its general branch gives
@pytest.mark.parametrize("seed", range(40))
def test_fit_of_a_conforming_array_equals_the_general_branch(seed):
    from dplus.primitives.operator_operands import _fit, _fit_slow

    r = np.random.default_rng(seed)
    shapes = [(), (1,), (3,), (2, 3), (1, 3), (2, 1), (4, 2, 3)]
    dtypes = [np.float64, np.float32, np.complex128, np.int64, np.bool_, np.float16]
    v_shape = shapes[r.integers(len(shapes))]
    other = shapes[r.integers(len(shapes))] if r.random() < 0.5 else v_shape
    try:  # the sensitivity of a result broadcast from the argument and another operand
        g_shape = np.broadcast_shapes(v_shape, other)
    except ValueError:
        g_shape = v_shape
    v = r.normal(size=v_shape).astype(dtypes[r.integers(len(dtypes))])
    g_dtype = np.dtype(dtypes[r.integers(len(dtypes))] if r.random() < 0.5 else v.dtype)
    g = r.normal(size=g_shape)
    if g_dtype.kind == "c":
        g = g + 1j * r.normal(size=g_shape)
    g = g.astype(g_dtype)
    fast, general = _fit(g, v), _fit_slow(g, v)
    if general is dplus.runtime.linear.gen_zero:
        assert fast is general
    else:
        assert type(fast) is type(general)
        assert np.shape(fast) == np.shape(general)
        assert np.asarray(fast).dtype == np.asarray(general).dtype
        np.testing.assert_array_equal(fast, general)
