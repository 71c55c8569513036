"""The operations generated code calls by name (bound into it as closure cells).

Each general-path operation returns a ProcResult; the rest move sensitivities around.
"""

from __future__ import annotations

import collections
import inspect
import operator
import sys
import types
from collections.abc import Iterator
from typing import Any, NoReturn

from ..errors import DplusError, NonDifferentiableError, SensitivityError
from .boxes import BoxSensitivities
from .closures import _PLUS_CODES, _REGISTERED_IDS, is_plus_function

# generated code calls these through helper_named
from .core import (  # noqa: F401
    CellKey,
    ItemColumns,
    KeywordDict,
    accumulate,
    apply_transform,
    as_plain_callable,
    fold,
    handover,
    is_tracked_mutable,
    keyword_sensitivity,
    keywords_at,
    layouts,
    lift,
    only_floats,
)
from .hooks import hooks
from .linear import (
    OneHot,
    TupleAccumulator,
    add,
    add_closure,
    gen_zero,
    is_ndarray,
    is_number,
    is_zero_sensitivity,
    tuple_items,
)
from .registry import _TRANSFORMS, lookup_transform
from .result import (  # noqa: F401  (plain_parameters, keywords_by_name: ops of generated code)
    ProcResult,
    _call_positionally,
    call_plus,
    keywords_by_name,
    plain_parameters,
)

Z = gen_zero
_PLUS_CODE_IDS = _PLUS_CODES._items

_NUMERIC = (int, float, complex)
_NUMBERS = frozenset({int, float})
_FLOATS = frozenset({float})
_LABELS = frozenset({int, bool})
# iterators whose items are integer labels (np.ndindex's index tuples): their items' sensitivities
# go nowhere, as a range's do (rule modules add their types)
LABEL_ITERATORS: set[type] = set()


def replay_segment(program: tuple, rec: tuple, adjoints: tuple, Abox: BoxSensitivities) -> tuple:
    """The reverse of a segment's general variant (run when its float guard failed), as a
    program over its record instead of generated statements (``reverse.replay_plan``).

    ``program`` is ``(slots, init, steps, result)``: one adjoint slot per value; ``init``
    fills slots from ``adjoints`` (the persistent adjoints the segment reads); each step,
    last operation first, is ``(value, source)`` for a copy or ``(backprop, value,
    ((position, operand, slot), ...))`` for an operation, ``backprop`` and ``operand``
    indexing the record; ``result`` names the slot each persistent adjoint ends as (-1: zero).
    """
    n, init, steps, result = program
    adj = [Z] * n
    for k, i in init:
        adj[k] = adjoints[i]
    for step in steps:
        if len(step) == 2:
            dst, src = step
            a = adj[dst]
            adj[dst] = Z
            if a is not Z:
                adj[src] = add(adj[src], a)
            continue
        bp, dst, operands = step
        a = adj[dst]
        adj[dst] = Z
        g = rec[bp](a, Abox)
        for pos, val, k in operands:
            adj[k] = accumulate(adj[k], rec[val], g[pos], Abox)
    return tuple([Z if k < 0 else adj[k] for k in result])


def call(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """Call ``f`` from transformed code: a plus-function directly, anything else lifted."""
    if not kwargs:
        tf = type(f)
        if tf is types.FunctionType:
            if id(f) not in _REGISTERED_IDS and id(f.__code__) not in _PLUS_CODE_IDS:
                t = _TRANSFORMS.get(f)
                if (
                    t is not None
                ):  # the commonest call: a registered function (define_dplus, a rule)
                    return t(*args)
        elif tf is types.BuiltinFunctionType or tf is type:  # max, len, zip, enumerate, ...
            t = _TRANSFORMS.get(f)
            if t is not None:
                return t(*args)
    if type(f) is types.FunctionType and is_plus_function(f):
        if kwargs:
            return _call_positionally(f, args, kwargs)
        return f(*args)
    p = lift(f)
    if kwargs and type(p) is types.FunctionType and p.__code__.co_flags & _VARKW == 0:
        return _call_positionally(p, args, kwargs)
    return p(*args, **kwargs)


def callee_plus(f: Any) -> Any:
    """What ``call(f, *args)`` (no keywords) calls, returned rather than called: generated
    first-order code calls it itself, so a recursive function costs one frame per level,
    as in the plain call (``call`` would be a second)."""
    tf = type(f)
    if tf is types.FunctionType:
        if id(f) not in _REGISTERED_IDS and id(f.__code__) not in _PLUS_CODE_IDS:
            t = _TRANSFORMS.get(f)
            if t is not None:
                return t
        elif is_plus_function(f):
            return f
    elif tf is types.BuiltinFunctionType or tf is type:
        t = _TRANSFORMS.get(f)
        if t is not None:
            return t
    if tf is types.FunctionType and is_plus_function(f):
        return f
    return lift(f)


_VARARGS = 0x04
_VARKW = 0x08


_INPLACE_TO_PLAIN = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
}


def _is_value(x: Any) -> bool:
    t = type(x)
    return t in _NUMERIC or is_number(x) or is_ndarray(x) or x is Z or t is bool


