"""NumPy arrays changed in place: their sensitivities kept by memory.

An array that differentiated code changes in place (``a[i] = v``, ``a += b``, ``out=``,
``a.sort()``, a function dplus does not see changing an argument) is a mutable container,
like a list (SPEC section 5): from then on, the sensitivities of what it holds live in
the box-sensitivity map, keyed by the array that owns its memory (its *owner*: the array
itself, or ``a.base`` for a view). Every name, view, row, list element or argument that
shows the same memory shares one entry, as NumPy shares the memory: the entry of an owner
is an array of the owner's dtype and layout, and the entry of a view is the same view of
the owner's entry (same byte offset and strides).

- Reading an array whose memory is tracked adds the read's sensitivity into the entry, at
  the view's place (``hand_over``).
- Writing moves the written elements' sensitivity out of the entry (to the values written,
  or through the operation that computed them), and puts back the values the write
  overwrote: the forward pass keeps only those (``WriteRecord``), and the reverse pass
  restores them (``undo``), so every backpropagator recorded before the write sees the
  values it read. When the pass ends, ``finish`` redoes the writes, so the arrays hold
  what the program left in them, exactly as after the plain call.
- The operation that made the memory takes the entry's sensitivity when its reverse runs
  (``taking_backprop``, put around the backprop of every result array whose memory was
  never written before the result was made: see ``ProcResult``'s constructor). Between
  the two, no write can be pending, so an operation that merely returns the same memory
  (a view, ``np.asarray``) hands back exactly what it took.
- At the boundary, an argument's gradient is its entry plus what its backprop returned:
  the sensitivity of the value it had on entry.

Memory that has never been written in place is not tracked, and its arrays stay values:
code with no in-place write pays one type test per result.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from ..errors import NonDifferentiableError
from . import result as _result
from .boxes import BoxSensitivities
from .linear import add, gen_zero

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then no array is ever tracked
    np = None  # type: ignore[assignment]

__all__ = [
    "memory_owner",
    "is_tracked_array",
    "track",
    "hand_over",
    "take",
    "peek",
    "WriteRecord",
    "remember_write",
    "undo",
    "taken",
    "finish",
    "taking_backprop",
    "results_take_entries",
    "is_taking_backprop",
]

Z: Any = gen_zero
_ndarray: Any = np.ndarray if np is not None else type("NoArray", (), {})

# id(owner) -> weakref to the owner: memory written in place by differentiated code (or by code
# it called). An owner stays tracked while it lives: its arrays keep their sensitivities in the
# map in every later pass, which is always right (the operation that makes memory takes its
# entry), only not needed.
_TRACKED: dict[int, Any] = {}


def memory_owner(a: Any) -> Any:
    """The array that owns ``a``'s memory: ``a`` itself, or the last array of its ``.base``
    chain (NumPy collapses the chain of a view of a view to the owner)."""
    b = a.base
    if b is None:
        return a
    while isinstance(b, _ndarray):
        nb = b.base
        if nb is None or not isinstance(nb, _ndarray):
            return b
        b = nb
    return a  # (memory of another kind of object: ``a`` stands for it)


def _forget(key: int, ref: Any) -> None:
    if _TRACKED.get(key) is ref:
        del _TRACKED[key]


def track(owner: Any) -> None:
    """From now on the sensitivities of ``owner``'s memory live in the map."""
    key = id(owner)
    ref = _TRACKED.get(key)
    if ref is not None and ref() is owner:
        return
    _TRACKED[key] = weakref.ref(owner, functools.partial(_forget, key))


def _tracked_owner(a: Any) -> Any:
    """``a``'s owner when its memory is tracked and can carry sensitivity, else None."""
    if not _TRACKED or a.dtype.kind not in "fc":
        return None
    m = a if a.base is None else memory_owner(a)
    ref = _TRACKED.get(id(m))
    if ref is None or ref() is not m:
        return None
    return m


def is_tracked_array(a: Any) -> bool:
    """Whether the array ``a`` shows memory whose sensitivities live in the map."""
    return _tracked_owner(a) is not None


# ---------------------------------------------------------------------------
# entries: one per owner and pass


