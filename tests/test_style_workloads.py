"""The styles family of the benchmarks (``benchmarks/workloads/styles``, issue #21): every
style of every computation, at a small size, gets dplus's gradient equal to the
hand-written one (on the fast paths and on the general path) and to central finite
differences, and leaves its arguments unchanged. Nothing is timed here."""

from __future__ import annotations

import copy
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dplus
from benchmarks.workloads import max_rel_error
from benchmarks.workloads._base import get_path, paths, set_path
from benchmarks.workloads.styles import STYLES
from dplus.transform.transformer import general_paths_only

IDS = [w.name for w in STYLES]


def small_args(w):
    return w.args(w.extra["test_size"] or w.check_size)


def finite_difference_errors(w, args, got, components=12, seed=0):
    """Worst relative error of ``got`` (one gradient per ``w.wrt`` entry) against central
    differences of the primal, on ``components`` components chosen at random."""
    comps = [(k, p) for k, i in enumerate(w.wrt) for p in paths(args[i])]
    comps = random.Random(seed).sample(comps, min(components, len(comps)))
    scale = max(abs(get_path(got[k], p)) for k, p in comps) or 1.0
    worst = 0.0
    for k, p in comps:
        i = w.wrt[k]
        x0 = get_path(args[i], p)
        h = 1e-6 * max(1.0, abs(x0))
        values = []
        for x in (x0 + h, x0 - h):
            a = list(copy.deepcopy(args))
            a[i] = set_path(a[i], p, x)
            values.append(w.primal(*a))
        fd = (values[0] - values[1]) / (2 * h)
        g = get_path(got[k], p)
        worst = max(worst, abs(fd - g) / max(abs(g), 1e-2 * scale))
    return worst


@pytest.mark.parametrize("w", STYLES, ids=IDS)
def test_style_gradient_agrees_with_hand_written_and_finite_differences(w):
    args = small_args(w)
    hand = w.hand_grad(*copy.deepcopy(args))
    fast = w.select(dplus.grad(w.primal)(*args))
    assert max_rel_error(list(fast), list(hand)) < 1e-8
    assert finite_difference_errors(w, args, fast) < 1e-5
    assert args == small_args(w)  # differentiation changed no argument


@pytest.mark.parametrize("w", STYLES, ids=IDS)
def test_style_gradient_on_the_general_path(w):
    args = small_args(w)
    hand = w.hand_grad(*copy.deepcopy(args))
    with general_paths_only():
        general = w.select(dplus.grad(w.primal)(*args))
    assert max_rel_error(list(general), list(hand)) < 1e-8


@pytest.mark.parametrize("w", STYLES, ids=IDS)
def test_style_primal_is_the_computation_of_its_group(w):
    """Every style computes the same value as the first style of its group."""
    first = next(v for v in STYLES if v.extra["group"] == w.extra["group"])
    args = small_args(w)
    assert w.primal(*copy.deepcopy(args)) == pytest.approx(first.primal(*args), rel=1e-12)
