"""Generator expressions whose laziness the program can see, made generator functions.

The normaliser evaluates a generator expression at once into a list. That is Python's lazy
generator only where the generator is consumed whole as soon as it is made, by a builtin
that runs no user code between its elements (``sum(v * x for v in xs)``, ``sorted(...)``,
``tuple(...)``). Anywhere else the difference shows: a generator read twice (Python's second
reading is empty), read in part (``next``, ``any``, ``zip`` with a shorter iterable, a
``break``: Python never computes the rest, which may raise or never end), or read after the
program changed a variable the expression reads (Python reads it when the element is made).

So at the first order every other generator expression is rewritten, before the scopes are
analysed, as the generator function Python's definition of it names, defined just before the
statement that makes it; the generator machine (:mod:`.generator_machine`) then runs it
lazily::

    r = c(v * x for v in xs if v)      ->   def _dpgenexpr1(_dpit2):
                                                for v in _dpit2:
                                                    if v:
                                                        yield v * x
                                            r = c(_dpgenexpr1(xs))

The first iterable is evaluated where the expression is, the rest inside the generator, as
Python does; the generator reads the function's variables through its closure, when it makes
each element. A generator expression inside a ``lambda`` or a comprehension is defined at the
statement too, and is given the variables those bind as arguments: it sees the value they had
when it was made (Python's would see a comprehension variable's last value if it outlived its
iteration). Not rewritten (left to the normaliser): an expression holding an assignment
expression (``:=`` binds in the enclosing function), ``yield`` or ``await``.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

from ..trees import function_def

__all__ = [
    "GeneratorExpressionLifter",
    "OnceReadGeneratorExpressions",
    "consumers_in",
    "names_bound_anywhere",
]

# builtins that take all of their iterable at once, running no user code between its elements
_WHOLE_BUILTINS = frozenset(
    {"sum", "list", "tuple", "sorted", "set", "frozenset", "min", "max", "dict"}
)
_WHOLE_MATH = frozenset({"fsum", "prod"})


def names_bound_anywhere(node: ast.AST) -> set[str]:
    """Every name ``node`` binds, in any of its scopes (assigned, parameters, ``def``,
    ``class``, ``import``): what may shadow a builtin or a module there."""
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
    return bound


def consumers_in(node: ast.AST, globals_: dict[str, Any]) -> Callable[[ast.Call], bool]:
    """A test of a call: does it consume its first argument whole, at once (a builtin of
    ``_WHOLE_BUILTINS`` or ``math.fsum``/``math.prod`` that neither the function nor its module
    rebinds, given that one iterable and otherwise only names, constants and lambdas, whose
    evaluation cannot run code between the generator's making and its reading)."""
    bound = names_bound_anywhere(node)

    def is_builtin(name: str) -> bool:
        return (
            name in _WHOLE_BUILTINS
            and name not in bound
            and globals_.get(name, getattr(builtins, name)) is getattr(builtins, name)
        )

    def is_math(func: ast.expr) -> bool:
        return (
            isinstance(func, ast.Attribute)
            and func.attr in _WHOLE_MATH
            and isinstance(func.value, ast.Name)
            and func.value.id not in bound
            and globals_.get(func.value.id) is math
        )

    def quiet(e: ast.expr) -> bool:
        return isinstance(e, (ast.Name, ast.Constant, ast.Lambda))

    def consumes_whole(call: ast.Call) -> bool:
        func = call.func
        if not ((isinstance(func, ast.Name) and is_builtin(func.id)) or is_math(func)):
            return False
        if not call.args or isinstance(call.args[0], ast.Starred):
            return False
        rest = call.args[1:] + [k.value for k in call.keywords]
        return all(k.arg is not None for k in call.keywords) and all(quiet(e) for e in rest)

    return consumes_whole


class GeneratorExpressionLifter(ast.NodeTransformer):
    """Rewrites the generator expressions of one statement's own expressions (not the bodies
    of its nested statements or functions, which are lifted where they are); :attr:`defs` are
    the generator functions to define before the statement."""

    def __init__(
        self, fresh: Callable[[str], str], consumes_whole: Callable[[ast.Call], bool]
    ) -> None:
        self.fresh = fresh
        self.consumes_whole = consumes_whole
        self.defs: list[ast.FunctionDef] = []
        self._bound: list[set[str]] = []  # names bound by the lambdas/comprehensions around
        self._whole: set[int] = set()  # generator expressions a builtin consumes at once

    def statement(self, st: ast.stmt) -> ast.stmt:
        """Lift from ``st``'s own expressions (a compound statement's test, iterable, context
        managers, subject and guards; a ``def``'s decorators and defaults)."""
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            st.decorator_list = [self.visit(d) for d in st.decorator_list]
            st.args.defaults = [self.visit(d) for d in st.args.defaults]
            st.args.kw_defaults = [
                None if d is None else self.visit(d) for d in st.args.kw_defaults
            ]
            return st
        if isinstance(st, ast.ClassDef):
            return st  # (rewritten into ordinary statements first, lifted from there)
        for field, value in ast.iter_fields(st):
            if isinstance(value, ast.expr):
                setattr(st, field, self.visit(value))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.expr):
                        value[i] = self.visit(item)
                    elif isinstance(item, ast.withitem):
                        self.visit(item)
                    elif isinstance(item, ast.ExceptHandler) and item.type is not None:
                        item.type = self.visit(item.type)
                    elif isinstance(item, ast.match_case) and item.guard is not None:
                        item.guard = self.visit(item.guard)
        return st

    # ------------------------------------------------------------------ the walk
    def visit_Call(self, node: ast.Call) -> ast.AST:
        if node.args and isinstance(node.args[0], ast.GeneratorExp) and self.consumes_whole(node):
            self._whole.add(id(node.args[0]))
        for a in node.args:
            if isinstance(a, ast.Starred) and isinstance(a.value, ast.GeneratorExp):
                self._whole.add(id(a.value))  # (``f(*gen)`` takes it all before the call)
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            None if d is None else self.visit(d) for d in node.args.kw_defaults
        ]
        args = node.args
        params = args.posonlyargs + args.args + args.kwonlyargs
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        self._bound.append({a.arg for a in params})
        node.body = self.visit(node.body)
        self._bound.pop()
        return node

    def _comprehension(self, node: Any) -> ast.AST:
        first = node.generators[0]
        first.iter = self.visit(first.iter)  # (evaluated in the enclosing scope)
        self._bound.append(_targets(node))
        for k, gen in enumerate(node.generators):
            if k:
                gen.iter = self.visit(gen.iter)
            gen.ifs = [self.visit(c) for c in gen.ifs]
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                setattr(node, field, self.visit(getattr(node, field)))
        self._bound.pop()
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = _comprehension

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        if id(node) in self._whole or _must_stay(node):
            return self._comprehension(node)
        first = node.generators[0]
        first_iter = self.visit(first.iter)
        own = _targets(node)
        around = set().union(*self._bound) if self._bound else set()
        params = sorted(
            {
                n.id
                for part in _inner_parts(node)
                for n in ast.walk(part)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            }
            & around - own
        )
        name = self.fresh("genexpr")
        it = self.fresh("it")
        body: list[ast.stmt] = [ast.Expr(value=ast.Yield(value=node.elt))]
        for k in range(len(node.generators) - 1, -1, -1):
            gen = node.generators[k]
            for cond in reversed(gen.ifs):
                body = [ast.If(test=cond, body=body, orelse=[])]
            iterable = ast.Name(id=it, ctx=ast.Load()) if k == 0 else gen.iter
            body = [ast.For(target=gen.target, iter=iterable, body=body, orelse=[])]
        fdef = function_def(name, [it, *params], body)
        _locate(fdef, node)
        self.defs.append(fdef)
        call = ast.Call(
            func=ast.Name(id=name, ctx=ast.Load()),
            args=[first_iter, *(ast.Name(id=p, ctx=ast.Load()) for p in params)],
            keywords=[],
        )
        return _locate(call, node)


