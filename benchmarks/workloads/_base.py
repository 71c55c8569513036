"""The workload description shared by every benchmark, plus tree helpers.

A workload is a plain-Python function (the *primal*) and a hand-written
gradient.  ``hand_grad(*args)`` returns one gradient per index in ``wrt``
(in that order), each shaped like its argument: floats, lists, dicts.
``select(full)`` picks those entries out of a ``dplus.grad``-style tuple (one
entry per positional argument), so

    w.select(dplus.grad(w.primal)(*w.args()))  ~=  w.hand_grad(*w.args())

is the check that the test-suite and the harness both make.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Workload",
    "differentiable",
    "dplus_setup_error",
    "leaves",
    "paths",
    "get_path",
    "set_path",
    "to_floats",
    "max_rel_error",
    "unflatten",
]


# --------------------------------------------------------------------------
# @differentiable: dplus.define_dplus when dplus is importable, else identity.
# Helper functions called from a primal (and recursive functions) must be
# registered with dplus (spec section 6: the default policy does not transform
# unknown callables).  Registering never changes the function, so every other
# tool calls exactly the same plain function.

_SETUP_ERRORS: list[str] = []


def differentiable(f: Callable) -> Callable:
    try:
        import dplus
    except Exception as e:  # dplus not importable: the plain function still works
        _SETUP_ERRORS.append(f"import dplus: {type(e).__name__}: {e}")
        return f
    try:
        dplus.define_dplus(f)
    except Exception as e:
        _SETUP_ERRORS.append(f"define_dplus({f.__qualname__}): {type(e).__name__}: {e}")
    return f


def dplus_setup_error() -> str | None:
    """The first error met while registering workload helpers with dplus, if any."""
    return _SETUP_ERRORS[0] if _SETUP_ERRORS else None


# --------------------------------------------------------------------------
# trees: nested lists / tuples / dicts of floats


def paths(tree: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Paths (tuples of keys/indices) of every number inside ``tree``, in order."""
    if isinstance(tree, dict):
        for k in tree:
            yield from paths(tree[k], prefix + (k,))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from paths(v, prefix + (i,))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield prefix
    else:
        raise TypeError(f"not a tree of numbers: {type(tree).__name__} at {prefix}")


def leaves(tree: Any) -> list:
    """The numbers inside ``tree``, in ``paths`` order."""
    return [get_path(tree, p) for p in paths(tree)]


def get_path(tree: Any, path: tuple) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def set_path(tree: Any, path: tuple, value: Any) -> Any:
    """Return ``tree`` with the number at ``path`` replaced (lists/dicts in place, tuples rebuilt)."""
    if not path:
        return value
    k, rest = path[0], path[1:]
    if isinstance(tree, tuple):
        items = list(tree)
        items[k] = set_path(items[k], rest, value)
        return tuple(items)
    tree[k] = set_path(tree[k], rest, value)
    return tree


