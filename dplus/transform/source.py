"""Getting the source of a function: its AST, file and line numbers.

Source comes from ``inspect`` / ``linecache`` (files, notebooks, ``python -c`` is not
possible). Several lambdas on one line are told apart by the column positions that
Python 3.11 code objects record.
"""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import os
import sys
import textwrap
import threading
import types
from typing import Any

import attrs

from ..errors import SourceUnavailableError, UnsupportedSyntaxError, describe_callable
from ..runtime.closures import CodeMap
from ..runtime.portable import carried_lines
from .trees import walk

__all__ = ["FunctionSource", "function_source"]


@attrs.frozen
class FunctionSource:
    """A function's definition as an AST (a FunctionDef or Lambda) with where it came from."""

    node: ast.FunctionDef | ast.Lambda
    filename: str
    code: types.CodeType
    globals: dict
    freevars: tuple[str, ...]


def _fix_fn_error(fn: Any) -> str:
    return (
        f"dplus could not find the source of {describe_callable(fn)}. Functions defined in a file, "
        "a notebook cell or a module have source; ones built by exec/eval, in a bare interactive "
        "prompt, or in C do not. Define it in a file, or register its derivative with "
        "dplus.register_primitive / dplus.register_backprop."
    )


class _SourceNotFound(SourceUnavailableError):
    """No definition of the function was found in the text of its file (if any)."""


def _is_dplus_own(fn: Any) -> bool:
    module = str(getattr(fn, "__module__", "") or "")
    return module == "dplus" or module.startswith("dplus.")


def _edited_error(fn: Any, filename: str) -> str:
    """The refusal of a function whose file's text is not the code that runs: the file
    was edited (or removed) after the module was imported."""
    if _is_dplus_own(fn):
        # (dplus differentiates its own rule code at higher orders: the user's code is fine)
        return (
            f"dplus's installation changed on disk since it was imported ({filename} is not "
            "the code that runs): restart Python, then differentiate again."
        )
    return (
        f"the source of {describe_callable(fn)} has changed since it was imported: the text in "
        f"{filename} is not the code that runs, so dplus would differentiate another function. "
        "Re-import the module (importlib.reload) or restart, then differentiate again."
    )


_SOURCE_CACHE = CodeMap()
_DECLARED_GLOBAL: dict[tuple[str, int], frozenset[str]] = {}


def names_declared_global_in(filename: str) -> frozenset[str]:
    """The names some function of the file ``filename`` declares ``global`` (and so may write
    into the module's namespace while it is differentiated): every function of the module
    reads them through the namespace, so that what one writes carries its sensitivity to
    what another reads. Empty when the file cannot be read."""
    lines = linecache.getlines(filename)
    key = (filename, len(lines))
    found = _DECLARED_GLOBAL.get(key)
    if found is None:
        found = _facts_of_file(lines).declared_global if lines else frozenset()
        _DECLARED_GLOBAL[key] = found
    return found


def function_source(fn: Any) -> FunctionSource:
    """The source of a plain Python function (``def`` or ``lambda``), cached per code object."""
    code = getattr(fn, "__code__", None)
    if code is None or not isinstance(fn, types.FunctionType):
        raise SourceUnavailableError(_fix_fn_error(fn))
    cached = _SOURCE_CACHE.get(code)
    if cached is not None:
        return FunctionSource(cached[0], cached[1], code, fn.__globals__, code.co_freevars)
    try:
        result = _function_source(fn, code)
    except _SourceNotFound as e:
        if not (_is_dplus_own(fn) or _is_file(code.co_filename)):
            raise SourceUnavailableError(str(e)) from None
        # (its file is there, or it is dplus's own: the definition was there when imported)
        raise SourceUnavailableError(_edited_error(fn, code.co_filename)) from None
    if not result.filename.startswith("<dplus:"):
        # generated text is transformed once (its transform is cached), and its trees are
        # large: kept, they would make every garbage collection slow
        _SOURCE_CACHE[code] = (result.node, result.filename)
    return result


