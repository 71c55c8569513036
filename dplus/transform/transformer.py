"""The source transformer's front door: from a Python callable to its plus-function.

Pipeline: ``source`` (get the AST) → ``scopes`` (what is local, free, boxed) →
``normalize`` (A-normal form) → ``reverse`` (forward and reverse code) → here: compile
once per code object, bind to each function object's closure cells, cache.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import linecache
import sys
import threading
import types
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, cast

import attrs

from ..errors import SourceUnavailableError, describe_callable
from ..markers import mark
from ..runtime.closures import (
    CodeMap,
    PlusInfo,
    is_plus_function,
    plus_info,
    plus_info_of_code,
    register_plus_code,
    remember_generated,
)
from ..runtime.hooks import hooks
from ..runtime.linear import gen_zero
from ..runtime.ops import own_signature
from ..runtime.registry import bind_transform, lookup_transform, register_primitive
from ..runtime.result import ProcResult
from . import persistent_cache
from .fused import vector_fused_gradient
from .inline import inline_calls, remember_guards
from .normalize.core import Namer
from .normalize.normalizer import normalize_function
from .reverse.builder import Specialized, build_plus_function
from .reverse.syntax import FAST_PATHS, Helpers, choose_prefix
from .scalarize import hoist_constant_reads, scalarize_lists
from .scopes import _nonlocal_assigned, analyse, resolve_free
from .source import function_source, names_declared_global_in
from .trees import child_blocks, clone, nesting_depth, unparse, walk

__all__ = [
    "plus_function_for",
    "can_transform",
    "lazy_transform",
    "construct_plus",
    "generated_source",
]

Z = gen_zero


@attrs.define
class Compiled:
    code: types.CodeType  # the plus-function's code
    helper_cells: dict[str, Any]
    origin: Any  # the function transformed; show() transforms it again (the tree is not kept)
    nestable: bool
    name: str
    simple: bool
    prefix: str
    codes: dict[str, types.CodeType]  # every generated plus-function's code by (unique) name
    filename: str = ""
    plus_def: Any = None  # the generated tree, only when asked for (large trees slow the GC)
    fused: types.CodeType | None = None  # grad in one function, for a one-segment float body
    _text: str | None = None
    guards: tuple[str, ...] = ()  # the helper names of inlined functions (inline.py's guards)

    @property
    def source(self) -> str:
        if self._text is None:
            tree = (
                self.plus_def
                if self.plus_def is not None
                else _compile(self.origin, self.nestable, keep_tree=True).plus_def
            )
            self._text = _readable(tree, self.filename)
            fused = getattr(tree, "dp_fused", None)
            if fused is not None:
                self._text += (
                    "\n\n# grad(f) on floats, forward and reverse in one function (None: the general way)\n"
                    + _readable(fused, self.filename).split("\n", 1)[1]
                )
        return self._text


_LOCK = threading.RLock()
_COMPILED = CodeMap()


@contextlib.contextmanager
def general_paths_only() -> Iterator[None]:
    """Transform without the type-guarded fast paths while inside (tests compare the two).

    Functions transformed inside are cached apart, so code transformed before and after
    keeps its fast paths.
    """
    global _COMPILED
    saved = _COMPILED
    with _LOCK:
        _COMPILED = CodeMap()
        FAST_PATHS[0] = False
        try:
            yield
        finally:
            FAST_PATHS[0] = True
            _COMPILED = saved


def can_transform(f: Any) -> bool:
    if isinstance(f, (types.FunctionType, types.MethodType, functools.partial)):
        return True
    if isinstance(f, type):
        return False
    call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's __call__ function)
    return isinstance(call, types.FunctionType)


def plus_function_for(f: Any) -> Callable[..., ProcResult]:
    """The plus-function of a Python callable, derived from its source."""
    if isinstance(f, types.MethodType):
        t = lookup_transform(f.__func__)
        return _bound_plus(t if t is not None else plus_function_for(f.__func__), f.__self__)
    if isinstance(f, functools.partial):
        return _partial_plus(f)
    if not isinstance(f, types.FunctionType):
        call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's __call__ function)
        if isinstance(call, types.FunctionType):
            t = lookup_transform(call)
            # the sensitivity of a callable object is its own (a dict of attribute sensitivities)
            return _bound_plus(t if t is not None else plus_function_for(call), f, as_object=True)
        raise SourceUnavailableError(
            f"{describe_callable(f)} is not a Python function, so dplus cannot transform its source"
        )
    return _plus_from(compile_function(f), f)


def _plus_from(compiled: Compiled, f: types.FunctionType) -> Callable[..., ProcResult]:
    closure = _closure_for(compiled, f)
    kwdefaults = None if compiled.simple else {compiled.prefix + "sig": own_signature(f)}
    fn = types.FunctionType(compiled.code, f.__globals__, compiled.name, None, closure)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    mark(fn, "__dplus_source__", f)
    remember_generated(fn)  # (for a copy unpickled in another process: dplus.runtime.portable)
    if compiled.fused is not None:
        fused = types.FunctionType(
            compiled.fused,
            f.__globals__,
            compiled.fused.co_name,
            None,
            _closure_for(compiled, f, compiled.fused),
        )
        mark(fn, "__dplus_fused__", fused)
    return fn


class _Unspecialized:
    """``f``'s plus-function made without inlining or reading parameters on entry, compiled
    when first called: what a plus-function made with them runs instead when one of its
    assumptions fails (an inlined global rebound, or its function given a new rule; a
    parameter read on entry that is not a dict holding the keys)."""

    def __init__(self, f: types.FunctionType) -> None:
        self.f = f
        self.plus: Callable[..., ProcResult] | None = None

    def __call__(self, /, *args: Any, **kwargs: Any) -> ProcResult:
        if self.plus is None:
            f = self.f
            compiled = _UNSPECIALIZED.get(f.__code__)
            if compiled is None:
                with _LOCK:
                    compiled = _UNSPECIALIZED[f.__code__] = _compile_or_load(f, specialize=False)
            self.plus = _plus_from(compiled, f)
        return self.plus(*args, **kwargs)


_UNSPECIALIZED = CodeMap()


def _closure_for(
    compiled: Compiled, f: types.FunctionType, code: types.CodeType | None = None
) -> tuple:
    user_cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
    cells = []
    for name in (code or compiled.code).co_freevars:
        if name in user_cells:
            cells.append(user_cells[name])
        elif name in compiled.helper_cells:
            cells.append(compiled.helper_cells[name])
        else:
            raise RuntimeError(
                f"dplus internal error: no cell for free variable {name!r} of generated code"
            )
    return tuple(cells)


def compile_function(f: types.FunctionType) -> Compiled:
    code = f.__code__
    compiled = _COMPILED.get(code)
    if compiled is not None:
        return compiled
    with _LOCK:
        compiled = _COMPILED.get(code)
        if compiled is None:
            compiled = _compile_or_load(f)
            _COMPILED[code] = compiled
    return compiled


def _compile_or_load(
    f: types.FunctionType, specialize: bool = True, nestable: bool = False
) -> Compiled:
    """``_compile(f)``, or its code read from the persistent cache when that is on and holds
    it (written there after a transformation otherwise)."""
    if persistent_cache.cache_directory() is None:
        return _compile(f, nestable=nestable, specialize=specialize)
    try:
        key = persistent_cache.entry_key(f, (FAST_PATHS[0], specialize, nestable))
    except persistent_cache.Unkeyable:
        return _compile(f, nestable=nestable, specialize=specialize)
    compiled = _compiled_from_entry(f, persistent_cache.load(key), nestable)
    if compiled is not None:
        persistent_cache.STATS["hits"] += 1
        return compiled
    persistent_cache.STATS["misses"] += 1
    compiled = _compile(f, nestable=nestable, specialize=specialize)
    _store_entry(key, compiled, f)
    return compiled


def _store_entry(key: str, compiled: Compiled, f: types.FunctionType) -> None:
    values = {name: cell.cell_contents for name, cell in compiled.helper_cells.items()}
    special = {id(v): "unspecialized" for v in values.values() if isinstance(v, _Unspecialized)}
    try:
        recipes = {
            name: persistent_cache.recipe_for(value, f, special) for name, value in values.items()
        }
    except persistent_cache.Unfindable:
        persistent_cache.STATS["unstorable"] += 1
        return
    by_value = {}
    for name, code in compiled.codes.items():
        info = plus_info_of_code(code)
        by_value[name] = info.by_value_freevars if info is not None else ()
    persistent_cache.store(
        key,
        {
            "plus": compiled.code,
            "fused": compiled.fused,
            "helpers": recipes,
            "guards": compiled.guards,
            "by_value": by_value,
            "name": compiled.name,
            "simple": compiled.simple,
            "prefix": compiled.prefix,
            "filename": compiled.filename,
            # the text of code made differentiable again, compiled from it (read again at
            # the next order under the file name the code carries)
            "text": "".join(linecache.getlines(compiled.code.co_filename))
            if compiled.nestable
            else "",
        },
    )


def _compiled_from_entry(
    f: types.FunctionType, entry: dict | None, nestable: bool = False
) -> Compiled | None:
    """The Compiled of a cache entry, with its helpers found in this process; None when the
    entry is absent, malformed, or names a value this process does not have (a miss)."""
    if entry is None:
        return None
    try:
        plus, fused = entry["plus"], entry["fused"]
        special = {"unspecialized": _Unspecialized(f)}
        values = {
            name: persistent_cache.follow_recipe(recipe, f, special)
            for name, recipe in entry["helpers"].items()
        }
        guards = tuple(entry["guards"])
        by_value = {name: tuple(names) for name, names in entry["by_value"].items()}
        name, simple, prefix = str(entry["name"]), bool(entry["simple"]), str(entry["prefix"])
        filename = str(entry["filename"])
        text = str(entry["text"])
    except (persistent_cache.Unfindable, KeyError, TypeError, ValueError, AttributeError):
        return None
    bindable = set(values) | set(f.__code__.co_freevars)
    for code in (plus, fused):
        if code is not None and not (
            isinstance(code, types.CodeType) and set(code.co_freevars) <= bindable
        ):
            return None
    if not isinstance(plus, types.CodeType) or not set(guards) <= set(values):
        return None
    if nestable:
        if not text:
            return None
        plus = _with_filename(plus, _register_text(f, text))
    elif plus.co_filename != f.__code__.co_filename:
        # (code made from generated text: this process registered that text under its name)
        plus = _with_filename(plus, f.__code__.co_filename)
        fused = None if fused is None else _with_filename(fused, f.__code__.co_filename)
        filename = f.__code__.co_filename
    codes: dict[str, types.CodeType] = {}
    _register_codes(plus, by_value, f, codes)
    helper_cells = {k: types.CellType(v) for k, v in values.items()}
    remember_guards({g: values[g] for g in guards}, helper_cells)
    COMPILE_LOG.append((prefix, nestable, sum(len(c.co_code) for c in codes.values())))
    return Compiled(
        plus,
        helper_cells,
        f,
        nestable,
        name,
        simple,
        prefix,
        codes,
        filename,
        None,
        fused,
        None,
        guards,
    )


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and the code nested in it, compiled from the file ``filename``."""
    consts = tuple(
        _with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


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


def _reads_own_namespace(node: ast.AST) -> bool:
    """Whether the function calls ``locals``, ``vars``, ``dir``, ``eval`` or ``exec`` by name."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id in ("locals", "vars", "dir", "eval", "exec")
        for n in walk(node)
    )


@_deep_stack_when_needed
@_collector_paused
def _compile(
    f: types.FunctionType, nestable: bool = False, keep_tree: bool = False, specialize: bool = True
) -> Compiled:
    src = function_source(f)
    node = clone(src.node)
    if isinstance(node, ast.FunctionDef):
        node.decorator_list = []
    # first-order code inlines calls of small define_dplus functions (see inline.py)
    # (not in a function that reads its own namespace: locals() would show the inlined names)
    inlines = specialize and not nestable and FAST_PATHS[0] and not _reads_own_namespace(node)
    guards, checks = inline_calls(f, node) if inlines else ({}, [])
    scope = analyse(node)
    freevars = src.freevars
    written_globals = names_declared_global_in(src.filename)
    if written_globals:
        # a global another function of the module may write while differentiated is read
        # through the module's namespace here too (normalize._ModuleNamespaceAccess)
        loads = {
            n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        scope.globals_ |= (
            (loads & written_globals) - set(scope.assigned) - set(freevars) - set(scope.nonlocals)
        )
    resolve_free(scope, set(), set(freevars))
    boxed_outside = {n for n in freevars if _nonlocal_assigned(scope, n)}
    taken = {n.id for n in walk(node) if isinstance(n, ast.Name)} | set(scope.params)
    taken |= {n.arg for n in walk(node) if isinstance(n, ast.arg)} | set(freevars)
    prefix = choose_prefix(taken)
    namer = Namer(taken)
    name = f.__code__.co_name if f.__code__.co_name != "<lambda>" else "lambda"
    ir = normalize_function(
        scope, namer, src.filename, f.__globals__, name, isinstance(node, ast.Lambda), boxed_outside
    )
    hoisted: list = []
    if not nestable and FAST_PATHS[0]:
        scalarize_lists(ir, namer)  # lists that never leave the function become their elements
        if specialize:  # (the transform made without this reads elements where the code does)
            hoisted = hoist_constant_reads(ir, namer)
    helpers = Helpers()
    helpers.values.update(guards)
    consts = {
        name
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ())
        if _cell_holds(cell, gen_zero)
    }
    specialized = Specialized(checks, hoisted, _Unspecialized(f)) if checks or hoisted else None
    plus_def = build_plus_function(
        ir,
        namer,
        helpers,
        f.__globals__,
        outer_free=freevars,
        nestable=nestable,
        prefix=prefix,
        const_names=consts,
        specialized=specialized,
    )
    if plus_def.dp_fusable and not ir.args.vararg:  # type: ignore[attr-defined]
        plus_def.dp_fused = vector_fused_gradient(  # type: ignore[attr-defined]
            ir, namer, helpers, f.__globals__, freevars, set(consts), specialized
        )
    by_value = _unique_plus_names(plus_def)
    fused_def = getattr(plus_def, "dp_fused", None)
    user_free = list(freevars)
    returned = ast.Return(value=ast.Name(id=plus_def.name, ctx=ast.Load()))
    factory = ast.FunctionDef(
        name=prefix + "factory",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=n) for n in list(helpers.values) + user_free],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[plus_def] + ([fused_def] if fused_def is not None else []) + [returned],
        decorator_list=[],
        returns=None,
        type_comment=None,
    )
    module = ast.Module(body=[factory], type_ignores=[])
    # the plus-function is located already; only the factory around it needs a position
    positioned: list[Any] = [factory, factory.args, *factory.args.args, returned, returned.value]
    for node in positioned:
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = plus_def.lineno
            node.col_offset = node.end_col_offset = 0
    filename = src.filename
    if nestable:
        # compiled from its own text, registered with linecache, so it can be transformed again
        text = unparse(module) + "\n"
        filename = _register_text(f, text)
        to_compile: Any = text
    else:
        to_compile = module
    try:
        code = compile(to_compile, filename, "exec")
    except SyntaxError as e:  # pragma: no cover - a transformer bug
        raise RuntimeError(
            f"dplus generated invalid code for {describe_callable(f)}: {e}\n{unparse(plus_def)}"
        ) from e
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    plus_code = next(
        c
        for c in factory_code.co_consts
        if isinstance(c, types.CodeType) and c.co_name == plus_def.name
    )
    fused_code = (
        None
        if fused_def is None
        else next(
            c
            for c in factory_code.co_consts
            if isinstance(c, types.CodeType) and c.co_name == fused_def.name
        )
    )
    codes: dict[str, types.CodeType] = {}
    _register_codes(plus_code, by_value, f, codes)
    helper_cells = {k: types.CellType(v) for k, v in helpers.values.items()}
    remember_guards(guards, helper_cells)
    COMPILE_LOG.append((prefix, nestable, sum(len(c.co_code) for c in codes.values())))
    return Compiled(
        plus_code,
        helper_cells,
        f,
        nestable,
        plus_def.name,
        bool(getattr(plus_def, "dp_simple", True)),
        prefix,
        codes,
        src.filename,
        plus_def if keep_tree else None,
        fused_code,
        None,
        tuple(guards),
    )


_NEST_COUNTER = [0]


def _register_text(f: types.FunctionType, text: str) -> str:
    """Register ``text``, the code of ``f`` made differentiable again, with linecache under
    a new file name (the next order reads it there); returns the name."""
    _NEST_COUNTER[0] += 1
    filename = f"<dplus: {f.__qualname__} differentiable again #{_NEST_COUNTER[0]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return filename


# (prefix, nestable, bytecode bytes) of every transformation: the benchmarks read how much
# code each order of a nested derivative generated
COMPILE_LOG: list[tuple[str, bool, int]] = []


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


def generated_source(f: Any) -> str:
    """The readable generated source of ``f``'s plus-function."""
    target = f
    if isinstance(f, types.MethodType):
        target = f.__func__
    if not isinstance(target, types.FunctionType):
        raise SourceUnavailableError(
            f"{describe_callable(f)} is not a Python function: it has no generated code to show"
        )
    source = getattr(target, "__dplus_source__", None)
    if source is not None and plus_info(target) is not None:
        target = source
    return compile_function(target).source


# ---------------------------------------------------------------------------
# bound methods, partials, callable objects


def _bound_plus(
    t: Callable[..., ProcResult], owner: Any, as_object: bool = False
) -> Callable[..., ProcResult]:
    plus = bind_transform(t, owner, as_object)
    _mark_plus(plus)
    return plus


def _partial_plus(p: functools.partial) -> Callable[..., ProcResult]:
    from ..runtime.core import KeywordDict, lift
    from ..runtime.ops import call_plus_keywords, keywords_at, merged_keywords

    inner_plus = (
        lift(p.func)
        if not can_transform(p.func)
        or lookup_transform(p.func) is not None
        or is_plus_function(p.func)  # made inside transformed code: it stands for itself
        else plus_function_for(p.func)
    )
    bound_args = p.args
    bound_kw = KeywordDict(p.keywords)  # (a value: its sensitivity is the partial's third part)
    bound_names = tuple(bound_kw)

    # (written in the language dplus differentiates, so that it is differentiated again: the
    # inner plus-function is called through call_plus_keywords, with the keywords as tuples,
    # and their sensitivities are picked by operations with rules of their own)
    def partial_plus(*args: Any, **kwargs: Any) -> ProcResult:
        names, values = merged_keywords(bound_kw, kwargs)
        r = call_plus_keywords(inner_plus, bound_args + args, names, values)
        inner = r.backprop
        nb = len(bound_args)

        def partial_backprop(A: Any, Abox: Any) -> tuple:
            out = inner(A, Abox)
            npos = nb + len(args)
            pos = out[1 : 1 + npos]
            kept = tuple([k for k in bound_names if k not in kwargs]) if kwargs else bound_names
            closure = (out[0], pos[:nb], keywords_at(out, 1 + npos, kept))
            res: tuple[Any, ...] = (closure,) + pos[nb:]
            if kwargs:
                res = res + (keywords_at(out, 1 + npos, tuple(kwargs)),)
            return res

        return ProcResult(r.primal, partial_backprop)

    if partial_plus.__code__ not in _EXTRA_PLUS:
        # its sensitivity is the partial's, (func, args, keywords): laid out by these variables
        _EXTRA_PLUS.add(partial_plus.__code__)
        register_plus_code(
            partial_plus.__code__, PlusInfo(None, ("inner_plus", "bound_args", "bound_kw"), None)
        )
    return partial_plus


_EXTRA_PLUS: set[types.CodeType] = set()


def _mark_plus(fn: Callable[..., Any]) -> None:
    code = cast(types.FunctionType, fn).__code__  # (a plus-function dplus made: a function)
    if code not in _EXTRA_PLUS:
        _EXTRA_PLUS.add(code)
        register_plus_code(code, PlusInfo(None, (), None))


# ---------------------------------------------------------------------------
# define_dplus: derive lazily, so recursion and mutual recursion work in any order


def lazy_transform(f: Any) -> Callable[..., ProcResult]:
    state: dict[str, Any] = {}

    def lazy_plus(*args: Any, **kwargs: Any) -> ProcResult:
        plus = state.get("plus")
        if plus is None:
            plus = state["plus"] = plus_function_for(f)
            register_primitive(f, plus, note="derived from source by define_dplus")
        if kwargs:  # (bound by runtime_ops.call, so their sensitivities come back by name)
            from ..runtime.ops import call

            return call(plus, *args, **kwargs)
        return plus(*args)

    lazy_plus.__name__ = lazy_plus.__qualname__ = f"{getattr(f, '__name__', 'f')}__plus"
    mark(lazy_plus, "__dplus_source__", f)
    mark(lazy_plus, "__dplus_lazy__", True)
    return lazy_plus


# ---------------------------------------------------------------------------
# constructing instances of user classes


def construct_plus(cls: Any) -> Callable[..., ProcResult] | None:
    if dataclasses.is_dataclass(cls) or attrs.has(cls):
        return _field_constructor(cls)
    if _is_plain_namedtuple(cls):
        return _namedtuple_constructor(cls)
    init = (
        cls.__dict__.get("__init__")
        if "__init__" in cls.__dict__
        else getattr(cls, "__init__", None)
    )
    if isinstance(init, types.FunctionType):
        t = lookup_transform(init)
        init_plus = t if t is not None else plus_function_for(init)

        def construct(*args: Any, **kwargs: Any) -> ProcResult:
            from ..runtime.core import apply_transform, handover

            obj = cls.__new__(cls)
            # (through apply_transform, so that this code can be differentiated again)
            r = apply_transform(init_plus, obj, *args, **kwargs)
            inner = r.backprop

            def construct_backprop(A: Any, Abox: Any) -> tuple:

                if A is not Z and A is not None:
                    handover(Abox, obj, A)
                out = inner(Z, Abox)
                return ((),) + tuple(out[2:])

            return ProcResult(obj, construct_backprop)

        _mark_plus(construct)
        return construct
    return None


def _is_plain_namedtuple(cls: type[Any]) -> bool:
    """A ``collections.namedtuple`` / ``typing.NamedTuple`` class whose construction is the
    generated one (no ``__new__`` or ``__init__`` of the user's)."""
    if not (issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)):
        return False
    for klass in cls.__mro__:
        if klass is tuple:
            return True
        if "__init__" in klass.__dict__:
            return False
        new = klass.__dict__.get("__new__")
        new = getattr(new, "__func__", new)  # (a staticmethod in the class dict)
        if new is not None and not getattr(new, "__module__", "").startswith("namedtuple_"):
            return False  # (the generated __new__ lives in a module named namedtuple_<name>)
    return True


