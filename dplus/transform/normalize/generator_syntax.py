"""What :mod:`.generator_machine` needs to know about a generator function's syntax before
rewriting it: which statements hold a ``yield`` (not counting nested scopes), the names it
binds and declares, whether an ``except`` clause may catch ``GeneratorExit``, and the
preparing rewrite (:class:`Prepare`) that puts every ``yield`` in a place the machine
resumes at, refusing the others by name (:class:`GeneratorSyntaxError`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class GeneratorSyntaxError(Exception):
    """A ``yield`` where the machine cannot resume: ``(node, what, fix)``."""

    def __init__(self, node: ast.AST, what: str, fix: str) -> None:
        super().__init__(what)
        self.node = node
        self.what = what
        self.fix = fix


def _walk_here(node: ast.AST):
    """The nodes under ``node`` that belong to its own scope (nested defs, lambdas, classes
    and comprehensions are not entered, but their default values and decorators are; a
    ``def`` statement given as ``node`` is a nested one: its body is not entered either)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(n.decorator_list)
            todo.extend(n.args.defaults)
            todo.extend(d for d in n.args.kw_defaults if d is not None)
            continue
        if isinstance(n, ast.Lambda):
            todo.extend(n.args.defaults)
            todo.extend(d for d in n.args.kw_defaults if d is not None)
            continue
        if isinstance(n, ast.ClassDef):
            todo.extend(n.decorator_list)
            todo.extend(n.bases)
            todo.extend(k.value for k in n.keywords)
            continue
        for child in ast.iter_child_nodes(n):
            todo.append(child)


def yields_in(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk_here(node))


def is_generator_function(node: ast.AST) -> bool:
    """A ``def`` with a ``yield`` of its own (not one of a function nested in it)."""
    return isinstance(node, ast.FunctionDef) and any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for st in node.body for n in _walk_here_body(st)
    )


def _walk_here_body(st: ast.AST):
    """``_walk_here`` of a statement of a body: a nested ``def`` statement's own body is not
    entered either."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return iter(())  # (a yield in its decorators or defaults: its own error)
    return _walk_here(st)


def bound_names(body: list[ast.stmt]) -> list[str]:
    """Every name the statements bind in their own scope, in order of first binding."""
    seen: dict[str, None] = {}

    def add(name: str | None) -> None:
        if name:
            seen.setdefault(name, None)

    for st in body:
        for n in _walk_here(st):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(n.name)
            elif isinstance(n, ast.ExceptHandler):
                add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    add((a.asname or a.name).split(".")[0])
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)):
                add(n.name)
            elif isinstance(n, ast.MatchMapping):
                add(n.rest)
            elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                # (a walrus inside a comprehension binds in the enclosing scope)
                for sub in ast.walk(n):
                    if isinstance(sub, ast.NamedExpr):
                        add(sub.target.id)
    return list(seen)


def declared(body: list[ast.stmt], kind: type) -> list[str]:
    out: dict[str, None] = {}
    for st in body:
        for n in _walk_here(st):
            if isinstance(n, (ast.Global, ast.Nonlocal)) and isinstance(n, kind):
                for name in n.names:
                    out.setdefault(name, None)
    return list(out)


def catches_generator_exit(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` clause might catch ``GeneratorExit`` (not just ``Exception``s)."""
    t = handler.type
    if t is None:
        return True
    types = t.elts if isinstance(t, ast.Tuple) else [t]
    for e in types:
        name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None
        if name is None or name in ("BaseException", "GeneratorExit"):
            return True
        if not (name.endswith("Error") or name in _EXCEPTION_NAMES):
            return True  # (a name dplus cannot place: it might be GeneratorExit)
    return False


_EXCEPTION_NAMES = {
    "Exception",
    "ArithmeticError",
    "StopIteration",
    "StopAsyncIteration",
    "Warning",
    "KeyboardInterrupt",
}


def is_yield_statement(st: ast.stmt) -> bool:
    """``yield v`` or ``targets = yield v`` (not ``yield from``)."""
    return isinstance(st, (ast.Expr, ast.Assign)) and isinstance(st.value, ast.Yield)


def any_yield(stmts: list[ast.stmt]) -> bool:
    return any(yields_in(s) for s in stmts)


