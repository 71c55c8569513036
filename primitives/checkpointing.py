"""Rules for :mod:`dplus.checkpoint`: record less in the forward pass, recompute in the reverse.

``run_checkpointed(f, args, kwargs)``: the forward pass calls ``f`` plainly and keeps its
arguments (arrays copied); the reverse pass calls ``f``'s transform on them and
backpropagates through that record. ``f``'s closure sensitivity (the parameters it
captures) comes back as the sensitivity of ``f``.

``checkpoint_loop(step, state, n, schedule=...)``: the forward pass runs the plain steps and
keeps some states; the reverse pass recomputes each stretch of steps through ``step``'s
transform, newest first, threading the state's sensitivity and summing the closure
sensitivities of all steps.

Both compare what they recompute with what the forward pass produced, and refuse
(``NonDifferentiableError``) when it differs: a gradient through a recomputation that does
not repeat the forward pass would be silently wrong.
"""

from __future__ import annotations

import functools
import math
import types
from typing import Any

from dplus.checkpoint import check_loop_arguments, checkpoint_loop, labelled, run_checkpointed
from dplus.errors import NonDifferentiableError, describe_callable
from dplus.rules import defnondiff
from dplus.runtime import calls as runtime_calls
from dplus.runtime.closures import is_plus_function
from dplus.runtime.core import lift
from dplus.runtime.handover import is_tracked_mutable
from dplus.runtime.kinds import is_ndarray
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import (
    is_registered_transform,
    lookup_transform,
    register_next_order_form,
    register_primitive,
)
from dplus.runtime.result import ProcResult, call_plus

from ._iterables import add_closure


def plus_of(f: Any) -> Any:
    """The transform of a function the user asked to checkpoint: derived from its source if
    it has no rule (asking for a checkpoint is asking for ``f`` to be differentiated)."""
    from dplus.transform.plus_functions import plus_function_for

    if is_plus_function(f) or lookup_transform(f) is not None:
        return lift(f)
    if isinstance(f, (types.FunctionType, types.MethodType, functools.partial)):
        return plus_function_for(f)
    return lift(f)


def stands_for_itself(f: Any) -> bool:
    """A function made inside differentiated code: its value is its own transform."""
    return is_plus_function(f) and not is_registered_transform(f)


def call_recorded(f: Any, args: tuple, kwargs: dict) -> ProcResult:
    """``f``'s transform called on ``args``: its result and the record of its backprop."""
    if stands_for_itself(f):
        return runtime_calls.call(f, *args, **kwargs)
    return call_plus(plus_of(f), *args, **kwargs)


def record_items(f: Any, items: list) -> tuple:
    """``f`` called on each item through its transform: the results (values) and their backprops."""
    results, bps = [], []
    for x in items:
        r = call_recorded(f, (x,), {})
        require_value(r.primal, f, "result")
        results.append(r.primal)
        bps.append(r.backprop)
    return results, bps


def kept_value(v: Any, owner: Any, what: str) -> Any:
    """``v`` as the reverse pass will need it: arrays copied, lists, dicts and objects refused."""
    require_value(v, owner, what)
    return frozen(v)


def frozen(v: Any) -> Any:
    """``v`` with its arrays copied, so that later in-place writes do not reach the kept value."""
    t = type(v)
    if t is tuple:
        return tuple(frozen(e) for e in v)
    if is_ndarray(v):
        return v.copy()
    return v


def frozen_plus(v: Any) -> ProcResult:
    return ProcResult(frozen(v), lambda A, Abox: ((), A))


def require_value(v: Any, owner: Any, what: str) -> None:
    t = type(v)
    if t is tuple:
        for e in v:
            require_value(e, owner, what)
    elif is_tracked_mutable(v):
        raise NonDifferentiableError(
            f"dplus.checkpoint: the {what} of {describe_callable(owner)} is a {t.__name__}; a checkpointed call "
            "is recomputed in the reverse pass, so its arguments, results and loop state must be values "
            "(numbers, tuples, NumPy arrays). Pass a tuple or an array instead"
        )


