"""Adapters: how each tool computes the gradient of a workload.

Every AD tool runs *the same source* as the plain-Python primal: the
workload's module functions are cloned with the global name ``math`` bound to
the tool's math module (``autograd.numpy``, ``jax.numpy``, ``torch``), as a
user who writes ``import autograd.numpy as math`` would do.  Only under
``jax.jit`` is ``max`` bound as well (to ``jnp.maximum``), because traced
values cannot be compared in Python there.

Inputs are converted into the tool's own types *before* timing (0-d JAX arrays,
float64 leaf tensors with ``requires_grad``), the way a user of that tool keeps
their parameters; the timed call is forward + backward, producing the gradient
in the tool's own types.

``Tool.prepare(workload, args)`` returns a :class:`Prepared`: ``run()`` computes
the gradient (this is what is timed), ``to_wrt(raw)`` turns its result into the
``hand_grad`` layout, plain floats inside, for the check.
"""

from __future__ import annotations

import functools
import importlib
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .workloads._base import Workload, leaves, to_floats, unflatten

__all__ = ["Prepared", "Tool", "TOOLS", "rebind", "tool_versions"]


@dataclass
class Prepared:
    run: Callable[[], Any]
    to_wrt: Callable[[Any], tuple]
    # an optional call that is run once before checking (e.g. a jit compile); its time is
    # reported separately
    compile: Callable[[], Any] | None = None


def rebind(fn: Callable, overrides: dict[str, Any]) -> Callable:
    """``fn`` (a module-level function) with ``overrides`` bound in a copy of its globals;
    every function of the same module is cloned into the copy too, so helpers and
    recursive calls see the overrides as well."""
    g0 = fn.__globals__
    g = dict(g0)
    g.update(overrides)
    for name, v in list(g.items()):
        if isinstance(v, types.FunctionType) and v.__globals__ is g0:
            g[name] = _clone_function(v, g)
        elif isinstance(v, type) and _methods_reading(v, g0):
            g[name] = _rebound_class(v, g0, g)
    return g[fn.__name__]


def _clone_function(f: types.FunctionType, g: dict) -> types.FunctionType:
    clone = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    clone.__kwdefaults__ = f.__kwdefaults__
    return clone


def _methods_reading(cls: type, g0: dict) -> dict[str, types.FunctionType]:
    """The methods defined in ``cls``'s body that read the module namespace ``g0``."""
    return {
        k: v
        for k, v in vars(cls).items()
        if isinstance(v, types.FunctionType) and v.__globals__ is g0
    }


def _rebound_class(cls: type, g0: dict, g: dict) -> type:
    """A subclass of ``cls`` whose methods read ``g`` instead of ``g0``: instances that the
    rebound functions construct (``Particle(...)``) call methods seeing the overrides."""
    methods = {k: _clone_function(v, g) for k, v in _methods_reading(cls, g0).items()}
    return type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__})


def _math_namespace(name: str, funcs: dict[str, Callable]) -> types.SimpleNamespace:
    ns = types.SimpleNamespace(pi=math.pi, e=math.e, inf=math.inf)
    for k, f in funcs.items():
        setattr(ns, k, f)
    ns.__name__ = name
    return ns


_MATH_FUNCS = ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "atan2", "log1p", "expm1")


class Tool:
    """Base class.  ``name`` is the column header; ``module`` the import that must work."""

    name = "?"
    module: str | None = None
    is_ad = True  # False for the primal and the hand-written gradient

    def __init__(self) -> None:
        self._error: str | None = None
        self._loaded = False

    def available(self) -> bool:
        if not self._loaded:
            self._loaded = True
            try:
                self.load()
            except Exception as e:  # ImportError and anything a broken install raises
                self._error = f"{type(e).__name__}: {e}"
        return self._error is None

    @property
    def unavailable_reason(self) -> str | None:
        self.available()
        return self._error

    def load(self) -> None:
        if self.module:
            importlib.import_module(self.module)

    def version(self) -> str:
        if not self.available():
            return "n/a"
        return _dist_version(self.module or "")

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        raise NotImplementedError


def _dist_version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        try:
            return getattr(importlib.import_module(dist), "__version__", "?")
        except Exception:
            return "n/a"


# --------------------------------------------------------------------------


class Primal(Tool):
    name = "primal"
    is_ad = False

    def version(self) -> str:
        return "plain Python"

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        f = w.primal
        return Prepared(run=lambda: f(*args), to_wrt=lambda raw: raw)


class Hand(Tool):
    name = "hand"
    is_ad = False

    def version(self) -> str:
        return "hand-written gradient"

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        g = w.hand_grad
        return Prepared(run=lambda: g(*args), to_wrt=lambda raw: raw)


class Dplus(Tool):
    name = "dplus"
    module = "dplus"

    def version(self) -> str:
        if not self.available():
            return "n/a"
        import dplus

        return getattr(dplus, "__version__", "?") + _git_rev()

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        import dplus

        g = dplus.grad(w.primal)
        return Prepared(run=lambda: g(*args), to_wrt=lambda raw: to_floats(w.select(raw)))


def _git_rev() -> str:
    import os
    import subprocess

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--", "dplus", "primitives"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except Exception:
        return ""
    return f" (git {rev}{'+dirty' if dirty else ''})" if rev else ""


