"""Whole-tree rewrites run before or after normalising: renaming, a generator's yields
collected in a list, names declared ``global`` read and written in the module's namespace."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ...errors import UnsupportedSyntaxError
from ..trees import walk_outside
from .core import Core, _const, _internal, _name


class _Renamer(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.renames:
            return ast.copy_location(ast.Name(id=self.renames[node.id], ctx=node.ctx), node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        # defaults are evaluated where the lambda is made: they see the renamed variables
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            self.visit(d) if d is not None else None for d in node.args.kw_defaults
        ]
        shadowed = {a.arg for a in node.args.args + node.args.posonlyargs + node.args.kwonlyargs}
        inner = _Renamer({k: v for k, v in self.renames.items() if k not in shadowed})
        node.body = inner.visit(node.body)
        return node


class _YieldsToList(ast.NodeTransformer):
    """A generator function's body, differentiated again (a higher order): it runs to
    completion when called and returns an iterator over the list of the values it yielded,
    in order (``iter(values)``, a ``runtime.routers.ListIterator`` there), so each value's
    sensitivity comes back to the expression that yielded it, and, as Python's generator,
    it gives its values once: a second ``sum(g)`` finds it exhausted, ``next(g)`` takes one.
    What needs the generator itself is refused: the value of a ``yield`` expression
    (``send``) and a generator's ``return`` value."""

    def __init__(
        self,
        out: str,
        name: str,
        filename: str,
        raised: str,
        line: int,
        returns: Any = None,
        limit: int | None = None,
    ) -> None:
        self.out = out
        self.name = name
        self.filename = filename
        self.raised = raised
        self.line = line
        # what a ``return value`` does (generator_returns.RETURNS): None, refused; "pair",
        # returns (values, value); "dropped": the value computed, as Python does, not kept
        self.returns = returns
        self.limit = limit  # (generator_limits.LIMIT: the most values a reader takes)

    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        start = ast.copy_location(
            ast.Assign(
                targets=[_name(self.out, ast.Store())], value=ast.List(elts=[], ctx=ast.Load())
            ),
            body[0],
        )
        new: list[ast.stmt] = []
        for st in body:
            done = self.visit(_deepcopy(st))
            new.extend(done if isinstance(done, list) else [done])
        end = ast.copy_location(ast.Return(value=self._values(_const(None))), body[-1])
        # an exception the body raises as it runs to completion is refused by name (Python's
        # generator raises it only when read that far: runtime.generator_ops)
        refused = _internal(
            "generator_raised_again",
            [
                _name(self.raised),
                _const(self.name),
                _const(self.filename),
                _const(self.line),
            ],
        )
        handler = ast.ExceptHandler(
            type=_name("Exception"),
            name=self.raised,
            body=[ast.copy_location(ast.Expr(value=refused), body[0])],
        )
        if self.limit == 0:  # (no reader takes a value: Python's never runs the body)
            new = [ast.copy_location(ast.Return(value=self._values(_const(None))), body[0])]
        guarded = ast.Try(body=new, handlers=[handler], orelse=[], finalbody=[])
        return [start, ast.copy_location(guarded, body[0]), end]

    def _values(self, returned: ast.expr) -> ast.expr:
        """``iter(<out>)``: the generator, once run, over the list of its values (for a
        twin that returns its value, ``(<out>, returned)``)."""
        if self.returns == "pair":
            return ast.Tuple(elts=[_name(self.out), returned], ctx=ast.Load())
        return ast.Call(func=_name("iter"), args=[_name(self.out)], keywords=[])

    def _refuse(self, node: ast.AST, what: str) -> UnsupportedSyntaxError:
        line = getattr(node, "lineno", "?")
        err = UnsupportedSyntaxError(
            f"{what} in the generator function {self.name!r} cannot be differentiated by dplus ({self.filename}, line "
            f"{line}): inside differentiated code a generator runs to completion and gives the list of its values; "
            "use only `yield value` and `yield from iterable` statements"
        )
        err.filename = self.filename
        err.lineno = line if isinstance(line, int) else None
        return err

    def _collect(self, method: str, value: ast.expr, like: ast.AST) -> ast.Expr:
        call = ast.Call(
            func=ast.Attribute(value=_name(self.out), attr=method, ctx=ast.Load()),
            args=[value],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(value=call), like)

    def visit_Expr(self, node: ast.Expr) -> Any:
        v = node.value
        if isinstance(v, ast.Yield):
            return self._limited(
                self._collect(
                    "append", self.visit(v.value) if v.value is not None else _const(None), node
                )
            )
        if isinstance(v, ast.YieldFrom):
            # (list(): a generator's values there are an iterator, which list() takes)
            values = ast.Call(func=_name("list"), args=[self.visit(v.value)], keywords=[])
            return self._limited(self._collect("extend", values, node))
        return self.generic_visit(node)

    def _limited(self, collect: ast.Expr) -> ast.stmt | list[ast.stmt]:
        """``collect``, then, for a generator no reader takes more than ``limit`` values of
        (an endless one: generator_limits), a return once it has yielded them."""
        if self.limit is None:
            return collect
        enough = ast.Compare(
            left=ast.Call(func=_name("len"), args=[_name(self.out)], keywords=[]),
            ops=[ast.GtE()],
            comparators=[_const(self.limit)],
        )
        stop = ast.If(test=enough, body=[ast.Return(value=self._values(_const(None)))], orelse=[])
        ast.copy_location(stop, collect)
        ast.fix_missing_locations(stop)
        return [collect, stop]

    def visit_Return(self, node: ast.Return) -> ast.stmt | list[ast.stmt]:
        value = node.value
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return ast.copy_location(ast.Return(value=self._values(_const(None))), node)
        if self.returns is None:
            raise self._refuse(node, "a generator's return value")
        value = self.visit(value)
        if self.returns == "pair":
            return ast.copy_location(ast.Return(value=self._values(value)), node)
        computed = ast.copy_location(ast.Expr(value=value), node)
        return [computed, ast.copy_location(ast.Return(value=self._values(value)), node)]

    def visit_Yield(self, node: ast.Yield | ast.YieldFrom) -> ast.AST:
        raise self._refuse(node, "the value of a yield expression (generator.send)")

    visit_YieldFrom = visit_Yield

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        return node  # (its own yields are its own)

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef


