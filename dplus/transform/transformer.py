"""The source transformer's front door: from a Python callable to its plus-function.

Pipeline: ``source`` (get the AST) → ``scopes`` (what is local, free, boxed) →
``normalize`` (A-normal form) → ``reverse`` (forward and reverse code) → here: compile
once per code object, bind to each function object's closure cells, cache.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import linecache
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from ..errors import SourceUnavailableError, describe_callable
from ..markers import mark
from ..runtime.arguments import own_signature
from ..runtime.closures import (
    CodeMap,
    plus_info,
    plus_info_of_code,
    remember_generated,
)
from ..runtime.error_places import register_source_lines
from ..runtime.linear import gen_zero
from ..runtime.result import ProcResult
from . import persistent_cache
from .deep_stack import _collector_paused, _deep_stack_when_needed
from .fused import vector_fused_gradient
from .generated_text import (
    _cell_holds,
    _readable,
    _register_codes,
    _register_text,
    _unique_plus_names,
    statement_lines,
)
from .inline import inline_calls, remember_guards
from .normalize.core import Namer
from .normalize.definitions import rewrite_definitions
from .normalize.normalizer import normalize_function
from .reverse.builder import build_plus_function
from .reverse.entry import Specialized
from .reverse.syntax import FAST_PATHS, Helpers, choose_prefix
from .scalarize import hoist_constant_reads, scalarize_lists
from .scopes import _nonlocal_assigned, analyse, resolve_free
from .source import function_source, names_declared_global_in
from .trees import clone, unparse, walk

__all__ = ["compile_function", "fused_first", "general_paths_only", "generated_source"]

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
    # the free variables of the plus-function that hold constants (its helpers and the
    # constants it was given): the differentiable-again form tells the next order so
    constant_names: frozenset[str] = frozenset()
    # (the plus-function's code or else the fused one, f's free variables) -> where each
    # free variable's cell comes from
    closure_plans: dict[tuple[bool, tuple[str, ...]], tuple[Any, ...]] = attrs.field(
        factory=dict, eq=False
    )

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
    """The cells of the plus-function's free variables: ``f``'s own, and the helpers'."""
    code = code or compiled.code
    key = (code is compiled.code, f.__code__.co_freevars)
    plan = compiled.closure_plans.get(key)
    if plan is None:
        plan = compiled.closure_plans[key] = _closure_plan(compiled, f, code)
    user = f.__closure__ or ()
    return tuple([user[at] if type(at) is int else at for at in plan])


def _closure_plan(
    compiled: Compiled | FusedOnly, f: types.FunctionType, code: types.CodeType
) -> tuple[Any, ...]:
    """Where each free variable's cell is found: a position in ``f``'s closure (made anew with
    every closure of a rule's backprop met again), or the helper's cell itself."""
    user_positions = {name: i for i, name in enumerate(f.__code__.co_freevars)}
    plan: list[Any] = []
    for name in code.co_freevars:
        if name in user_positions:
            plan.append(user_positions[name])
        elif name in compiled.helper_cells:
            plan.append(compiled.helper_cells[name])
        else:
            raise RuntimeError(
                f"dplus internal error: no cell for free variable {name!r} of generated code"
            )
    return tuple(plan)


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
        key = persistent_cache.entry_key(
            f, (FAST_PATHS[0], specialize, nestable, sorted(given_constants(f)))
        )
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
        frozenset(values) | given_constants(f),
    )


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and the code nested in it, compiled from the file ``filename``."""
    consts = tuple(
        _with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def _reads_own_namespace(node: ast.AST) -> bool:
    """Whether the function calls ``locals``, ``vars``, ``dir``, ``eval`` or ``exec`` by name."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id in ("locals", "vars", "dir", "eval", "exec")
        for n in walk(node)
    )


def _names_in(node: ast.AST) -> tuple[set[str], set[str]]:
    """The names ``node`` uses (as names and parameters), and those of them it reads."""
    used: set[str] = set()
    loads: set[str] = set()
    for n in walk(node):
        if isinstance(n, ast.Name):
            used.add(n.id)
            if isinstance(n.ctx, ast.Load):
                loads.add(n.id)
        elif isinstance(n, ast.arg):
            used.add(n.arg)
    return used, loads