def _is_file(filename: str) -> bool:
    return not filename.startswith("<") and os.path.isfile(filename)


def _function_source(fn: Any, code: types.CodeType) -> FunctionSource:
    filename = code.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        linecache.checkcache(filename)
        lines = linecache.getlines(filename, fn.__globals__)
    if not lines and not carried_lines(fn) and getattr(fn, "__module__", None) != "__main__":
        # a closure of an importable module, unpickled by value: its module's file is here
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        module_file = getattr(module, "__file__", None)
        if module_file and module_file.endswith(".py"):
            module_lines = linecache.getlines(module_file)
            if len(module_lines) >= code.co_firstlineno:
                lines, filename = module_lines, module_file
    node = None
    imported: frozenset[str] = frozenset()
    carried = carried_lines(fn) if not lines else []
    if carried:
        # unpickled in another process: the source came with the function (dplus.runtime.portable)
        lines = carried
        filename = getattr(fn.__dplus_origin__, "filename", filename)
        try:
            block_lines, start = (
                inspect.getblock(lines[code.co_firstlineno - 1 :]),
                code.co_firstlineno,
            )
        except (TypeError, IndexError, SyntaxError):
            raise _SourceNotFound(_fix_fn_error(fn)) from None
    elif not lines:
        raise _SourceNotFound(_fix_fn_error(fn))
    elif filename != code.co_filename:
        try:
            block_lines, start = (
                inspect.getblock(lines[code.co_firstlineno - 1 :]),
                code.co_firstlineno,
            )
        except (TypeError, IndexError, SyntaxError):
            raise _SourceNotFound(_fix_fn_error(fn)) from None
    else:
        linecache.checkcache(filename)  # (as inspect does: a file edited since is read again)
        lines = linecache.getlines(filename, fn.__globals__) or lines
        node = _def_in_file(lines, code)
        facts = _facts_of_file(lines)
        imported = facts.imported
        if node is None and code.co_name == "<lambda>" and code.co_firstlineno in facts.lambdas:
            # (the lambdas of its first line, in the parse of the file: no block to read)
            block_lines, start = [], code.co_firstlineno
        elif node is None:
            try:
                block_lines, start = inspect.getsourcelines(fn)
            except (OSError, TypeError, IndexError):
                raise _SourceNotFound(_fix_fn_error(fn)) from None
    if node is None:
        node = _find_node(fn, code, block_lines, start, lines)
    if not filename.startswith("<dplus:") and not _compiles_to(node, code, imported):
        raise SourceUnavailableError(_edited_error(fn, filename))
    return FunctionSource(node, filename, code, fn.__globals__, code.co_freevars)


@attrs.frozen
class _FileFacts:
    """What one parse of a whole file tells: its defs by (first line, name), the names
    imported at module level, the names some function declares ``global``, its lambdas by
    first line."""

    defs: dict[tuple[int, str], list[Any]]
    imported: frozenset[str]
    declared_global: frozenset[str]
    lambdas: dict[int, list[ast.Lambda]]


# the facts of the files read last, by the identity of linecache's list of each file's lines
# (a new list when the file changes): one parse and one walk of a whole file instead of
# inspect's tokenizer per function and a parse per question asked of the file. A few files,
# not one: a transformation reads the function's file and the files of the inline rules it
# uses (primitives/math.py, primitives/operator_builders.py), in turns, and each turn parsed
# the file again (12 parses for the first gradient of a 10-line function, most of its time).
# Few, because a large file's tree is large.
_RECENT_FILES: dict[int, tuple[list[str], _FileFacts]] = {}
_RECENT_FILES_KEPT = 4
_RECENT_FILES_LOCK = threading.Lock()


