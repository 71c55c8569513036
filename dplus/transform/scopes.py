"""Which names a function binds, reads from outside, and shares with the closures inside it.

A variable captured by a nested function and also rebound (assigned more than once, in a
loop, or through ``nonlocal``) is *boxed*: its sensitivity travels through the
box-sensitivity map under a per-invocation key, so late binding differentiates correctly.
So is every variable a method of a class defined inside reads (its def is marked
``dp_method``; a function set as an attribute, ``T.m = lambda self: ...``, is marked
``dp_escapes_as_method``): a method is called from wherever the class is used.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import attrs

__all__ = ["Scope", "analyse", "METHOD_NAME_HINT", "is_method_name"]

FunctionNode = ast.FunctionDef | ast.Lambda

# The name a class statement's method gets in the rewritten function (``_dpmethod_g3``):
# the plus-function generated for it keeps the name (``_dpmethod_g3__plus_2``) in the text
# that is differentiated again, where the ``dp_method`` mark of the tree is gone; so at every
# order a method's captures are boxed, their sensitivities kept in cells, not carried by the
# function value that the class holds (and drops: ``higher.class_rules``).
METHOD_NAME_HINT = "method_"


def is_method_name(name: str) -> bool:
    """Whether ``name`` is that of a class statement's method in rewritten or generated code."""
    return name.startswith("_dp" + METHOD_NAME_HINT)


@attrs.define
class Scope:
    node: FunctionNode
    params: list[str]
    assigned: set[str]  # bound here (params included)
    nonlocals: set[str]
    globals_: set[str]
    reads: set[str]  # every name read here
    free: set[str]  # names this scope (or scopes inside it) take from enclosing scopes
    assign_sites: dict[str, int]
    assigned_in_loop: set[str]
    children: list[Scope]
    assign_lines: dict[str, list[int]] = attrs.field(factory=dict)
    defs: set[str] = attrs.field(factory=set)  # names bound by def statements here
    boxed: set[str] = attrs.field(factory=set)  # locals of this scope that are boxed
    # names from enclosing scopes that a method of a class defined inside reads
    method_free: set[str] = attrs.field(factory=set)

    @property
    def locals(self) -> set[str]:
        return self.assigned - self.nonlocals - self.globals_

    def is_local(self, name: str) -> bool:
        """``name in self.locals`` without building the set (asked once per statement)."""
        return name in self.assigned and name not in self.nonlocals and name not in self.globals_


def names_bound_by(n: ast.AST) -> list[str]:
    """The names the node ``n`` itself binds (not its children): an assignment target, a
    ``def``/``class`` name, an ``except ... as`` name, an import, a ``match`` capture."""
    if isinstance(n, ast.Name):
        return [] if isinstance(n.ctx, ast.Load) else [n.id]
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [n.name]
    if isinstance(n, ast.ExceptHandler):
        return [n.name] if n.name else []
    if isinstance(n, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in n.names]
    if isinstance(n, (ast.MatchAs, ast.MatchStar)):
        return [n.name] if n.name else []
    if isinstance(n, ast.MatchMapping):
        return [n.rest] if n.rest else []
    return []


def parameter_names(args: ast.arguments) -> list[str]:
    """Every parameter's name, in the signature's order."""
    names = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg:
        names.append(args.vararg.arg)
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names


class _Collector(ast.NodeVisitor):
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.loop_depth = 0

    def bind(self, name: str, line: int = 0) -> None:
        s = self.scope
        s.assign_lines.setdefault(name, []).append(line)
        s.assigned.add(name)
        s.assign_sites[name] = s.assign_sites.get(name, 0) + 1
        if self.loop_depth:
            s.assigned_in_loop.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bind(node.id, node.lineno)
        else:
            self.scope.reads.add(node.id)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocals.update(node.names)

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals_.update(node.names)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.scope.reads.add(node.target.id)
        self.generic_visit(node)

    def _loop(self, node: ast.AST) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_For = _loop
    visit_While = _loop

    def _comprehension(self, node: ast.AST) -> None:
        # comprehensions are desugared into loops of this scope with fresh names
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_ListComp = _comprehension
    visit_SetComp = _comprehension
    visit_DictComp = _comprehension
    visit_GeneratorExp = _comprehension

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node.lineno)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self.bind((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.bind(node.name, node.lineno)
        self.scope.defs.add(node.name)
        for d in node.decorator_list:
            self.visit(d)
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        self.scope.children.append(_analyse(node))

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        self.scope.children.append(_analyse(node))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.bind(node.name)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.bind(node.rest)
        self.generic_visit(node)


def _analyse(node: FunctionNode) -> Scope:
    params = parameter_names(node.args)
    scope = Scope(
        node, params, set(params), set(), set(), set(), set(), {p: 1 for p in params}, set(), []
    )
    c = _Collector(scope)
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        c.visit(stmt)
    local = scope.locals
    free = {n for n in scope.reads if n not in local and n not in scope.globals_}
    free |= scope.nonlocals
    for child in scope.children:
        free |= {n for n in child.free if n not in local and n not in scope.globals_}
    scope.free = free
    # boxed: every local a method of a class defined here reads (class_statements.py: a
    # method may be called from anywhere, so what it reads carries its sensitivity in a cell)
    for child in scope.children:
        method = (
            getattr(child.node, "dp_method", None)
            or getattr(child.node, "dp_escapes_as_method", False)
            or (isinstance(child.node, ast.FunctionDef) and is_method_name(child.node.name))
        )
        read = child.free if method else child.method_free
        for name in read:
            if name in local:
                scope.boxed.add(name)
            elif name not in scope.globals_:
                scope.method_free.add(name)
    # boxed: locals captured by a child and rebound somewhere
    for child in scope.children:
        for name in child.free:
            if name not in local:
                continue
            if (
                scope.assign_sites.get(name, 0) > 1
                or name in scope.assigned_in_loop
                or _nonlocal_assigned(child, name)
                or any(line > child.node.lineno for line in scope.assign_lines.get(name, []))
                or name in scope.defs
            ):
                # local functions captured by closures (recursion, mutual recursion) are boxed:
                # the sensitivities of their captured variables then add up through every level
                scope.boxed.add(name)
    return scope


def _nonlocal_assigned(scope: Scope, name: str) -> bool:
    if name in scope.nonlocals and name in scope.assigned:
        return True
    return any(_nonlocal_assigned(c, name) for c in scope.children if name not in c.locals)


def analyse(node: FunctionNode, outer_free: tuple[str, ...] = ()) -> Scope:
    """Analyse a top-level function; its own nonlocal writes to ``outer_free`` are boxed too."""
    scope = _analyse(node)
    return scope


def resolve_free(scope: Scope, enclosing: set[str], outer_free: set[str]) -> None:
    """Keep as free only names bound by an enclosing scope (or the function's own closure)."""
    scope.free = {n for n in scope.free if n in enclosing or n in outer_free}
    inner = enclosing | scope.locals
    for c in scope.children:
        resolve_free(c, inner, outer_free)


def walk_scopes(scope: Scope) -> Iterator[Scope]:
    yield scope
    for c in scope.children:
        yield from walk_scopes(c)
