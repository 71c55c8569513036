"""The NumPy family (issues #21 and #22): array code at the sizes where the cost of each
operation's bookkeeping decides the gradient's cost: a tanh network on a batch of 64,
ridge least squares, a stencil written in place. The same source runs under every tool,
its global ``np`` rebound to the tool's array library (``autograd.numpy``, ``jax.numpy``,
a small torch namespace); each gradient is compared with the hand-written one before it is
timed. Cells give the gradient's median time and its ratio to the primal's; ``(best)``
is the ratio of the fastest repeats, less disturbed by other load.

Run: ``python -m benchmarks --only arrays`` (``--tools`` picks the columns).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .timing import TooSlow, autorange, call_once, fmt_seconds
from .tools import rebind
from .workloads.arrays import ARRAY_WORKLOADS, ArrayWorkload

if TYPE_CHECKING:
    from .runner import Config, Report

GOAL = 3.0  # issue #22: the small network at most 3x its primal
REL_TOL = 1e-6


def run_arrays(cfg: Config, out: Report) -> None:
    import numpy as np

    out("NumPy workloads (issues #21, #22): gradient time and its ratio to the primal")
    out(f"load average before: {_load()}")
    tools = ["primal", "hand"] + [t for t in cfg.tools if t not in ("primal", "hand")]
    header = f"  {'workload':15}" + "".join(f"{t:>22}" for t in tools)
    out(header)
    for w in ARRAY_WORKLOADS:
        args = w.make_args()
        expected = w.hand_grad(*args)
        cells: list[str] = []
        primal_time = primal_best = None
        for tool in tools:
            try:
                run, to_numpy = _prepare(tool, w, args)
                first, raw = call_once(run, cfg.cap)
                if tool != "primal":
                    _check(np, to_numpy(raw), expected, w, tool)
                t = autorange(run, cfg.budget, first=first, repeats=cfg.repeats, cap=cfg.cap)
            except TooSlow:
                cells.append("too slow")
                continue
            except Exception as e:  # a tool that refuses (in-place writes) or fails
                cells.append(f"error: {type(e).__name__}"[:21])
                continue
            if tool == "primal":
                primal_time, primal_best = t.seconds, t.best
                cells.append(fmt_seconds(t.seconds))
            elif primal_time:
                cells.append(f"{t.seconds / primal_time:.1f}x ({t.best / primal_best:.1f}x)")
            else:
                cells.append(fmt_seconds(t.seconds))
        out(f"  {w.name:15}" + "".join(f"{c:>22}" for c in cells))
    out(f"load average after: {_load()}")
    out(f"goal (issue #22): the tanh network at most {GOAL:g}x its primal under dplus")
    out()


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _check(np: Any, got: tuple, expected: tuple, w: ArrayWorkload, tool: str) -> None:
    for g, e in zip(got, expected):
        scale = max(1.0, float(np.max(np.abs(e))))
        if np.shape(g) != np.shape(e) or float(np.max(np.abs(np.asarray(g) - e))) > REL_TOL * scale:
            raise AssertionError(f"{tool}'s gradient of {w.name} differs from the hand-written one")


def _prepare(tool: str, w: ArrayWorkload, args: tuple) -> tuple[Callable[[], Any], Callable]:
    """The timed call of ``tool`` on ``w`` and how to read its result as NumPy arrays."""
    if tool == "primal":
        return (lambda: w.primal(*args)), (lambda raw: raw)
    if tool == "hand":
        return (lambda: w.hand_grad(*args)), (lambda raw: raw)
    if tool == "dplus":
        import dplus

        g = dplus.grad(w.primal, argnums=w.wrt)
        return (lambda: g(*args)), (lambda raw: tuple(raw))
    if tool == "autograd":
        import autograd
        import autograd.numpy as anp

        f = rebind(w.primal, {"np": anp})
        g = autograd.grad(_packed(f, w, args), 0)
        wrt = tuple(args[i] for i in w.wrt)
        return (lambda: g(wrt)), (lambda raw: tuple(raw))
    if tool in ("jax", "jax-jit"):
        os.environ.setdefault(
            "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        f = rebind(w.primal, {"np": jnp})
        g = jax.grad(f, argnums=w.wrt)
        if tool == "jax-jit":
            g = jax.jit(g)
        jargs = tuple(jnp.asarray(a) for a in args)
        return (lambda: jax.block_until_ready(g(*jargs))), (
            lambda raw: tuple(np_array(x) for x in raw)
        )
    if tool == "torch":
        import torch

        torch.set_num_threads(1)
        f = rebind(w.primal, {"np": _torch_namespace(torch)})
        targs = [torch.tensor(a) for a in args]
        wrt = [targs[i].requires_grad_() for i in w.wrt]

        def run() -> Any:
            return torch.autograd.grad(f(*targs), wrt)

        return run, (lambda raw: tuple(x.numpy() for x in raw))
    raise ValueError(f"no tool {tool!r} for the NumPy workloads")


def np_array(x: Any) -> Any:
    import numpy as np

    return np.asarray(x)


def _packed(f: Callable, w: ArrayWorkload, args: tuple) -> Callable:
    """``f`` as a function of the tuple of the arguments it is differentiated in."""

    def packed(wrt: tuple) -> Any:
        full = list(args)
        for i, a in zip(w.wrt, wrt):
            full[i] = a
        return f(*full)

    return packed


def _torch_namespace(torch: Any) -> types.SimpleNamespace:
    """The NumPy functions the workloads call, as torch spells them."""

    def reduce(fn: Callable) -> Callable:
        def reduced(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
            return fn(x) if axis is None else fn(x, dim=axis, keepdim=keepdims)

        return reduced

    return types.SimpleNamespace(
        tanh=torch.tanh,
        exp=torch.exp,
        log=torch.log,
        sum=reduce(torch.sum),
        max=reduce(torch.amax),
    )
