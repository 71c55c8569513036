"""Inlining calls of small ``define_dplus`` functions, before normalising.

A call of a user function inside differentiated code costs a plus-function call, a
``ProcResult``, a backprop closure and a backprop call: several times the function's
own work when the function is a few lines of float arithmetic (a force law, a
quaternion product). When the callee's transform is the one ``define_dplus`` derives
from its source, differentiating its body in place gives the same derivative, so a
statement ``target = g(args)`` (also ``return g(args)`` and ``g(args)`` alone) becomes::

    _a1 = <first argument>; _a2 = ...          # evaluated once, in order, as before
    <g's body, its parameters and locals renamed; its return value into target>

The global ``g`` may be rebound later, so the plus-function tests every inlined name on
entry (``g is <the function g was>``) and, when one fails, runs the function's transform
made without inlining instead; it tests them again before it returns, and raises when one
was rebound while it ran (its forward pass used the old function).

What is inlined, and only that:

- the callee is a plain function of the same module and file, found under a global
  name the caller never binds, registered by ``define_dplus`` (its transform is derived
  from its source), not the caller itself or a function being inlined around it;
- it takes positional parameters only (no defaults, ``*args``, keywords), is called
  with as many positional arguments and no keywords, and has no free variables;
- its body is at most ``MAX_STATEMENTS`` statements ending in its only ``return``, with
  no loop (a call costs little next to one), no nested function, class, lambda or
  comprehension, no ``global``/``nonlocal``, ``yield``, ``await``, ``try``, ``with``,
  ``import`` or ``match``; inside a ``try``, no ``if`` either (an exception out of an
  inlined branch would interrupt a compound statement, which the try's reverse refuses,
  where the call is one statement that raised);
- the names it reads from the module are not bound in the caller.

Registering another rule for an inlined function later makes its callers' guards fail
(:func:`forget`), so they call it, and its new rule, again (through the transform made
without inlining).
"""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any, cast

from ..errors import DplusError
from ..runtime.calls import holds_method
from ..runtime.registry import _ON_NEW_RULE, _TRANSFORMS
from .scopes import names_bound_by
from .trees import walk

__all__ = ["inline_calls", "forget", "MAX_STATEMENTS"]

MAX_STATEMENTS = 40
_MAX_DEPTH = 3  # inlined bodies are searched again for calls, this many levels deep
_MAX_CLASSES = 6  # a method call is inlined for at most this many classes holding the method
_FLAGS_EXCLUDED = (
    0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200
)  # *args, **kw, generator, coroutine, async
_FORBIDDEN = (
    ast.Return,
    ast.Global,
    ast.Nonlocal,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
    ast.For,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.AsyncFor,
    ast.Import,
    ast.ImportFrom,
    ast.Match,
    ast.Starred,
    ast.NamedExpr,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_TRY = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_DYNAMIC_NAMES = {"locals", "vars", "globals", "eval", "exec", "super", "dir"}

_GONE = object()  # a guard cell's value once its function has another rule: no global `is` it
# id(callee) -> (callee, guard cells of the transforms that inlined it)
_GUARDS: dict[int, tuple[Any, list[types.CellType]]] = {}


def forget(fn: Any) -> None:
    """``fn`` has a new rule: code that inlined it calls it again."""
    entry = _GUARDS.pop(id(fn), None)
    if entry is not None and entry[0] is fn:
        for cell in entry[1]:
            cell.cell_contents = _GONE


_ON_NEW_RULE.append(forget)


def remember_guards(guards: dict[str, Any], cells: dict[str, types.CellType]) -> None:
    """Note the cells the guards of one transform read (after it is compiled)."""
    for name, fn in guards.items():
        entry = _GUARDS.setdefault(id(fn), (fn, []))
        if entry[0] is not fn:  # an id reused after the function was freed
            entry = _GUARDS[id(fn)] = (fn, [])
        entry[1].append(cells[name])


def _bound_names(node: ast.AST) -> set[str]:
    """Every name ``node`` binds anywhere (nested scopes too: a conservative superset)."""
    out: set[str] = set()
    for n in walk(node):
        out.update(names_bound_by(n))
        if isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
    return out


def _all_names(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)} | _bound_names(node)