def _facts_of_file(lines: list[str]) -> _FileFacts:
    known = _RECENT_FILES.get(id(lines))
    if known is not None and known[0] is lines:
        return known[1]
    try:
        tree: ast.Module | None = ast.parse("".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    defs: dict[tuple[int, str], list[Any]] = {}
    declared: set[str] = set()
    lambdas: dict[int, list[ast.Lambda]] = {}
    for node in walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defs.setdefault((first, node.name), []).append(node)
        elif isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, ast.Lambda):
            lambdas.setdefault(node.lineno, []).append(node)
    facts = _FileFacts(defs, _module_imports(tree), frozenset(declared), lambdas)
    with _RECENT_FILES_LOCK:
        # (the entry holds the list, so no other list can have its id while it is kept)
        _RECENT_FILES[id(lines)] = (lines, facts)
        while len(_RECENT_FILES) > _RECENT_FILES_KEPT:
            del _RECENT_FILES[next(iter(_RECENT_FILES))]  # the oldest
    return facts


def _module_imports(tree: ast.Module | None) -> frozenset[str]:
    """The names an ``import`` binds in the module's own scope (CPython reaches a method of
    such a name with LOAD_ATTR, not LOAD_METHOD: the source check compiles with them)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body) if tree is not None else []
    while stack:
        st = stack.pop()
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in st.names if a.name != "*")
        elif not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for child in ast.iter_child_nodes(st):
                if isinstance(child, ast.stmt):
                    stack.append(child)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    stack.extend(child.body)
    return frozenset(names)


def _def_in_file(lines: list[str], code: types.CodeType) -> ast.FunctionDef | None:
    """The ``def`` that ``code`` was compiled from, found in the parse of the whole file
    ``lines`` (its first line is the first decorator's); None when not found that way."""
    if code.co_name == "<lambda>":
        return None
    found = _facts_of_file(lines).defs.get((code.co_firstlineno, code.co_name), ())
    if len(found) != 1:
        return None
    node = found[0]
    if isinstance(node, ast.AsyncFunctionDef):
        raise UnsupportedSyntaxError(
            f"async functions cannot be differentiated: {code.co_name} at "
            f"{code.co_filename}:{code.co_firstlineno}"
        )
    return node


# --------------------------------------------------------------------------
# the source found must be the code that runs (a file edited after import is not)

_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CLASSDEREF", "LOAD_CLOSURE"}
)
_STORES = frozenset({"STORE_FAST", "STORE_DEREF", "STORE_GLOBAL", "STORE_NAME"})
_DELETES = frozenset({"DELETE_FAST", "DELETE_DEREF", "DELETE_GLOBAL", "DELETE_NAME"})
# what differs with the scope a def is compiled in (cells, how a callable is loaded)
_SCOPE_ONLY = frozenset(
    {"MAKE_CELL", "COPY_FREE_VARS", "PUSH_NULL", "RESUME", "NOP", "CACHE", "EXTENDED_ARG"}
)


def _shape(code: types.CodeType, skipped: list[tuple[int, int, int, int]]) -> list:
    """The code's operations with their names, constants and operators, leaving out what
    depends only on the scope it was compiled in (local, cell or global access) and what
    lies in the ``skipped`` source spans."""
    import dis

    out: list = []
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in _SCOPE_ONLY or _inside(ins.positions, skipped):
            continue
        if op in _LOADS:
            out.append(("LOAD", ins.argval))
        elif op in _STORES:
            out.append(("STORE", ins.argval))
        elif op in _DELETES:
            out.append(("DELETE", ins.argval))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):  # (a compiler's choice for ``obj.m(...)``)
            out.append(("ATTR", ins.argval))
        elif op in ("PRECALL", "CALL"):
            out.append(("CALL", ins.arg))
        elif op == "LOAD_CONST":
            v = ins.argval
            if (
                isinstance(v, str) and ".<locals>." in v
            ):  # a class's __qualname__: where it was compiled
                v = v.rsplit(".<locals>.", 1)[1]
            out.append(
                (
                    "CONST",
                    _shape(v, skipped)
                    if isinstance(v, types.CodeType)
                    else (type(v).__name__, repr(v)),
                )
            )
        elif "JUMP" in op or op.startswith("FOR_ITER") or op.startswith("SEND"):
            out.append((op.replace("BACKWARD", "").replace("FORWARD", ""),))
        elif op in ("KW_NAMES",):
            out.append((op, repr(ins.argval)))
        else:
            out.append(
                (
                    op,
                    ins.argrepr
                    if isinstance(ins.argval, int) and ins.argrepr
                    else repr(ins.argval),
                )
            )
    return out