@_deep_stack_when_needed
@_collector_paused
def _compile(
    f: types.FunctionType,
    nestable: bool = False,
    keep_tree: bool = False,
    specialize: bool = True,
    fused_only: bool = False,
) -> Any:
    """``f``'s plus-function compiled (a :class:`Compiled`). With ``fused_only``: its fused
    gradient alone (a :class:`FusedOnly`), built without the general variant, when its body
    is one fast segment; the full build otherwise; None when that build left the general
    variant out and made no fused gradient (``fused_first`` then builds in full)."""
    src = function_source(f)
    node = clone(src.node)
    if isinstance(node, ast.FunctionDef):
        node.decorator_list = []
    # class statements and generator functions inside become ordinary code first
    node = rewrite_definitions(
        node,
        f.__qualname__,
        str(f.__globals__.get("__name__", f.__module__)),
        bool(f.__code__.co_flags & __future__.annotations.compiler_flag),
        src.filename,
        again=nestable,
        globals_=f.__globals__,
    )
    # first-order code inlines calls of small define_dplus functions (see inline.py)
    # (not in a function that reads its own namespace: locals() would show the inlined names)
    inlines = specialize and not nestable and FAST_PATHS[0] and not _reads_own_namespace(node)
    guards, checks = inline_calls(f, node) if inlines else ({}, [])
    scope = analyse(node)
    freevars = src.freevars
    written_globals = names_declared_global_in(src.filename)
    used, loads = _names_in(node)
    if written_globals:
        # a global another function of the module may write while differentiated is read
        # through the module's namespace here too (normalize._ModuleNamespaceAccess)
        scope.globals_ |= (
            (loads & written_globals) - set(scope.assigned) - set(freevars) - set(scope.nonlocals)
        )
    resolve_free(scope, set(), set(freevars))
    boxed_outside = {n for n in freevars if _nonlocal_assigned(scope, n)}
    taken = used | set(scope.params) | set(freevars)
    prefix = choose_prefix(taken)
    namer = Namer(taken)
    name = f.__code__.co_name if f.__code__.co_name != "<lambda>" else "lambda"
    ir = normalize_function(
        scope,
        namer,
        src.filename,
        f.__globals__,
        name,
        isinstance(node, ast.Lambda),
        boxed_outside,
        f.__qualname__,
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
    } | given_constants(f)
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
        defer_general=fused_only,
    )
    if plus_def.dp_deferred:  # type: ignore[attr-defined]
        return _compile_fused_only(f, plus_def, helpers, freevars, prefix, src.filename, guards)
    if plus_def.dp_fusable and not ir.args.vararg:  # type: ignore[attr-defined]
        plus_def.dp_fused = vector_fused_gradient(  # type: ignore[attr-defined]
            ir, namer, helpers, f.__globals__, freevars, set(consts), specialized
        )
    by_value = _unique_plus_names(plus_def)
    fused_def = getattr(plus_def, "dp_fused", None)
    # the plus-function is located already; only the factory around it needs a position
    module = _factory(
        prefix,
        list(helpers.values) + list(freevars),
        [plus_def] + ([fused_def] if fused_def is not None else []),
        plus_def.name,
        plus_def.lineno,
    )
    filename = src.filename
    if nestable:
        # compiled from its own text, registered with linecache, so it can be transformed again
        text = unparse(module) + "\n"
        filename = _register_text(f, text)
        register_source_lines(filename, src.filename, statement_lines(module))
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
        frozenset(helpers.values) | given_constants(f),
    )


@attrs.define
class FusedOnly:
    """The fused gradient of a function built without its general variant (``fused_first``)."""

    code: types.CodeType
    helper_cells: dict[str, Any]
    closure_plans: dict[tuple[str, ...], tuple[Any, ...]] = attrs.field(factory=dict, eq=False)