class _Memory:
    """The part of one pass's map that holds memory: entries by owner, and the writes the
    pass has undone (to redo when it ends)."""

    __slots__ = ("entries", "undone")

    def __init__(self) -> None:
        self.entries: dict[int, tuple[Any, Any, Any]] = {}  # id(owner) -> (owner, flat, shaped)
        self.undone: list[WriteRecord] = []


def _memory(Abox: BoxSensitivities) -> _Memory:
    m = Abox._memory
    if m is None:
        m = Abox._memory = _Memory()
    return m


def _entry(Abox: BoxSensitivities, owner: Any, create: bool) -> Any:
    """The flat buffer holding the sensitivity of ``owner``'s memory (None: none yet)."""
    mem = Abox._memory
    found = mem.entries.get(id(owner)) if mem is not None else None
    if found is not None:
        return found[1]
    if not create:
        return None
    # laid out as the owner's memory, so that any view of it has the same view of the entry
    flat = np.zeros(owner.nbytes // owner.itemsize, dtype=owner.dtype)
    shaped = np.ndarray(owner.shape, owner.dtype, buffer=flat, strides=owner.strides)
    _memory(Abox).entries[id(owner)] = (owner, flat, shaped)
    return flat


def _address(a: Any) -> int:
    return int(a.__array_interface__["data"][0])


def entry_view(flat: Any, owner: Any, a: Any) -> Any:
    """The view of the entry ``flat`` that ``a`` is of its owner's memory."""
    offset = _address(a) - _address(owner) if a is not owner else 0
    return np.ndarray(a.shape, a.dtype, buffer=flat, offset=offset, strides=a.strides)


def overlaps_itself(a: Any) -> bool:
    """Whether two elements of ``a`` are one place of memory (a broadcast view)."""
    return any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))


