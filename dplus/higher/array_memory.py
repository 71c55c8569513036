"""Arrays changed in place, at the next order of differentiation.

A first-order backward pass over code that changes arrays in place changes arrays itself
(:mod:`dplus.runtime.memory`): it puts back the values each write overwrote (``undo``), writes
the program's values again when it ends (``finish``), and adds sensitivities into, and takes
them out of, the entries that hold the sensitivity of changed memory (``hand_over``,
``take``). When that pass is differentiated (a Hessian), each of these operations is itself
an in-place change of an array -- a primal array of the first order, or an entry -- and its
rule below makes it with the first order's in-place rules (``primitives.numpy_inplace``),
which record it for the next order's backward pass like any write of the program.

The values a write overwrote and the values ``undo`` found (``WriteRecord.old`` and
``.new``) are read by later operations of the pass; their next-order sensitivities wait in
stashes of the next order's map, keyed by the record, from the operation that read them to
the one that made them (``Stash``: a take clears what the matching add left).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import NonDifferentiableError
from ..primitives import numpy_inplace as _in_place
from ..primitives import numpy_inplace_methods as _in_place_methods
from ..primitives.numpy_inplace import array_inplace_plus, array_setitem_plus
from ..rules import defnondiff
from ..runtime import memory
from ..runtime.boxes import BoxSensitivities
from ..runtime.linear import add, gen_zero
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult
from .stashes import Stash, stash_add, stash_take_clear

Z: Any = gen_zero

__all__ = ["handed_over_array", "folded_array_back"]


class _RecordStashes:
    """The two stashes of one write record: the sensitivities of its ``old`` and ``new``."""

    __slots__ = ("old", "new")

    def __init__(self) -> None:
        self.old = Stash()
        self.new = Stash()


_STASHES: dict[int, tuple[Any, _RecordStashes]] = {}


def _stashes(rec: memory.WriteRecord) -> _RecordStashes:
    found = _STASHES.get(id(rec))
    if found is None or found[0] is not rec:
        found = _STASHES[id(rec)] = (rec, _RecordStashes())
        if len(_STASHES) > 100000:  # (records of passes long over)
            for k in list(_STASHES)[:50000]:
                del _STASHES[k]
    return found[1]


def _read_back(Abox2: BoxSensitivities, a: Any, idx: Any, T: Any) -> None:
    """The next order's reverse of reading ``a[idx]``: ``T`` into the entry of ``a``'s memory."""
    if T is Z or T is None:
        return
    if not memory.is_tracked_array(a):
        raise NonDifferentiableError(
            "derivatives of derivatives through an array changed in place reached memory dplus does "
            "not follow; please report it with the function you differentiated"
        )
    if idx is Ellipsis:
        memory.hand_over(Abox2, a, T)
        return
    owner = memory.memory_owner(a)
    flat = memory._entry(Abox2, owner, True)
    view = memory.entry_view(flat, owner, a)
    np.add.at(view, idx, memory._real_if_needed(T, a))


# ---------------------------------------------------------------------------
# the values writes overwrite


def _remember_write_rule(dst: Any, idx: Any, old: Any) -> ProcResult:
    rec = memory.remember_write(dst, idx, old)

    def remember_write_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        return (), Z, None, stash_take_clear(_stashes(rec).old, Abox2)

    return ProcResult(rec, remember_write_backprop)


def _undo_rule(Abox: Any, rec: memory.WriteRecord) -> ProcResult:
    dst, idx = rec.dst, rec.idx
    rec.new = np.array(dst[idx], copy=True)  # read
    write = array_setitem_plus(dst, idx, rec.old)  # and written, as the next order sees it
    if Abox is not None:
        memory._memory(Abox).undone.append(rec)
    else:
        raise NonDifferentiableError(
            "derivatives of derivatives through a backward pass run without a box-sensitivity map"
        )
    write_back = write.backprop

    def undo_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        st = _stashes(rec)
        stash_add(st.old, write_back(Z, Abox2)[3], Abox2)
        _read_back(Abox2, dst, idx, stash_take_clear(st.new, Abox2))
        return (), None, None

    return ProcResult(None, undo_backprop)


def _finish_rule(Abox: BoxSensitivities) -> ProcResult:
    mem = Abox._memory
    undone = mem.undone if mem is not None else []
    if mem is not None:
        mem.undone = []
    writes = [
        (rec, array_setitem_plus(rec.dst, rec.idx, rec.new).backprop) for rec in reversed(undone)
    ]

    def finish_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        for rec, back in reversed(writes):
            stash_add(_stashes(rec).new, back(Z, Abox2)[3], Abox2)
        return ((), None)

    return ProcResult(None, finish_backprop)


# ---------------------------------------------------------------------------
# entries


def _view_of_entry(Abox: BoxSensitivities, a: Any, create: bool) -> Any:
    owner = memory.memory_owner(a)
    flat = memory._entry(Abox, owner, create)
    if flat is None:
        return None
    if memory.overlaps_itself(a):
        raise NonDifferentiableError(
            "derivatives of derivatives through a broadcast view of an array changed in place are not "
            "supported yet"
        )
    return memory.entry_view(flat, owner, a)


def _hand_over_with_back(Abox: BoxSensitivities, a: Any, s: Any) -> Any:
    """``memory.hand_over(Abox, a, s)`` made as an in-place addition the next order records;
    the function of the next order's map giving the sensitivity of ``s``."""
    if s is Z or s is None:
        return lambda Abox2: Z
    view = _view_of_entry(Abox, a, True)
    added = array_inplace_plus(_iadd, view, memory._real_if_needed(s, a)).backprop

    def hand_over_transpose(Abox2: BoxSensitivities) -> Any:
        return added(Z, Abox2)[2]

    return hand_over_transpose