def _factory(
    prefix: str, params: list[str], defs: list[ast.stmt], returned: str, lineno: int
) -> ast.Module:
    """The module ``def <prefix>factory(<helpers and f's free variables>): <defs>; return
    <returned>``, its new nodes given the line ``lineno``."""
    ret = ast.Return(value=ast.Name(id=returned, ctx=ast.Load()))
    factory = ast.FunctionDef(
        name=prefix + "factory",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=n) for n in params],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[*defs, ret],
        decorator_list=[],
        returns=None,
        type_comment=None,
    )
    positioned: list[Any] = [factory, factory.args, *factory.args.args, ret, ret.value]
    for node in positioned:
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = lineno
            node.col_offset = node.end_col_offset = 0
    return ast.Module(body=[factory], type_ignores=[])


def _compile_fused_only(
    f: types.FunctionType,
    plus_def: Any,
    helpers: Helpers,
    freevars: tuple[str, ...],
    prefix: str,
    filename: str,
    guards: dict[str, Any],
) -> FusedOnly | None:
    """Compile the fused gradient of a build that left the general variant out (its
    plus-function is incomplete: not compiled)."""
    fused_def = plus_def.dp_fused
    if fused_def is None:
        return None
    module = _factory(
        prefix, list(helpers.values) + list(freevars), [fused_def], fused_def.name, plus_def.lineno
    )
    code = compile(module, filename, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    fused_code = next(
        c
        for c in factory_code.co_consts
        if isinstance(c, types.CodeType) and c.co_name == fused_def.name
    )
    helper_cells = {k: types.CellType(v) for k, v in helpers.values.items()}
    remember_guards(guards, helper_cells)
    return FusedOnly(fused_code, helper_cells)


_FUSED_FIRST = CodeMap()  # code -> FusedOnly, or False: no fused gradient without the full build


def fused_first(f: types.FunctionType) -> Callable[..., Any] | None:
    """``f``'s fused gradient (``f__grad``, see ``FunctionBuilder.fused_gradient``) without
    building its plus-function, when ``f``'s body is one float fast segment; None otherwise
    (then ``compile_function`` builds, or has built, the whole plus-function).

    For ``grad`` on floats only the fused gradient runs: the general variant of the segment
    and the plus-function (most of the generated code) are built when first needed, by the
    full build, whose fused gradient is the same code. Not with the persistent cache on (it
    holds full builds) nor inside ``general_paths_only``."""
    if not FAST_PATHS[0] or persistent_cache.cache_directory() is not None:
        return None
    code = f.__code__
    if _COMPILED.get(code) is not None:
        return None
    got = _FUSED_FIRST.get(code)
    if got is None:
        with _LOCK:
            got = _FUSED_FIRST.get(code)
            if got is None and _COMPILED.get(code) is None:
                built = _compile(f, fused_only=True)
                if isinstance(built, Compiled):  # (the body is not one fast segment: built in full)
                    _COMPILED[code] = built
                    got = False
                else:
                    got = _FUSED_FIRST[code] = built if built is not None else False
    if not got:
        return None
    plan = got.closure_plans.get(code.co_freevars)
    if plan is None:
        plan = got.closure_plans[code.co_freevars] = _closure_plan(got, f, got.code)
    user = f.__closure__ or ()
    closure = tuple([user[at] if type(at) is int else at for at in plan])
    return types.FunctionType(got.code, f.__globals__, got.code.co_name, None, closure)


def given_constants(f: Any) -> frozenset[str]:
    """The free variables of ``f`` that hold constants: a plus-function rebuilt to be
    differentiated again names the helpers it closes over (runtime functions, rules, zero),
    whose sensitivity is always zero, so the next order tracks none for them."""
    names = getattr(f, "__dplus_constant_freevars__", None)
    if not names:
        return frozenset()
    return frozenset(names) & frozenset(f.__code__.co_freevars)


# (prefix, nestable, bytecode bytes) of every transformation: the benchmarks read how much
# code each order of a nested derivative generated
COMPILE_LOG: list[tuple[str, bool, int]] = []


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
