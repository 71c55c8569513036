"""The text of generated code: registered with ``linecache`` (for tracebacks and for the
next order, which reads it as source), made readable for ``dplus.show``, and its code objects
registered as plus-functions' codes.
"""

from __future__ import annotations

import ast
import linecache
import types
from collections import deque
from typing import Any

from ..runtime.closures import (
    PlusInfo,
    register_plus_code,
)
from .outside_writes import note_plus_code
from .trees import child_blocks, clone, unparse

_NEST_COUNTER = [0]


def _register_text(f: types.FunctionType, text: str) -> str:
    """Register ``text``, the code of ``f`` made differentiable again, with linecache under
    a new file name (the next order reads it there); returns the name."""
    _NEST_COUNTER[0] += 1
    filename = f"<dplus: {f.__qualname__} differentiable again #{_NEST_COUNTER[0]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return filename


def statement_lines(module: ast.Module) -> list[int]:
    """The source lines of ``module``'s statements, in ``ast.walk`` order: with the text
    ``unparse(module)``, which has the same statements in that order, they map the text's
    lines to the source's when a refusal names its place (``runtime.result``).

    (Only statements, exception handlers and match cases hold statements, so the walk
    visits those alone, breadth first and in field order as ``ast.walk``: the statements
    come in ``ast.walk``'s order without a visit of every expression.)"""
    lines: list[int] = []
    todo: deque[ast.AST] = deque([module])
    pop, extend = todo.popleft, todo.extend
    stmt = ast.stmt
    while todo:
        n = pop()
        if isinstance(n, stmt):
            lines.append(getattr(n, "lineno", 0))
        t = type(n)
        fields = _BLOCK_FIELDS.get(t)
        if fields is None:
            fields = _BLOCK_FIELDS[t] = tuple(f for f in t._fields if f in _BLOCKS)
        for f in fields:
            extend(n.__dict__.get(f) or ())
    return lines


_BLOCKS = frozenset(("body", "handlers", "orelse", "finalbody", "cases"))
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {}  # statement_lines: t's fields among _BLOCKS


def _cell_holds(cell: Any, value: Any) -> bool:
    try:
        return cell.cell_contents is value
    except ValueError:
        return False


def _unique_plus_names(plus_def: ast.FunctionDef) -> dict[str, tuple]:
    """Number nested plus-functions in tree order, so two builds of one function agree on names.

    Returns each generated function's by-value free variables, by its final name.
    """
    k = 0
    by_value: dict[str, tuple] = {plus_def.name: getattr(plus_def, "dp_by_value", ())}
    for body in _statement_lists(plus_def):
        for i, st in enumerate(body):
            if isinstance(st, ast.FunctionDef) and st is not plus_def:
                if st.name.endswith("__plus"):
                    k += 1
                    old = st.name
                    st.name = f"{old}_{k}"
                    # the def is followed by the assignment of the user's name from it
                    nxt = body[i + 1] if i + 1 < len(body) else None
                    if (
                        isinstance(nxt, ast.Assign)
                        and isinstance(nxt.value, ast.Name)
                        and nxt.value.id == old
                    ):
                        nxt.value.id = st.name
                by_value[st.name] = getattr(st, "dp_by_value", ())
    return by_value


def _statement_lists(root: ast.AST) -> Any:
    """Every statement list under ``root``, in tree order; expressions are not entered
    (generated code defines functions only at statement level)."""
    queue = deque([root])
    while queue:
        for block in child_blocks(queue.popleft()):
            yield block
            queue.extend(block)


def _register_codes(
    code: types.CodeType, by_value: dict[str, tuple], f: Any, codes: dict[str, types.CodeType]
) -> None:
    if "__plus" in code.co_name:
        register_plus_code(code, PlusInfo(f.__code__, tuple(by_value.get(code.co_name, ())), f))
        note_plus_code(f, code)
        codes[code.co_name] = code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _register_codes(c, by_value, f, codes)


def _readable(plus_def: ast.FunctionDef, filename: str) -> str:
    """The generated source with the user's line numbers as comments."""
    tree = clone(plus_def)
    markers: dict[str, int] = {}

    def mark(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        last = None
        for st in body:
            line = getattr(st, "lineno", None)
            if line is not None and line != last:
                key = f"__dp_line_{len(markers)}__"
                markers[key] = line
                out.append(ast.Expr(value=ast.Name(id=key, ctx=ast.Load())))
                last = line
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(st, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    setattr(st, field, mark(sub))
            if isinstance(st, ast.Try):
                for h in st.handlers:
                    h.body = mark(h.body)
            out.append(st)
        return out

    tree.body = mark(tree.body)
    text = unparse(tree)
    import linecache

    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in markers:
            n = markers[stripped]
            indent = line[: len(line) - len(line.lstrip())]
            src_line = linecache.getline(filename, n).strip()
            lines.append(f"{indent}# line {n}: {src_line}" if src_line else f"{indent}# line {n}")
        else:
            lines.append(line)
    return f"# generated by dplus from {filename}\n" + "\n".join(lines)
