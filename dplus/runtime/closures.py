"""Which plus-functions exist, and what a function closes over (its sensitivity's shape)."""

from __future__ import annotations

import types
from typing import Any

from .portable import if_picklable

__all__ = ["PlusInfo", "register_plus_code", "plus_info", "closure_values", "is_plus_function"]


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