class Prepare(ast.NodeTransformer):
    """Before the blocks are rewritten: ``global``/``nonlocal`` dropped, ``return (yield v)``
    and ``a += yield v`` split, ``return v`` becoming ``return (0, v)``, yields in other
    places refused."""

    def __init__(self, machine_name: Callable[[str], str]) -> None:
        self.machine_name = machine_name  # (a fresh local the machine keeps across resumptions)

    def visit_Global(self, node: ast.AST) -> Any:
        return ast.copy_location(ast.Pass(), node)

    visit_Nonlocal = visit_Global

    def _skip_scope(self, node: ast.AST) -> ast.AST:
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip_scope

    def visit_Return(self, node: ast.Return) -> Any:
        v = node.value
        if isinstance(v, (ast.Yield, ast.YieldFrom)):
            t = self.machine_name("sent")
            first = ast.copy_location(
                ast.Assign(targets=[ast.Name(id=t, ctx=ast.Store())], value=v), node
            )
            ret = ast.copy_location(
                ast.Return(
                    value=ast.Tuple(
                        elts=[ast.Constant(0), ast.Name(id=t, ctx=ast.Load())], ctx=ast.Load()
                    )
                ),
                node,
            )
            return [first, ret]
        self.check(v)
        return ast.copy_location(
            ast.Return(
                value=ast.Tuple(
                    elts=[ast.Constant(0), v if v is not None else ast.Constant(None)],
                    ctx=ast.Load(),
                )
            ),
            node,
        )

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if isinstance(node.value, (ast.Yield, ast.YieldFrom)):
            if not isinstance(node.target, ast.Name):
                raise GeneratorSyntaxError(
                    node,
                    "a yield augmenting an element or attribute",
                    "assign the yield to a variable first",
                )
            t = self.machine_name("sent")
            first = ast.copy_location(
                ast.Assign(targets=[ast.Name(id=t, ctx=ast.Store())], value=node.value), node
            )
            second = ast.copy_location(
                ast.AugAssign(target=node.target, op=node.op, value=ast.Name(id=t, ctx=ast.Load())),
                node,
            )
            return [first, second]
        self.check(node)
        return node

    def visit_Expr(self, node: ast.Expr) -> Any:
        if isinstance(node.value, (ast.Yield, ast.YieldFrom)):
            self.check(node.value.value)
            return node
        self.check(node)
        return node

    def visit_Assign(self, node: ast.Assign) -> Any:
        if isinstance(node.value, (ast.Yield, ast.YieldFrom)):
            for t in node.targets:
                self.check(t)
            self.check(node.value.value)
            return node
        self.check(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if isinstance(node.value, (ast.Yield, ast.YieldFrom)) and node.simple:
            new = ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
            return self.visit_Assign(new)
        self.check(node)
        return node

    def generic_visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.stmt) and not isinstance(
            node, (ast.If, ast.While, ast.For, ast.Try, ast.Match, ast.With)
        ):
            self.check(node)
            return node
        self.check_header(node)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                new: list[Any] = []
                for child in block:
                    r = self.visit(child)
                    if isinstance(r, list):
                        new.extend(r)
                    elif r is not None:
                        new.append(r)
                setattr(node, field, new)
        return node

    def check_header(self, node: ast.AST) -> None:
        """A compound statement's own expressions (not its blocks): no yield there."""
        if isinstance(node, (ast.If, ast.While)):
            self.check(node.test)
        elif isinstance(node, ast.For):
            self.check(node.target)
            self.check(node.iter)
        elif isinstance(node, ast.Match):
            self.check(node.subject)
            for c in node.cases:
                self.check(c.pattern)
                self.check(c.guard)
        elif isinstance(node, ast.With):
            for item in node.items:
                self.check(item.context_expr)
        elif isinstance(node, ast.Try):
            for h in node.handlers:
                self.check(h.type)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        return self.visit_body_of(node)

    def visit_match_case(self, node: ast.match_case) -> Any:
        return self.visit_body_of(node)

    def visit_body_of(self, node: Any) -> Any:
        """``node`` with each statement of its body visited (one may become several)."""
        new: list[Any] = []
        for child in node.body:
            r = self.visit(child)
            new.extend(r if isinstance(r, list) else [r])
        node.body = new
        return node

    def check(self, node: ast.AST | None) -> None:
        if node is None:
            return
        for n in _walk_here(node):
            if isinstance(n, (ast.Yield, ast.YieldFrom)):
                raise GeneratorSyntaxError(
                    n, "a yield inside an expression", "assign it first: `v = yield ...`"
                )
            if isinstance(n, ast.Await):
                raise GeneratorSyntaxError(n, "await", "")