class _Callee:
    """An inlinable function: its definition and the names it binds and reads."""

    def __init__(self, fn: types.FunctionType, node: ast.FunctionDef) -> None:
        self.fn = fn
        self.node = node
        self.params = [a.arg for a in node.args.args]
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # the docstring
        if body and isinstance(body[-1], ast.Return):
            self.body = body[:-1]
            self.result: ast.expr = body[-1].value or ast.Constant(value=None)
        else:  # (a function returning None by running to its end)
            self.body = body
            self.result = ast.Constant(value=None)
        self.assigned = _bound_names(ast.Module(body=body, type_ignores=[]))
        self.locals = self.assigned | set(self.params)
        self.reads = {
            n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        } - self.locals
        self.branches = any(isinstance(n, ast.If) for st in self.body for n in walk(st))


def _callee(
    fn: object,
    caller: types.FunctionType,
    args: list[ast.expr],
    keywords: list[ast.keyword],
    method: bool = False,
) -> _Callee | None:
    """The definition of ``fn`` when a call of it with these arguments may be inlined (a
    ``method`` may also run to its end, returning None)."""
    if type(fn) is not types.FunctionType or fn is caller or keywords:
        return None
    if not _made_by_define_dplus(fn):
        return None  # no rule, or one written by hand
    code = fn.__code__
    if (
        fn.__globals__ is not caller.__globals__
        or code.co_filename != caller.__code__.co_filename
        or fn.__closure__
        or fn.__defaults__
        or fn.__kwdefaults__
        or code.co_flags & _FLAGS_EXCLUDED
        or code.co_kwonlyargcount
        or code.co_posonlyargcount
        or code.co_argcount != len(args)
        or any(isinstance(a, ast.Starred) for a in args)
    ):
        return None
    from .source import function_source

    try:
        node = function_source(fn).node
    except DplusError:
        return None
    if not isinstance(node, ast.FunctionDef):
        return None
    body = node.body
    if not body:
        return None
    last = body[-1]
    ends_in_return = isinstance(last, ast.Return)
    returned = last.value if isinstance(last, ast.Return) else None
    if returned is None and not method:
        return None
    statements = 0
    for st in body[:-1] if ends_in_return else body:
        for n in walk(st):
            if isinstance(n, _FORBIDDEN):
                return None
            if isinstance(n, ast.Name) and n.id in _DYNAMIC_NAMES:
                return None
            statements += isinstance(n, ast.stmt)
    if statements > MAX_STATEMENTS or (
        returned is not None and any(isinstance(n, _FORBIDDEN[1:]) for n in walk(returned))
    ):
        return None
    return _Callee(fn, node)


def _made_by_define_dplus(fn: types.FunctionType) -> bool:
    t = _TRANSFORMS.get(fn)
    return t is not None and getattr(t, "__dplus_source__", None) is fn


