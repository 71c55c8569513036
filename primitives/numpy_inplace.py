"""Rules for changing NumPy arrays in place.

Every in-place form runs as in the plain program, on the array itself: item, slice,
boolean-mask and fancy-index assignment (``a[i] = v``, ``a[1:-1] = ...``, ``a[m] = v``,
``a[[0, 2]] = v``), augmented assignment on arrays and views (``a += b``, ``v = a[2:];
v *= 2``, ``for row in B: row -= 1``, ``a @= M``), ``out=`` of the functions with rules,
``np.add.at``/``np.subtract.at``/``np.multiply.at``, and the methods and functions that
change an array (``a.fill``, ``a.sort``, ``a.partition``, ``a.put``, ``np.copyto``,
``np.put``, ``np.place``, ``np.putmask``, ``np.fill_diagonal``, ``np.put_along_axis``,
``a.__iadd__(b)``, ``operator.iadd(a, b)``).

Each write keeps the values it overwrites (``runtime.memory.remember_write``); its reverse
moves the written elements' sensitivity out of the memory's entry in the box-sensitivity
map, to the values written or through the operation that computed them, and puts the
old values back (see :mod:`dplus.runtime.memory`). An operation computed in place
(``a *= b``, ``out=``, ``np.add.at``) is differentiated by the rule of the same operation
computed on the old values, which the reverse pass restores before that rule's backprop
runs.

Refused (``NonDifferentiableError``, before anything changes): ``a.resize`` (it changes
the shape of memory others may show), ``setfield``, a write into a broadcast view (its
elements are one place of memory), into an array of a NumPy subclass, or into memory
owned by an object that is not an array (``np.frombuffer``); ufuncs other than add,
subtract and multiply with ``.at``.
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.calls import IN_PLACE_OPERATORS
from dplus.runtime.core import apply_transform
from dplus.runtime.linear import add, gen_zero
from dplus.runtime.memory import (
    hand_over,
    memory_owner,
    overlaps_itself,
    remember_write,
    take,
    take_at,
    track,
    undo,
)
from dplus.runtime.registry import lookup_transform, register_primitive
from dplus.runtime.result import ProcResult

from .numpy_fit import fit

try:
    import numpy as np
except ImportError:  # without NumPy this module registers nothing
    np = None  # type: ignore[assignment]

Z: Any = gen_zero

__all__ = [
    "array_setitem_plus",
    "array_inplace_plus",
    "out_plus",
    "out_argument",
    "ufunc_at_plus",
    "IN_PLACE_OPERATORS",
    "register_in_place_rules",
    "check_writable",
    "function_name",
    "user_place",
]


_OWN_DIRS = (
    os.path.dirname(os.path.abspath(__file__)),  # the rule library
    os.path.dirname(
        os.path.dirname(os.path.abspath(apply_transform.__code__.co_filename))
    ),  # dplus
)


def user_place() -> str:
    """``file, line N`` of the innermost frame of the user's code (not dplus's)."""
    f: Any = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not os.path.abspath(name).startswith(_OWN_DIRS) and "<dplus" not in name:
            return f"{name}, line {f.f_lineno}"
        f = f.f_back
    return "your code"


def check_writable(dst: Any, what: str) -> Any:
    """The owner of ``dst``'s memory, when dplus can follow writes into ``dst``; raises otherwise."""
    if type(dst) is not np.ndarray:
        raise NonDifferentiableError(
            f"{what} ({user_place()}) would change a {type(dst).__module__}.{type(dst).__qualname__} in "
            "place; dplus follows in-place changes of plain NumPy arrays only. Make a new array instead "
            "(np.where, np.concatenate, a.copy())"
        )
    owner = memory_owner(dst)
    if owner.base is not None or not (owner.flags.c_contiguous or owner.flags.f_contiguous):
        raise NonDifferentiableError(
            f"{what} ({user_place()}) would change in place an array whose memory belongs to a "
            f"{type(owner.base).__name__} (np.frombuffer, a memory map, ...), which dplus cannot follow. "
            "Copy it into a new array first (np.array(buffer_array))"
        )
    if overlaps_itself(dst):
        raise NonDifferentiableError(
            f"{what} ({user_place()}) would write into a broadcast view, whose elements share memory: "
            "write into a copy instead (np.array(view))"
        )
    return owner