def positions(a: Any, owner: Any) -> Any:
    """The element index in the owner's flat memory of each element of ``a`` (same shape)."""
    item = owner.itemsize
    pos = np.full(a.shape, (_address(a) - _address(owner)) // item, dtype=np.intp)
    for axis, (n, s) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[axis] = n
        pos = pos + (np.arange(n, dtype=np.intp) * (s // item)).reshape(shape)
    return pos


def _real_if_needed(s: Any, view: Any) -> Any:
    if view.dtype.kind != "f":
        return s
    if s.dtype.kind == "c" if type(s) is _ndarray else np.iscomplexobj(s):
        return np.real(s)
    return s


# While a function is set here, ``hand_over`` is made by it: derivatives of derivatives run
# code that hands sensitivities over as it is (``dplus.higher.box_map``), and record each
# addition into an entry for the next order (``dplus.memory_again``).
RECORDER: list[Any] = [None]


def hand_over(Abox: BoxSensitivities, a: Any, s: Any) -> None:
    """Add the sensitivity ``s`` of the array ``a`` (tracked memory) into its entry."""
    if s is Z or s is None:
        return
    recorder = RECORDER[0]
    if recorder is not None:
        recorder(Abox, a, s)
        return
    owner = memory_owner(a)
    flat = _entry(Abox, owner, True)
    s = _real_if_needed(s, a)
    if overlaps_itself(a):
        if a.dtype != owner.dtype:
            raise NonDifferentiableError(
                "sensitivity reached a broadcast view of another dtype of an array changed in place"
            )
        np.add.at(flat, positions(a, owner).ravel(), np.broadcast_to(s, a.shape).ravel())
        return
    view = entry_view(flat, owner, a)
    view += s


def _owner_and_entry(Abox: BoxSensitivities | None, a: Any) -> tuple[Any, Any] | None:
    """The owner of ``a``'s memory and the flat entry holding its sensitivity (None: none)."""
    if Abox is None:
        return None
    owner = memory_owner(a)
    flat = _entry(Abox, owner, False)
    return None if flat is None else (owner, flat)


def take(Abox: BoxSensitivities | None, a: Any) -> Any:
    """The sensitivity the entry holds for ``a``'s elements, removed from the entry (each place
    of memory once: a broadcast view gets it at the first element showing it)."""
    found = _owner_and_entry(Abox, a)
    if found is None:
        return Z
    owner, flat = found
    if overlaps_itself(a):
        pos = positions(a, owner).ravel()
        first = np.zeros(pos.shape, dtype=bool)
        _, where = np.unique(pos, return_index=True)
        first[where] = True
        out = np.zeros(pos.shape, dtype=a.dtype)
        out[first] = flat[pos[first]]
        flat[pos] = 0
        return out.reshape(a.shape)
    view = entry_view(flat, owner, a)
    out = view.copy()
    view[...] = 0
    return out


def peek(Abox: BoxSensitivities | None, a: Any) -> Any:
    """The sensitivity the entry holds for ``a``'s elements, left in the entry."""
    found = _owner_and_entry(Abox, a)
    if found is None:
        return Z
    owner, flat = found
    if overlaps_itself(a):
        return flat[positions(a, owner)]
    return entry_view(flat, owner, a).copy()


def peek_unclaimed(Abox: BoxSensitivities | None, a: Any, claimed: dict[Any, Any]) -> Any:
    """:func:`peek` of the elements of ``a`` that no array folded before it with the same
    ``claimed`` showed: at the boundary, each place of memory gives its sensitivity once, to
    the first argument (or element of one) showing it, so that arguments sharing memory get
    gradients that add up to the memory's, as arguments read twice do. ``claimed`` maps
    ``id(owner)`` to which places were given; its key ``"twice"`` says whether any place was
    shown again."""
    S = peek(Abox, a)
    if S is Z:
        return Z
    owner = memory_owner(a)
    given = claimed.get(id(owner))
    if given is None:
        given = claimed[id(owner)] = (owner, np.zeros(owner.nbytes // owner.itemsize, dtype=bool))
    pos = positions(a, owner)
    fresh = ~given[1][pos]
    given[1][pos] = True
    if fresh.all():
        return S
    claimed["twice"] = True
    return np.where(fresh, S, 0)


def take_at(Abox: BoxSensitivities | None, a: Any, idx: Any, last_wins: Any = None) -> Any:
    """``take`` of the elements ``a[idx]`` (an index with arrays in it: each occurrence; with
    ``last_wins`` -- a boolean array shaped like ``a[idx]`` -- only where it holds)."""
    found = _owner_and_entry(Abox, a)
    if found is None:
        return Z
    owner, flat = found
    view = entry_view(flat, owner, a)
    out = np.array(view[idx], copy=True)
    view[idx] = 0
    if last_wins is not None:
        out = np.where(last_wins, out, 0)
    return out


# ---------------------------------------------------------------------------
# the values writes overwrite


class WriteRecord:
    """One write into ``dst[idx]``: ``old`` is what it overwrote; ``new`` what it wrote, kept
    while the pass that undid it runs."""

    __slots__ = ("dst", "idx", "old", "new")

    def __init__(self, dst: Any, idx: Any, old: Any) -> None:
        self.dst = dst
        self.idx = idx
        self.old = old
        self.new: Any = None


def remember_write(dst: Any, idx: Any, old: Any) -> WriteRecord:
    """Before writing ``dst[idx]``: ``old`` is a copy of what is there now."""
    return WriteRecord(dst, idx, old)


def undo(Abox: BoxSensitivities | None, rec: WriteRecord) -> None:
    """Put back what the write overwrote (the reverse pass reaches the write)."""
    dst, idx = rec.dst, rec.idx
    rec.new = np.array(dst[idx], copy=True)
    dst[idx] = rec.old
    if Abox is not None:
        _memory(Abox).undone.append(rec)
    else:  # (a backprop run without a map: nothing will redo it, so redo it now)
        dst[idx] = rec.new


def finish(Abox: BoxSensitivities) -> None:
    """At the end of a pass: redo the writes it undid, in the order the program made them, so
    that every array holds again what the forward pass left in it."""
    mem = Abox._memory
    if mem is None or not mem.undone:
        return
    undone = mem.undone
    mem.undone = []
    for rec in reversed(undone):
        rec.dst[rec.idx] = rec.new


# ---------------------------------------------------------------------------
# arrays changed by code dplus does not see


def unseen_writes(changed: list[tuple[Any, Any]]) -> list[WriteRecord]:
    """Records of the elements that code dplus does not see changed: ``changed`` holds
    ``(owner, contents)`` pairs, ``contents`` an ``ArrayContents`` of the owner before the
    call. From then on the owners' memory is tracked."""
    records = []
    for owner, contents in changed:
        where, old = contents.changed_elements(owner)
        records.append(WriteRecord(owner, where, old))
        track(owner)
    return records


def reverse_unseen_writes(Abox: BoxSensitivities | None, records: list[WriteRecord]) -> Any:
    """The reverse of :func:`unseen_writes`: the old values are put back; returns the first
    array whose changed elements received a sensitivity (their derivative is unknown), or
    None."""
    culprit = None
    for rec in reversed(records):
        S = take_at(Abox, rec.dst, rec.idx)
        if S is not Z and culprit is None and np.any(S != 0):
            culprit = rec.dst
        undo(Abox, rec)
    return culprit


# ---------------------------------------------------------------------------
# the operation that made the memory takes its entry


def taken(A: Any, r: Any, Abox: Any) -> Any:
    """``A`` plus what the entry of the array ``r``'s memory holds for it, taken out."""
    if _TRACKED and type(Abox) is BoxSensitivities and Abox._memory is not None:
        if _tracked_owner(r) is not None:
            S = take(Abox, r)
            if S is not Z:
                return S if A is Z or A is None else add(A, S)
    return A


# The code of the backprops of rules that make arrays and hand their arguments' sensitivities
# back at once (the NumPy rules, the operators on arrays, reading an array's elements): their
# results take the entry. (Not an operation that hands an element of a list, a dict or an
# object on, nor a plus-function or a rule that runs one: what such an operation returns is
# made by an operation inside it, whose result takes the entry at the right time.)
_TAKING_FILES: set[str] = set()
# (by file and first line: the code dplus derives from a backprop's source to differentiate
# it again is a new code object of the same place, and its results take the entry alike)
_TAKING_CODES: set[tuple[str, int]] = set()


def results_take_entries(*, filename: str | None = None, code: Any = None) -> None:
    """The backprops defined in ``filename`` (or with the code object ``code``) belong to rules
    whose array results take the entry of their memory (see :func:`taking_backprop`)."""
    if filename is not None:
        _TAKING_FILES.add(filename)
    if code is not None:
        _TAKING_CODES.add((code.co_filename, code.co_firstlineno))


def is_array(v: Any) -> bool:
    return type(v) is _ndarray


def taking_backprop(r: Any, bp: Any, any_rule: bool = False) -> Any:
    """The backprop of a rule whose result is the array ``r``: ``bp``, given also what the
    entry of ``r``'s memory holds when the reverse pass reaches the rule.

    Put around the results of the rules named by :func:`results_take_entries` whose memory
    has never been written in place: if it is written later, this operation made it (or
    shows it before any write, and its backprop hands the part it took back to the same
    memory at once), and no write of it can happen during the operation, so taking the entry
    here is right. ``bp`` unchanged for memory already written, for arrays that cannot carry
    sensitivity, and for other operations."""
    if not any_rule:
        code = getattr(bp, "__code__", None)
        if code is None or (
            code.co_filename not in _TAKING_FILES
            and (code.co_filename, code.co_firstlineno) not in _TAKING_CODES
        ):
            return bp
    if r.dtype.kind not in "fc" or is_tracked_array(r):
        return bp

    def take_then_backprop(A: Any, Abox: Any) -> Any:
        return bp(taken(A, r, Abox), Abox)

    take_then_backprop.__qualname__ = getattr(bp, "__qualname__", "backprop")
    return take_then_backprop


_TAKE_CODE = (
    taking_backprop(
        np.zeros(1) if np is not None else None, lambda A, Abox: None, any_rule=True
    ).__code__
    if np is not None
    else None
)
# the closure sensitivity of the wrapper: (the wrapped backprop's, the result's)
TAKING_LAYOUT = ("bp", "r")
assert _TAKE_CODE is None or _TAKE_CODE.co_freevars == TAKING_LAYOUT


def is_taking_backprop(fn: Any) -> bool:
    """Whether ``fn`` is a backprop :func:`taking_backprop` put around another."""
    return getattr(fn, "__code__", None) is _TAKE_CODE


if np is not None:
    _result.array_results(
        _ndarray, taking_backprop, lambda r, bp: taking_backprop(r, bp, any_rule=True)
    )
