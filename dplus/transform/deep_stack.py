"""Transforming a function whose syntax tree nests deeper than the passes' recursion allows:
in a thread whose stack and recursion limit fit its depth (several passes recurse once per
level of an expression; a long sum is a tree as deep as it has terms).
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from .source import function_source
from .trees import nesting_depth


def _collector_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with the cyclic garbage collector paused: a transformation makes tens of
    thousands of AST nodes that live until it ends, and the collector would traverse them
    again and again (a sixth of the transformation time)."""

    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


# The passes walk expressions recursively, a few frames per level: a function nested deeper
# than this is transformed in a thread with a stack (and recursion limit) to match, so a long
# sum or a deeply nested expression that CPython runs is transformed too
_SHALLOW_ENOUGH = 60
_FRAMES_PER_LEVEL = 12
_STACK_BYTES_PER_FRAME = 2048
_LIMIT_LOCK = threading.Lock()


def _deep_stack_when_needed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(f, ...)`` run with room for recursion as deep as ``f``'s syntax tree needs."""

    @functools.wraps(fn)
    def run(f: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
        depth = nesting_depth(function_source(f).node)
        if depth <= _SHALLOW_ENOUGH:
            return fn(f, *args, **kwargs)
        return _on_deep_stack(lambda: fn(f, *args, **kwargs), depth * _FRAMES_PER_LEVEL + 1000)

    return run


def _on_deep_stack(thunk: Callable[[], Any], frames: int) -> Any:
    """``thunk()`` in a new thread whose stack holds ``frames`` frames, the recursion limit
    raised (for the process, as Python allows no other way) while it runs and restored after.
    The caller waits: the lock it may hold is not needed by the transformation."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, thunk()))
        except BaseException as e:  # handed to the caller's thread
            outcome.append((False, e))

    with _LIMIT_LOCK:
        old_limit = sys.getrecursionlimit()
        raised = max(old_limit, frames)
        sys.setrecursionlimit(raised)
        old_stack = threading.stack_size(
            max(threading.stack_size(), frames * _STACK_BYTES_PER_FRAME + (1 << 20))
        )
        try:
            worker = threading.Thread(target=target, name="dplus-transform")
            worker.start()
        finally:
            threading.stack_size(old_stack)
    try:
        worker.join()
    finally:
        with _LIMIT_LOCK:
            if sys.getrecursionlimit() == raised:
                sys.setrecursionlimit(old_limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