def unflatten(template: Any, values: Iterator) -> Any:
    """Rebuild the shape of ``template`` taking its numbers from the iterator ``values``."""
    if isinstance(template, dict):
        return {k: unflatten(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [unflatten(v, values) for v in template]
    if isinstance(template, tuple):
        return tuple(unflatten(v, values) for v in template)
    return next(values)


def to_floats(tree: Any) -> Any:
    """Convert a gradient of any tool (numpy / jax / torch scalars inside lists, tuples,
    dicts) into plain floats with the same nesting."""
    if isinstance(tree, dict):
        return {k: to_floats(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return (
            type(tree)(to_floats(v) for v in tree)
            if isinstance(tree, tuple)
            else [to_floats(v) for v in tree]
        )
    if hasattr(tree, "tolist") and getattr(tree, "ndim", 0) > 0:  # array-valued gradient
        return to_floats(tree.tolist())
    return float(tree)


def max_rel_error(got: Any, ref: Any) -> float:
    """Largest componentwise error of ``got`` against ``ref``, relative to
    ``max(|ref_i|, 1e-3 * max_j |ref_j|)`` (so tiny components of a large gradient
    are compared on the gradient's scale).  Raises ``ValueError`` on a shape mismatch."""
    got_l, ref_l = _aligned_leaves(got, ref)
    if not ref_l:
        return 0.0
    scale = max(abs(r) for r in ref_l)
    worst = 0.0
    for g, r in zip(got_l, ref_l):
        g = float(g)
        if math.isnan(g) or math.isinf(g):
            return math.inf
        denom = max(abs(r), 1e-3 * scale)
        err = abs(g - r) / denom if denom > 0 else abs(g - r)
        worst = max(worst, err)
    return worst


def _aligned_leaves(got: Any, ref: Any, path: tuple = ()) -> tuple[list, list]:
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(got) != set(ref):
            raise ValueError(
                f"at {path or 'top'}: expected a dict with keys {sorted(ref)}, got {_describe(got)}"
            )
        gs, rs = [], []
        for k in ref:
            a, b = _aligned_leaves(got[k], ref[k], path + (k,))
            gs += a
            rs += b
        return gs, rs
    if isinstance(ref, (list, tuple)):
        if hasattr(got, "tolist") and getattr(got, "ndim", 0) > 0:
            got = got.tolist()
        if not isinstance(got, (list, tuple)) or len(got) != len(ref):
            raise ValueError(
                f"at {path or 'top'}: expected a sequence of length {len(ref)}, got {_describe(got)}"
            )
        gs, rs = [], []
        for i, (g, r) in enumerate(zip(got, ref)):
            a, b = _aligned_leaves(g, r, path + (i,))
            gs += a
            rs += b
        return gs, rs
    try:
        return [float(got)], [float(ref)]
    except (TypeError, ValueError):
        raise ValueError(f"at {path or 'top'}: expected a number, got {_describe(got)}") from None


def _describe(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} of length {len(v)}"
    if isinstance(v, dict):
        return f"dict with keys {sorted(map(str, v))}"
    return f"{type(v).__name__} {v!r:.60}"


# --------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    title: str
    primal: Callable[..., float]
    hand_grad: Callable[..., tuple]
    make_args: Callable[[int], tuple]
    wrt: tuple[int, ...]
    default_size: int
    check_size: int | None = None  # size used for the finite-difference check (None: default)
    size_label: str = "n"
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def args(self, size: int | None = None) -> tuple:
        """Fresh arguments (deterministic) at ``size`` (default: ``default_size``)."""
        return self.make_args(self.default_size if size is None else size)

    def select(self, full: tuple) -> tuple:
        """The entries of a one-per-positional-argument gradient tuple that ``hand_grad`` returns."""
        return tuple(full[i] for i in self.wrt)

    def check_hand_grad(
        self, size: int | None = None, max_components: int = 40, rel: float = 1e-5, seed: int = 0
    ) -> float:
        """Compare ``hand_grad`` with central finite differences on up to
        ``max_components`` components of the ``wrt`` arguments (chosen at random
        with ``seed``); return the worst relative error, raise ``AssertionError``
        when it exceeds ``rel``."""
        size = self.check_size if size is None else size
        args = self.args(size)
        hand = self.hand_grad(*copy.deepcopy(args))
        comps = [(k, p) for k, i in enumerate(self.wrt) for p in paths(args[i])]
        if len(comps) > max_components:
            comps = random.Random(seed).sample(comps, max_components)
        hand_scale = max((abs(v) for v in leaves(list(hand))), default=0.0)
        worst, where = 0.0, None
        for k, p in comps:
            i = self.wrt[k]
            x0 = get_path(args[i], p)
            h = 1e-6 * max(1.0, abs(x0))
            vals = []
            for xv in (x0 + h, x0 - h):
                a = list(copy.deepcopy(args))
                a[i] = set_path(a[i], p, xv)
                vals.append(self.primal(*a))
            fd = (vals[0] - vals[1]) / (2 * h)
            g = get_path(hand[k], p)
            err = abs(fd - g) / max(abs(g), 1e-2 * hand_scale, 1e-12)
            if err > worst:
                worst, where = err, (i, p, g, fd)
        if worst > rel:
            i, p, g, fd = where
            raise AssertionError(
                f"{self.name}: hand-written gradient disagrees with finite differences at argument {i}, "
                f"component {list(p)}: hand {g!r}, finite differences {fd!r} (relative error {worst:.2e})"
            )
        return worst

    def check_grad(
        self, grad_fn: Callable[..., tuple], size: int | None = None, rel: float = 1e-8
    ) -> float:
        """Compare a ``dplus.grad``-style gradient function (one entry per positional
        argument) with ``hand_grad`` at ``size``; return the worst relative error, raise
        ``AssertionError`` when it exceeds ``rel``.  ``w.check_grad(dplus.grad(w.primal))``."""
        args = self.args(size)
        ref = self.hand_grad(*copy.deepcopy(args))
        got = self.select(grad_fn(*args))
        err = max_rel_error(got, ref)
        if not err <= rel:
            raise AssertionError(
                f"{self.name}: gradient differs from the hand-written one "
                f"(max relative error {err:.3g} > {rel:g})"
            )
        return err