def _is_basic(idx: Any) -> bool:
    """Whether ``a[idx]`` is a view (no index array, no list, no boolean)."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        t = type(p)
        if t is int or t is slice or p is None or p is Ellipsis:
            continue
        if t is bool or t is np.bool_:
            return False
        if isinstance(p, np.integer) or (
            hasattr(p, "__index__") and not isinstance(p, (np.ndarray, list))
        ):
            continue
        return False
    return True


def _may_repeat(idx: Any) -> bool:
    """Whether an advanced index may name one element twice (an integer array or list in it)."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if isinstance(p, (list, tuple)) or (isinstance(p, np.ndarray) and p.dtype.kind != "b"):
            return True
    return False


def _last_wins(dst: Any, idx: Any) -> Any:
    """For ``dst[idx] = v`` with an index naming elements more than once: where the value
    written is the one the element keeps (NumPy writes in order, the last one stays)."""
    pos = np.arange(dst.size, dtype=np.intp).reshape(dst.shape)[idx]
    flat = np.ravel(pos)
    if flat.size < 2:
        return None
    order = np.arange(flat.size)
    last = np.full(dst.size, -1, dtype=np.intp)
    last[flat] = order  # (NumPy assigns in order: the last occurrence stays)
    keep = last[flat] == order
    if keep.all():
        return None
    return keep.reshape(np.shape(pos))


# ---------------------------------------------------------------------------
# a[idx] = value


def array_setitem_plus(dst: Any, idx: Any, value: Any) -> ProcResult:
    """``dst[idx] = value`` on an array: the write, and its reverse."""
    owner = check_writable(dst, "assigning into an array")
    rec = remember_write(dst, idx, np.copy(dst[idx]))
    dst[idx] = value
    track(owner)
    last = None if _is_basic(idx) or not _may_repeat(idx) else _last_wins(dst, idx)

    def array_setitem_backprop(A: Any, Abox: Any) -> tuple:
        S = take_at(Abox, dst, idx, last)
        undo(Abox, rec)
        if S is Z or value is None:
            return (), Z, None, Z
        return (), Z, None, fit(S, value)

    return ProcResult(None, array_setitem_backprop)


# ---------------------------------------------------------------------------
# a op= b


def array_inplace_plus(iop: Any, a: Any, b: Any) -> ProcResult:
    """``a op= b`` on the array ``a``: computed in ``a``'s memory, as Python does; its
    reverse restores ``a``'s old values and runs the rule of ``a op b`` on them."""
    owner = check_writable(a, f"`{_SYMBOLS.get(iop, iop.__name__)}`")
    plain = IN_PLACE_OPERATORS[iop]
    old = a.copy()
    rec = remember_write(a, Ellipsis, old)
    r = apply_transform(lookup_transform(plain), old, b)  # the rule, on the old values
    out = iop(a, b)
    if out is not a:  # (NumPy computed a new array: nothing changed in place)
        return ProcResult(out, r.backprop)
    track(owner)
    rule_back = r.backprop

    def array_inplace_backprop(A: Any, Abox: Any) -> tuple:
        S = take(Abox, a)
        if A is not Z and A is not None:
            S = A if S is Z else add(S, A)
        undo(Abox, rec)
        if S is Z:
            return (), Z, Z
        g = rule_back(S, Abox)
        old_s = g[1]
        if old_s is not Z and old_s is not None:
            hand_over(Abox, a, old_s)  # the sensitivity of the old values, where they were
        return (), Z, g[2]

    return ProcResult(out, array_inplace_backprop)


_SYMBOLS = {
    operator.iadd: "+=",
    operator.isub: "-=",
    operator.imul: "*=",
    operator.itruediv: "/=",
    operator.ifloordiv: "//=",
    operator.imod: "%=",
    operator.ipow: "**=",
    operator.imatmul: "@=",
    operator.iand: "&=",
    operator.ior: "|=",
    operator.ixor: "^=",
    operator.ilshift: "<<=",
    operator.irshift: ">>=",
}


