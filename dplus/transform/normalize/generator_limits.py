"""How many values a program can take from each making of a generator, where that is known
before it runs (differentiated again).

Differentiated again, a generator runs to completion where it is made
(``rewrites._YieldsToList``), which an endless one (``while True``) never reaches. When every
making of it can give out at most ``n`` values, it runs until it has yielded ``n`` and stops
there: what it would yield after them no reader can take, and a generator read after its
making has no effect the program sees (``GeneratorUses.refuse_read_later``), so stopping
early shows nothing. A making gives out at most:

- ``k`` for ``itertools.islice(gen(...), k)`` (or ``islice(gen(...), start, k[, step])``);
- ``n + 1`` for ``zip(..., gen(...), ...)`` with a list or tuple display of ``n`` elements
  among the other arguments (zip takes one more from the generators before that one);
- ``1`` for ``next(gen(...))``;
- for ``it = gen(...)`` in no loop, with ``it`` bound nowhere else: the number of
  ``next(it)`` calls, each in no loop and in the same function (``it.close()`` takes none);
  any other use of ``it`` (a loop over it, a call given it) leaves the count unknown.

The function is marked (:data:`LIMIT`) for ``_YieldsToList``; where a count is unknown an
endless generator stays refused by name.
"""

from __future__ import annotations

import ast
import builtins
import itertools
from collections.abc import Callable
from typing import Any

from ..trees import walk
from .generator_returns import binds_otherwise

__all__ = ["LIMIT", "values_read_at_most"]

LIMIT = "dp_generator_limit"

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_REPEATS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension, *_SCOPES)


def values_read_at_most(
    gen: ast.FunctionDef,
    node: ast.AST,
    parents: dict[int, ast.AST],
    globals_: dict[str, Any],
    bound: set[str],
) -> int | None:
    """The most values any making of ``gen`` (a generator function whose name nothing else
    binds) can give out in ``node``; None when unknown."""
    most = 0
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id == gen.name and isinstance(n.ctx, ast.Load):
            call = parents.get(id(n))
            if not (isinstance(call, ast.Call) and call.func is n):
                return None
            k = _taken_from(call, node, parents, globals_, bound)
            if k is None:
                return None
            most = max(most, k)
    return most


def _taken_from(
    call: ast.Call,
    node: ast.AST,
    parents: dict[int, ast.AST],
    globals_: dict[str, Any],
    bound: set[str],
) -> int | None:
    def is_builtin(name: str) -> bool:
        return name not in bound and globals_.get(name, getattr(builtins, name, None)) is getattr(
            builtins, name, None
        )

    p = parents.get(id(call))
    if isinstance(p, ast.Call) and p.args and call in p.args:
        if _is_islice(p.func, globals_, bound) and p.args[0] is call and not p.keywords:
            stop = p.args[1] if len(p.args) == 2 else p.args[2] if len(p.args) > 2 else None
            return _count(stop)
        if isinstance(p.func, ast.Name) and is_builtin(p.func.id) and not p.keywords:
            if p.func.id == "next" and p.args[0] is call and len(p.args) <= 2:
                return 1
            if p.func.id == "zip":
                lengths = [
                    len(a.elts)
                    for a in p.args
                    if isinstance(a, (ast.List, ast.Tuple))
                    and not any(isinstance(e, ast.Starred) for e in a.elts)
                ]
                return min(lengths) + 1 if lengths else None
        return None
    if (
        isinstance(p, ast.Assign)
        and len(p.targets) == 1
        and isinstance(p.targets[0], ast.Name)
        and not _repeated(p, parents)
    ):
        return _next_calls_of(p.targets[0].id, p, node, parents, is_builtin)
    return None


def _is_islice(func: ast.expr, globals_: dict[str, Any], bound: set[str]) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "islice"
        and isinstance(func.value, ast.Name)
        and func.value.id not in bound
        and globals_.get(func.value.id) is itertools
    )


def _count(e: ast.expr | None) -> int | None:
    if isinstance(e, ast.Constant) and type(e.value) is int and e.value >= 0:
        return e.value
    return None


def _repeated(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether ``n`` is in a loop or a comprehension of its own function."""
    p = parents.get(id(n))
    while p is not None and not isinstance(p, _SCOPES):
        if isinstance(p, _REPEATS):
            return True
        p = parents.get(id(p))
    return False


def _function_of(n: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    p = parents.get(id(n))
    while p is not None and not isinstance(p, _SCOPES):
        p = parents.get(id(p))
    return p


def _next_calls_of(
    name: str,
    made: ast.Assign,
    node: ast.AST,
    parents: dict[int, ast.AST],
    is_builtin: Callable[[str], bool],
) -> int | None:
    count = 0
    where = _function_of(made, parents)
    for n in walk(node):
        if binds_otherwise(n, name):
            return None
        if not (isinstance(n, ast.Name) and n.id == name):
            continue
        if not isinstance(n.ctx, ast.Load):
            if n is not made.targets[0]:
                return None
            continue
        if _function_of(n, parents) is not where or _repeated(n, parents):
            return None
        p = parents.get(id(n))
        if (
            isinstance(p, ast.Call)
            and isinstance(p.func, ast.Name)
            and p.func.id == "next"
            and is_builtin("next")
            and p.args
            and p.args[0] is n
            and len(p.args) <= 2
            and not p.keywords
        ):
            count += 1
            continue
        q = parents.get(id(p))
        if (
            isinstance(p, ast.Attribute)
            and p.attr == "close"
            and isinstance(q, ast.Call)
            and q.func is p
            and isinstance(parents.get(id(q)), ast.Expr)
        ):
            continue
        return None
    return count
