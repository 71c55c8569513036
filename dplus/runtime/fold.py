"""Moving sensitivities out of the box-sensitivity map at a call's boundary: the layouts and
snapshots of arguments taken when a call starts, and ``fold``, which gathers a mutable
value's sensitivity back from its entries into the structure of the value.
"""

from __future__ import annotations

import collections
import itertools
import sys
from collections.abc import Sequence
from typing import Any, cast

from ..errors import NonDifferentiableError
from . import memory as _memory
from .boxes import Box, BoxSensitivities
from .classes import is_local_class
from .closures import closure_values
from .core import CellKey
from .handover import _as_items, is_tracked_mutable, only_floats
from .kinds import is_atom, is_ndarray, is_number
from .linear import (
    OneHot,
    TupleAccumulator,
    add,
    coerce_zero,
    gen_zero,
    is_zero_sensitivity,
    object_attributes,
    zero,
)
from .result import KeywordDict, ProcResult

_ndarray: Any = _memory._ndarray

_NUMBERS = frozenset({float, int})
_FLOATS = frozenset({float})
_TUPLES = frozenset({tuple})
_ZEROS = frozenset({type(gen_zero)})
_chain = itertools.chain.from_iterable


def _bytes_of(a: Any) -> bytes:
    """The array's data, by ``ndarray.tobytes`` itself: a subclass may refuse its own
    (astropy's ``Quantity.tobytes`` raises ``NotImplementedError``)."""
    return _ndarray.tobytes(a)