def same_value(u: Any, v: Any) -> bool:
    tu = type(u)
    if tu is float or tu is complex:
        return u == v or (u != u and v != v)
    if tu is tuple:
        return type(v) is tuple and len(u) == len(v) and all(same_value(a, b) for a, b in zip(u, v))
    if is_ndarray(u):
        import numpy as np

        return (
            is_ndarray(v)
            and u.shape == v.shape
            and bool(np.array_equal(u, v, equal_nan=u.dtype.kind in "fc"))
        )
    try:
        return bool(u == v)
    except Exception:  # an object whose comparison raises: nothing to compare by
        return True


def check_recomputed(recomputed: Any, original: Any, owner: Any) -> None:
    if not same_value(recomputed, original):
        raise NonDifferentiableError(
            f"dplus.checkpoint: recomputing {describe_callable(owner)} in the reverse pass gave a different "
            "result than the forward pass (it draws random numbers, or reads a value that changed in between), "
            "so its gradient cannot be recomputed. Make it deterministic (pass the random state as an argument) "
            "or do not checkpoint it"
        )


defnondiff(require_value)
defnondiff(stands_for_itself)
defnondiff(plus_of)
register_primitive(
    frozen, frozen_plus, note="a copy of a kept value's arrays: the identity for sensitivities"
)
defnondiff(same_value)
defnondiff(check_recomputed)


def labelled_plus(checkpointed: Any, f: Any) -> ProcResult:
    return ProcResult(labelled(checkpointed, f), lambda A, Abox: ((), A, gen_zero))


register_primitive(
    labelled,
    labelled_plus,
    note="dplus.checkpoint's naming of the function it returns: the identity",
)


def run_checkpointed_plus(f: Any, args: tuple, kwargs: dict) -> ProcResult:
    saved = kept_value(tuple(args), f, "arguments")
    out = run_checkpointed(f, saved, kwargs)
    require_value(out, f, "result")

    def run_checkpointed_backprop(A: Any, Abox: Any) -> tuple:
        r = call_recorded(f, saved, kwargs)
        check_recomputed(r.primal, out, f)
        rs = r.backprop(A, Abox)
        return ((), rs[0], tuple(rs[1 : 1 + len(saved)]), gen_zero)

    return ProcResult(out, run_checkpointed_backprop)


register_primitive(
    run_checkpointed,
    run_checkpointed_plus,
    note="dplus.checkpoint: the forward pass keeps the arguments only, the reverse pass recomputes the record",
)


def _loop_sig(step: Any, state: Any, n: Any, *, schedule: str = "sqrt") -> tuple:
    return step, state, n, schedule