class Autograd(Tool):
    name = "autograd"
    module = "autograd"

    def load(self) -> None:
        import autograd  # noqa: F401
        import autograd.numpy as anp

        self.math = _math_namespace("autograd.numpy", {k: getattr(anp, k) for k in _MATH_FUNCS})

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        from autograd import grad

        f = rebind(w.primal, {"math": self.math})
        wrt = w.wrt
        rest = list(args)

        def packed(wrt_args):
            a = list(rest)
            for i, v in zip(wrt, wrt_args):
                a[i] = v
            return f(*a)

        g = grad(packed)
        wrt_args = tuple(args[i] for i in wrt)
        return Prepared(run=lambda: g(wrt_args), to_wrt=lambda raw: tuple(to_floats(list(raw))))


class _JaxBase(Tool):
    module = "jax"

    def load(self) -> None:
        import os

        # one thread, like torch below: XLA's worker threads would otherwise keep the
        # machine's cores busy after each call and slow the cells measured after them
        os.environ.setdefault(
            "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        self.math = _math_namespace("jax.numpy", {k: getattr(jnp, k) for k in _MATH_FUNCS})

    def version(self) -> str:
        if not self.available():
            return "n/a"
        return f"{_dist_version('jax')} (jaxlib {_dist_version('jaxlib')})"

    def _convert(self, tree: Any) -> Any:
        jnp = self.jnp
        if isinstance(tree, dict):
            return {k: self._convert(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [self._convert(v) for v in tree]
        if isinstance(tree, tuple):
            return tuple(self._convert(v) for v in tree)
        return jnp.asarray(tree, dtype=jnp.float64)


class JaxEager(_JaxBase):
    name = "jax"

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        jax = self.jax
        f = rebind(w.primal, {"math": self.math})
        g = jax.grad(f, argnums=w.wrt)
        jargs = tuple(self._convert(a) if i in w.wrt else a for i, a in enumerate(args))
        return Prepared(
            run=lambda: jax.block_until_ready(g(*jargs)),
            to_wrt=lambda raw: tuple(to_floats(list(raw))),
        )


def _jnp_max(jnp: Any) -> Callable:
    def max_(*items: Any) -> Any:
        if len(items) == 1:
            items = tuple(items[0])
        return functools.reduce(jnp.maximum, items)

    return max_


class JaxJit(_JaxBase):
    name = "jax-jit"

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        jax, jnp = self.jax, self.jnp
        f = rebind(w.primal, {"math": self.math, "max": _jnp_max(jnp)})
        static = tuple(i for i, a in enumerate(args) if type(a) is int and i not in w.wrt)
        jitted = jax.jit(jax.grad(f, argnums=w.wrt), static_argnums=static)
        jargs = tuple(a if i in static else self._convert(a) for i, a in enumerate(args))
        run = lambda: jax.block_until_ready(jitted(*jargs))
        return Prepared(run=run, to_wrt=lambda raw: tuple(to_floats(list(raw))), compile=run)


class Torch(Tool):
    name = "torch"
    module = "torch"

    def load(self) -> None:
        import torch

        # Scalar tensors gain nothing from threads, and torch's pool keeps spinning after
        # each operation: measured here, it made the dplus cells that follow a torch cell
        # in the same process about 1.5x slower (quaternion: 23 -> 35 us per gradient).
        torch.set_num_threads(1)
        self.torch = torch

        def wrap(tf: Callable, mf: Callable) -> Callable:
            def fn(*xs: Any) -> Any:
                if any(isinstance(x, torch.Tensor) for x in xs):
                    return tf(
                        *(
                            x
                            if isinstance(x, torch.Tensor)
                            else torch.tensor(x, dtype=torch.float64)
                            for x in xs
                        )
                    )
                return mf(*xs)

            fn.__name__ = mf.__name__
            return fn

        self.math = _math_namespace(
            "torch", {k: wrap(getattr(torch, k), getattr(math, k)) for k in _MATH_FUNCS}
        )

    def prepare(self, w: Workload, args: tuple) -> Prepared:
        torch = self.torch
        f = rebind(w.primal, {"math": self.math})
        wrt_templates = [args[i] for i in w.wrt]
        flat = [
            torch.tensor(float(v), dtype=torch.float64, requires_grad=True)
            for t in wrt_templates
            for v in leaves(t)
        ]
        it = iter(flat)
        targs = list(args)
        for i, t in zip(w.wrt, wrt_templates):
            targs[i] = unflatten(t, it)
        targs = tuple(targs)

        def run() -> Any:
            # allow_unused: a weight behind a dead ReLU never enters the graph (gradient 0)
            return torch.autograd.grad(f(*targs), flat, allow_unused=True)

        def to_wrt(raw: Any) -> tuple:
            it2 = iter(0.0 if t is None else float(t) for t in raw)
            return tuple(unflatten(t, it2) for t in wrt_templates)

        return Prepared(run=run, to_wrt=to_wrt)


TOOLS: list[Tool] = [Primal(), Hand(), Dplus(), Autograd(), JaxEager(), JaxJit(), Torch()]


def tool_versions() -> list[tuple[str, str]]:
    """Versions from the installed distributions' metadata: nothing is imported but
    dplus, so the sections run before the table see a process without jax/torch."""
    from importlib.metadata import PackageNotFoundError, version

    out = [("dplus", Dplus().version())]
    for dist in ("autograd", "jax", "jaxlib", "torch", "numpy"):
        try:
            out.append((dist, version(dist)))
        except PackageNotFoundError:
            out.append((dist, "not installed"))
    return out