class _Inliner:
    def __init__(self, fn: types.FunctionType, node: ast.FunctionDef) -> None:
        self.fn = fn
        self.node = node
        self._bound: set[str] | None = None
        self._taken: set[str] | None = None
        self._next_suffix: dict[str, int] = {}  # fresh: the first suffix not yet tried, by base
        self._shared: set[str] | None = None  # names functions nested in the caller may bind
        self.guards: dict[str, Any] = {}  # guard name -> the function it stands for
        self.checks: list[tuple[str, str]] = []  # (global name, guard name) of every inlined call
        self.active: list[Any] = []  # functions being inlined around the current statement
        self.in_try = 0  # try statements around the current statement
        self._methods: dict[tuple[str, int], list[tuple[type, _Callee]]] = {}  # methods_of

    # (the names are gathered when a call may be inlined: most big functions inline nothing)
    @property
    def bound(self) -> set[str]:
        if self._bound is None:
            self._bound = _bound_names(self.node) | set(self.fn.__code__.co_freevars)
        return self._bound

    @property
    def taken(self) -> set[str]:
        if self._taken is None:
            self._taken = _all_names(self.node) | set(self.fn.__globals__) | set(dir(builtins))
        return self._taken

    def fresh(self, hint: str, keep_underscore: bool = False) -> str:
        base = hint if keep_underscore else (hint.lstrip("_") or "v")
        # (names are only ever added to ``taken``, so the suffixes below the last one given
        # stay taken: starting there gives the same name as counting from 1, without the
        # search that made a function of n method calls cost n² here)
        i = self._next_suffix.get(base, 1)
        while f"{base}_{i}" in self.taken:
            i += 1
        name = f"{base}_{i}"
        self.taken.add(name)
        self._next_suffix[base] = i + 1
        return name

    def guard_name(self, fn: Any) -> str:
        for name, g in self.guards.items():
            if g is fn:
                return name
        name = self.fresh(f"_dplus_inline_{fn.__name__}", keep_underscore=True)
        self.guards[name] = fn
        return name

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            out.extend(self.stmt(st))
        return out

    def stmt(self, st: ast.stmt) -> list[ast.stmt]:
        trying = isinstance(st, _TRY)
        self.in_try += trying
        try:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(st, field, None)
                if (
                    isinstance(inner, list)
                    and inner
                    and isinstance(inner[0], ast.stmt)
                    and not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                ):
                    setattr(st, field, self.block(inner))
            if isinstance(st, ast.Try):
                for h in st.handlers:
                    h.body = self.block(h.body)
        finally:
            self.in_try -= trying
        call = None
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.Call):
            call = st.value
        elif isinstance(st, (ast.Return, ast.Expr)) and isinstance(st.value, ast.Call):
            call = st.value
        if call is None and len(self.active) < _MAX_DEPTH:
            return self.hoisted_method_call(st)
        if call is None or len(self.active) >= _MAX_DEPTH:
            return [st]
        if isinstance(call.func, ast.Attribute):
            return self.method_call(st, call)
        if not isinstance(call.func, ast.Name):
            return [st]
        fn = self.fn.__globals__.get(call.func.id)
        if (
            type(fn) is not types.FunctionType
            or any(fn is a for a in self.active)
            or call.func.id in self.bound
        ):
            return [st]
        callee = _callee(fn, self.fn, call.args, call.keywords)
        if callee is None or callee.reads & self.bound or (self.in_try and callee.branches):
            # (in a try, an exception out of an inlined `if` would interrupt a compound
            # statement, which the try's reverse refuses; the call itself is one statement)
            return [st]
        return self.inline(st, call, callee)

    def method_call(self, st: ast.stmt, call: ast.Call) -> list[ast.stmt]:
        """``obj.name(args)`` on a name, with names and constants as arguments, where classes
        of the module hold an inlinable function under ``name``: the call becomes::

            if <obj's class is the first class, holding that function, obj nothing of that name>:
                <that function's body, self = obj>
            elif <the same for the second class>:
                ...
            else:
                obj.name(args)                  # the general path, as before

        The test is made when Python would look the method up (the receiver and arguments
        are names and constants: evaluating them runs no code), per call, at run time
        (:func:`runtime.calls.holds_method`); a later rule for the method or the class makes
        it fail (:func:`forget`)."""
        func = cast(ast.Attribute, call.func)
        receiver = func.value
        if (
            self.in_try  # (an exception out of the branch would interrupt an `if` in a try)
            or not isinstance(receiver, ast.Name)
            or call.keywords
            or not all(isinstance(a, (ast.Name, ast.Constant)) for a in call.args)
        ):
            return [st]
        out: list[ast.stmt] = [st]
        for cls, callee in reversed(self.methods_of(func.attr, [receiver, *call.args])):
            if any(callee.fn is a for a in self.active) or callee.reads & self.bound:
                continue
            function_call = ast.Call(
                func=ast.Name(id=func.attr, ctx=ast.Load()),
                args=[receiver, *call.args],
                keywords=[],
            )
            body = self.inline(st, function_call, callee, checked=False)
            test = ast.Call(
                func=ast.Name(id=self.guard_name(holds_method), ctx=ast.Load()),
                args=[
                    _copy(receiver),
                    ast.Name(id=self.guard_name(cls), ctx=ast.Load()),
                    ast.Constant(value=func.attr),
                    ast.Name(id=self.guard_name(callee.fn), ctx=ast.Load()),
                ],
                keywords=[],
            )
            test.dp_nondiff_guard = True  # type: ignore[attr-defined]  # (normalize: no record)
            choice = ast.copy_location(ast.If(test=test, body=body, orelse=out), st)
            ast.fix_missing_locations(choice)
            out = [choice]
        return out

    def hoisted_method_call(self, st: ast.stmt) -> list[ast.stmt]:
        """``target = obj.name(args) - y`` (or ``return``, or an expression statement): a
        method call on names that is the first thing arithmetic evaluates (only constants
        before it: a name read there could raise first, or be rebound by the call) is
        taken out, ``t = obj.name(args); target = t - y``, and inlined there when it may
        be."""
        value = getattr(st, "value", None)
        if not (
            isinstance(st, (ast.Expr, ast.Return))
            or isinstance(st, ast.Assign)
            and len(st.targets) == 1
        ) or not isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return [st]
        node: ast.expr = value
        while not isinstance(node, ast.Call):
            if isinstance(node, ast.UnaryOp):
                node = node.operand
            elif isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant):
                node = node.right
            elif isinstance(node, ast.BinOp):
                node = node.left
            else:
                return [st]
        call = node
        if not isinstance(call.func, ast.Attribute):
            return [st]
        temp = self.fresh(f"{call.func.attr}_result")
        taken = ast.copy_location(
            ast.Assign(targets=[ast.Name(id=temp, ctx=ast.Store())], value=call), st
        )
        inlined = self.method_call(taken, call)
        if len(inlined) == 1 and inlined[0] is taken:
            return [st]  # (not inlined: the statement as written)
        rest = _replace(st, call, ast.Name(id=temp, ctx=ast.Load()))
        ast.fix_missing_locations(rest)
        return inlined + [rest]

    def stays_bound(self, name: str, param: str, callee: _Callee) -> bool:
        """Whether the caller's ``name`` may stand for the callee's parameter ``param`` in the
        inlined body: the body never binds ``param``, and nothing the body runs can bind
        ``name`` (a local of the caller, not global or nonlocal, read by no function nested
        in it: only such a function could rebind it)."""
        if param in callee.assigned:
            return False
        if self._shared is None:
            shared: set[str] = set()
            for n in walk(self.node):
                if n is not self.node and isinstance(
                    n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
                ):
                    shared |= _all_names(n)
                elif isinstance(n, (ast.Global, ast.Nonlocal)):
                    shared.update(n.names)
            self._shared = shared | set(self.fn.__code__.co_freevars)
        return name in self.bound and name not in self._shared

    def methods_of(self, name: str, args: list[ast.expr]) -> list[tuple[type, _Callee]]:
        """The classes among the module's globals whose own namespace holds an inlinable
        function under ``name`` for these arguments, with that function (none when there
        are more than ``_MAX_CLASSES``)."""
        key = (name, len(args))
        if key in self._methods:
            return self._methods[key]
        found: list[tuple[type, _Callee]] = []
        for value in dict.fromkeys(
            v for v in list(self.fn.__globals__.values()) if type(v) is type
        ):  # (a class with a metaclass never passes holds_method)
            fn = value.__dict__.get(name)
            if type(fn) is not types.FunctionType:
                continue
            callee = _callee(fn, self.fn, args, [], method=True)
            if callee is not None:
                found.append((value, callee))
        self._methods[key] = found = found if len(found) <= _MAX_CLASSES else []
        return found

    def inline(
        self, st: ast.stmt, call: ast.Call, callee: _Callee, checked: bool = True
    ) -> list[ast.stmt]:
        fn = callee.fn
        self.taken.update(_all_names(callee.node))
        out: list[ast.stmt] = []
        temps: list[ast.Name | ast.Constant] = []
        walrus = any(isinstance(n, ast.NamedExpr) for a in call.args for n in walk(a))
        for a in call.args:  # each argument evaluated once, in order
            if isinstance(a, ast.Constant) or (isinstance(a, ast.Name) and not walrus):
                temps.append(a)
                continue
            t = self.fresh(f"{fn.__name__}_arg")
            out.append(
                ast.copy_location(
                    ast.Assign(targets=[ast.Name(id=t, ctx=ast.Store())], value=a), st
                )
            )
            temps.append(ast.Name(id=t, ctx=ast.Load()))
        out = self.block(out)  # an argument that is itself a call of an inlinable function
        renamed = {name: self.fresh(f"{fn.__name__}_{name}") for name in sorted(callee.locals)}
        body: list[ast.stmt] = []
        for i, (p, a) in enumerate(zip(callee.params, temps)):
            if (
                not checked
                and i == 0
                and isinstance(a, ast.Name)
                and self.stays_bound(a.id, p, callee)
            ):
                # a method's body reads the receiver's name itself (its test read it first:
                # the other arguments are assigned, so an unbound one raises where it did)
                renamed[p] = a.id
                continue
            body.append(
                ast.copy_location(
                    ast.Assign(targets=[ast.Name(id=renamed[p], ctx=ast.Store())], value=_copy(a)),
                    st,
                )
            )
        body += [_rename(s, renamed) for s in callee.body]
        result = _rename(callee.result, renamed)
        if isinstance(st, ast.Assign):
            body.append(
                ast.copy_location(
                    ast.Assign(targets=[_rename(st.targets[0], {})], value=result),
                    callee.node.body[-1],
                )
            )
        elif isinstance(st, ast.Return):
            body.append(ast.copy_location(ast.Return(value=result), callee.node.body[-1]))
        elif not (isinstance(result, ast.Constant) and result.value is None):
            body.append(ast.copy_location(ast.Expr(value=result), callee.node.body[-1]))
        self.active.append(fn)
        try:
            body = self.block(body)
        finally:
            self.active.pop()
        if checked:  # (a function read from the module: tested on entry and before returning)
            check = (cast(ast.Name, call.func).id, self.guard_name(fn))  # (stmt: a name)
            if check not in self.checks:
                self.checks.append(check)
        out += body
        for new in out:
            ast.fix_missing_locations(new)  # new nodes take their statement's position
        return out


def _replace(st: ast.stmt, old: ast.expr, new: ast.expr) -> ast.stmt:
    """``st`` with the node ``old`` (found by identity) replaced by ``new``."""
    for parent in walk(st):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return st
    raise AssertionError("the node to replace is not in the statement")  # pragma: no cover


def _copy(e: ast.Name | ast.Constant) -> ast.expr:
    return (
        ast.Name(id=e.id, ctx=ast.Load())
        if isinstance(e, ast.Name)
        else ast.Constant(value=e.value)
    )


def _rename(node: Any, names: dict[str, str]) -> Any:
    from .trees import clone

    new = clone(node)
    for n in walk(new):
        if isinstance(n, ast.Name) and n.id in names:
            n.id = names[n.id]
    return new


def inline_calls(
    fn: types.FunctionType, node: ast.FunctionDef | ast.Lambda
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Inline the calls in ``node`` (``fn``'s definition, changed in place) that may be.

    Returns the guard names, with the function each stands for, and the tests the
    plus-function makes: ``(global name, guard name)``, the global being the guard's function.
    """
    if not isinstance(node, ast.FunctionDef):
        return {}, []
    inliner = _Inliner(fn, node)
    node.body = inliner.block(node.body)
    return inliner.guards, inliner.checks
