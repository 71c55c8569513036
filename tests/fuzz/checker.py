"""Differential checks of one generated program against dplus.

``check(program)`` imports the program from a real file (dplus reads source through
``inspect``/``linecache``) and compares, on deep copies of the arguments each time:

1. the primal of ``dplus.dplus(f)`` with the plain call, and the arguments after each run
   (under ``dplus.dplus`` and under ``dplus.grad``) with the arguments after the plain call;
2. ``dplus.dplus(f)(*args).backprop(1.0)`` with ``dplus.grad(f)(*args)`` (``grad`` called
   first, so a function that gets its fused gradient alone at first is checked so);
3. every partial derivative with central finite differences at two step sizes, which must
   agree first (else the point is not smooth there and the partial is skipped);
4. the gradient with fast paths with the gradient built by ``general_paths_only()``;
5. for float-only arguments, ``dplus.hessian(f)`` with central differences of ``dplus.grad(f)``;
6. the backward pass in the sensitivity it is given: linear, and at second order its
   derivative in that sensitivity (``cotangent.py``).

The result is an ``Outcome``: ``ok``, ``wrong`` (a number differs), ``crash`` (an exception
from inside dplus that is not a ``DplusError``), ``refused`` (a ``DplusError``), ``skipped``
(the plain call raised or returned no finite number) or ``timeout``.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import math
import os
import re
import signal
import sys
import tempfile
import traceback
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

import dplus
from dplus.transform.transformer import general_paths_only

from . import cotangent
from .generator import Program

# Tolerances: a gradient agrees with central differences when
#   |g - fd| <= ABS_TOL + REL_TOL * max(|g|, |fd|) + ROUNDING * |f| / h
REL_TOL = 1e-5
ABS_TOL = 1e-6
ROUNDING = 1e-14
STEPS = (1e-5, 1e-4)  # relative step sizes; the two estimates must agree first
AGREE_TOL = 1e-5  # relative agreement of the two estimates
PRIMAL_TOL = 1e-12  # primal and mutated arguments: equal to rounding
PATH_TOL = 1e-9  # fast path against general path, backprop against grad
FLOAT32_PATH_TOL = 1e-4  # ... when one of them computed in float64 what the other did in float32
SECOND_REL_TOL = 1e-4
SECOND_ABS_TOL = 1e-5
THIRD_REL_TOL = 1e-3  # (differences of a Hessian: one order less accurate)
THIRD_ABS_TOL = 1e-4


@dataclass(frozen=True)
class Precision:
    """Finite-difference steps and tolerances for one floating-point type of argument."""

    steps: tuple
    agree: float
    rel: float
    abs: float
    rounding: float


FLOAT64 = Precision(STEPS, AGREE_TOL, REL_TOL, ABS_TOL, ROUNDING)
# float32 elements: 1e-5 steps vanish in rounding (eps 6e-8), so larger steps and looser
# tolerances; the program itself computes in float32.
FLOAT32 = Precision((1e-2, 3e-3), 3e-3, 3e-3, 1e-4, 1e-6)


def precision_of(args) -> Precision:
    """float32 as soon as one argument holds float32 elements: NumPy 2 keeps ``x + e`` (a
    Python float plus a float32 element) in float32, so any partial may pass through it."""
    return (
        FLOAT32
        if any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args)
        else FLOAT64
    )


class FuzzTimeout(BaseException):
    """Raised by the alarm; a BaseException so that generated ``except`` clauses never catch it."""


@dataclass
class Outcome:
    status: str  # ok / wrong / crash / refused / skipped / timeout
    kind: str = ""  # e.g. "gradient", "first:TypeError", "plain-raised"
    detail: str = ""  # expected vs got, or the traceback's last lines
    partials: int = 0  # partial derivatives compared with finite differences
    partials_skipped: int = 0
    second: int = 0  # second-order entries compared
    second_skipped: int = 0
    third: int = 0  # third-order entries compared
    third_skipped: int = 0
    cotangent: int = 0  # backward passes compared in the sensitivity given (first order)
    cotangent_second: int = 0  # ... and their derivatives in it (second order)
    message: str = ""  # a crash's normalised first line: tells crashes of one type apart

    @property
    def key(self) -> str:
        return f"{self.status}:{self.kind}"

    @property
    def signature(self) -> str:
        """What must stay the same while shrinking, and what tells distinct failures apart."""
        return f"{self.status}:{self.kind}:{self.message}"

    @property
    def failed(self) -> bool:
        return self.status in ("wrong", "crash")


class Mismatch(Exception):
    """A check found a wrong number: ``kind`` names the check."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


