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
    "undo",
    "finish",
    "taking_backprop",
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
    _TRACKED[key] = weakref.ref(owner, lambda r, key=key: _forget(key, r))


def _tracked_owner(a: Any) -> Any:
    """``a``'s owner when its memory is tracked and can carry sensitivity, else None."""
    if not _TRACKED or a.dtype.kind not in "fc":
        return None
    m = memory_owner(a)
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


def _positions(a: Any, owner: Any) -> Any:
    """The element index in the owner's flat memory of each element of ``a`` (same shape)."""
    item = owner.itemsize
    pos = np.full(a.shape, (_address(a) - _address(owner)) // item, dtype=np.intp)
    for axis, (n, s) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[axis] = n
        pos = pos + (np.arange(n, dtype=np.intp) * (s // item)).reshape(shape)
    return pos


def _real_if_needed(s: Any, view: Any) -> Any:
    if view.dtype.kind == "f" and np.iscomplexobj(s):
        return np.real(s)
    return s


def hand_over(Abox: BoxSensitivities, a: Any, s: Any) -> None:
    """Add the sensitivity ``s`` of the array ``a`` (tracked memory) into its entry."""
    if s is Z or s is None:
        return
    owner = memory_owner(a)
    flat = _entry(Abox, owner, True)
    s = _real_if_needed(s, a)
    if overlaps_itself(a):
        if a.dtype != owner.dtype:
            raise NonDifferentiableError(
                "sensitivity reached a broadcast view of another dtype of an array changed in place"
            )
        np.add.at(flat, _positions(a, owner).ravel(), np.broadcast_to(s, a.shape).ravel())
        return
    view = entry_view(flat, owner, a)
    view += s


def take(Abox: BoxSensitivities | None, a: Any) -> Any:
    """The sensitivity the entry holds for ``a``'s elements, removed from the entry (each place
    of memory once: a broadcast view gets it at the first element showing it)."""
    if Abox is None:
        return Z
    owner = memory_owner(a)
    flat = _entry(Abox, owner, False)
    if flat is None:
        return Z
    if overlaps_itself(a):
        pos = _positions(a, owner).ravel()
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
    if Abox is None:
        return Z
    owner = memory_owner(a)
    flat = _entry(Abox, owner, False)
    if flat is None:
        return Z
    if overlaps_itself(a):
        return flat[_positions(a, owner)]
    return entry_view(flat, owner, a).copy()


def take_at(Abox: BoxSensitivities | None, a: Any, idx: Any, last_wins: Any = None) -> Any:
    """``take`` of the elements ``a[idx]`` (an index with arrays in it: each occurrence; with
    ``last_wins`` -- a boolean array shaped like ``a[idx]`` -- only where it holds)."""
    if Abox is None:
        return Z
    owner = memory_owner(a)
    flat = _entry(Abox, owner, False)
    if flat is None:
        return Z
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


def record_write(dst: Any, idx: Any) -> WriteRecord:
    """Before writing ``dst[idx]``: a record of what is there now."""
    return WriteRecord(dst, idx, np.array(dst[idx], copy=True))


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
# the operation that made the memory takes its entry


def taking_backprop(r: Any, bp: Any) -> Any:
    """The backprop of an operation whose result is the array ``r``: ``bp``, given also what
    the entry of ``r``'s memory holds when the reverse pass reaches the operation.

    Put around every result whose memory has never been written in place: if it is written
    later, this operation made it (or shows it before any write), and no write of it can
    happen during the operation, so taking the entry here is right. ``bp`` unchanged for
    memory already written (an operation returning it does not make it) and for arrays
    that cannot carry sensitivity."""
    if r.dtype.kind not in "fc" or is_tracked_array(r):
        return bp

    def take_then_backprop(A: Any, Abox: Any) -> Any:
        if _TRACKED and type(Abox) is BoxSensitivities and Abox._memory is not None:
            if _tracked_owner(r) is not None:
                S = take(Abox, r)
                if S is not Z:
                    A = S if A is Z or A is None else add(A, S)
        return bp(A, Abox)

    take_then_backprop.__qualname__ = getattr(bp, "__qualname__", "backprop")
    return take_then_backprop


if np is not None:
    _result.array_results(_ndarray, taking_backprop)
