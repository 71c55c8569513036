"""The benchmark workloads (``benchmarks/workloads``): each hand-written gradient agrees
with finite differences, and dplus's gradient agrees with the hand-written one, on the
fast paths and on the general path, at small sizes. Nothing is timed here (the harness
times; tests never assert timings)."""

from __future__ import annotations

import copy
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dplus
from benchmarks.workloads import ALL, max_rel_error
from dplus.transform.transformer import general_paths_only

SMALL = {
    "scalar_loop": 30,
    "dot": 40,
    "matvec": 6,
    "mlp": 8,
    "particles": 25,
    "dict_model": 20,
    "recursive": 15,
}


@pytest.mark.parametrize("w", ALL, ids=[w.name for w in ALL])
def test_hand_written_gradient_agrees_with_finite_differences(w):
    assert w.check_hand_grad() < 1e-5  # at the workload's own check size


@pytest.mark.parametrize("w", ALL, ids=[w.name for w in ALL])
def test_dplus_gradient_agrees_with_the_hand_written_one_on_both_paths(w):
    size = SMALL.get(w.name)
    args = w.args(size)
    hand = w.hand_grad(*copy.deepcopy(args))
    fast = w.select(dplus.grad(w.primal)(*copy.deepcopy(args)))
    assert max_rel_error(list(fast), list(hand)) < 1e-8
    with general_paths_only():
        general = w.select(dplus.grad(w.primal)(*copy.deepcopy(args)))
    assert max_rel_error(list(general), list(hand)) < 1e-8
    # the arguments are unchanged by differentiation (the workloads copy what they mutate)
    assert args == w.args(size)


@pytest.mark.parametrize("seed", range(3))
def test_the_reduction_styles_of_the_memory_section(seed):
    """Each style of ``benchmarks/workloads/reductions.py`` differentiated against central
    differences (their memory is what the harness measures)."""
    import random

    from benchmarks.workloads.reductions import STYLES

    rng = random.Random(seed)
    xs = [rng.uniform(-2, 2) for _ in range(7)]
    ys = [rng.uniform(-2, 2) for _ in range(7)]
    h = 1e-6
    for name, f, arity in STYLES:
        args = (xs, ys)[:arity]
        g = dplus.grad(f)(*[list(a) for a in args])
        for j, a in enumerate(args):
            for i in range(len(a)):
                up = [list(b) for b in args]
                down = [list(b) for b in args]
                up[j][i] += h
                down[j][i] -= h
                fd = (f(*up) - f(*down)) / (2 * h)
                assert abs(g[j][i] - fd) < 1e-6 * max(1.0, abs(fd)), (name, j, i)