def _namedtuple_constructor(cls: type[Any]) -> Callable[..., ProcResult]:
    """A named tuple built from its fields: each argument gets its field's sensitivity."""
    names = list(cls._fields)

    def construct_namedtuple(*args: Any, **kwargs: Any) -> ProcResult:
        obj = cls(*args, **kwargs)
        n = len(names)

        def construct_namedtuple_backprop(A: Any, Abox: Any) -> tuple:
            from ..runtime.linear import tuple_items

            parts = dict(zip(names, tuple_items(A, n)))
            out = ((),) + tuple(parts[name] for name in names[: len(args)])
            if kwargs:
                out = out + ({k: parts.get(k, Z) for k in kwargs},)
            return out

        return ProcResult(obj, construct_namedtuple_backprop)

    _mark_plus(construct_namedtuple)
    return construct_namedtuple


def _field_constructor(cls: Any) -> Callable[..., ProcResult]:
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        names = [a.name for a in attrs.fields(cls) if a.init]

    def construct_fields(*args: Any, **kwargs: Any) -> ProcResult:
        obj = cls(*args, **kwargs)
        pos_names = names[: len(args)]

        def construct_fields_backprop(A: Any, Abox: Any) -> tuple:
            from ..runtime.core import handover

            if A is not Z and A is not None:
                handover(Abox, obj, A)
            entry = Abox.pop(obj, Z)
            get = (lambda n: entry.get(n, Z)) if entry is not Z else (lambda n: Z)
            out = ((),) + tuple(get(n) for n in pos_names)
            if kwargs:
                out = out + ({k: get(k) for k in kwargs},)
            return out

        return ProcResult(obj, construct_fields_backprop)

    _mark_plus(construct_fields)
    return construct_fields


hooks.install(plus_function_for=plus_function_for)