class _ModuleNamespaceAccess(ast.NodeTransformer):
    """Reads and writes of the names a function declares ``global`` become reads and writes
    of the module's namespace, ``globals()[name]``: the namespace is a mutable container
    (a dict), so a write happens as in Python, once per call, and a value written and read
    back carries its sensitivity (SPEC section 5). Functions nested inside that do not bind
    the name read the same global, so their reads are rewritten too."""

    def __init__(self, names: set[str]) -> None:
        self.names = set(names)

    def visit_Global(self, node: ast.Global) -> ast.Global:
        return node

    def visit_NamedExpr(self, node: Core) -> ast.NamedExpr:
        node.value = self.visit(node.value)
        if node.target.id in self.names:
            node.dp_global = True  # (its target must stay a name: Normalizer.e_NamedExpr writes it)
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id not in self.names:
            return node
        namespace = ast.Call(func=_name("globals"), args=[], keywords=[])
        access: Core = ast.copy_location(
            ast.Subscript(value=namespace, slice=_const(node.id), ctx=node.ctx), node
        )
        access.dp_global = (
            True  # (a read falls back to the builtins, or raises NameError, as Python's)
        )
        return access

    def _nested(self, node: Any, params: list[str], body: list[ast.stmt]) -> Any:
        declared = {
            n
            for st in body
            for sub in _walk_no_scopes(st)
            if isinstance(sub, ast.Global)
            for n in sub.names
        }
        bound = set(params) | {
            sub.id
            for st in body
            for sub in _walk_no_scopes(st)
            if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load)
        }
        inner = _ModuleNamespaceAccess((self.names - bound) | declared)
        for field in ("decorator_list",):
            setattr(node, field, [self.visit(d) for d in getattr(node, field, [])])
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            self.visit(d) if d is not None else None for d in node.args.kw_defaults
        ]
        if isinstance(node.body, list):
            node.body = [inner.visit(st) for st in node.body]
        else:
            node.body = inner.visit(node.body)
        return node

    @staticmethod
    def _params(args: ast.arguments) -> list[str]:
        every = (
            args.posonlyargs
            + args.args
            + args.kwonlyargs
            + [a for a in (args.vararg, args.kwarg) if a]
        )
        return [a.arg for a in every]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return self._nested(node, self._params(node.args), node.body)

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return self._nested(node, self._params(node.args), [node.body])  # type: ignore[list-item]  # (a lambda's body is an expression: _nested walks it as a body)


def _deepcopy(node: ast.AST) -> ast.AST:
    import copy

    return copy.deepcopy(node)