# ---------------------------------------------------------------------------
# out=


def out_argument(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The array ``fn(*args, **kwargs)`` writes into (``out=``, or a ufunc's extra positional
    argument), or None."""
    out = kwargs.get("out")
    if out is None and isinstance(fn, np.ufunc) and len(args) > fn.nin:
        out = args[fn.nin]
    if isinstance(out, tuple):
        if len(out) == 1:
            return out[0]
        if all(o is None for o in out):
            return None
        return out
    return out


def out_plus(
    fn: Any, transform: Callable[..., ProcResult], args: tuple, kwargs: dict
) -> ProcResult:
    """``fn(*args, out=y)`` for a function whose rule is ``transform``: the rule computes the
    result from the arguments as they are (their sensitivities come from its backprop), and
    ``fn`` itself writes into ``y``, as in the plain call."""
    y = out_argument(fn, args, kwargs)
    if isinstance(y, tuple):
        raise NonDifferentiableError(
            f"{function_name(fn)}(..., out=(...)) with several outputs ({user_place()}) is not supported: "
            "use the returned arrays"
        )
    name = f"{function_name(fn)}(..., out=...)"
    owner = check_writable(y, name)
    is_ufunc = isinstance(fn, np.ufunc)
    where = kwargs.get("where", True) if is_ufunc else True  # (a ufunc's: which elements it writes)
    plain_args = args
    if is_ufunc and len(args) > fn.nin:
        plain_args = args[: fn.nin]
    plain_kwargs = {
        k: v for k, v in kwargs.items() if k != "out" and not (is_ufunc and k == "where")
    }
    # the rule on the arguments as they are before y changes (one showing y's memory: a copy)
    plain_args = tuple(_unaliased(a, owner) for a in plain_args)
    r = apply_transform(transform, *plain_args, **plain_kwargs)
    rec = remember_write(y, Ellipsis, y.copy())
    res = fn(*args, **kwargs)
    track(owner)
    rule_back = r.backprop
    mask = None if where is True else np.broadcast_to(np.asarray(where, dtype=bool), y.shape)

    def out_backprop(A: Any, Abox: Any) -> tuple:
        S = take(Abox, y)
        if A is not Z and A is not None:
            S = A if S is Z else add(S, A)
        undo(Abox, rec)
        if S is Z:
            g: tuple = ((),) + (Z,) * len(plain_args)
        else:
            if mask is not None:
                hand_over(Abox, y, np.where(mask, 0, S))  # where= left those elements as they were
                S = np.where(mask, S, 0)
            g = rule_back(S, Abox)
        out = tuple(g[: 1 + len(plain_args)]) + (Z,) * (len(args) - len(plain_args))
        if kwargs:
            named = g[1 + len(plain_args)] if len(g) > 1 + len(plain_args) else {}
            out = out + ({k: (named.get(k, Z) if isinstance(named, dict) else Z) for k in kwargs},)
        return out

    return ProcResult(res, out_backprop)


def _unaliased(a: Any, owner: Any) -> Any:
    """``a``, or a copy of it when it shows the memory of ``owner`` (to be overwritten)."""
    if type(a) is np.ndarray and memory_owner(a) is owner:
        return np.copy(a)
    return a


def function_name(fn: Any) -> str:
    name: Any = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return name if "." in name else f"numpy.{name}"


# ---------------------------------------------------------------------------
# ufunc.at


def _flat_positions(a: Any, indices: Any) -> Any:
    return np.arange(a.size, dtype=np.intp).reshape(a.shape)[indices]


def ufunc_at_plus(ufunc: Any, a: Any, indices: Any, b: Any = None) -> ProcResult:
    """``np.add.at(a, indices, b)`` (and ``subtract``, ``multiply``): unbuffered, so an element
    named twice gets both."""
    if ufunc not in (np.add, np.subtract, np.multiply) or b is None:
        raise NonDifferentiableError(
            f"numpy.{ufunc.__name__}.at ({user_place()}) changes an array in place with a derivative "
            "dplus does not know; np.add.at, np.subtract.at and np.multiply.at are supported (for a "
            "division, np.multiply.at(a, idx, 1.0 / v))"
        )
    owner = check_writable(a, f"numpy.{ufunc.__name__}.at")
    pos = _flat_positions(a, indices)
    bb = np.broadcast_to(np.asarray(b), pos.shape)
    old_a = a.copy()
    rec = remember_write(a, Ellipsis, old_a)
    ufunc.at(a, indices, b)
    track(owner)
    flat_pos = np.ravel(pos)

    def ufunc_at_backprop(A: Any, Abox: Any) -> tuple:
        S = take(Abox, a)
        undo(Abox, rec)
        if S is Z:
            return (), Z, Z, None, Z
        Sf = np.ravel(S)  # (a fresh array, C order: the same element order as the positions)
        if ufunc is np.multiply:
            old = np.ravel(old_a)
            bf = np.ravel(bb)
            total = np.ones(a.size, dtype=np.result_type(old, bf))
            np.multiply.at(total, flat_pos, bf)
            hand_over(Abox, a, (Sf * total).reshape(a.shape))
            others = _products_of_others(flat_pos, bf)
            gb = (Sf[flat_pos] * old[flat_pos] * others).reshape(pos.shape)
        else:
            hand_over(Abox, a, S)
            gb = Sf[flat_pos].reshape(pos.shape)
            if ufunc is np.subtract:
                gb = -gb
        return (), Z, Z, None, fit(gb, b)

    return ProcResult(None, ufunc_at_backprop)


def _products_of_others(pos: Any, b: Any) -> Any:
    """For each occurrence ``k``: the product of the ``b`` of the other occurrences naming the
    same element (1.0 for an element named once)."""
    out = np.ones(b.shape, dtype=b.dtype)
    for k in _repeated_occurrences(pos):
        others = pos == pos[k]
        others[k] = False
        out[k] = np.prod(np.where(others, b, 1.0))
    return out


def _repeated_occurrences(pos: Any) -> Any:
    """The occurrences whose element is named more than once."""
    _, inverse, counts = np.unique(pos, return_inverse=True, return_counts=True)
    return np.flatnonzero(counts[inverse] > 1).tolist()


def refusing(fn: Any, why: str) -> None:
    """``fn`` changes an array in a way dplus cannot follow: calling it raises, naming it."""
    if fn is None:
        return

    def transform(*args: Any, **kwargs: Any) -> ProcResult:
        raise NonDifferentiableError(f"{function_name(fn)} ({user_place()}) {why}")

    transform.__name__ = transform.__qualname__ = f"{getattr(fn, '__name__', 'fn')}_plus"
    register_primitive(fn, transform, note=f"raises: {why}")


def register_in_place_rules() -> None:
    """Register the rules of this module (on import, when NumPy is installed)."""
    nd = np.ndarray
    register_primitive(
        np.ufunc.at, ufunc_at_plus, note="numpy rule: ufunc.at (add, subtract, multiply), in place"
    )
    register_primitive(
        nd.__setitem__, array_setitem_plus, note="numpy rule: ndarray.__setitem__, in place"
    )
    for iop in IN_PLACE_OPERATORS:
        method = getattr(nd, f"__{iop.__name__}__", None)
        if method is not None:
            register_primitive(
                method, _method_of(iop), note=f"numpy rule: ndarray.__{iop.__name__}__, in place"
            )
    refusing(
        nd.resize,
        "changes the shape of an array in place, which other names and views may show; "
        "use np.resize(a, shape), which returns a new array",
    )
    refusing(nd.setfield, "changes the bytes of an array in place, which dplus cannot follow")
    refusing(getattr(nd, "itemset", None), "changes an array in place: write a[index] = value")


def _method_of(iop: Any) -> Callable[..., ProcResult]:
    def transform(a: Any, b: Any) -> ProcResult:
        return array_inplace_plus(iop, a, b)

    transform.__name__ = transform.__qualname__ = f"ndarray_{iop.__name__}_plus"
    return transform


if np is not None:
    register_in_place_rules()
