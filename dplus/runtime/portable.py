"""What a function pickled by value needs to be differentiated in another process.

cloudpickle (used by Dask, Ray and ``multiprocessing`` with it) pickles functions of
``__main__``, notebooks and non-importable modules *by value*: their code, globals and
``__dict__``, but not their source file (the code's file name is not even kept) nor dplus's
registry. So dplus keeps both in the function's ``__dict__``, where they travel with it:

- ``__dplus_origin__``: a :class:`SourceFile`, the text of the file the function was defined
  in, read when the function is pickled (a handle on the file name until then);
- ``__dplus_rule__``: ``"define_dplus"``, or the transform registered for the function (if
  it can be pickled); a function that arrives with one is registered again the first time
  dplus meets it.

- ``__dplus_codes__`` (on plus-functions dplus generated): the generated code objects and
  what dplus knows of them, registered again on arrival, so that the copy and the closures it
  makes are known as plus-functions there too.

Functions pickled by reference (those of importable modules) need neither: the other
process imports their module, which registers them, and reads their file.
"""

from __future__ import annotations

import linecache
import sys
import threading
import types
from typing import Any

__all__ = [
    "SourceFile",
    "remember_source",
    "remember_rule",
    "carried_lines",
    "carried_rule",
    "DEFINED",
]

DEFINED = "define_dplus"


class SourceFile:
    """The lines of one source file; pickled with its text."""

    __slots__ = ("filename", "_lines")

    def __init__(self, filename: str, lines: list[str] | None = None) -> None:
        self.filename = filename
        self._lines = lines

    def lines(self) -> list[str]:
        if self._lines is not None:
            return self._lines
        return linecache.getlines(self.filename)

    def __reduce__(self) -> tuple:
        return (SourceFile, (self.filename, self.lines()))

    def __repr__(self) -> str:
        return f"SourceFile({self.filename!r})"


_trying = threading.local()


def if_picklable(value: Any) -> Any:
    """``value`` if it can be pickled, else None. (Within a trial, nested handles do not try
    again: the outer trial decides for all of them, or trials would nest exponentially.)"""
    if getattr(_trying, "active", False):
        return value
    try:
        import cloudpickle as dumper
    except ImportError:  # pragma: no cover
        import pickle as dumper
    _trying.active = True
    try:
        dumper.dumps(value)
    except Exception:
        return None
    finally:
        _trying.active = False
    return value


class CarriedRule:
    """A registered transform kept with its function; pickled only if it can be (a rule that
    closes over something unpicklable must not make the user's function unpicklable)."""

    __slots__ = ("rule",)

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __reduce__(self) -> tuple:
        return (CarriedRule, (if_picklable(self.rule),))


_BY_FILE: dict[str, SourceFile] = {}


def travels_by_value(f: Any) -> bool:
    """A Python function that cloudpickle pickles by value (its module cannot be imported)."""
    if type(f) is not types.FunctionType:
        return False
    module = getattr(f, "__module__", None)
    return module is None or module == "__main__" or module not in sys.modules


def remember_source(f: Any) -> None:
    """Give ``f`` a handle on its source file (nothing is read now)."""
    if not travels_by_value(f) or "__dplus_origin__" in f.__dict__:
        return
    filename = f.__code__.co_filename
    handle = _BY_FILE.get(filename)
    if handle is None:
        handle = _BY_FILE[filename] = SourceFile(filename)
    try:
        f.__dplus_origin__ = handle
    except (AttributeError, TypeError):
        pass


def remember_rule(f: Any, rule: Any) -> None:
    """Keep ``f``'s rule (or :data:`DEFINED`) with ``f``, for a copy of it made by unpickling."""
    if not travels_by_value(f):
        return
    try:
        f.__dplus_rule__ = rule if rule == DEFINED else CarriedRule(rule)
    except (AttributeError, TypeError):
        return
    remember_source(f)


def carried_lines(f: Any) -> list[str]:
    origin = getattr(f, "__dplus_origin__", None)
    return origin.lines() if isinstance(origin, SourceFile) else []


def carried_rule(f: Any) -> Any:
    if type(f) is not types.FunctionType:
        return None
    rule = f.__dict__.get("__dplus_rule__")
    return rule.rule if isinstance(rule, CarriedRule) else rule