def call_on_constants(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``call(f, ...)`` where the callee is a module-level name and every argument is a
    literal or a module-level name (``np.ptp(W)``): when ``f`` is unknown (run by the
    default policy) and no argument holds a list, dict or object that this run could have
    filled, its result does not depend on the differentiated inputs, so it is a constant
    and its sensitivity is not asked for."""
    P = constant_callee(f, args, kwargs)
    if P is None:
        return call(f, *args, **kwargs)
    r = P(*args, **kwargs)
    zeros = ((),) + (Z,) * len(args) + (({k: Z for k in kwargs},) if kwargs else ())
    return ProcResult(r.primal, lambda A, Abox: zeros)


def constant_callee(f: Any, args: tuple, kwargs: dict) -> Any:
    """The plus-function of ``f`` when ``call_on_constants(f, *args, **kwargs)`` is a
    constant: ``f`` is unknown (the default policy runs it) and no argument holds a
    container this run could have filled; else None."""
    P = lift(f)
    if getattr(P, "dp_unknown", False) and not _may_hold_sensitivity(args + tuple(kwargs.values())):
        return P
    return None


def _may_hold_sensitivity(values: tuple) -> bool:
    """A mutable container reachable from ``values``: its contents may depend on this run."""
    return any(not is_ndarray(v) for v, _ in layouts(values))


def refuse_array_in_place(value: Any, where: tuple[str, str, str]) -> None:
    """Raise before ``a op= b`` changes the array ``value`` in place when something else may
    see it (``dplus.transform.sharing``): ``where`` is the statement, its place and the fix."""
    if is_ndarray(value):
        statement, place, fix = where
        raise NonDifferentiableError(
            f"`{statement}` ({place}) would change a NumPy array in place, and this array may also be seen "
            f"through another name, a view, a container or the caller, which dplus does not follow (arrays "
            f"are values in dplus). Write `{fix}` to make a new array (other references then keep the old "
            f"values), or build the array with a NumPy expression (np.where, np.concatenate)"
        )


def select_binop(fn: Any, a: Any, b: Any) -> Any:
    """Which transform a binary operator uses: its registered rule (numbers, arrays, sequences
    and user objects' dunder methods are all handled there), else the policy."""
    t = lookup_transform(fn)
    if t is None and _is_value(a) and _is_value(b):
        t = lookup_transform(_INPLACE_TO_PLAIN.get(fn, fn))
    return t if t is not None else lift(fn)


def binop_plus(fn: Any, a: Any, b: Any) -> ProcResult:
    """A binary operator on any operands, through the operator's rule."""
    return select_binop(fn, a, b)(a, b)


def accumulate_cell(Abox: BoxSensitivities, key: CellKey, value: Any, s: Any) -> None:
    """Add the sensitivity of a value read from a boxed variable into its cell's entry."""
    if s is Z or s is None:
        return
    if value is not None and is_tracked_mutable(value):
        handover(Abox, value, s)
    else:
        Abox.accumulate(key, s)


def closure_parts(A: Any, n: int) -> tuple:
    """The per-variable parts of a closure's (or a ``*args`` tuple's) sensitivity."""
    parts = tuple_items(A, n)
    if len(parts) != n:
        raise SensitivityError(
            f"a closure sensitivity of length {len(parts)} was given for a function closing over {n} variables"
        )
    return parts


def star_sensitivity(g: tuple, pos: int, n: int, value: Any) -> Any:
    """The sensitivities of the arguments a ``*value`` supplied, shaped like ``value``."""
    items = list(g[pos : pos + n])
    if all(s is Z or s is None for s in items):
        return Z
    if isinstance(value, list):
        return items
    if isinstance(value, tuple):
        return tuple(items)
    if is_ndarray(value):
        np = sys.modules["numpy"]
        return np.array([0.0 if s is Z else s for s in items])
    if all(is_zero_sensitivity(s) for s in items):
        return Z
    raise NonDifferentiableError(
        f"sensitivity reached arguments unpacked from a {type(value).__name__}; unpack a list or a tuple"
    )


def keyword_sensitivities(g: tuple, pos: int) -> dict:
    if len(g) > pos and isinstance(g[pos], dict):
        return g[pos]
    return {}


def merged_keywords(bound: dict, kwargs: dict) -> tuple:
    """The keywords ``{**bound, **kwargs}`` as a pair of tuples: names and values."""
    merged = {**bound, **kwargs}
    return tuple(merged), tuple(merged.values())


def call_plus_keywords(P: Any, args: tuple, names: tuple, values: tuple) -> ProcResult:
    """``call_plus(P, *args, **dict(zip(names, values)))``: the keywords as tuples, so that
    code differentiated again reaches no dict."""
    return call_plus(P, *args, **dict(zip(names, values)))


def double_star_sensitivity(kw: dict, keys: tuple) -> Any:
    """The sensitivity of a dict passed as ``**d``, for the ``keys`` it held at the call."""
    out = {k: kw.get(k, Z) for k in keys}
    return out if any(v is not Z for v in out.values()) else Z


# ---------------------------------------------------------------------------
# loops: where the sensitivity of each iteration's element goes


class _NullRouter:
    __slots__ = ()

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        pass

    def result(self) -> Any:
        return Z


class _RaisingRouter:
    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if not is_zero_sensitivity(A):
            raise NonDifferentiableError(
                f"sensitivity reached the elements of a {self.what} iterated by a for loop; such elements cannot "
                "carry sensitivity in dplus. Iterate over a list or a tuple instead"
            )

    def result(self) -> Any:
        return Z


class _ListRouter:
    __slots__ = ("lst", "n", "entry")

    def __init__(self, lst: list, n: int) -> None:
        self.lst = lst
        self.n = n  # its length where the loop ended (it may be resized since)
        self.entry: list | None = None

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        entry = self.entry
        if entry is None or Abox.get(self.lst) is not entry:
            entry = self.entry = Abox.list_entry(self.lst, self.n)
        e = entry[i]
        if type(e) is float and type(A) is float:
            entry[i] = e + A
        else:
            entry[i] = add(e, A)

    def result(self) -> Any:
        return Z


class _TupleRouter:
    __slots__ = ("items", "stash")

    def __init__(self, n: int) -> None:
        self.items: list = [Z] * n
        self.stash: Any = None  # derivatives of derivatives: where result's sensitivity waits

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        self.items[i] = add(self.items[i], A)

    def result(self) -> Any:
        if all(s is Z for s in self.items):
            return Z
        return TupleAccumulator(self.items)


class _ArrayRouter:
    __slots__ = ("arr", "g", "stash")

    def __init__(self, arr: Any) -> None:
        self.arr = arr
        self.g: Any = None  # the array of sensitivities, made by the first one
        self.stash: Any = None  # derivatives of derivatives: where result's sensitivity waits

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        if self.g is None:
            np = sys.modules["numpy"]
            self.g = np.zeros_like(self.arr, dtype=float)
        self.g[i] += A

    def result(self) -> Any:
        return Z if self.g is None else self.g


_NULL = _NullRouter()


# ---------------------------------------------------------------------------
# ``for ... in zip(xs, ...)`` / ``enumerate(xs)`` / ``reversed(xs)`` whose body may write into
# the lists, and ``for ... in map(f, xs)`` / ``filter(f, xs)``: Python's own lazy iterator over
# the live lists, as in a plain call (``map`` calls ``f`` when the loop takes an item)


_LIVE_BUILTINS = (zip, enumerate, reversed)
_LIVE_CALLERS = (map, filter)
_LIVE_ARGS = (list, tuple, range, str)


class LiveIteration:
    """The iterator ``fn(*args)`` of the builtin ``zip``, ``enumerate``, ``reversed``, ``map``
    or ``filter`` over lists (and tuples, ranges, strings), made when the loop starts, as Python
    makes it: each item reads the lists as they are when it is taken. ``first`` is the position
    the first item of ``reversed`` reads; ``calls`` records ``map``'s calls of its function
    (their backprops run when the iterations are reversed); ``positions`` the position of each
    element ``filter`` kept."""

    __slots__ = ("fn", "args", "it", "first", "calls", "positions", "taken")

    def __init__(self, fn: Any, args: tuple, start: Any, function: Any = None) -> None:
        self.fn = fn
        self.args = args
        self.first = len(args[0]) - 1 if fn is reversed else 0
        self.calls: Any = None  # a dplus.primitives._iterables.Calls, for map
        self.positions: list[int] = []  # for filter
        self.it: Iterator[Any]
        self.taken = 0  # items taken so far (a loop or a rule may go on where next() stopped)
        if fn is map:
            self.calls = hooks.recorded_calls(function)
            self.it = map(self._call, *args)
        elif fn is filter:
            self.it = self._kept(
                bool if function is None else as_plain_callable(function), iter(args[0])
            )
        else:
            self.it = enumerate(args[0], start) if fn is enumerate else fn(*args)

    def _call(self, *items: Any) -> Any:
        return self.calls.call(items)

    def _kept(self, predicate: Any, items: Any) -> Any:
        for i, x in enumerate(items):
            if predicate(x):
                self.positions.append(i)
                yield x

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        item = next(self.it)
        self.taken += 1
        return item


def live_iteration(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``call(fn, *args, **kwargs)`` for the iterable of a ``for`` loop that Python's laziness
    may show through: for ``zip``, ``enumerate``, ``reversed``, ``map`` and ``filter`` of lists
    (tuples, ranges, strings), a :class:`LiveIteration` (the loop's router sends each item's
    sensitivity to the positions it read); otherwise the rule."""
    if fn in _LIVE_CALLERS:
        return _live_call(fn, args, kwargs)
    given = len(args)
    if laziness_visible(fn, args, kwargs):
        iterables, start = args, 0
        if fn is enumerate:  # (its start: the second positional argument or the keyword)
            iterables, start = args[:1], args[1] if given == 2 else kwargs.get("start", 0)
        args = iterables
        live = LiveIteration(fn, args, start)

        def live_iteration_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
            parts = Abox.stash_record(live)[1] or {}
            out = tuple(gen_zero if j not in parts else tuple(parts[j]) for j in range(len(args)))
            return (
                ((),) + out + (None,) * (given - len(args)) + (({"start": None},) if kwargs else ())
            )

        return ProcResult(live, live_iteration_backprop)
    return call(fn, *args, **kwargs)


def laziness_visible(fn: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the iterator ``fn(*args, **kwargs)`` can show its laziness to a loop: ``map`` and
    ``filter`` call their function as items are taken; ``zip``, ``enumerate`` and ``reversed``
    read a list as it is when each item is taken (over tuples, ranges and strings, which
    nothing changes, the eager list gives the same items)."""
    if fn in _LIVE_CALLERS:
        iterables = args[1:]
        return (
            not kwargs
            and bool(iterables)
            and (fn is map or len(iterables) == 1)
            and all(type(a) in _LIVE_ARGS for a in iterables)
        )
    given = len(args)
    iterables = args[:1] if fn is enumerate else args
    return (
        fn in _LIVE_BUILTINS
        and bool(iterables)
        and all(type(a) in _LIVE_ARGS for a in iterables)
        and any(type(a) is list for a in iterables)
        and set(kwargs) <= ({"start"} if fn is enumerate else set())
        and (fn is zip or given == 1 or (fn is enumerate and given == 2 and not kwargs))
    )


def live_iteration_again(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """:func:`live_iteration` in code differentiated again: an ordinary call where the
    iterator's laziness cannot show (``zip`` of tuples); otherwise refused (its routing has no
    rules at higher orders, and a list made at once could compute other values than Python)."""
    if not laziness_visible(fn, args, kwargs):
        return call(fn, *args, **kwargs)
    refuse_live_iteration_again(fn)


def refuse_live_iteration_again(fn: Any) -> NoReturn:
    name = getattr(fn, "__name__", "the iterator")
    raise NonDifferentiableError(
        f"derivatives of derivatives of {name}() iterated lazily (kept in a variable, or by a loop that changes "
        f"what it reads) are not supported yet; in a function differentiated more than once, make the list at "
        f"once, list({name}(...)), where the program does not depend on {name}'s laziness"
    )


def _live_call(fn: Any, args: tuple, kwargs: dict) -> ProcResult:
    """``map(function, *iterables)`` / ``filter(function, iterable)`` as a :class:`LiveIteration`:
    the function is called as the loop takes items; its closure sensitivity (the sum over the
    calls, collected by the router) and the tuples' go back when the call is reversed."""
    iterables = args[1:]
    if (
        kwargs
        or not iterables
        or (fn is filter and len(iterables) != 1)
        or not all(type(a) in _LIVE_ARGS for a in iterables)
    ):
        return call(fn, *args, **kwargs)
    live = LiveIteration(fn, iterables, 0, args[0])

    def live_call_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        parts = Abox.stash_record(live)[1] or {}
        out = tuple(gen_zero if j not in parts else tuple(parts[j]) for j in range(len(iterables)))
        return ((), parts.get("function", gen_zero)) + out

    return ProcResult(live, live_call_backprop)


class _LiveRouter:
    """Routes iteration ``i``'s item sensitivity of a :class:`LiveIteration` to the element each
    argument gave it: a list's entry (created with the list's length where the loop ended), a
    tuple's sensitivity (kept for the iterable's backprop in the pass's stash); for ``map``,
    through the backprop of the call that made the item (its function's closure sensitivity
    kept in the stash too)."""

    __slots__ = ("live", "lengths", "start")

    def __init__(self, live: LiveIteration, lengths: tuple, start: int) -> None:
        self.live = live
        self.lengths = lengths
        self.start = start  # the number of items taken before the first one routed here

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        live = self.live
        i += self.start
        if live.fn is zip:
            parts = tuple_items(A, len(live.args))
            pos = i
        elif live.fn is enumerate:
            parts = (tuple_items(A, 2)[1],)
            pos = i
        elif live.fn is map:
            rs = live.calls.back(i, A, Abox)
            if rs is None:
                return
            self.add_to_function(rs[0], Abox)
            parts = rs[1:]
            pos = i
        elif live.fn is filter:
            parts = (A,)
            pos = live.positions[i]
        else:
            parts = (A,)
            pos = live.first - i
        for j, (arg, s) in enumerate(zip(live.args, parts)):
            if s is Z or s is None:
                continue
            t = type(arg)
            if t is list:
                n = self.lengths[j] if self.lengths[j] >= 0 else len(arg)
                if not is_number(s) and pos < len(arg) and is_tracked_mutable(arg[pos]):
                    handover(Abox, arg[pos], s)
                    continue
                entry = Abox.list_entry(arg, n)
                entry[pos] = add(entry[pos], s)
            elif t is tuple:
                items = self.stashed(Abox).setdefault(j, [Z] * len(arg))
                items[pos] = add(items[pos], s)

    def add_to_function(self, s: Any, Abox: BoxSensitivities) -> None:
        if s is Z or s is None or (type(s) is tuple and not s):
            return
        parts = self.stashed(Abox)
        parts["function"] = add_closure(parts.get("function", Z), s)

    def stashed(self, Abox: BoxSensitivities) -> dict:
        rec = Abox.stash_record(self.live)
        if rec[1] is None:
            rec[1] = {}
        return rec[1]

    def result(self) -> Any:
        return Z


def route_back(route: Any, i: int, A: Any, Abox: BoxSensitivities) -> None:
    """``route.back(i, A, Abox)``, as a function with a rule (for derivatives of derivatives)."""
    route.back(i, A, Abox)


def route_result(route: Any) -> Any:
    """``route.result()``, as a function with a rule (for derivatives of derivatives)."""
    return route.result()


def prefix_reversed(items: Any, n: int) -> Any:
    """The first ``n`` of ``items`` (a list or tuple), last first."""
    return reversed(items) if n == len(items) else reversed(items[:n])


def append_back(xs: list, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``xs.append(v)`` run natively: what ``list.append``'s backprop returns,
    the appended element's sensitivity taken off the end of the list's entry."""
    found = Abox._entries.get(id(xs))
    if found is None or found[1] is Z:
        return (), Z, None, Z
    return (), Z, None, found[1].pop()


def append_back_number(xs: list, Abox: BoxSensitivities) -> Any:
    """The reverse of a fast segment's ``xs.append(v)`` of a number: ``v``'s sensitivity,
    taken off the end of the list's entry (what :func:`append_back` returns last)."""
    found = Abox._entries.get(id(xs))
    if found is None or found[1] is Z:
        return Z
    return found[1].pop()


def holds_keys(obj: Any, keys: tuple) -> bool:
    """Whether reading ``obj[k]`` for every key gives an element without running user code:
    a dict holding the keys, or a list or tuple long enough for integer keys."""
    t = type(obj)
    if t is dict:
        for k in keys:
            if k not in obj:
                return False
        return True
    if t is list or t is tuple:
        n = len(obj)
        for k in keys:
            if type(k) is not int or not -n <= k < n:
                return False
        return True
    return False


def check_hoisted(obj: Any, keys: tuple, values: tuple, name: str) -> None:
    """After the forward pass: the elements read on entry are still those of ``obj``."""
    for k, v in zip(keys, values):
        try:
            same = obj[k] is v
        except (KeyError, IndexError):
            same = False
        if not same:
            raise DplusError(
                f"{name}[{k!r}] changed while a differentiated call that reads it ran, but dplus read it once, "
                "when the call started (the parameter is only read in the function). Fix: change it before or "
                "after the call, not from code the call runs."
            )


def inline_rebound(names: tuple) -> None:
    """A global whose calls a plus-function inlined was rebound while it ran."""
    raise DplusError(
        f"a function whose calls dplus inlined ({', '.join(names)}) was rebound while a differentiated "
        "call that inlined it ran, so that call computed with the function it had before. Fix: rebind "
        "it before or after calling the differentiated function, not from inside it."
    )


def route_columns(itv: list, sens: list | None, nf: int, cols: list, Abox: BoxSensitivities) -> Any:
    """:func:`route_all` for a loop over a fresh list of tuples (``zip``, ``enumerate``)
    whose first ``nf`` iterations' item sensitivities were collected as columns, last
    iteration first (``None``: a column of zeros); ``sens`` holds the later iterations'
    (``None``: there were none).

    When every iteration took the fast way, the columns become the list's entry as they are
    (an :class:`ItemColumns`, which the builtin's backprop reads without transposing).
    """
    for c in cols:
        if c is not None:
            c.reverse()
    if sens is None:
        if nf == len(itv) and Abox.get(itv) is Z:
            Abox[itv] = ItemColumns(cols)
            return Z
        sens = [Z] * nf
    full = [[Z] * nf if c is None else c for c in cols]
    sens[:nf] = zip(*full)
    return route_all(itv, sens, Abox)


def all_numbers(*lists: list) -> bool:
    """Whether every element of the lists is an ``int`` or a ``float`` (one C-level pass each)."""
    for xs in lists:
        if not (only_floats(xs) or _NUMBERS.issuperset(map(type, xs))):
            return False
    return True


def zip_lists_back(
    lists: tuple, lengths: tuple, cols: list, Abox: BoxSensitivities, backwards: bool
) -> None:
    """The reverse of ``zip`` of lists for a loop that ran over the lists themselves: ``cols[j]``
    holds the sensitivities of ``lists[j]``'s first elements (``None``: zeros), last first
    when ``backwards``, and ``lengths[j]`` is that list's length at the call; they go to the
    lists' entries."""
    for xs, n, col in zip(lists, lengths, cols):
        if col is None:
            continue
        if backwards:
            col.reverse()
        found = Abox._entries.get(id(xs))
        if found is None or found[1] is Z:
            Abox[xs] = col if len(col) == n else col + [Z] * (n - len(col))
            continue
        # by position: the elements were numbers when zip read them, whatever the list holds now
        entry = found[1]
        nf = len(col)
        if len(entry) < nf:
            entry.extend([Z] * (nf - len(entry)))
        try:
            sums = list(map(operator.add, entry[:nf], col))  # (gen_zero + x is x)
        except TypeError:  # (None in the entry)
            sums = None
        if sums is None or not only_floats(sums):
            sums = [add(e, c) for e, c in zip(entry, col)]
        entry[:nf] = sums


class ListIterator:
    """``iter(xs)`` of a list inside differentiated code: Python's list iterator (it reads the
    live list, and once exhausted stays exhausted), whose list and position stay known, so
    that the elements ``next`` and ``for`` take get their sensitivities."""

    __slots__ = ("source", "index", "done", "by_next")

    def __init__(self, source: list) -> None:
        self.source = source
        self.index = 0
        self.done = False
        self.by_next: set | None = None  # the positions ``next()`` took (not a loop over it)

    def __iter__(self) -> ListIterator:
        return self

    def __next__(self) -> Any:
        i = self.index
        if not self.done and i < len(self.source):
            self.index = i + 1
            return self.source[i]
        self.done = True
        raise StopIteration

    def __length_hint__(self) -> int:
        return 0 if self.done else max(0, len(self.source) - self.index)


class _ListIteratorRouter:
    """Iteration ``i`` of a loop over a :class:`ListIterator` took the element at ``start + i``."""

    __slots__ = ("lst", "positions", "n")

    def __init__(self, it: ListIterator, end: tuple, iterations: int) -> None:
        self.lst = it.source
        self.n = end[1]
        # each iteration took one element, the last where the loop ended; stopping takes none,
        # and the elements next() took in the body are not the loop's
        skipped = it.by_next or ()
        positions: list[int] = []
        pos = end[0] - 1
        while len(positions) < iterations:
            if pos not in skipped:
                positions.append(pos)
            pos -= 1
        positions.reverse()
        self.positions = positions

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        pos = self.positions[i]
        if not is_number(A) and pos < len(self.lst) and is_tracked_mutable(self.lst[pos]):
            handover(Abox, self.lst[pos], A)
            return
        entry = Abox.list_entry(self.lst, self.n)
        entry[pos] = add(entry[pos], A)

    def result(self) -> Any:
        return Z


class _SetRouter:
    """A loop over a set: its element's sensitivity, by element, in a dict (the set's
    sensitivity; ``order`` is the set's iteration order, recorded where the loop ended)."""

    __slots__ = ("order", "sens")

    def __init__(self, order: tuple) -> None:
        self.order = order
        self.sens: dict = {}

    def back(self, i: int, A: Any, Abox: BoxSensitivities) -> None:
        if A is Z or A is None:
            return
        e = self.order[i]
        if type(e) is int or type(e) is bool:
            return  # (integers in a set are labels: see primitives.containers.set_sensitivity)
        self.sens[e] = add(self.sens[e], A) if e in self.sens else A

    def result(self) -> Any:
        return self.sens or Z


def list_length(itv: Any) -> Any:
    """The length of the list a loop iterates, recorded where the loop ends (the list may be
    resized before the loop's reverse runs); ``-1`` for any other iterable; for a
    :class:`LiveIteration`, one for each argument."""
    if type(itv) is LiveIteration:  # (and, last, the number of items taken)
        return tuple(len(a) if type(a) is list else -1 for a in itv.args) + (itv.taken,)
    if type(itv) is ListIterator:
        return itv.index, len(itv.source)
    if type(itv) is set or type(itv) is frozenset:
        return tuple(itv)  # (its order: the set may change before the loop's reverse)
    return len(itv) if type(itv) is list or isinstance(itv, (list, collections.deque)) else -1


def route_all(itv: Any, sens: list, Abox: BoxSensitivities, length: int = -1) -> Any:
    """After the reverse of a loop over ``itv``: ``sens[i]`` is the sensitivity of the element
    iteration ``i`` took. List elements' go into ``Abox``; returns the iterable's own sensitivity.
    ``length`` is a list's length where the loop ended (:func:`list_length`; ``-1``: now).

    (The per-iteration routers do the same one element at a time; this is for loops whose body
    cannot write into the list, and ``sens`` is the generated code's own list, taken over.)
    """
    t = type(itv)
    if t is list or isinstance(itv, (list, collections.deque)):
        n = len(itv) if length < 0 else length
        if len(sens) < n:  # the loop broke early
            sens.extend([Z] * (n - len(sens)))
        elif len(sens) > n:  # the body appended while iterating
            del sens[n:]
        entry = Abox.get(itv)
        if entry is Z:
            Abox[itv] = sens
            return Z
        for i, si in enumerate(sens):
            if si is not Z and si is not None:
                e = entry[i]
                entry[i] = e + si if type(e) is float and type(si) is float else add(e, si)
        return Z
    if t is tuple or isinstance(itv, tuple):
        for si in sens:
            if si is not Z and si is not None:
                if len(sens) < len(itv):
                    sens.extend([Z] * (len(itv) - len(sens)))
                return TupleAccumulator(sens)
        return Z
    if t is range:
        return Z
    route = iteration_router(itv, len(sens), length)
    for i, si in enumerate(sens):
        if si is not Z and si is not None:
            route.back(i, si, Abox)
    return route.result()


def iteration_router(itv: Any, n: int, length: Any = -1) -> Any:
    """Where each iteration's element sensitivity goes, for a loop over ``itv`` that ran ``n``
    times; ``length``: a list's length where the loop ended (:func:`list_length`; ``-1``: now),
    or the tuple :func:`list_length` recorded for a live iterator or a set's order."""
    t = type(itv)
    if t is range:
        return _NULL
    if t is list or isinstance(itv, (list, collections.deque)):
        return _ListRouter(itv, len(itv) if length < 0 else length)
    if t is tuple:
        return _TupleRouter(len(itv))
    if t is LiveIteration:
        lengths = length if type(length) is tuple else list_length(itv)
        return _LiveRouter(itv, lengths, lengths[-1] - n)
    if t is ListIterator:
        return _ListIteratorRouter(itv, length if type(length) is tuple else list_length(itv), n)
    if isinstance(itv, tuple):
        return _TupleRouter(len(itv))
    if isinstance(itv, (str, bytes, dict, type({}.keys()))):
        return _NULL
    if is_ndarray(itv):
        return _ArrayRouter(itv)
    if t is set or t is frozenset:
        order = length if type(length) is tuple else tuple(itv)
        if _LABELS.issuperset(map(type, order)):
            return _NULL  # integers in a set are labels (primitives.containers.set_sensitivity)
        return _SetRouter(order)
    if isinstance(itv, (set, frozenset)):
        return _RaisingRouter("set")
    if t in LABEL_ITERATORS:
        return _NULL
    return _RaisingRouter(t.__name__)


# ---------------------------------------------------------------------------
# calling conventions with defaults, *args and **kwargs


def make_signature(spec: str, defaults: tuple, kw_defaults: tuple) -> inspect.Signature:
    """The signature of a nested function from its source parameter list and default values."""
    src = f"def _f({spec}): pass"
    ns: dict = {}
    exec(compile(src, "<dplus signature>", "exec"), ns)
    f = ns["_f"]
    f.__defaults__ = tuple(defaults) or None
    kwonly = [
        p.name
        for p in inspect.signature(f).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    kwd = {name: d for name, d in zip(kwonly, kw_defaults) if d is not None}
    f.__kwdefaults__ = kwd or None
    return inspect.signature(f)


def own_signature(f: types.FunctionType) -> inspect.Signature:
    """The signature of ``f``'s own code and defaults. ``inspect.signature(f)`` follows
    ``__wrapped__`` (set by ``functools.wraps``) and ``__signature__``: the parameters of
    another function, not the ones ``f``'s body binds."""
    plain = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    plain.__kwdefaults__ = f.__kwdefaults__
    return inspect.signature(plain)


def bind_arguments(
    sig: inspect.Signature, args: tuple, kwargs: dict, defaults: tuple | None = None
) -> tuple:
    """The parameters' values, in the signature's order. ``defaults``: a nested function's
    default values (those of ``sig``), whose sensitivities a rule of higher.py hands back."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    values = [bound.arguments[name] for name in sig.parameters]
    if defaults is not None:
        for (k, used), d in zip(defaults_used(sig, args, kwargs), defaults):
            if used:
                values[k] = d
    return tuple(values)


def defaults_used(sig: inspect.Signature, args: tuple, kwargs: dict) -> list[tuple[int, bool]]:
    """For each parameter with a default value, in the signature's order: its position, and
    whether the call left it at its default."""
    out = []
    npos = len(args)
    i = 0
    for k, p in enumerate(sig.parameters.values()):
        passed = p.name in kwargs
        if (
            p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and i < npos
        ):
            passed = True
            i += 1
        if p.default is not inspect.Parameter.empty:
            out.append((k, not passed))
    return out


def default_sensitivities(sig: inspect.Signature, args: tuple, kwargs: dict, sens: tuple) -> tuple:
    """The sensitivities of a nested function's parameters that have default values, in the
    signature's order: a parameter's own where the call left it at its default, else zero.
    A nested function's defaults are computed when its ``def`` runs, so they travel back
    with its closure sensitivity, after the variables it closes over."""
    return tuple(sens[k] if used else Z for k, used in defaults_used(sig, args, kwargs))


def unbind_sensitivities(
    sig: inspect.Signature,
    args: tuple,
    kwargs: dict,
    closure: Any,
    sens: tuple,
    Abox: BoxSensitivities,
) -> tuple:
    """Map parameter sensitivities back to the positions and keywords the call used
    (``closure``: the closure's sensitivity, put first)."""
    params = list(sig.parameters.values())
    by_name = dict(zip([p.name for p in params], sens))
    pos_sens: list = []
    npos = len(args)
    i = 0
    for p in params:
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if i < npos:
                pos_sens.append(by_name[p.name])
                i += 1
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            extra = npos - i
            if extra > 0:
                s = by_name[p.name]
                # () is how a pass that found nothing for *args says zero
                items = (
                    closure_parts(s, extra)
                    if s is not Z and s is not None and s != ()
                    else [Z] * extra
                )
                pos_sens.extend(items)
                i += extra
    out = (closure,) + tuple(pos_sens)
    if kwargs:
        kw_sens: dict = {}
        var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        for name in kwargs:
            if name in by_name and sig.parameters[name].kind is not inspect.Parameter.VAR_KEYWORD:
                kw_sens[name] = by_name[name]
            elif var_kw is not None:
                kw_sens[name] = Z
        if var_kw is not None:
            s = by_name[var_kw]
            if isinstance(s, dict):
                for k, v in s.items():
                    kw_sens[k] = add(kw_sens.get(k, Z), v)
        out = out + (KeywordDict(kw_sens),)
    return out


# ---------------------------------------------------------------------------
# cheap paths for the commonest container operations (lists and tuples)


def read_back(obj: Any, idx: int, kind: Any, v: Any, A: Any, Abox: BoxSensitivities) -> Any:
    """The reverse of ``v = obj[idx]``; ``kind`` is the length read from, or the rule's backprop."""
    if A is Z or A is None:
        if type(kind) is not int:
            kind(Z, Abox)
        return Z
    if type(kind) is not int:
        return kind(A, Abox)[1]
    if is_tracked_mutable(v):
        handover(Abox, v, A)
        return Z
    if type(obj) is dict:
        entry = Abox.map_entry(obj)
        entry[idx] = add(entry[idx], A) if idx in entry else A
        return Z
    n = kind
    i = idx + n if idx < 0 else idx
    if type(obj) is tuple:
        return OneHot(i, A, n)
    items = Abox.list_entry(obj, n)
    items[i] = add(items[i], A)
    return Z


def read_back_into(
    adj: Any, obj: Any, idx: Any, kind: Any, v: Any, A: Any, Abox: BoxSensitivities
) -> Any:
    """``accumulate(adj, obj, read_back(obj, idx, kind, v, A, Abox), Abox)``: the new adjoint of ``obj``.

    A number read from a list or dict (the commonest read in a loop) adds its sensitivity
    straight into the container's entry.
    """
    if A is Z or A is None:
        if type(kind) is not int:
            kind(Z, Abox)
        return adj
    tv = type(v)
    if type(kind) is int and (tv is float or tv is int):
        t = type(obj)
        if t is list:
            found = Abox._entries.get(id(obj))  # the entry, without a method call when it exists
            i = idx + kind if idx < 0 else idx
            entry = Abox.list_entry(obj, kind) if found is None else found[1]
            prev = entry[i]
            entry[i] = (
                A
                if prev is Z
                else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
            )
            return adj
        if t is dict:
            found = Abox._entries.get(id(obj))
            entry = Abox.map_entry(obj) if found is None else found[1]
            prev = entry.get(idx, Z)
            entry[idx] = (
                A
                if prev is Z
                else (prev + A if type(prev) is float and type(A) is float else add(prev, A))
            )
            return adj
    return accumulate(adj, obj, read_back(obj, idx, kind, v, A, Abox), Abox)


def list_display_parts(A: Any, lst: list, n: int, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``lst = [a, b, ...]``: the sensitivities of the ``n`` elements
    (``A`` handed in, then the list's entry taken out of ``Abox``: before, it did not exist)."""
    if A is not Z and A is not None:
        handover(Abox, lst, A)
    found = Abox._entries.pop(id(lst), None)
    if found is None or found[1] is Z:
        return (Z,) * n
    return tuple(found[1])


def _stored_list_entry(obj: Any, kind: Any, lst: list, Abox: BoxSensitivities) -> Any:
    """The reverse of ``obj[i] = lst`` (:func:`write_back`, inline: the slot's sensitivity
    handed to ``lst``), then ``lst``'s entry taken out of ``Abox`` (``None``: it has none)."""
    entries = Abox._entries
    if type(kind) is int:
        found = entries.get(id(obj))
        s = Z
        if found is not None and found[1] is not Z:
            s = found[1][kind]
            found[1][kind] = Z
    else:
        s = kind(Z, Abox)[3]
    if s is not Z and s is not None:
        handover(Abox, lst, s)
    found = entries.pop(id(lst), None)
    return None if found is None or found[1] is Z else found[1]


_NO_ENTRY = (None, Z)


def store_display_numbers(obj: Any, kind: Any, lst: list, n: int, Abox: BoxSensitivities) -> list:
    """:func:`store_display_back` for a fast segment, whose elements are numbers: their
    sensitivities as numbers (``0.0`` for none)."""
    entries = Abox._entries
    found = entries.get(id(obj), _NO_ENTRY) if type(kind) is int else None
    if found is not None and (found[1] is Z or found[1][kind] is Z):
        # (the commonest case, inline: the slot holds nothing, ``lst``'s entry is its parts)
        found = entries.pop(id(lst), None)
        items = None if found is None or found[1] is Z else found[1]
    else:
        items = _stored_list_entry(obj, kind, lst, Abox)
    if items is None:
        return [0.0] * n
    if _FLOATS.issuperset(map(type, items)):
        return items  # (the entry, taken out of Abox: no one else holds it)
    out = [0.0 if si is Z or si is None else si for si in items]
    for si in out:
        if type(si) is not float and not is_number(si):
            raise SensitivityError(
                f"a {type(si).__name__} was given as the sensitivity of a number in a list"
            )
    return out


def store_display_back(obj: Any, kind: Any, lst: list, n: int, Abox: BoxSensitivities) -> tuple:
    """The reverse of ``lst = [a, b, ...]; obj[i] = lst`` where the list is used nowhere else:
    :func:`write_back` and :func:`list_display_parts` in one call, the sensitivities of
    the ``n`` elements."""
    items = _stored_list_entry(obj, kind, lst, Abox)
    return (Z,) * n if items is None else tuple(items)


def write_back(obj: Any, kind: Any, Abox: BoxSensitivities) -> Any:
    """The reverse of ``obj[i] = v``: the sensitivity moved out of the entry to ``v``."""
    if type(kind) is int:
        found = Abox._entries.get(id(obj))
        if found is None or found[1] is Z:
            return Z
        entry = found[1]
        s = entry[kind]
        entry[kind] = Z
        return s
    return kind(Z, Abox)[3]


_METHODS: dict[tuple[type, str], Any] = {}


def callmethod(obj: Any, name: str, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``obj.name(*args)`` from transformed code; the backprop is ``((), A_obj, None, *A_args)``."""
    t = type(obj)
    key = (t, name)
    rule = _METHODS.get(key)
    if rule is None:
        attr_ = getattr(t, name, None)
        if (
            attr_ is not None
            and not isinstance(obj, (types.ModuleType, type))
            and not (
                isinstance(attr_, (staticmethod, classmethod))
                or isinstance(getattr(obj, "__dict__", None), dict)
                and name in obj.__dict__
            )
            and callable(attr_)
        ):
            rule = lookup_transform(attr_)
            if rule is None and isinstance(attr_, types.FunctionType):
                rule = lift(attr_)  # a user method: define_dplus'd, or the policy
            if (
                rule is not None
                and isinstance(attr_, types.FunctionType)
                and lookup_transform(attr_) is None
            ):
                rule = None  # do not cache policies: they may change
            if rule is not None:
                _METHODS[key] = rule
        if rule is None:
            # a module function, a class or static method, an attribute holding a callable
            r = helper_named("getattr_plus")(obj, name)
            inner = r.backprop
            rc = call(r.primal, *args, **kwargs)
            inner_c = rc.backprop

            def callattr_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
                out = inner_c(A, Abox)
                return ((), inner(out[0], Abox)[1], None) + tuple(out[1:])

            return ProcResult(rc.primal, callattr_backprop)
    r = apply_transform(rule, obj, *args, **kwargs)
    inner = r.backprop

    def method_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        out = inner(A, Abox)
        return ((), out[1], None) + tuple(out[2:])

    return ProcResult(r.primal, method_backprop)


def unpack_back(adj: Any, v: Any, parts: tuple, Abox: BoxSensitivities) -> Any:
    """``accumulate(adj, v, unpack_sensitivity(v, parts), Abox)``: the adjoint of ``v``
    after the reverse of ``a, b, ... = v``. A list hands the parts straight to its entry."""
    if type(v) is list:
        # the common case: float parts, and the list's first sensitivity (its entry is the parts)
        entries = Abox._entries
        if (
            len(parts) == len(v)
            and id(v) not in entries
            and (
                len(parts) == 2
                and type(parts[0]) is float
                and type(parts[1]) is float
                or _FLOATS.issuperset(map(type, parts))
            )
        ):
            entries[id(v)] = (v, list(parts))
            return adj
        handover(Abox, v, parts)
        return adj
    return accumulate(adj, v, unpack_sensitivity(v, parts), Abox)


def unpack_sensitivity(v: Any, parts: tuple) -> Any:
    """The sensitivity of ``v`` from those of the names ``a, b = v`` bound."""
    if type(v) is tuple:
        return parts
    if type(v) is list:
        return list(parts)
    return hooks.sequence_sensitivity(v, list(parts))


# ---------------------------------------------------------------------------
# the names generated code calls

# Rules of the rule library that generated code calls by name (building displays, reading
# and writing subscripts and attributes: dplus.primitives.containers) provide themselves
# here when they are defined, so this module need not import the layer above it.
_PROVIDED: dict[str, Any] = {}


def provide_to_generated_code(*functions: Any, **values: Any) -> None:
    """Let generated code call each of ``functions`` by its ``__name__`` (and read each of
    ``values`` by its keyword)."""
    for fn in functions:
        _PROVIDED[fn.__name__] = fn
    _PROVIDED.update(values)


def helper_named(name: str) -> Any:
    """The runtime operation, or the rule provided above, that generated code calls as ``name``."""
    provided = _PROVIDED.get(name)
    return provided if provided is not None else globals()[name]
