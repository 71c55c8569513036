"""A generator's ``return`` value and ``close()`` at a higher order, as ordinary code.

Differentiated again, a generator runs to completion where it is made and gives an iterator
over its values (``rewrites._YieldsToList``). Two things Python's generator object shows are
still right there when the program can see them only in these forms:

- a ``return value`` of a generator function whose every call is read by ``yield from``, a
  ``for`` loop or a builtin that takes all its values (``sum(gen())``: Python drops the value
  there): the function gets a twin that returns ``(values, value)``, and ``r = yield from
  gen(a)`` becomes ``t = twin(a); yield from t[0]; r = t[1]``, so the value is an ordinary
  value of the program, carrying its sensitivity at every order. Where else a call goes (kept
  in a variable, given to a function: its ``StopIteration.value`` could be read) it stays
  refused by name (``_YieldsToList``).
- ``it.close()`` as a statement, of a variable bound only to generators of functions with no
  ``try`` (so closing runs none of their code, and no ``finally`` could run): the values were
  made where the generator was, so closing is taking the rest of them, unread
  (``for _ in it: pass``), after which ``next`` finds it exhausted, as Python's.

The functions are marked for ``_YieldsToList`` (:data:`RETURNS`): ``"pair"`` (the twin) or
``"dropped"`` (the value computed, as Python does, and not returned).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from ..trees import walk
from .generator_syntax import is_generator_function

__all__ = [
    "RETURNS",
    "binds_otherwise",
    "generators_bound_once",
    "rewrite_closes",
    "rewrite_returns",
]

RETURNS = "dp_generator_returns"

# builtins that take all of an iterable's values and drop a generator's return value
_TAKE_ALL = frozenset(
    {"sum", "list", "tuple", "sorted", "min", "max", "set", "frozenset", "any", "all", "dict"}
)


def rewrite_returns(
    node: ast.FunctionDef | ast.Lambda,
    fresh: Callable[[str], str],
    is_builtin: Callable[[str], bool],
) -> None:
    """The return values of ``node``'s generator functions, in place (module docstring)."""
    parents = {id(c): n for n in walk(node) for c in ast.iter_child_nodes(n)}
    for gen in generators_bound_once(node).values():
        if _returns_a_value(gen) and _return_value_unseen(gen, node, parents, is_builtin):
            _give_the_value_to_yield_from(gen, node, parents, fresh)


def rewrite_closes(node: ast.FunctionDef | ast.Lambda, fresh: Callable[[str], str]) -> None:
    """The ``close()`` statements of ``node``'s generators, in place (module docstring)."""
    parents = {id(c): n for n in walk(node) for c in ast.iter_child_nodes(n)}
    _closes_as_taking_the_rest(node, generators_bound_once(node), parents, fresh)


def binds_otherwise(n: ast.AST, name: str) -> bool:
    """Whether ``n`` binds (or declares) ``name`` other than as a ``Name`` target: a
    parameter, ``global``/``nonlocal``, ``except ... as``, an import, a ``def``/``class``,
    a capture pattern of ``match``."""
    if isinstance(n, ast.arg):
        return n.arg == name
    if isinstance(n, (ast.Global, ast.Nonlocal)):
        return name in n.names
    if isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return n.name == name
    if isinstance(n, ast.MatchMapping):
        return n.rest == name
    if isinstance(n, ast.alias):
        return (n.asname or n.name.split(".")[0]) == name
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return n.name == name
    return False


def _own_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``fn``'s body outside the functions and classes nested in it."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return out


