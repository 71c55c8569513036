"""Whether a function's code may write where its caller sees it and then raise (see
runtime/interrupted.py). Conservative: a call of the program's own function or a method may
write through its arguments."""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any

from ..errors import DplusError
from ..runtime import interrupted
from ..runtime.closures import plus_info_of_code
from .source import function_source
from .trees import walk

__all__ = ["may_write_outside", "note_plus_code"]

_WRITING_BUILTINS = {"setattr", "delattr", "exec", "eval", "vars", "globals", "locals"}


def may_write_outside(node: ast.AST, globals_: dict[str, Any]) -> bool:
    """Whether the function ``node`` may write where its caller sees it and raise after: a
    write (a subscript or attribute stored or deleted, a ``global``/``nonlocal`` name
    assigned, a call of anything but a builtin or a module's function) followed, in the order
    the code runs, by a place that may raise (``raise``, ``assert``, a call, a subscript, a
    division or power); in a loop, a place anywhere in the same loop counts as after."""
    shared = {
        name for n in walk(node) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names
    }
    writes: list[tuple[int, int]] = []
    raises: list[tuple[int, int]] = []
    for st in walk(node):
        if not isinstance(st, ast.stmt) or isinstance(st, _SCOPES):
            continue
        end = (st.end_lineno or st.lineno, st.end_col_offset or 0)
        if isinstance(st, (ast.Raise, ast.Assert)):
            raises.append((st.lineno, st.col_offset))
        for n in _own_expressions(st):
            if _writes(n, shared, globals_):
                writes.append(end)
            if _may_raise(n):
                raises.append((getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    if not writes:
        return False
    if any(r > min(writes) for r in raises):
        return True
    return any(
        _writes_and_raises_in(loop, shared, globals_)
        for loop in walk(node)
        if isinstance(loop, _LOOPS)
    )


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _own_expressions(st: ast.stmt) -> list[ast.AST]:
    """The nodes of ``st`` outside the statements nested in it."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [
        v
        for f, v in ast.iter_fields(st)
        if f not in ("body", "orelse", "finalbody", "handlers", "cases")
        for v in (v if isinstance(v, list) else [v])
        if isinstance(v, ast.AST)
    ]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _writes(n: ast.AST, shared: set[str], globals_: dict[str, Any]) -> bool:
    if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
        return True
    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in shared:
        return True
    return isinstance(n, ast.Call) and not _reads_only(n.func, globals_)


def _may_raise(n: ast.AST) -> bool:
    return (
        isinstance(n, ast.Call)
        or isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Load)
        or isinstance(n, ast.BinOp)
        and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod, ast.Pow))
    )


def _writes_and_raises_in(loop: ast.AST, shared: set[str], globals_: dict[str, Any]) -> bool:
    nodes = list(walk(loop))
    return any(_writes(n, shared, globals_) for n in nodes) and any(
        isinstance(n, (ast.Raise, ast.Assert)) or _may_raise(n) for n in nodes
    )


def _reads_only(func: ast.expr, globals_: dict[str, Any]) -> bool:
    """A callee that writes nothing its caller sees: a builtin function or class, or a
    function of a module (``math.sin``, ``np.sum``)."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = globals_.get(func.value.id)
        return isinstance(owner, types.ModuleType)
    if isinstance(func, ast.Name):
        if func.id in _WRITING_BUILTINS:
            return False
        value = globals_.get(func.id, getattr(builtins, func.id, None))
        return isinstance(value, types.BuiltinFunctionType) or (
            isinstance(value, type) and value.__module__ == "builtins"
        )
    return False


_DECIDED: dict[types.CodeType, bool] = {}  # a function's code -> whether it may write outside


def note_plus_code(f: types.FunctionType, code: types.CodeType) -> None:
    """Record the plus-function ``code`` made from ``f`` when ``f`` may write where its caller
    sees it (runtime/interrupted.py)."""
    writes = _DECIDED.get(f.__code__)
    if writes is None:
        writes = _DECIDED[f.__code__] = _may_write(f)
    if writes:
        interrupted.WRITERS.add(code)


def _may_write(f: types.FunctionType) -> bool:
    if plus_info_of_code(f.__code__) is not None:
        # generated code differentiated again: as the function it was made from
        return f.__code__ in interrupted.WRITERS
    if str(f.__module__).startswith("dplus."):
        return False  # (dplus's own rules differentiated again raise only as the primitive would)
    try:
        node = function_source(f).node
    except DplusError:  # (no source here: code read from the persistent cache)
        return True
    return may_write_outside(node, f.__globals__)