# ----- loading ---------------------------------------------------------------------------------
_DIR: str | None = None
_COUNTER = itertools.count()


def module_dir() -> str:
    global _DIR
    if _DIR is None:
        _DIR = tempfile.mkdtemp(prefix="dplus_fuzz_")
        sys.path.insert(0, _DIR)
    return _DIR


def load(source: str):
    """Import ``source`` as a fresh module written to a real file."""
    name = f"dplus_fuzz_{os.getpid()}_{next(_COUNTER)}"
    path = os.path.join(module_dir(), name + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def unload(module) -> None:
    sys.modules.pop(module.__name__, None)
    try:
        os.remove(module.__file__)
    except OSError:
        pass


def build_args(module, described: tuple) -> tuple:
    """Argument descriptions to values: ``("Pt", a, b)`` is an instance of the module's ``Pt``."""

    def build(v):
        if isinstance(v, tuple) and v and v[0] == "Pt":
            return module.Pt(v[1], v[2])
        return v

    return tuple(build(v) for v in described)


def args_text(described: tuple) -> str:
    parts = []
    for v in described:
        if isinstance(v, tuple) and v and v[0] == "Pt":
            parts.append(f"Pt({v[1]!r}, {v[2]!r})")
        elif isinstance(v, np.ndarray):
            parts.append(f"np.array({v.tolist()!r}, dtype=np.{v.dtype})")
        else:
            parts.append(repr(v))
    return ", ".join(parts)


@contextmanager
def time_limit(seconds: float):
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise FuzzTimeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ----- values ----------------------------------------------------------------------------------
def leaves(value, path=()):
    """Paths of the floats inside ``value`` (ints and bools are not differentiated)."""
    if type(value) is float:
        yield path
    elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
        for index in np.ndindex(value.shape):
            yield path + (index,)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif hasattr(value, "__dict__") and not callable(value):
        for k, v in vars(value).items():
            yield from leaves(v, path + (("attr", k),))


def get(value, path):
    for p in path:
        if isinstance(p, tuple) and p[0] == "attr":
            value = getattr(value, p[1]) if not isinstance(value, dict) else value[p[1]]
        else:
            value = value[p]
    return value


def replaced(value, path, new):
    """A deep copy of ``value`` with the leaf at ``path`` set to ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, np.ndarray):
        out = value.copy()
        out[head] = new  # (an element index is the last step of a path)
        return out
    if isinstance(value, tuple):
        return tuple(
            replaced(v, rest, new) if i == head else copy.deepcopy(v) for i, v in enumerate(value)
        )
    out = copy.deepcopy(value)
    if isinstance(head, tuple) and head[0] == "attr":
        setattr(out, head[1], replaced(getattr(value, head[1]), rest, new))
    else:
        out[head] = replaced(value[head], rest, new)
    return out


def difference(a, b, tol: float, where: str = "", exact_arrays: bool = False) -> str | None:
    """Where ``a`` and ``b`` differ (same nest of containers, numbers within ``tol``), or None.
    Arrays must have the same shape and dtype; with ``exact_arrays`` (arguments after a call)
    the same elements too, else elements within ``tol``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if (
            not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray))
            or a.shape != b.shape
            or a.dtype != b.dtype
        ):
            return f"{where}: {a!r} vs {b!r}"
        same = (
            np.array_equal(a, b)
            if exact_arrays
            else np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)
        )
        return None if same else f"{where}: {a!r} vs {b!r}"
    if isinstance(a, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = difference(x, y, tol, f"{where}[{i}]", exact_arrays)
            if d:
                return d
        return None
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return f"{where}: {a!r} vs {b!r}"
        for k in a:
            d = difference(a[k], b[k], tol, f"{where}[{k!r}]", exact_arrays)
            if d:
                return d
        return None
    if hasattr(a, "__dict__") and not callable(a):
        if (
            type(a).__qualname__ != type(b).__qualname__
        ):  # (the general path runs a second copy of the module)
            return f"{where}: {a!r} vs {b!r}"
        return difference(vars(a), vars(b), tol, where, exact_arrays)
    numbers = (int, float, np.integer, np.floating)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        a, b = float(a), float(b)
        if a == b or (math.isnan(a) and math.isnan(b)):
            return None
        if math.isclose(a, b, rel_tol=tol, abs_tol=tol):
            return None
        return f"{where}: {a!r} vs {b!r}"
    if a is None and b is None:
        return None
    if a != b:
        return f"{where}: {a!r} vs {b!r}"
    return None


def grad_leaf(g, path):
    """The gradient entry at ``path`` (an object's gradient is a dict of its attributes)."""
    for p in path:
        if isinstance(p, tuple) and p[0] == "attr":
            g = g[p[1]] if isinstance(g, dict) else getattr(g, p[1])
        else:
            g = g[p]
    return g


def path_text(path) -> str:
    out = f"args[{path[0]}]"
    for p in path[1:]:
        out += f".{p[1]}" if isinstance(p, tuple) and p[:1] == ("attr",) else f"[{p!r}]"
    return out


def normalised_message(e: BaseException) -> str:
    """The first line of an exception message without numbers, paths and generated names."""
    line = (str(e).splitlines() or [""])[0]
    line = re.sub(r"(/[^\s:'\"]+)+", "<file>", line)
    line = re.sub(r"dplus_fuzz_\w+", "<module>", line)
    line = re.sub(r"\b([a-z]+)\d+\b", r"\1N", line)
    line = re.sub(r"\d+", "N", line)
    return line[:120]


# ----- the checks ------------------------------------------------------------------------------
class Checker:
    def __init__(
        self,
        order: int = 1,
        time_limit: float = 5.0,
        check_general: bool = True,
        check_fd: bool = True,
        check_cotangent: bool = True,
    ):
        self.order = order
        self.seconds = time_limit
        self.check_general = check_general
        self.check_fd = check_fd
        self.check_cotangent = check_cotangent

    def focused(self, target: Outcome) -> Checker:
        """A checker that skips the checks that run after the one ``target`` failed (the
        shrinker's many runs need only that one)."""
        stage = target.kind.split(":")[0]
        late = target.kind in (
            "gradient",
            "fast_vs_general",
            "second_order",
            "third_order",
        ) or stage in ("general", "second", "third")
        second = target.kind in (
            "second_order",
            "third_order",
            "cotangent_second_order",
        ) or stage in ("second", "third", "cotangent2")
        general = second or target.kind == "fast_vs_general" or stage == "general"
        return Checker(
            order=self.order if second else 1,
            time_limit=self.seconds,
            check_general=self.check_general and general,
            check_fd=self.check_fd and late,
            check_cotangent=self.check_cotangent,
        )

    def check(self, program: Program) -> Outcome:
        self.form, self.cotangent_scale = cotangent.form_of(program.seed)
        self.seed = program.seed
        try:
            module = load(
                program.source + cotangent.probe_source(program.entry, self.form)
                if self.check_cotangent
                else program.source
            )
            # A second copy for the general path: its @define_dplus helpers are transformed
            # there for the first time, so their general paths are compared too.
            twin = load(program.source) if self.check_general else None
        except Exception as e:
            return Outcome("skipped", "invalid-program", f"{type(e).__name__}: {e}")
        self.twin = twin
        try:
            if not callable(getattr(module, program.entry, None)):
                return Outcome("skipped", "invalid-program", f"no function {program.entry}")
            try:
                build_args(module, program.args)
            except Exception as e:
                return Outcome("skipped", "invalid-program", f"arguments: {type(e).__name__}: {e}")
            return self.check_module(module, program)
        finally:
            unload(module)
            if twin is not None:
                unload(twin)

    def check_module(self, module, program: Program) -> Outcome:
        f = getattr(module, program.entry)
        described = program.args
        out = Outcome("ok")
        try:
            with time_limit(self.seconds):
                self.run_checks(f, module, described, out)
        except FuzzTimeout:
            return Outcome(
                "timeout", "timeout", f"over {self.seconds} s", out.partials, out.partials_skipped
            )
        except Mismatch as m:
            out.status, out.kind, out.detail = "wrong", m.kind, m.detail
        except _Stop as s:
            out.status, out.kind, out.detail, out.message = s.status, s.kind, s.detail, s.message
        return out

    def fresh(self, module, described):
        return build_args(module, copy.deepcopy(described))

    def dplus_call(self, stage: str, fn, *args):
        """Call into dplus; exceptions become ``refused`` or ``crash`` outcomes."""
        try:
            return fn(*args)
        except (FuzzTimeout, Mismatch, _Stop):
            raise
        except dplus.DplusError as e:
            raise _Stop(
                "refused",
                f"{stage}:{type(e).__name__}: {normalised_message(e)}",
                format_exception(e),
            ) from e
        except Exception as e:
            raise _Stop(
                "crash", f"{stage}:{type(e).__name__}", format_exception(e), normalised_message(e)
            ) from e

    def run_checks(self, f, module, described, out: Outcome) -> None:
        # the plain call
        plain_args = self.fresh(module, described)
        try:
            expected = f(*plain_args)
        except FuzzTimeout:
            raise
        except Exception as e:
            raise _Stop("skipped", "plain-raised", f"{type(e).__name__}: {e}") from e
        if type(expected) not in (float, int) or not math.isfinite(expected) or abs(expected) > 1e8:
            raise _Stop("skipped", "not-a-finite-float", repr(expected))

        # 1. grad first, its mutation (first: a float function whose body is one fast segment
        # gets its fused gradient alone, transformer.fused_first; dplus.dplus(f) below builds
        # the rest, so both ways of building are checked)
        args2 = self.fresh(module, described)
        gradient = self.refusal_changes_no_array(
            module, described, args2, lambda: dplus.grad(f)(*args2)
        )
        d = difference(plain_args, args2, PRIMAL_TOL, "args", exact_arrays=True)
        if d:
            raise Mismatch(
                "mutation", f"arguments after the plain call vs after dplus.grad(f): {d}"
            )
        # 2. primal and mutation under dplus.dplus, and backprop against grad
        args1 = self.fresh(module, described)
        result = self.refusal_changes_no_array(
            module, described, args1, lambda: dplus.dplus(f)(*args1)
        )
        d = difference(expected, result.primal, PRIMAL_TOL, "primal")
        if d:
            raise Mismatch(
                "primal",
                f"plain call returned {expected!r}, dplus.dplus(f) primal {result.primal!r}",
            )
        d = difference(plain_args, args1, PRIMAL_TOL, "args", exact_arrays=True)
        if d:
            raise Mismatch(
                "mutation", f"arguments after the plain call vs after dplus.dplus(f): {d}"
            )
        backprop = self.dplus_call("first", lambda: result.backprop(1.0))

        d = difference(backprop, gradient, PATH_TOL, "gradient")
        if d:
            raise Mismatch(
                "backprop_vs_grad",
                f"dplus.dplus(f)(*args).backprop(1.0) vs dplus.grad(f)(*args): {d}\n"
                f"backprop: {backprop!r}\ngrad:     {gradient!r}",
            )

        # 2b. one argument asked for: the others are constants of the backward pass, whose
        # rules may skip their sensitivities (runtime.constants); the asked one is unchanged
        if any(isinstance(a, np.ndarray) for a in plain_args):
            for i in range(len(plain_args)):
                args_i = self.fresh(module, described)
                one = self.dplus_call("first", lambda i=i, a=args_i: dplus.grad(f, argnums=i)(*a))
                d = difference(gradient[i], one, PATH_TOL, f"args[{i}]")
                if d:
                    raise Mismatch(
                        "argnums_vs_grad",
                        f"dplus.grad(f, argnums={i}) vs dplus.grad(f)[{i}]: {d}\n"
                        f"argnums: {one!r}\ngrad:    {gradient[i]!r}",
                    )

        # 3. finite differences
        base_args = self.fresh(module, described)
        p = precision_of(base_args)
        # a float32 program is also differenced in float64 (its arrays widened), where the small
        # steps rarely cross a kink; a partial is wrong only when it matches no estimate
        widened = p is FLOAT32 and self.runs_the_same_widened(f, module, described, expected)
        for path in list(leaves(base_args)) if self.check_fd else ():
            estimates = [self.central_difference(f, module, described, path, expected)]
            if widened:
                estimates.append(
                    self.central_difference(f, module, described, path, expected, widen=True)
                )
            estimates = [fd for fd in estimates if fd is not None]
            if not estimates:
                out.partials_skipped += 1
                continue
            try:
                g = grad_leaf(gradient, path)
            except (KeyError, IndexError, TypeError, AttributeError):
                raise Mismatch(
                    "gradient", f"no gradient entry at {path_text(path)} in {gradient!r}"
                ) from None
            if isinstance(g, np.floating):
                g = float(g)
            x = get(base_args, path)
            if not isinstance(g, (int, float)) or not any(
                close_to_fd(g, fd, expected, x, p) for fd in estimates
            ):
                raise Mismatch(
                    "gradient",
                    f"d f / d {path_text(path)}: finite differences {estimates!r}, "
                    f"dplus.grad {g!r}\nfull gradient: {gradient!r}",
                )
            out.partials += 1

        # 4. fast paths against the general path
        if self.check_general:
            twin = self.twin
            f_general = getattr(twin, f.__name__)
            args3 = self.fresh(twin, described)
            with general_paths_only():
                general = self.dplus_call("general", lambda: dplus.grad(f_general)(*args3))
                args4 = self.fresh(twin, described)
                general_primal = self.dplus_call(
                    "general", lambda: dplus.dplus(f_general)(*args4).primal
                )
            # (float32 programs: a path that inlines a helper, or sums in another order,
            # rounds in float32 differently: equal to float32 rounding, not to 1e-9)
            tolerance = PATH_TOL if precision_of(plain_args) is FLOAT64 else FLOAT32_PATH_TOL
            d = difference(gradient, general, tolerance, "gradient")
            if d:
                raise Mismatch(
                    "fast_vs_general",
                    f"fast paths vs general_paths_only(): {d}\n"
                    f"fast:    {gradient!r}\ngeneral: {general!r}",
                )
            d = difference(expected, general_primal, PRIMAL_TOL, "primal") or difference(
                plain_args, args4, PRIMAL_TOL, "args", exact_arrays=True
            )
            if d:
                raise Mismatch(
                    "fast_vs_general", f"general_paths_only() primal or arguments differ: {d}"
                )

        # 5. the backward pass in the sensitivity given: linear
        if self.check_cotangent:
            self.check_cotangent_linearity(module, described, expected, plain_args, gradient, out)

        # 6. second order
        if self.order >= 2 and all(type(a) is float for a in described):
            hessian = self.check_second_order(f, described, gradient, out)
            if self.order >= 3:
                self.check_third_order(f, described, hessian, out)
        elif self.order >= 2 and all(type(a) is float or is_float64_array(a) for a in described):
            self.check_hessian_vector_product(f, described, out)
        if (
            self.check_cotangent
            and self.order >= 2
            and all(type(a) is float or is_float64_array(a) for a in described)
        ):
            self.check_cotangent_derivative(module, described, gradient, out)

    def check_cotangent_linearity(self, module, described, expected, plain_args, gradient, out):
        """The probe (``cotangent.py``: ``f`` as a decorated helper, its result put into the
        program's form) runs as the plain call does, and its backward pass given
        ``v = c * unit`` returns ``c * grad(f)`` (exactly: ``c`` is a power of two)."""
        form, c = self.form, self.cotangent_scale
        probe = module._dplus_probe
        try:
            plain_result = probe(*self.fresh(module, described))
        except FuzzTimeout:
            raise
        except Exception:  # (f gave a number that the form cannot take: nothing to check)
            return
        args = self.fresh(module, described)
        result = self.dplus_call("cotangent", lambda: dplus.dplus(probe)(*args))
        d = difference(plain_result, result.primal, PRIMAL_TOL, "primal") or difference(
            plain_args, args, PRIMAL_TOL, "args", exact_arrays=True
        )
        if d:
            raise Mismatch(
                "primal",
                f"f as a decorated helper, its result as {form.name} "
                f"(tests/fuzz/cotangent.py): {d}",
            )
        v = cotangent.scaled(form.unit, c)
        back = self.dplus_call("cotangent", lambda: result.backprop(v))
        # (float32 programs: the sensitivity of r is then a float64 NumPy scalar, and
        # NumPy promotes float32 with it, so the backward pass given v runs in float64)
        tolerance = PATH_TOL if precision_of(args) is FLOAT64 else FLOAT32_PATH_TOL
        d = difference(back, cotangent.scaled(gradient, c), tolerance, "backprop(v)")
        if d:
            raise Mismatch(
                "cotangent",
                f"the backward pass is not linear in the sensitivity given: f's result as "
                f"{form.name} (tests/fuzz/cotangent.py), v = {v!r}: {d}; "
                f"c(v) = {c!r}, so c(v) * grad(f) is expected\n"
                f"backprop(v): {back!r}\ngrad(f):     {gradient!r}",
            )
        out.cotangent += 1

    def check_cotangent_derivative(self, module, described, gradient, out):
        """The derivative in ``v``, by ``dplus.grad``, of ``sum(w * backprop(v))`` is
        ``C * sum(w * grad(f))`` (``C``: the coefficients of the form)."""
        form, c = self.form, self.cotangent_scale
        v = cotangent.scaled(form.unit, c)
        weights = cotangent.weights_for(described, self.seed)
        total, size = cotangent.weighted_sum(weights, gradient)
        args = self.fresh(module, described)
        got = self.dplus_call(
            "cotangent2",
            lambda: dplus.grad(module._dplus_probe_weighted, argnums=0)(v, args, weights),
        )
        want = cotangent.scaled(form.coefficients, total)
        tolerance = 1e-8 * (1.0 + size)
        got_numbers = list(cotangent.numbers(got))
        want_numbers = list(cotangent.numbers(want))
        if len(got_numbers) != len(want_numbers) or any(
            not abs(a - b) <= tolerance for a, b in zip(got_numbers, want_numbers)
        ):
            raise Mismatch(
                "cotangent_second_order",
                f"d/dv of sum(w * backprop(v)), f's result as {form.name} "
                f"(tests/fuzz/cotangent.py), at v = {v!r}: dplus.grad {got!r}, "
                f"expected {want!r} (C * sum(w * grad(f)))\nweights: {weights!r}",
            )
        out.cotangent_second += len(got_numbers)

    def refusal_changes_no_array(self, module, described, args, call):
        """``call()`` through ``dplus_call``; a refusal must come before an array argument changed
        (dplus refuses in-place writes to arrays the caller can see)."""
        try:
            return self.dplus_call("first", call)
        except _Stop as stop:
            if stop.status == "refused":
                before = self.fresh(module, described)
                for i, (a, b) in enumerate(zip(before, args)):
                    if isinstance(a, np.ndarray) and not np.array_equal(a, b):
                        raise Mismatch(
                            "mutation",
                            f"dplus refused ({stop.kind}) after changing the array "
                            f"args[{i}]: {a!r} became {b!r}",
                        ) from stop
            raise

    def check_hessian_vector_product(self, f, described, out: Outcome) -> None:
        """For float and float64-array arguments: ``dplus.hvp`` along a fixed random direction
        against central differences of ``dplus.grad`` along it."""
        rng = np.random.default_rng(len(described))
        direction = tuple(
            rng.uniform(-1.0, 1.0, np.shape(a))
            if isinstance(a, np.ndarray)
            else float(rng.uniform(-1.0, 1.0))
            for a in described
        )
        product = self.dplus_call(
            "second", lambda: dplus.hvp(f)(copy.deepcopy(described), direction)
        )
        grad = dplus.grad(f)
        estimates = []
        for step in STEPS:
            try:
                up = grad(*(a + step * v for a, v in zip(described, direction)))
                down = grad(*(a - step * v for a, v in zip(described, direction)))
            except FuzzTimeout:
                raise
            except Exception:
                out.second_skipped += 1
                return
            estimates.append(
                [
                    (np.asarray(u, float) - np.asarray(d, float)) / (2 * step)
                    for u, d in zip(up, down)
                ]
            )
        for i, (a, b) in enumerate(zip(*estimates)):
            if not (
                np.all(np.isfinite(a))
                and np.allclose(a, b, rtol=AGREE_TOL * 10, atol=AGREE_TOL * 10)
            ):
                out.second_skipped += 1
                continue
            try:
                got = np.asarray(product[i], float)
            except (IndexError, TypeError, ValueError):
                raise Mismatch("second_order", f"hvp has no entry [{i}]: {product!r}") from None
            if got.shape != a.shape or not np.allclose(
                got, a, rtol=SECOND_REL_TOL, atol=SECOND_ABS_TOL
            ):
                raise Mismatch(
                    "second_order",
                    f"(H v)[args[{i}]]: central differences of dplus.grad along v "
                    f"{a!r}, dplus.hvp {got!r}\nv: {direction!r}",
                )
            out.second += int(a.size)

    def runs_the_same_widened(self, f, module, described, expected) -> bool:
        """Whether ``f`` on the float32 arguments widened to float64 returns about the float32
        value (it took the same branches), so that its differences are the float32 program's."""
        try:
            value = f(*widened(self.fresh(module, described)))
        except FuzzTimeout:
            raise
        except Exception:
            return False
        return (
            isinstance(value, (int, float))
            and math.isfinite(value)
            and abs(value - expected) <= FLOAT32.abs + FLOAT32.rel * abs(expected)
        )

    def central_difference(self, f, module, described, path, value, widen=False):
        """The partial derivative by central differences at two step sizes, or None when they
        disagree (not smooth here) or the function raises nearby. ``widen``: with float32
        arrays made float64 (and float64's steps)."""
        estimates = []
        base = self.fresh(module, described)
        if widen:
            base = widened(base)
        x = get(base, path)
        p = precision_of(base)
        if widen:  # the one-sided differences need the value at x in the widened arithmetic
            try:
                value = f(*widened(self.fresh(module, described)))
            except FuzzTimeout:
                raise
            except Exception:
                return None
            if not isinstance(value, (int, float)):
                return None
        one_sided = []
        for step in p.steps:
            h = step * max(1.0, abs(x))
            # the values really passed (a float32 element rounds x +- h)
            x_up, x_down = type(x)(x + h), type(x)(x - h)
            try:
                up = f(*replaced(base, path, x_up))
                down = f(*replaced(base, path, x_down))
            except FuzzTimeout:
                raise
            except Exception:
                return None
            if not (isinstance(up, (int, float)) and isinstance(down, (int, float))):
                return None
            estimates.append((up - down) / float(x_up - x_down))
            one_sided.append(
                (float(x_up - x), float(up - value), float(x - x_down), float(value - down))
            )
        a, b = estimates
        if not (math.isfinite(a) and math.isfinite(b)):
            return None
        tolerance = p.agree * max(1.0, abs(a), abs(b)) + p.rounding * abs(value) / (
            max(p.steps) * max(1.0, abs(x))
        )
        if abs(a - b) > tolerance or kink_within_steps(one_sided, tolerance):
            return None
        return a

    def check_second_order(self, f, described, gradient, out: Outcome) -> None:
        args = tuple(described)
        hessian = self.dplus_call("second", lambda: dplus.hessian(f)(*args))
        n = len(args)
        grad = dplus.grad(f)
        for j in range(n):
            column = self.gradient_difference(grad, args, j, gradient)
            for i in range(n):
                try:
                    h_ij = hessian[i][j]
                except (IndexError, TypeError, KeyError):
                    raise Mismatch(
                        "second_order", f"hessian has no entry [{i}][{j}]: {hessian!r}"
                    ) from None
                if column is None:
                    out.second_skipped += 1
                    continue
                fd = column[i]
                if not isinstance(h_ij, (int, float)) or not (
                    abs(h_ij - fd) <= SECOND_ABS_TOL + SECOND_REL_TOL * max(abs(h_ij), abs(fd))
                ):
                    raise Mismatch(
                        "second_order",
                        f"d2 f / d args[{i}] d args[{j}]: central differences of "
                        f"dplus.grad {fd!r}, dplus.hessian {h_ij!r}\n"
                        f"hessian: {hessian!r}",
                    )
                out.second += 1
        return hessian

    def check_third_order(self, f, described, hessian, out: Outcome) -> None:
        """A few third derivatives (grad of one checked Hessian entry) against central
        differences of that entry of the (checked) Hessian: cheap enough to run on every
        float-only program."""
        args = tuple(described)
        n = len(args)
        H = dplus.hessian(f)
        for i, j in dict.fromkeys([(0, 0), (n - 1, 0)]):
            entry = hessian_entry(f, i, j)
            third = self.dplus_call("third", dplus.grad(entry), *args)
            for k in dict.fromkeys([0, n - 1]):
                fd = self.hessian_difference(H, args, i, j, k, hessian)
                if fd is None:
                    out.third_skipped += 1
                    continue
                t = third[k] if isinstance(third, tuple) else None
                if not isinstance(t, (int, float)) or not (
                    abs(t - fd) <= THIRD_ABS_TOL + THIRD_REL_TOL * max(abs(t), abs(fd))
                ):
                    raise Mismatch(
                        "third_order",
                        f"d3 f / d args[{i}] d args[{j}] d args[{k}]: central differences of "
                        f"dplus.hessian {fd!r}, dplus.grad of hessian[{i}][{j}] {t!r}\n"
                        f"hessian: {hessian!r}",
                    )
                out.third += 1

    def hessian_difference(self, H, args, i, j, k, hessian):
        """d/d args[k] of the Hessian's entry [i][j] by central differences (None where the
        two step sizes disagree: not smooth enough there)."""
        estimates = []
        one_sided = []
        entry = hessian[i][j]
        for step in STEPS:
            h = step * max(1.0, abs(args[k]))
            up = list(args)
            down = list(args)
            up[k] += h
            down[k] -= h
            try:
                e_up, e_down = H(*up)[i][j], H(*down)[i][j]
            except FuzzTimeout:
                raise
            except Exception:
                return None
            estimates.append((e_up - e_down) / (2 * h))
            one_sided.append((h, e_up - entry, h, entry - e_down))
        a, b = estimates
        tolerance = AGREE_TOL * 10 * max(1.0, abs(a), abs(b))
        if (
            not (math.isfinite(a) and math.isfinite(b))
            or abs(a - b) > tolerance
            or kink_within_steps(one_sided, tolerance)
        ):
            return None
        return a

    def gradient_difference(self, grad, args, j, gradient):
        """Column ``j`` of the Hessian by central differences of the (checked) gradient, whose
        value at ``args`` is ``gradient``."""
        estimates = []
        one_sided = []
        for step in STEPS:
            h = step * max(1.0, abs(args[j]))
            up = list(args)
            down = list(args)
            up[j] += h
            down[j] -= h
            try:
                gu = grad(*up)
                gd = grad(*down)
            except FuzzTimeout:
                raise
            except Exception:
                return None
            estimates.append([(a - b) / (2 * h) for a, b in zip(gu, gd)])
            one_sided.append([(h, u - g, h, g - d) for u, g, d in zip(gu, gradient, gd)])
        a, b = estimates
        for x, y, sides in zip(a, b, zip(*one_sided)):
            tolerance = AGREE_TOL * 10 * max(1.0, abs(x), abs(y))
            if (
                not (math.isfinite(x) and math.isfinite(y))
                or abs(x - y) > tolerance
                or kink_within_steps(sides, tolerance)
            ):
                return None
        return a


def kink_within_steps(one_sided, tolerance: float) -> bool:
    """Whether a kink (a jump of the derivative) lies within both steps, where the two
    central differences agree on a wrong slope: each step's ``(h_up, rise_up, h_down,
    rise_down)`` gives its forward minus backward difference, which is ``h f''`` where ``f`` is
    smooth (so the smaller step's is a fraction of the larger's) but about the jump of the
    derivative at both steps when the kink lies within the smaller one."""
    (small, large) = sorted(one_sided, key=lambda s: s[0])
    curvature = [
        abs(rise_up / h_up - rise_down / h_down)
        for h_up, rise_up, h_down, rise_down in (small, large)
    ]
    return curvature[0] > 0.5 * curvature[1] + tolerance


def hessian_entry(f, i: int, j: int):
    """The function giving the entry [i][j] of ``f``'s Hessian (differentiated once more)."""

    def entry(*a):
        return dplus.hessian(f)(*a)[i][j]

    return entry


def widened(args: tuple) -> tuple:
    """The arguments with every float32 array (at the top level, where the generator puts
    them) made float64."""
    return tuple(
        a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a
        for a in args
    )


def is_float64_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float64


def close_to_fd(g: float, fd: float, value: float, x: float, p: Precision = FLOAT64) -> bool:
    if not math.isfinite(g):
        return False
    h = min(p.steps) * max(1.0, abs(x))
    return abs(g - fd) <= p.abs + p.rel * max(abs(g), abs(fd)) + p.rounding * abs(value) / h


class _Stop(Exception):
    def __init__(self, status: str, kind: str, detail: str, message: str = ""):
        super().__init__(detail)
        self.status, self.kind, self.detail, self.message = status, kind, detail, message


def format_exception(e: BaseException) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(lines[-6:])