def _walk_no_scopes(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and the nodes under it outside nested functions, lambdas and classes
    (in no particular order; contexts skipped)."""
    return walk_outside(node, _NEW_SCOPES)


def refuse_generator_expressions_read_again(
    body: list[ast.stmt],
    function: str,
    filename: str,
    generator_functions: frozenset = frozenset(),
    lazy_builtins: frozenset = frozenset(),
) -> None:
    """Refuse ``g = (expr for ...)`` when ``g`` may be read more than once: inside
    differentiated code a generator expression is a list (evaluated at once), so a second
    ``sum(g)`` would see its values again where Python's generator is exhausted. Read more
    than once: two reads of the name, or one in a loop (or a nested function or
    comprehension) that the assignment is not in. A name assigned more than once is left
    alone (which value a read sees is not known here). ``generator_functions``: names whose
    call gives a list the same way (a generator function at a higher order of
    differentiation), refused the same way as ``g = gen(...)``; ``lazy_builtins``: the names
    of the builtins ``zip``, ``map``, ... not rebound, whose iterator is a list there too."""
    stores: Counter[str] = Counter()
    kept: dict[str, ast.Assign] = {}
    for node in _walk_no_scopes_body(body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] += 1
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and (
                isinstance(node.value, ast.GeneratorExp)
                or (
                    isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name)
                    and (
                        node.value.func.id in generator_functions
                        or node.value.func.id in lazy_builtins
                    )
                )
            )
        ):
            kept[node.targets[0].id] = node
    taken_otherwise = _taken_by_next_or_method(body) if kept else set()
    for name, assign in kept.items():
        if stores[name] != 1 or name in taken_otherwise:
            continue  # (next(g), g.send(v): refused where they run at a higher order)
        reads = _reads_outside(body, name, assign)
        if reads[0] > 1 or reads[1]:
            value = assign.value
            what = (
                "generator expression"
                if isinstance(value, ast.GeneratorExp)
                else f"iterator {value.func.id}(...) (differentiated again: its items are made at once)"  # type: ignore[attr-defined]
                if value.func.id in lazy_builtins  # type: ignore[attr-defined]
                else "generator (differentiated again: a generator runs to completion)"
            )
            err = UnsupportedSyntaxError(
                f"the {what} kept in {name!r} in {function!r} ({filename}, line "
                f"{assign.lineno}) may be read more than once: inside differentiated code its "
                "values are made at once into a list, so a second reading "
                "would see them again where Python's generator is exhausted. Make it a "
                "list ([...] or list(...)) if its values are meant to be read again, or read it once"
            )
            err.filename = filename
            err.lineno = assign.lineno
            raise err


def _taken_by_next_or_method(body: list[ast.stmt]) -> set[str]:
    """The names ``body`` passes to ``next`` or calls a method of (``g.send(v)``)."""
    out: set[str] = set()
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "next":
                out.update(a.id for a in n.args[:1] if isinstance(a, ast.Name))
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                out.add(n.value.id)
    return out


def _reads_outside(body: list[ast.stmt], name: str, assign: ast.stmt) -> tuple[int, bool]:
    """How many times ``body`` reads ``name``, and whether a read may run more than once
    without ``assign`` (it is in a loop, nested function or comprehension ``assign`` is not in)."""
    count = 0
    repeated = False
    stack: list[tuple[ast.AST, bool]] = [(st, False) for st in body]
    while stack:
        node, repeating = stack.pop()
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            count += 1
            repeated = repeated or repeating
            continue
        again = repeating or (
            isinstance(
                node, (ast.For, ast.While, ast.comprehension, *_COMPREHENSIONS, *_NEW_SCOPES)
            )
            and not any(n is assign for n in ast.walk(node))
        )
        once = _evaluated_once(node)  # (a loop's iterable: once, where the loop starts)
        stack.extend(
            (child, repeating if child is once else again) for child in ast.iter_child_nodes(node)
        )
    return count, repeated


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _evaluated_once(node: ast.AST) -> ast.AST | None:
    """The part of a loop or comprehension evaluated once, before it repeats anything."""
    if isinstance(node, ast.For):
        return node.iter
    if isinstance(node, _COMPREHENSIONS):
        return node.generators[0]  # (its iterable; its target and ifs are bare names/tests)
    if isinstance(node, ast.comprehension):
        return node.iter
    return None


def _walk_no_scopes_body(body: list[ast.stmt]):
    for s in body:
        if isinstance(s, _NEW_SCOPES):
            yield s  # (a def or class of the body: its own body is another scope)
        else:
            yield from _walk_no_scopes(s)


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