def checkpoint_loop_plus(*args: Any, **kwargs: Any) -> ProcResult:
    try:
        step, state, n, schedule = _loop_sig(*args, **kwargs)
    except TypeError:
        checkpoint_loop(*args, **kwargs)  # the plain function's own error
        raise
    check_loop_arguments(step, n, schedule)
    n = int(n)
    if schedule == "none":
        stride = 1
    elif schedule == "sqrt":
        stride = max(1, math.isqrt(max(n - 1, 0)) + 1)
    else:
        stride = n + 1  # bisection keeps only the initial state in the forward pass
    kept = {}
    s = state
    for i in range(n):
        if i % stride == 0:
            kept[i] = kept_value(s, step, "loop state")
        s = run_checkpointed(step, (s,), {})
    require_value(s, step, "loop state")
    out = s

    def record(lo: int, hi: int, s_lo: Any) -> tuple:
        """The steps lo..hi-1 through the transform: their backprops and the state at hi."""
        bps = []
        s = s_lo
        for _ in range(lo, hi):
            r = call_recorded(step, (s,), {})
            bps.append(r.backprop)
            s = r.primal
        return bps, s

    def reverse_strided(A: Any, Abox: Any) -> tuple:
        a, fs = A, gen_zero
        starts = sorted(kept)
        for j in range(len(starts) - 1, -1, -1):
            lo = starts[j]
            hi = starts[j + 1] if j + 1 < len(starts) else n
            bps, end = record(lo, hi, kept[lo])
            check_recomputed(end, kept[hi] if hi in kept else out, step)
            a, fs = backprop_steps(bps, a, fs, Abox)
        return a, fs

    def reverse_bisected(lo: int, hi: int, s_lo: Any, a: Any, fs: Any, Abox: Any) -> tuple:
        if hi - lo <= 2:
            bps, end = record(lo, hi, s_lo)
            if hi == n:
                check_recomputed(end, out, step)
            return backprop_steps(bps, a, fs, Abox)
        mid = (lo + hi) // 2
        s_mid = s_lo
        for _ in range(lo, mid):
            s_mid = run_checkpointed(step, (s_mid,), {})
        a, fs = reverse_bisected(mid, hi, kept_value(s_mid, step, "loop state"), a, fs, Abox)
        return reverse_bisected(lo, mid, s_lo, a, fs, Abox)

    def checkpoint_loop_backprop(A: Any, Abox: Any) -> tuple:
        if n == 0:
            a, fs = A, gen_zero
        elif schedule == "bisection":
            a, fs = reverse_bisected(0, n, kept[0], A, gen_zero, Abox)
        else:
            a, fs = reverse_strided(A, Abox)
        return loop_sensitivities(fs, a, args, kwargs)

    return ProcResult(out, checkpoint_loop_backprop)


def backprop_steps(bps: list, a: Any, fs: Any, Abox: Any) -> tuple:
    """Run the steps' backprops newest first: the first state's sensitivity and the summed
    closure sensitivity of the step function."""
    for bp in reversed(bps):
        rs = bp(a, Abox)
        fs = add_closure(fs, rs[0])
        a = rs[1]
    return a, fs


def loop_sensitivities(fs: Any, a: Any, args: tuple, kwargs: dict) -> tuple:
    out: tuple = ((), fs, a)
    if len(args) > 2:
        out = out + (None,)
    if kwargs:
        out = out + ({k: None for k in kwargs},)
    return out


register_primitive(
    checkpoint_loop,
    checkpoint_loop_plus,
    note="dplus.checkpoint_loop: keeps every k-th state (sqrt) or none (bisection), recomputes segments in reverse",
)


# At the next order the rules above are not differentiated from their source (their function
# arguments may be functions made in differentiated code, whose values are their own
# transforms there): these recording forms, equal in value and sensitivities, are. So a
# derivative of a derivative keeps the record of the checkpointed code; only the first order
# recomputes.


def run_checkpointed_recorded(f: Any, args: tuple, kwargs: dict) -> ProcResult:
    r = call_recorded(f, args, kwargs)
    n = len(args)
    bp = r.backprop

    def run_checkpointed_recorded_backprop(A: Any, Abox: Any) -> tuple:
        rs = bp(A, Abox)
        return ((), rs[0], tuple(rs[1 : 1 + n]), gen_zero)

    return ProcResult(r.primal, run_checkpointed_recorded_backprop)


def checkpoint_loop_recorded(*args: Any, **kwargs: Any) -> ProcResult:
    step, state, n, schedule = _loop_sig(*args, **kwargs)
    bps = []
    s = state
    for _ in range(n):
        r = call_recorded(step, (s,), {})
        bps.append(r.backprop)
        s = r.primal

    def checkpoint_loop_recorded_backprop(A: Any, Abox: Any) -> tuple:
        a, fs = backprop_steps(bps, A, gen_zero, Abox)
        return loop_sensitivities(fs, a, args, kwargs)

    return ProcResult(s, checkpoint_loop_recorded_backprop)


register_next_order_form(run_checkpointed_plus, run_checkpointed_recorded)
register_next_order_form(checkpoint_loop_plus, checkpoint_loop_recorded)