def _targets(node: Any) -> set[str]:
    return {
        n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)
    }


def _inner_parts(node: ast.GeneratorExp) -> list[ast.AST]:
    """What of ``node`` runs inside the generator: all but the first iterable."""
    parts: list[ast.AST] = [node.elt]
    for k, gen in enumerate(node.generators):
        if k:
            parts.append(gen.iter)
        parts.extend(gen.ifs)
    return parts


def _must_stay(node: ast.GeneratorExp) -> bool:
    return any(
        isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)
    )


def _locate(new: ast.AST, like: ast.AST) -> Any:
    """Give ``new`` and its children without a position ``like``'s (errors name that line)."""
    for n in ast.walk(new):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            ast.copy_location(n, like)
    return new


class OnceReadGeneratorExpressions(ast.NodeTransformer):
    """Differentiated again (a higher order), a generator expression's values are made at
    once. Given to a function of the program (``twice(v * x for v in xs)``, a method of an
    object, by keyword too) or to ``next``,
    it becomes ``iter([...])``, an iterator over them (``runtime.routers.ListIterator``),
    so that a callee reading it twice finds it exhausted the second time, as Python's.
    Elsewhere (consumed whole by ``sum``, ... or given to ``zip``, ``any``, ...) it is left
    a list, which those read once. ``iter`` must be the builtin (``iter_is_builtin``).
    :attr:`passed` holds the expressions rewritten, whose evaluation the caller checks for
    effects the program would see early."""

    def __init__(
        self,
        is_programs_function: Callable[[str], bool],
        is_module: Callable[[str], bool],
        next_is_builtin: bool,
    ) -> None:
        self.is_programs_function = is_programs_function
        self.is_module = is_module
        self.next_is_builtin = next_is_builtin
        self.passed: list[ast.GeneratorExp] = []

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not self._programs(node.func):
            return node  # (a builtin or a library's function: a list, read once)
        node.args = [self._once(a) for a in node.args]
        for k in node.keywords:
            k.value = self._once(k.value)
        return node

    def _programs(self, func: ast.expr) -> bool:
        """Whether ``func`` may be a function of the program: a name bound to one, ``next``,
        or a method of an object (not a module's function)."""
        if isinstance(func, ast.Name):
            return (func.id == "next" and self.next_is_builtin) or self.is_programs_function(
                func.id
            )
        if isinstance(func, ast.Attribute):
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            return not (isinstance(root, ast.Name) and self.is_module(root.id))
        return True

    def _once(self, a: ast.expr) -> ast.expr:
        if not isinstance(a, ast.GeneratorExp) or _holds_own_scope_syntax(a):
            return a
        self.passed.append(a)
        listed = ast.copy_location(ast.ListComp(elt=a.elt, generators=a.generators), a)
        return ast.copy_location(
            ast.Call(func=ast.Name(id="iter", ctx=ast.Load()), args=[listed], keywords=[]), a
        )


def _holds_own_scope_syntax(e: ast.GeneratorExp) -> bool:
    """``:=``, ``yield``, ``await`` inside: left to the normaliser as they are."""
    return any(
        isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(e)
    )