def generators_bound_once(node: ast.AST) -> dict[str, ast.FunctionDef]:
    """The generator functions of ``node`` whose name nothing else binds."""
    defs: dict[str, list[ast.AST]] = {}
    for n in walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(n.name, []).append(n)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            defs.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.arg):
            defs.setdefault(n.arg, []).append(n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                defs.setdefault(name, []).append(n)
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            defs.setdefault(n.name, []).append(n)
        elif isinstance(n, ast.alias):
            defs.setdefault(n.asname or n.name.split(".")[0], []).append(n)
    out: dict[str, ast.FunctionDef] = {}
    for name, found in defs.items():
        only = found[0]
        if len(found) == 1 and only is not node and isinstance(only, ast.FunctionDef):
            if is_generator_function(only):
                out[name] = only
    return out


def _returns_a_value(gen: ast.FunctionDef) -> bool:
    return any(
        isinstance(n, ast.Return)
        and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
        for n in _own_nodes(gen)
    )


def _calls_of(name: str, node: ast.AST, parents: dict) -> list[ast.Call] | None:
    """The calls ``name(...)`` in ``node``; None if the name is read otherwise."""
    calls = []
    for n in walk(node):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            call = parents.get(id(n))
            if not (isinstance(call, ast.Call) and call.func is n):
                return None
            calls.append(call)
    return calls


def _return_value_unseen(
    gen: ast.FunctionDef, node: ast.AST, parents: dict, is_builtin: Callable[[str], bool]
) -> bool:
    """Whether every call of ``gen`` is read where nothing but ``yield from`` sees the
    value it returns."""
    calls = _calls_of(gen.name, node, parents)
    if calls is None:
        return False
    for call in calls:
        p = parents.get(id(call))
        if isinstance(p, ast.YieldFrom):
            q = parents.get(id(p))
            if isinstance(q, ast.Expr) or (isinstance(q, ast.Assign) and q.value is p):
                continue
            return False
        if isinstance(p, (ast.For, ast.comprehension)) and p.iter is call:
            continue
        if (
            isinstance(p, ast.Call)
            and isinstance(p.func, ast.Name)
            and p.func.id in _TAKE_ALL
            and is_builtin(p.func.id)
            and p.args
            and p.args[0] is call
        ):
            continue
        return False
    return True


def _give_the_value_to_yield_from(
    gen: ast.FunctionDef, node: ast.AST, parents: dict, fresh: Callable[[str], str]
) -> None:
    setattr(gen, RETURNS, "dropped")
    assigns = [
        q
        for call in _calls_of(gen.name, node, parents) or ()
        if isinstance(p := parents.get(id(call)), ast.YieldFrom)
        and isinstance(q := parents.get(id(p)), ast.Assign)
    ]
    if not assigns:
        return
    twin = copy.deepcopy(gen)
    twin.name = fresh(gen.name + "_returning")
    setattr(twin, RETURNS, "pair")
    _insert_after(gen, twin, parents)
    for st in assigns:
        value = st.value
        call = value.value  # type: ignore[attr-defined]
        call.func = ast.Name(id=twin.name, ctx=ast.Load())
        t = fresh("returned")
        made = ast.Assign(targets=[ast.Name(id=t, ctx=ast.Store())], value=call)
        taken = ast.Expr(value=ast.YieldFrom(value=_item(t, 0)))
        result = ast.Assign(targets=st.targets, value=_item(t, 1))
        for new in (made, taken, result):
            ast.copy_location(new, st)
            ast.fix_missing_locations(new)
        _replace(st, [made, taken, result], parents)


def _item(name: str, k: int) -> ast.expr:
    return ast.Subscript(
        value=ast.Name(id=name, ctx=ast.Load()), slice=ast.Constant(k), ctx=ast.Load()
    )


def _closes_as_taking_the_rest(
    node: ast.AST, generators: dict[str, ast.FunctionDef], parents: dict, fresh: Callable
) -> None:
    without_try = {
        name
        for name, gen in generators.items()
        if not any(isinstance(n, (ast.Try, ast.TryStar, ast.With)) for n in _own_nodes(gen))
    }
    for st in [n for n in walk(node) if isinstance(n, ast.Expr)]:
        call = st.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "close"
            and isinstance(call.func.value, ast.Name)
            and not call.args
            and not call.keywords
        ):
            continue
        name = call.func.value.id
        if not _bound_only_to_generators(name, node, parents, without_try):
            continue
        loop = ast.For(
            target=ast.Name(id=fresh("closed"), ctx=ast.Store()),
            iter=ast.Name(id=name, ctx=ast.Load()),
            body=[ast.Pass()],
            orelse=[],
        )
        ast.copy_location(loop, st)
        ast.fix_missing_locations(loop)
        _replace(st, [loop], parents)


def _bound_only_to_generators(name: str, node: ast.AST, parents: dict, gens: set[str]) -> bool:
    bindings = 0
    for n in walk(node):
        if binds_otherwise(n, name):
            return False
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            st = parents.get(id(n))
            if not (
                isinstance(st, ast.Assign)
                and st.targets == [n]
                and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Name)
                and st.value.func.id in gens
            ):
                return False
            bindings += 1
    return bindings > 0


def _body_holding(st: ast.stmt, parents: dict) -> list[ast.stmt]:
    p = parents[id(st)]
    for field in ("body", "orelse", "finalbody"):
        body = getattr(p, field, None)
        if isinstance(body, list) and any(s is st for s in body):
            return body
    for h in getattr(p, "handlers", ()) or getattr(p, "cases", ()):
        if any(s is st for s in h.body):
            return h.body
    raise AssertionError("a statement outside its parent's bodies")


def _replace(st: ast.stmt, new: list[ast.stmt], parents: dict) -> None:
    body = _body_holding(st, parents)
    i = next(k for k, s in enumerate(body) if s is st)
    body[i : i + 1] = new


def _insert_after(st: ast.stmt, new: ast.stmt, parents: dict) -> None:
    body = _body_holding(st, parents)
    i = next(k for k, s in enumerate(body) if s is st)
    body.insert(i + 1, new)