def _hand_over_rule(Abox: BoxSensitivities, a: Any, s: Any) -> ProcResult:
    back = _hand_over_with_back(Abox, a, s)
    return ProcResult(None, lambda T, Abox2: ((), None, Z, back(Abox2)))


def _taken_out(Abox: Any, a: Any, idx: Any, last: Any) -> tuple:
    """``take_at`` made as a read and an in-place write of zeros: the value, and the function
    of its next-order sensitivity and map doing the reverse."""
    view = _view_of_entry(Abox, a, False) if Abox is not None else None
    if view is None:
        return Z, lambda T, Abox2: None
    S = np.array(view[idx], copy=True)
    if last is not None:
        S = np.where(last, S, 0)
    cleared = array_setitem_plus(view, idx, 0.0).backprop

    def taken_out_back(T: Any, Abox2: BoxSensitivities) -> None:
        cleared(Z, Abox2)  # (zeros are constants)
        if T is not Z and T is not None:
            _read_back(Abox2, view, idx, T if last is None else np.where(last, T, 0))

    return S, taken_out_back


def _take_rule(Abox: Any, a: Any) -> ProcResult:
    S, back = _taken_out(Abox, a, Ellipsis, None)

    def take_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        back(T, Abox2)
        return (), None, Z

    return ProcResult(S, take_backprop)


def _take_at_rule(Abox: Any, a: Any, idx: Any, last: Any = None) -> ProcResult:
    S, back = _taken_out(Abox, a, idx, last)

    def take_at_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        back(T, Abox2)
        return (), None, Z, None, None

    return ProcResult(S, take_at_backprop)


def _peek_rule(Abox: Any, a: Any) -> ProcResult:
    view = _view_of_entry(Abox, a, False) if Abox is not None else None
    S = Z if view is None else view.copy()

    def peek_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        if view is not None:
            _read_back(Abox2, view, Ellipsis, T)
        return (), None, Z

    return ProcResult(S, peek_backprop)


def _taken_rule(A: Any, r: Any, Abox: Any) -> ProcResult:
    if not (
        type(Abox) is BoxSensitivities and Abox._memory is not None and memory.is_tracked_array(r)
    ):
        return ProcResult(A, lambda T, Abox2: ((), T, None, None))
    S, back = _taken_out(Abox, r, Ellipsis, None)
    out = S if A is Z or A is None else add(A, S)

    def taken_backprop(T: Any, Abox2: BoxSensitivities) -> tuple:
        back(T, Abox2)
        return (), T, None, None

    return ProcResult(out, taken_backprop)


# ---------------------------------------------------------------------------
# what boxes_again needs for arrays


def handed_over_array(Abox: BoxSensitivities, a: Any, s: Any) -> Any:
    """``boxes_again.handed_over`` for an array whose memory is tracked."""
    return _hand_over_with_back(Abox, a, s)


def folded_array_back(Abox: Any, a: Any, F: Any, Abox2: BoxSensitivities) -> None:
    """The transpose of ``fold``'s reading of the entry of the array ``a``."""
    if Abox is None or F is Z or F is None or not memory.is_tracked_array(a):
        return
    view = _view_of_entry(Abox, a, False)
    if view is not None:
        _read_back(Abox2, view, Ellipsis, F)


def _unseen_writes_rule(changed: list) -> ProcResult:
    if changed:
        _refuse_unseen_writes_again()
    return ProcResult([], lambda T, Abox2: ((), None))


def _reverse_unseen_writes_rule(Abox: Any, records: list) -> ProcResult:
    if records:
        _refuse_unseen_writes_again()
    return ProcResult(None, lambda T, Abox2: ((), None, None))


def _refuse_unseen_writes_again() -> None:
    raise NonDifferentiableError(
        "derivatives of derivatives through an array changed in place by code dplus does not see are not "
        "supported: decorate that function with @dplus.define_dplus"
    )


_iadd = __import__("operator").iadd

_NOTE = "internal: arrays changed in place, at the next order"
register_primitive(memory.remember_write, _remember_write_rule, note=_NOTE)
register_primitive(memory.undo, _undo_rule, note=_NOTE)
register_primitive(memory.finish, _finish_rule, note=_NOTE)
register_primitive(memory.hand_over, _hand_over_rule, note=_NOTE)
register_primitive(memory.take, _take_rule, note=_NOTE)
register_primitive(memory.take_at, _take_at_rule, note=_NOTE)
register_primitive(memory.peek, _peek_rule, note=_NOTE)
register_primitive(memory.taken, _taken_rule, note=_NOTE)
register_primitive(memory.unseen_writes, _unseen_writes_rule, note=_NOTE)
register_primitive(memory.reverse_unseen_writes, _reverse_unseen_writes_rule, note=_NOTE)
for _fn in (
    memory.track,
    memory.memory_owner,
    memory.is_tracked_array,
    memory.overlaps_itself,
    memory.is_taking_backprop,
    _in_place.check_writable,
    _in_place.user_place,
    _in_place._is_basic,
    _in_place._may_repeat,
    _in_place._last_wins,
    _in_place._flat_positions,
    _in_place_methods._permuted,
    _in_place_methods._put_positions,
    _in_place._repeated_occurrences,
    _in_place.out_argument,
):
    defnondiff(_fn, note=_NOTE)