def _inside(pos: Any, spans: list[tuple[int, int, int, int]]) -> bool:
    if pos is None or pos.lineno is None or not spans:
        return False
    start = (pos.lineno, pos.col_offset or 0)
    return any((a, b) <= start <= (c, d) for a, b, c, d in spans)


def _compiles_to(
    node: ast.FunctionDef | ast.Lambda,
    code: types.CodeType,
    imported: frozenset[str] = frozenset(),
) -> bool:
    """Whether the source ``node`` compiles to ``code`` (up to how names are reached).

    The definition is compiled inside a function that binds ``code``'s free variables, so
    that they stay free, in a module that imports the names ``imported`` (as the function's
    module does); when that cannot be compiled (a construct only valid where the function
    really was), the source is trusted."""
    import __future__

    # the definition itself is not copied (a shallow copy drops its decorators): compile()
    # reads the tree and never changes it, and every node of it has its position already, so
    # only the wrapper's own nodes are positioned
    if isinstance(node, ast.FunctionDef):
        target = copy.copy(node)
        target.decorator_list = []
        stmt: ast.stmt = target
    else:
        stmt = ast.copy_location(ast.Expr(value=node), node)
    before: list[ast.stmt] = [
        ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store())], value=ast.Constant(value=None))
        for v in code.co_freevars
    ]
    if isinstance(node, ast.FunctionDef) and node.name not in code.co_freevars:
        # the definition binds its name in the wrapper; where the function really was, its
        # name is global, and a recursive call from a comprehension or lambda must stay so
        before.insert(0, ast.Global(names=[node.name]))
    after: list[ast.stmt] = [
        ast.Expr(value=ast.Name(id=v, ctx=ast.Load())) for v in code.co_freevars
    ]
    outer = ast.FunctionDef(
        name="_dplus_source_check_",
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=before + after,
        decorator_list=[],
        returns=None,
        type_comment=None,
    )
    imports: list[ast.stmt] = (
        [ast.Import(names=[ast.alias(name=n) for n in sorted(imported)])] if imported else []
    )
    module = ast.Module(body=[*imports, outer], type_ignores=[])
    ast.fix_missing_locations(module)
    outer.body = before + [stmt] + after
    flags = code.co_flags & sum(
        getattr(__future__, f).compiler_flag for f in __future__.all_feature_names
    )
    try:
        compiled = compile(module, code.co_filename, "exec", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return True
    wrapper = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    found = [
        c for c in wrapper.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name
    ]
    if len(found) != 1:
        return False
    # the same code object (flags aside: the copy is nested in the wrapper) has the same
    # shape; comparing shapes (dis, half of a big function's check) is for code that differs
    # in how names are reached or in what is skipped
    return _identical(found[0], code) or _same_shape(found[0], code, node)


def _identical(compiled: types.CodeType, code: types.CodeType) -> bool:
    return compiled.replace(co_flags=code.co_flags) == code


def _same_shape(compiled: types.CodeType, code: types.CodeType, node: ast.AST) -> bool:
    # ``assert`` statements are left out: pytest rewrites those of test modules
    spans = [
        (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
        for n in walk(node)
        if isinstance(n, ast.Assert) and n.end_lineno is not None and n.end_col_offset is not None
    ]
    return _shape(compiled, spans) == _shape(code, spans)


def _parse_block(block_lines: list[str]) -> tuple[ast.Module, int]:
    """Parse a block of source lines that may be indented or a fragment of a statement."""
    text = "".join(block_lines)
    dedented = textwrap.dedent(text)
    indent = len(block_lines[0]) - len(block_lines[0].lstrip()) if block_lines else 0
    try:
        return ast.parse(dedented), indent
    except SyntaxError:
        pass
    # a lambda inside a larger expression: cut at the end of the expression
    stripped = dedented.strip()
    for end in range(len(stripped), 0, -1):
        try:
            return ast.parse(stripped[:end]), indent
        except SyntaxError:
            continue
    raise SyntaxError("could not parse")


def _find_node(
    fn: Any,
    code: types.CodeType,
    block_lines: list[str],
    start: int,
    all_lines: list[str],
) -> Any:
    if code.co_name != "<lambda>":
        return _find_def(fn, code, block_lines, start)
    # A lambda: the lambdas of its first line in the parse of the whole file (else of its
    # block), told apart by position
    first = code.co_firstlineno
    candidates: list[ast.Lambda] = list(_facts_of_file(all_lines).lambdas.get(first, ()))
    if not candidates:
        try:
            module, indent = _parse_block(block_lines)
        except SyntaxError:
            raise _SourceNotFound(_fix_fn_error(fn)) from None
        _shift(module, start - 1, indent)
        candidates = [n for n in walk(module) if isinstance(n, ast.Lambda)]
    if len(candidates) == 1:
        return candidates[0]
    found = _lambda_at_position(code, candidates)
    if found is not None:
        return found
    matching = [
        c
        for c in candidates
        if _arg_names(c) == code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    ]
    if len(matching) == 1:
        return matching[0]
    raise SourceUnavailableError(
        f"several lambdas on line {first} of {code.co_filename} could not be told apart; "
        "give the function a name with def"
    )


def _find_def(fn: Any, code: types.CodeType, block_lines: list[str], start: int) -> Any:
    """The ``def`` of ``code`` in its block of lines."""
    try:
        module, indent = _parse_block(block_lines)
    except SyntaxError:
        raise _SourceNotFound(_fix_fn_error(fn)) from None
    for node in walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            if isinstance(node, ast.AsyncFunctionDef):
                raise UnsupportedSyntaxError(
                    f"async functions cannot be differentiated: {code.co_name} at "
                    f"{code.co_filename}:{code.co_firstlineno}"
                )
            _shift(module, start - 1, indent)
            return node
    raise _SourceNotFound(_fix_fn_error(fn))


def _lambda_at_position(code: types.CodeType, candidates: list[ast.Lambda]) -> Any:
    """The lambda whose body holds the code's first instruction position and no inner
    lambda that holds it (None: the positions do not tell)."""
    positions = [p for p in code.co_positions() if p[0] is not None]
    if not positions:
        return None
    # the body's first instruction position lies inside exactly one lambda's body
    body_pos = [(p[0], p[2]) for p in positions if p[2] is not None]

    def holds(c: ast.Lambda) -> bool:
        b = c.body
        return any(
            (b.lineno, b.col_offset) <= pos <= (b.end_lineno, b.end_col_offset) for pos in body_pos
        )

    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for cand in candidates:
        if holds(cand) and _arg_names(cand) == params:
            inner = [c for c in candidates if c is not cand and _contains(cand, c)]
            if not any(holds(c) for c in inner):
                return cand
    return None


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in walk(outer))


def _arg_names(node: ast.Lambda) -> tuple[str, ...]:
    a = node.args
    return tuple(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)


def _shift(module: ast.AST, line_offset: int, col_offset: int) -> None:
    if line_offset:
        ast.increment_lineno(module, line_offset)
    if col_offset:
        for node in walk(module):
            if hasattr(node, "col_offset") and node.col_offset is not None:
                node.col_offset += col_offset
            if hasattr(node, "end_col_offset") and node.end_col_offset is not None:
                node.end_col_offset += col_offset
