"""Which plus-functions exist, and what a function closes over (its sensitivity's shape)."""

from __future__ import annotations

import types
from typing import Any

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

    def __init__(self, source_fn_code: types.CodeType | None, by_value_freevars: tuple[str, ...], origin: Any) -> None:
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
        return tuple(_cell_value(cells[name]) if name in cells else None for name in info.by_value_freevars)
    from .registry import is_registered_transform

    if is_registered_transform(fn):
        return ()
    return tuple(_cell_value(c) for c in closure)


_REGISTERED_IDS = _registered_ids()
