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
from dplus.runtime.closures import is_plus_function, user_function
from dplus.runtime.core import as_plain_callable, lift
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
from .revolve import first_descent, split


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


def plain_callable(f: Any, nargs: int) -> Any:
    """``f`` as a recomputation calls it plainly with ``nargs`` arguments: for a function made
    inside differentiated code, the user's own function rebuilt when it can be
    (``user_function``: at the primal's speed, where ``f`` itself would record as it runs and
    drop the record); otherwise as ``run_checkpointed`` calls it. (What it computes is
    checked against the recorded recomputation, as every recomputation is.)"""
    if stands_for_itself(f):
        rebuilt = user_function(f, nargs)
        if rebuilt is not None:
            return rebuilt
    return as_plain_callable(f)


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
    if kwargs:
        out = run_checkpointed(f, saved, kwargs)
    else:
        out = plain_callable(f, len(saved))(*saved)
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


def _loop_sig(
    step: Any, state: Any, n: Any, *, schedule: str = "sqrt", snapshots: Any = None
) -> tuple:
    return step, state, n, schedule, snapshots


def checkpoint_loop_plus(*args: Any, **kwargs: Any) -> ProcResult:
    try:
        step, state, n, schedule, snapshots = _loop_sig(*args, **kwargs)
    except TypeError:
        checkpoint_loop(*args, **kwargs)  # the plain function's own error
        raise
    check_loop_arguments(step, n, schedule, snapshots)
    n = int(n)
    if schedule == "revolve":
        return revolve_loop(step, state, n, snapshots, args, kwargs)
    advance = plain_callable(step, 1)
    kept, out = _run_keeping(step, advance, state, n, _stride(schedule, n))

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
            s_mid = advance(s_mid)
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


def _stride(schedule: str, n: int) -> int:
    """How many steps apart the forward pass keeps the states of an ``n``-step loop."""
    if schedule == "none":
        return 1
    if schedule == "sqrt":
        return max(1, math.isqrt(max(n - 1, 0)) + 1)
    return n + 1  # bisection keeps only the initial state in the forward pass


def _run_keeping(
    step: Any, advance: Any, state: Any, n: int, stride: int
) -> tuple[dict[int, Any], Any]:
    """The loop's ``n`` steps run without recording (``advance``: the step called plainly),
    keeping the state at every ``stride``-th step; the states kept, by step, and the final
    state."""
    kept = {}
    s = state
    for i in range(n):
        if i % stride == 0:
            kept[i] = kept_value(s, step, "loop state")
        s = advance(s)
    require_value(s, step, "loop state")
    return kept, s


def revolve_loop(step: Any, state: Any, n: int, k: int, args: tuple, kwargs: dict) -> ProcResult:
    """The forward pass of the binomial schedule with ``k`` snapshots: the plain steps, keeping
    the states where the schedule's forward sweep puts its snapshots, and the last step
    recorded (Griewank's "youturn"). The reverse pass (:class:`RevolveReversal`) continues
    the schedule from there."""
    if n == 0:
        return ProcResult(state, lambda A, Abox: loop_sensitivities(gen_zero, A, args, kwargs))
    first = kept_value(state, step, "loop state")
    positions = set(first_descent(n, k))
    descent: dict = {}
    advance = plain_callable(step, 1)
    s = state
    for i in range(n - 1):
        if i in positions:
            descent[i] = kept_value(s, step, "loop state")
        s = advance(s)
    last_input = kept_value(s, step, "loop state")
    del s
    if n - 1 in positions:  # (a snapshot of the last step's state: the state it is recorded from)
        descent[n - 1] = last_input
    r = call_recorded(step, (last_input,), {})
    out = r.primal
    require_value(out, step, "loop state")
    # the first reverse pass uses the forward sweep's snapshots and record, and drops them as
    # it goes; a later one (a jacobian runs the backprop once per output) starts from scratch
    youturn: list = [descent, r.backprop, last_input]
    del r, descent, last_input

    def checkpoint_loop_revolve_backprop(A: Any, Abox: Any) -> tuple:
        reversal = RevolveReversal(step, advance, out, A, Abox)
        if youturn:
            reversal.descent, reversal.youturn = youturn[0], (youturn[1], youturn[2])
            youturn.clear()
        reversal.run(0, n, k, first, reversal.youturn is not None)
        return loop_sensitivities(reversal.fs, reversal.a, args, kwargs)

    return ProcResult(out, checkpoint_loop_revolve_backprop)


class RevolveReversal:
    """One reverse pass of a loop under the binomial schedule: the steps newest first, each
    recorded from its state, advanced from the nearest snapshot as ``revolve.split`` says.

    Each recorded step's result is compared with the state the step reversed before it was
    recorded from (the last one's with the forward pass's result), so the recorded steps
    form one trajectory from the initial state to the forward pass's result, or the pass
    refuses. States are referenced only while the schedule holds them."""

    def __init__(self, step: Any, plain_step: Any, out: Any, A: Any, Abox: Any) -> None:
        self.step, self.plain_step, self.Abox = step, plain_step, Abox
        self.a, self.fs = A, gen_zero
        self.expected = out  # what the step reversed next must produce
        self.descent: dict = {}  # the forward sweep's snapshots not used yet, by position
        self.youturn: tuple | None = None  # the forward pass's record of the last step, its state

    def run(self, lo: int, hi: int, slots: int, s_lo: Any, on_descent: bool) -> None:
        """Reverse steps ``lo .. hi-1`` from ``s_lo``, the state at ``lo``, keeping at most
        ``slots`` states at once (``s_lo``'s included). ``on_descent``: the range ends the
        forward sweep's, whose snapshots and last record are there to take."""
        while hi - lo > 1 and slots > 1:
            j = split(hi - lo, slots)
            if on_descent:
                s_j = self.descent.pop(lo + j)
            else:
                s_j = self.advance(s_lo, j)
            self.run(lo + j, hi, slots - 1, s_j, on_descent)
            del s_j  # (its slot is free again for the first part of the range)
            on_descent = False
            hi = lo + j
        for i in range(hi - 1, lo - 1, -1):
            if (
                on_descent and self.youturn is not None
            ):  # the last step, recorded by the forward pass
                bp, s_i = self.youturn
                self.youturn = None
            else:
                s_i = self.advance(s_lo, i - lo)
                r = call_recorded(self.step, (s_i,), {})
                check_recomputed(r.primal, self.expected, self.step)
                bp = r.backprop
                del r
            self.expected = None
            self.a, self.fs = backprop_steps([bp], self.a, self.fs, self.Abox)
            del bp
            self.expected = s_i
            del s_i

    def advance(self, s: Any, steps: int) -> Any:
        for _ in range(steps):
            s = self.plain_step(s)
        return s


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
    note="dplus.checkpoint_loop: keeps every k-th state (sqrt), none (bisection) or k where the binomial schedule says (revolve), recomputes in reverse",
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
    step, state, n, _, _ = _loop_sig(*args, **kwargs)
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
