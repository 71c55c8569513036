"""Which plus-functions exist, and what a function closes over (its sensitivity's shape)."""

from __future__ import annotations

import types
from typing import Any

from .portable import if_picklable

__all__ = [
    "PlusInfo",
    "register_plus_code",
    "plus_info",
    "closure_values",
    "is_plus_function",
    "user_function",
]


class CodeMap:
    """A map keyed by code objects *by identity*.

    Code objects compare equal when their bytecode, names and first line agree, even across
    files, so a plain dict could hand one function's transform to another.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, tuple[types.CodeType, Any]] = {}

    def get(self, code: types.CodeType, default: Any = None) -> Any:
        item = self._items.get(id(code))
        return default if item is None else item[1]

    def __setitem__(self, code: types.CodeType, value: Any) -> None:
        self._items[id(code)] = (code, value)

    def __contains__(self, code: object) -> bool:
        return id(code) in self._items

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[types.CodeType, Any]]:
        return list(self._items.values())


class PlusInfo:
    """What the transformer knows about one generated plus-function code object."""

    __slots__ = ("source_fn_code", "by_value_freevars", "origin")

    def __init__(
        self, source_fn_code: types.CodeType | None, by_value_freevars: tuple[str, ...], origin: Any
    ) -> None:
        self.source_fn_code = source_fn_code  # the user's code object it was made from
        self.by_value_freevars = by_value_freevars  # in the user's co_freevars order
        self.origin = origin  # the transformer's record of the source (for re-transformation)


_PLUS_CODES = CodeMap()


def register_plus_code(code: types.CodeType, info: PlusInfo) -> None:
    _PLUS_CODES[code] = info


def plus_info_of_code(code: types.CodeType) -> PlusInfo | None:
    return _PLUS_CODES.get(code)


def plus_info(fn: Any) -> PlusInfo | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return _PLUS_CODES.get(code)


def is_plus_function(fn: Any) -> bool:
    if type(fn) is types.FunctionType and id(fn.__code__) in _PLUS_CODES._items:
        return True
    return id(fn) in _REGISTERED_IDS


def _registered_ids() -> dict:
    from .registry import _TRANSFORM_IDS

    return _TRANSFORM_IDS


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # empty cell
        return None


def closure_values(fn: Any) -> tuple:
    """The values a function closes over by value, in its sensitivity's order."""
    if type(fn) is types.MethodType:
        return (fn.__self__,)
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is None or not closure:
        return ()
    cells = dict(zip(code.co_freevars, closure))
    info = _PLUS_CODES.get(code)
    if info is not None:
        return tuple(
            _cell_value(cells[name]) if name in cells else None for name in info.by_value_freevars
        )
    from .registry import is_registered_transform

    if is_registered_transform(fn):
        return ()
    return tuple(_cell_value(c) for c in closure)


_REGISTERED_IDS = _registered_ids()


# ---------------------------------------------------------------------------
# the user's function behind a plus-function made inside differentiated code

_USER_CODES = CodeMap()  # generated code -> the user's code object it was made from, or None
_VARIADIC = 0x04 | 0x08  # (code flags: *args, **kwargs)
_ATOMS = (float, int, complex, bool, str, bytes, type(None))


def _user_code(code: types.CodeType) -> types.CodeType | None:
    """The user's code object that the generated plus-function code ``code`` was made from:
    the def or lambda of the same name on the same line in the function the transformer
    was given (None when it is not exactly one)."""
    if code in _USER_CODES:
        return _USER_CODES.get(code)
    info = _PLUS_CODES.get(code)
    found = None
    if info is not None and isinstance(info.source_fn_code, types.CodeType):
        name = code.co_name.split("__plus", 1)[0]
        name = "<lambda>" if name == "lambda" else name
        matches = [
            c
            for c in _nested_codes(info.source_fn_code)
            if c.co_name == name and c.co_firstlineno == code.co_firstlineno
        ]
        found = matches[0] if len(matches) == 1 else None
    _USER_CODES[code] = found
    return found


def _holds_plus_function(v: Any) -> bool:
    """Some plus-function is reachable from ``v`` (through containers and attributes), or
    ``v`` is too big to look through."""
    stack, seen = [v], set()
    while stack:
        x = stack.pop()
        if type(x) in _ATOMS or id(x) in seen:
            continue
        seen.add(id(x))
        if len(seen) > 10_000:
            return True
        if is_plus_function(x) or getattr(type(x), "__dplus_plus_object__", False):
            return True
        if isinstance(x, (tuple, list, set, frozenset)):
            stack.extend(e for e in x if type(e) not in _ATOMS)
        elif isinstance(x, dict):
            stack.extend(e for e in x.values() if type(e) not in _ATOMS)
        elif not isinstance(x, (type, types.ModuleType, types.FunctionType)):
            attributes = getattr(x, "__dict__", None)
            if isinstance(attributes, dict):
                stack.extend(attributes.values())
    return False


def user_function(fn: Any, nargs: int) -> types.FunctionType | None:
    """The user's own function that ``fn``, a plus-function made inside differentiated code
    from a def or a lambda, stands for: rebuilt from the user's code, ``fn``'s globals and the
    cells of the values it captured. Called plainly with ``nargs`` positional arguments it
    does what ``fn``'s primal does, at the primal's speed (``fn`` itself records as it runs).

    None when that cannot be relied on: the code is not found, the signature needs defaults
    or keywords, a captured variable is rebound (boxed), or a captured value holds a function
    made inside differentiated code (a plus-function, which a plain call would not expect)."""
    if type(fn) is not types.FunctionType:
        return None
    info = _PLUS_CODES.get(fn.__code__)
    code = _user_code(fn.__code__) if info is not None else None
    if (
        code is None
        or code.co_argcount != nargs
        or code.co_kwonlyargcount
        or code.co_flags & _VARIADIC
    ):
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        cell = cells.get(name)
        if cell is None or name not in info.by_value_freevars:
            return None
        try:
            value = cell.cell_contents
        except ValueError:  # (not bound yet)
            return None
        if _holds_plus_function(value):
            return None
        closure.append(cell)
    return types.FunctionType(code, fn.__globals__, code.co_name, None, tuple(closure) or None)


# ---------------------------------------------------------------------------
# the records of generated code travel with a function pickled by value (dplus.runtime.portable)


class GeneratedCodes:
    """The plus-code records of a generated function's code and of the code nested in it."""

    __slots__ = ("code",)

    def __init__(self, code: types.CodeType) -> None:
        self.code = code

    def __reduce__(self) -> tuple:
        records = []
        for code in _nested_codes(self.code):
            info = plus_info_of_code(code)
            if info is not None:
                # the origin is needed only to differentiate the copy again; one that cannot be
                # pickled (its globals hold a cluster client, a lock) stays behind
                records.append(
                    (code, info.source_fn_code, info.by_value_freevars, if_picklable(info.origin))
                )
        return (_arrive, (self.code, tuple(records)))


def _nested_codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(_nested_codes(c))
    return out


def _arrive(code: types.CodeType, records: tuple) -> GeneratedCodes:
    for c, source_fn_code, by_value, origin in records:
        if plus_info_of_code(c) is None:
            register_plus_code(c, PlusInfo(source_fn_code, by_value, origin))
    return GeneratedCodes(code)


def remember_generated(fn: Any) -> None:
    try:
        fn.__dplus_codes__ = GeneratedCodes(fn.__code__)
    except (AttributeError, TypeError):
        pass