class ArrayContents:
    """The bytes of a NumPy array when a call of code dplus does not see began (compared by
    bytes: NaNs compare equal to themselves, every dtype is covered), and the elements the
    call writes whatever values it writes (``written``: an ``out=`` argument's)."""

    __slots__ = ("shape", "data", "written")

    def __init__(self, a: Any) -> None:
        self.shape = a.shape
        self.data = _bytes_of(a)
        self.written: Any = None

    def changed(self, a: Any) -> bool:
        if self.written is not None and a.shape == self.shape:
            return True
        return a.shape != self.shape or _bytes_of(a) != self.data

    def changed_elements(self, a: Any) -> Any:
        """Where the elements of ``a`` (same shape) differ from the bytes kept or were written,
        and what they were there."""
        np = sys.modules["numpy"]
        n, item = a.size, a.itemsize
        before = np.frombuffer(self.data, dtype=np.uint8).reshape(n, item)
        now = np.frombuffer(_bytes_of(a), dtype=np.uint8).reshape(n, item)
        where = (before != now).any(axis=1).reshape(a.shape)
        if self.written is not None:
            # (an output written with the values it held: its new values still come from the
            # call, whose derivative is unknown)
            where |= self.written
        old = np.frombuffer(self.data, dtype=a.dtype).reshape(a.shape)[where]
        return where, old

    def mark_written(self, owner: Any, view: Any) -> None:
        """The elements of ``owner`` that ``view`` shows are written by the call."""
        np = sys.modules["numpy"]
        item = owner.itemsize
        flat = np.zeros(owner.nbytes // item, dtype=bool)
        if self.written is not None:
            flat[_memory.positions(owner, owner).ravel()] = self.written.ravel()
        flat[_memory.positions(view, owner).ravel()] = True
        self.written = flat[_memory.positions(owner, owner)]


def _out_arrays(op: Any, args: tuple, kwargs: dict) -> list[Any]:
    """The arrays a NumPy call writes its results into: ``out=`` (an array or a tuple of
    them), and a ufunc's outputs passed by position."""
    outs: list[Any] = []
    out = kwargs.get("out")
    if out is not None:
        outs.extend(out if type(out) is tuple else (out,))
    nin = getattr(op, "nin", None)
    if type(nin) is int and type(op).__name__ == "ufunc" and len(args) > nin:
        outs.extend(args[nin:])
    return [o for o in outs if type(o) is _ndarray]


def layouts(values: Any) -> list[tuple[Any, Any]]:
    """``(container, its items)`` for every list, dict, box and object reachable from
    ``values`` (tuples looked into), and ``(owner, ArrayContents)`` for the array owning the
    memory of every NumPy array: what a call of code dplus does not see may change."""
    out: list[tuple[Any, Any]] = []
    seen: set[int] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is float or t is int or t is bool or v is None or t is str:
            continue
        if t is tuple:
            stack.extend(v)
            continue
        if is_ndarray(v):
            # (a view's owner: code given a view can reach the rest through ``.base``)
            m = _memory.memory_owner(v) if t is _ndarray else v
            if id(m) not in seen:
                seen.add(id(m))
                out.append((m, ArrayContents(m)))
            continue
        if not (is_tracked_mutable(v) or is_local_class(v)) or t is CellKey or id(v) in seen:
            continue
        seen.add(id(v))
        items = _container_items(v)
        if items is None:
            continue  # (an attribute that cannot be read, a property that raises: not watched)
        if isinstance(v, list):
            if not _NUMBERS.issuperset(map(type, items)):
                stack.extend(items)
        elif t is Box:
            stack.append(v.value)
        elif isinstance(v, set):
            pass  # (its elements are hashable values)
        elif isinstance(v, collections.deque):
            stack.extend(items)
        else:  # a dict's or an object's (key, value) pairs
            stack.extend(x for _, x in items)
        out.append((v, items))
    return out


def _container_items(v: Any) -> tuple | None:
    """A list's elements, a box's value, or a dict's or object's (key, value) pairs."""
    if isinstance(v, list):
        return tuple(v)
    if isinstance(v, dict):
        return tuple(v.items())
    if isinstance(v, (set, collections.deque)):
        return tuple(v)
    if type(v) is Box:
        return (v.value,)
    if isinstance(v, type):  # (a class built by differentiated code: its own attributes)
        return tuple(v.__dict__.items())
    try:
        return tuple(object_attributes(v).items())
    except Exception:
        return None


def watch_call(op: Any, args: tuple, kwargs: dict) -> list[tuple[Any, Any]]:
    """:func:`layouts` of what a call of ``op`` (code dplus does not see) could change: its
    arguments, and a bound method's object or a callable object itself."""
    watched = layouts(args + tuple(kwargs.values()) + (getattr(op, "__self__", op),))
    for out in _out_arrays(op, args, kwargs):
        owner = _memory.memory_owner(out)
        for v, contents in watched:
            if v is owner and type(contents) is ArrayContents:
                contents.mark_written(owner, out)
    return watched


def changed_since(watched: list[tuple[Any, Any]]) -> list[Any]:
    """The containers of :func:`layouts` whose items are no longer the same objects, and
    the arrays whose contents changed."""
    out = []
    for v, items in watched:
        if type(items) is ArrayContents:
            if items.changed(v):
                out.append(v)
            continue
        now = _container_items(v) or ()  # (unreadable now, readable before the call: changed)
        if len(now) != len(items) or not all(map(_same_item, now, items)):
            out.append(v)
    return out


def _same_item(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is tuple and len(a) == 2 and type(b) is tuple and len(b) == 2:  # (key, value) pairs
        return a[1] is b[1] and (a[0] is b[0] or _equal_keys(a[0], b[0]))
    return False


def _equal_keys(a: Any, b: Any) -> bool:
    # (a dict's items are remade as tuples; a list's 2-tuples may hold arrays, whose == is
    # elementwise: those are the same only as the same objects)
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False


def has_own_entry(v: Any) -> bool:
    """Whether ``v``'s sensitivity lives in the box-sensitivity map under ``v`` itself: a
    tracked mutable, or a class whose attributes carry sensitivity. Code that hands such a
    value back hands back that entry with it, which belongs to whoever made ``v``."""
    return is_tracked_mutable(v) or is_local_class(v)


def mutable_sensitivity_of(v: Any, Abox: BoxSensitivities) -> Any:
    """The sensitivity held in ``Abox`` for ``v`` and the mutable values inside it."""
    if Abox is None:
        return gen_zero
    if type(v) is _ndarray:
        return _memory.peek(Abox, v) if _memory.is_tracked_array(v) else gen_zero
    if is_tracked_mutable(v):
        return fold_arguments(v, gen_zero, Abox)
    if type(v) is tuple:
        return tuple(mutable_sensitivity_of(e, Abox) for e in v)
    if is_local_class(v):  # (its attributes' sensitivities, by name: runtime.classes)
        entry = Abox.get(v)
        return gen_zero if entry is gen_zero or not entry else tuple(entry.values())
    return gen_zero


class ItemColumns:
    """The element sensitivities of a fresh list of tuples made by ``zip`` or ``enumerate``,
    held as columns: ``cols[j]`` lists every item's ``j``-th part (``None``: all zero).

    Only the reverse of a fast loop over such a list puts one in ``Abox``
    (``runtime.routers.route_columns``), and only the backprop of the builtin that made the
    list reads it (``primitives._iterables.columns``): no user code can reach the list.
    """

    __slots__ = ("cols",)

    def __init__(self, cols: list) -> None:
        self.cols = cols


class Snapshot:
    """The layout a mutable argument had when a differentiated function was called.

    The box-sensitivity map gives an argument's sensitivity in the layout it had at the
    call (writes restore layouts in reverse), so the boundary folds against this record
    of the layout, not against the argument as the function left it.
    """

    __slots__ = ("obj", "items", "content")

    def __init__(self, obj: Any, items: Any, content: str | None = None) -> None:
        self.obj = obj
        self.items = items
        # "floats" or "float tuples": a list that held only those, ``items`` being its copy
        self.content = content


def snapshot(v: Any, _memo: dict | None = None) -> Any:
    """``v`` with every mutable value inside replaced by a :class:`Snapshot` of its layout."""
    t = type(v)
    if t is float or t is int or t is bool or v is None:
        return v
    if t is tuple:
        for e in v:
            te = type(e)
            if te is not float and te is not int:
                break
        else:
            return v  # the common case: numbers only
        if _memo is None:  # the arguments of a call: numbers and lists of floats at once
            _memo = {}
            return tuple([_snapshot_element(e, _memo) for e in v])
    if _memo is None:
        _memo = {}
    key = id(v)
    if key in _memo:
        return _memo[key]
    if t is _ndarray:
        return v  # (an array's sensitivity is folded from the array itself)
    if is_tracked_mutable(v):
        snap = Snapshot(v, None)
        _memo[key] = snap
        snap.items, snap.content = _layout(v, _memo)
        return snap
    if isinstance(v, tuple):
        items = [snapshot(e, _memo) for e in v]
        for x, e in zip(items, v):
            if x is not e:  # a mutable value inside, now its snapshot
                make = getattr(type(v), "_make", None)  # a NamedTuple's
                return make(items) if make is not None else tuple(items)
        return v
    return v


def _layout(v: Any, memo: dict) -> tuple[Any, str | None]:
    """A tracked mutable value's layout (a snapshot's ``items``) and what it held, when that is
    only floats or only tuples of floats (its ``content``)."""
    t = type(v)
    if t is list and only_floats(v):
        return v[:], "floats"  # floats only: the layout is the copy
    if t is list and _NUMBERS.issuperset(map(type, v)):
        return v[:], None  # numbers only: the layout is the copy
    if t is list and _TUPLES.issuperset(map(type, v)) and _FLOATS.issuperset(map(type, _chain(v))):
        return v[
            :
        ], "float tuples"  # tuples of floats (data points): immutable, the copy is the layout
    if isinstance(v, list):
        return [_snapshot_element(e, memo) for e in v], None  # (a matrix's rows: at once)
    if isinstance(v, dict):
        return {k: snapshot(e, memo) for k, e in v.items()}, None
    if t is Box:
        return snapshot(v.value, memo), None
    if isinstance(v, (set, collections.deque)):
        return v, None  # (folded as the set or deque it is: a set's elements are hashable values)
    if t is not CellKey:
        return {k: snapshot(e, memo) for k, e in object_attributes(v).items()}, None
    return None, None


def _snapshot_element(e: Any, memo: dict) -> Any:
    """:func:`snapshot` of an element: numbers and lists of floats (a vector, a matrix's
    row) without the general steps."""
    te = type(e)
    if te is float or te is int:
        return e
    if te is list:
        snap = memo.get(id(e))
        if snap is None and only_floats(e):
            snap = memo[id(e)] = Snapshot(e, e[:], "floats")
        if snap is not None:
            return snap
    return snapshot(e, memo)


_WITH_MEMORY = "with memory"  # (a key of fold's memo: no id is a string)


def fold_arguments(
    v: Any, s: Any, Abox: BoxSensitivities | None, claimed: dict[Any, Any] | None = None
) -> Any:
    """:func:`fold` at the boundary of a differentiation: the arrays in ``v`` whose memory was
    changed in place get also their entries (the sensitivity of what they held on entry),
    each place of memory once across the folds sharing ``claimed``
    (:func:`runtime.memory.peek_unclaimed`). Inside a pass, an array's entry stays where it
    is: it belongs to its memory."""
    return fold(v, s, Abox, {_WITH_MEMORY: {} if claimed is None else claimed})


def keyword_dict_sensitivity(kwargs: dict, s: Any, Abox: BoxSensitivities) -> KeywordDict:
    """The sensitivity of a function's ``**kwargs`` dict as its caller takes it: by keyword,
    ``s``'s part plus the dict's ``Abox`` entry, and nothing more.

    A value in it that is a list, dict or object has its own sensitivity in ``Abox`` under
    its own identity, where the caller finds it: it is not folded in here (as :func:`fold`
    does at the user's boundary), or the caller would hand it over a second time, and zeros
    would be made of the whole object graph behind it (a Dask client's, say) and handed
    into it."""
    entry = Abox.get(kwargs) if kwargs in Abox else gen_zero
    out = KeywordDict()
    for k in kwargs:
        sk = s.get(k, gen_zero) if isinstance(s, dict) else gen_zero
        if isinstance(entry, dict) and k in entry:
            sk = add(sk, entry[k])
        out[k] = sk
    return out


def fold(v: Any, s: Any, Abox: BoxSensitivities | None, _memo: dict | None = None) -> Any:
    """The user-facing sensitivity of ``v``: ``s`` plus ``Abox`` entries, no ``gen_zero`` inside."""
    if _memo is None:
        _memo = {}
    t = type(v)
    if t is Snapshot:
        return _fold_snapshot(v, s, Abox, _memo)
    if t is float or t is int:
        if s is gen_zero or s is None:
            return zero(v)
        return s
    key = id(v)
    if key in _memo:
        return _memo[key]
    if t is list or isinstance(v, list):
        return _fold_list_value(v, s, Abox, _memo, key)
    if t is tuple or isinstance(v, tuple):
        return _fold_tuple(v, s, Abox, _memo)
    if t is dict or isinstance(v, dict):
        return _fold_mapping(v, s, Abox.get(v) if Abox is not None else gen_zero, Abox, _memo, key)
    if isinstance(v, collections.deque):
        return _fold_deque(v, s, Abox, _memo, key)
    if isinstance(v, (set, frozenset)):
        _refuse_set_sensitivity(v, s, Abox)
        s = gen_zero
    return _fold_value(v, s, Abox, _memo, key)


def _fold_list_value(v: list, s: Any, Abox: BoxSensitivities | None, memo: dict, key: int) -> list:
    entry: Any = Abox.get(v) if Abox is not None else gen_zero
    base = _as_items(s, len(v), v) if s is not gen_zero and s is not None else None
    if base is None and entry is not gen_zero and len(entry) == len(v):
        # the common case, a list of numbers: one pass, no recursion
        out = [
            e if type(x) is float and type(e) is float else fold(x, e, Abox, memo)
            for x, e in zip(v, entry)
        ]
        memo[key] = out
        return out
    return _fold_list(v, base, entry, Abox, memo, key)


def _fold_tuple(v: tuple, s: Any, Abox: BoxSensitivities | None, memo: dict) -> Any:
    if (
        type(v) is tuple
        and type(s) is tuple
        and len(s) == len(v)
        and _FLOATS.issuperset(map(type, s))
        and _NUMBERS.issuperset(map(type, v))
    ):
        return s  # numbers with their sensitivities: nothing to fold
    if s is gen_zero or s is None:
        items = [gen_zero] * len(v)
    elif type(s) is OneHot:
        items = s.to_list()
    elif type(s) is TupleAccumulator:
        items = s.items
    else:
        items = list(s)
    out_items = [fold(e, si, Abox, memo) for e, si in zip(v, items)]
    make = getattr(type(v), "_make", None)  # a NamedTuple's
    return make(out_items) if make is not None else tuple(out_items)


def _fold_deque(
    v: collections.deque, s: Any, Abox: BoxSensitivities | None, memo: dict, key: int
) -> collections.deque:
    entry = Abox.get(v) if Abox is not None else gen_zero
    base = _as_items(s, len(v), v) if s is not gen_zero and s is not None else [gen_zero] * len(v)
    if type(entry) is list and len(entry) == len(v):
        base = [add(b, e) for b, e in zip(base, entry)]
    folded = collections.deque([fold(e, b, Abox, memo) for e, b in zip(v, base)])
    memo[key] = folded
    return folded


def _refuse_set_sensitivity(v: set | frozenset, s: Any, Abox: BoxSensitivities | None) -> None:
    """A set made outside has no values its elements' sensitivities could go back to, and a
    gradient shaped like a set does not exist: any sensitivity reaching it is an error."""
    parts = list(s.values()) if isinstance(s, dict) else []
    entry = Abox.get(v) if Abox is not None and isinstance(v, set) else gen_zero
    if isinstance(entry, dict):
        parts.extend(entry.values())
    if any(not is_zero_sensitivity(x) for x in parts):
        raise NonDifferentiableError(
            "sensitivity reached the elements of a set that comes from outside "
            "the differentiated code (an argument, a global), where its elements cannot carry sensitivity in "
            "dplus. Iterate over a list or a tuple instead, or make the set inside: {a, b} or set(xs)"
        )


def _fold_value(v: Any, s: Any, Abox: BoxSensitivities | None, memo: dict, key: int) -> Any:
    """:func:`fold` of a value that is not a list, tuple, dict or deque."""
    t = type(v)
    if t is Box:
        raw = s.value if isinstance(s, Box) else s
        if Abox is not None and v in Abox:
            raw = add(raw, Abox.get(v))
        result = Box(None)
        memo[key] = result
        result.value = fold(v.value, raw, Abox, memo)
        return result
    if t is ProcResult:
        sp = s.primal if isinstance(s, ProcResult) else gen_zero
        sb = s.backprop if isinstance(s, ProcResult) else gen_zero
        return ProcResult(fold(v.primal, sp, Abox, memo), fold(v.backprop, sb, Abox, memo))
    if type(v) is bool or is_atom(v):
        return None
    if t is _ndarray and Abox is not None and _WITH_MEMORY in memo and _memory.is_tracked_array(v):
        # an argument changed in place: its entry holds the sensitivity of what it showed on entry
        s = add(s, _memory.peek_unclaimed(Abox, v, memo[_WITH_MEMORY]))
    if is_number(v) or is_ndarray(v):
        return zero(v) if s is gen_zero or s is None else conform_numpy_sensitivity(v, s)
    if callable(v):
        return _fold_closure(v, s, Abox, memo)
    if is_tracked_mutable(v):
        entry = Abox.get(v) if Abox is not None else gen_zero
        return _fold_mapping(object_attributes(v), s, entry, Abox, memo, key)
    return coerce_zero(s, v)


def _fold_closure(v: Any, s: Any, Abox: BoxSensitivities | None, memo: dict) -> Any:
    """A function's sensitivity: one per value its closure holds."""
    vals = closure_values(v)
    if s is gen_zero or s is None:
        items = [gen_zero] * len(vals)
    else:
        items = list(s.items if type(s) is TupleAccumulator else s)
        if len(items) != len(vals):
            return coerce_zero(s, v)
    return tuple(fold(e, si, Abox, memo) for e, si in zip(vals, items))


def conform_numpy_sensitivity(v: Any, s: Any) -> Any:
    """A NumPy argument's sensitivity as the user sees it: of the argument's dtype (a float32
    array or scalar gets a float32 gradient, as in autograd), zeros for an integer or bool
    array (a constant, as with JAX's ``allow_int``), real for a real argument."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(v, (np.ndarray, np.generic)):
        return s
    dtype = v.dtype
    if isinstance(s, (np.ndarray, np.generic)) and s.dtype == dtype:
        # (an array of shape () gets one: NumPy's sum of two such arrays is a NumPy scalar)
        return np.asarray(s) if isinstance(v, np.ndarray) and isinstance(s, np.generic) else s
    if dtype.kind in "biu":
        return (
            zero(v) if isinstance(v, np.ndarray) else s
        )  # (NumPy integer scalars count as numbers)
    if dtype.kind not in "fc":
        return s
    if dtype.kind == "f" and np.iscomplexobj(s):
        s = np.real(s)
    if isinstance(v, np.ndarray):
        return np.asarray(s).astype(dtype) if np.shape(s) == v.shape else s
    return dtype.type(s) if np.ndim(s) == 0 else s


def fold_float_list(snap: Snapshot, Abox: BoxSensitivities | None) -> list | None:
    """The fold of a list that held only floats and has no sensitivity but its ``Abox``
    entry: its entry's floats, or zeros when it has none (``None``: fold it the general way)."""
    found = Abox._entries.get(id(snap.obj)) if Abox is not None else None
    if found is None:
        return [0.0] * len(snap.items)  # it received no sensitivity
    entry = found[1]
    if type(entry) is list and len(entry) == len(snap.items) and only_floats(entry):
        return entry[:]  # one C-level pass to check, one to copy
    return None


def _fold_snapshot(snap: Snapshot, s: Any, Abox: BoxSensitivities | None, _memo: dict) -> Any:
    v = snap.obj
    key = id(snap)
    if key in _memo:
        return _memo[key]
    entry: Any = Abox.get(v) if Abox is not None else gen_zero
    items = snap.items
    if isinstance(v, list):
        base = _as_items(s, len(items), items) if s is not gen_zero and s is not None else None
        if (
            snap.content == "float tuples"
            and base is None
            and type(entry) is list
            and len(entry) == len(items)
            and _TUPLES.issuperset(map(type, entry))
            and _FLOATS.issuperset(map(type, _chain(entry)))
            and list(map(len, entry)) == list(map(len, items))
        ):
            # tuples of floats, each with a tuple of float sensitivities: nothing to fold
            out = entry[:]
            _memo[key] = out
            return out
        if (
            base is None
            and snap.content == "floats"
            and (entry is gen_zero or type(entry) is list and len(entry) == len(items))
        ):
            # the common case, a list of floats: their sensitivities are the entry's
            floats = fold_float_list(snap, Abox)
            if floats is None:  # (then the Abox has an entry: a list)
                floats = [0.0 if e is gen_zero or e is None else e for e in cast(list[Any], entry)]
            _memo[key] = floats
            return floats
        return _fold_list(items, base, entry, Abox, _memo, key)
    if isinstance(v, dict) or (type(v) is not Box and isinstance(items, dict)):
        return _fold_mapping(items, s, entry, Abox, _memo, key)
    if type(v) is Box:
        raw = s.value if isinstance(s, Box) else s
        if entry is not gen_zero:
            raw = add(raw, entry)
        result = Box(None)
        _memo[key] = result
        result.value = fold(items, raw, Abox, _memo)
        return result
    return fold(v, s, Abox, _memo)


def _fold_list(
    items: list[Any], base: Sequence[Any] | None, entry: Any, Abox: Any, memo: dict, key: int
) -> list:
    """Element by element: the given sensitivities plus the list's ``Abox`` entry."""
    out: list = []
    memo[key] = out
    if base is None and (
        entry is gen_zero or len(entry) == len(items) and _ZEROS.issuperset(map(type, entry))
    ):
        # no sensitivity for the list itself (the usual case for a list of lists: each row's
        # is in the row's own entry): rows of floats with float entries are copied at once
        append = out.append
        for e in items:
            if type(e) is Snapshot and e.content == "floats":
                r = memo.get(id(e))
                if r is None:
                    r = fold_float_list(e, Abox)
                    r = (
                        _fold_snapshot(e, gen_zero, Abox, memo)
                        if r is None
                        else memo.setdefault(id(e), r)
                    )
                append(r)
            else:
                append(fold(e, gen_zero, Abox, memo))
        return out
    for i, e in enumerate(items):
        si = gen_zero if base is None else base[i]
        if entry is not gen_zero and i < len(entry):
            si = add(si, entry[i])
        out.append(fold(e, si, Abox, memo))
    return out


def _fold_mapping(items: dict, s: Any, entry: Any, Abox: Any, memo: dict, key: int) -> dict:
    """Key by key (dict keys or attribute names): the given sensitivities plus the ``Abox`` entry."""
    out: dict = {}
    memo[key] = out
    for k, e in items.items():
        sk = s.get(k, gen_zero) if isinstance(s, dict) else gen_zero
        if entry is not gen_zero and k in entry:
            sk = add(sk, entry[k])
        out[k] = fold(e, sk, Abox, memo)
    return out
