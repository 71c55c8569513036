"""Lists and tuples that never leave the function become their elements (scalar replacement).

Small vectors written as list displays and read back at once are common in numerical
code, all the more after inlining: ``r = qmul(q, p)`` hands a four-element list from the
callee's ``return [...]`` to the caller's ``w, x, y, z = r``. Each such list costs a
display, an entry in the box-sensitivity map, and a runtime call per read in the reverse,
and splits the float arithmetic around it into separate segments. When a list display's
only uses are the reads below, no code can see the list itself, so it need not exist
(the same for a tuple display, such as the pair an inlined ``return fx, fy`` makes)::

    L = [a, b, c]          ->   _L_0 = a; _L_1 = b; _L_2 = c
    M = L                  ->   (M is another name for the same elements)
    x, y, z = M            ->   x = _L_0; y = _L_1; z = _L_2
    t = L[-1]              ->   t = _L_2

That is, on the normalised core (every element an atom), for a name that:

- is bound once in the function, by the display (no starred element), not a parameter,
  not shared with a nested function (no closure reads it), not a cell of the box map;
- is read only in statements after the display in the same block (nested blocks of
  those included), each read being a copy into a name that qualifies the same way (bound
  in that block), an unpacking into exactly as many names, or an index that is an
  integer constant in range (or a name bound once to one: ``-1`` is normalised into one).

Anything else (the list returned, passed, stored, mutated, iterated, compared, read by
a variable index) keeps the list. The elements are copied when the display runs, so a
name rebound between the display and a read still gives the value the list held.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import Any, cast

from .normalize.core import IRFunction, Namer, closure_reads
from .trees import child_blocks, walk

__all__ = ["scalarize_lists", "hoist_constant_reads"]


def _statements(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``stmts`` and in the blocks nested in them (nested functions'
    bodies included), in source order, without walking into expressions: the uses looked
    for are statements."""
    for st in stmts:
        yield st
        for sub in child_blocks(st):
            yield from _statements(sub)


def name_counts(body: list[ast.stmt]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """How often each name is bound and read in ``body`` (nested scopes included), and the
    names bound once to an integer constant (``k = 1; xs[k]``)."""
    stores: dict[str, int] = {}
    loads: dict[str, int] = {}
    for n in walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Name):
            table = loads if isinstance(n.ctx, ast.Load) else stores
            table[n.id] = table.get(n.id, 0) + 1
    consts = {
        st.targets[0].id: v
        for st in _statements(body)
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and stores.get(st.targets[0].id) == 1
        and (v := int_constant(st.value)) is not None
    }
    return stores, loads, consts


def scalarize_lists(ir: IRFunction, namer: Namer) -> int:
    """Rewrite ``ir.body`` in place; returns how many lists were replaced."""
    if not any(_display(st) for block in _blocks(ir.body) for st in block):
        return 0  # (no display to replace: the name counts below walk the whole function)
    stores, loads, consts = name_counts(ir.body)
    excluded = set(ir.scope.params) | set(ir.boxed) | set(ir.outer_boxed) | _read_by_nested(ir.body)
    done = 0
    for block in _blocks(ir.body):
        i = 0
        while i < len(block):
            plan = _plan(block, i, stores, loads, excluded, consts)
            if plan is None:
                i += 1
                continue
            _rewrite(block, i, plan, namer, consts)
            done += 1
            i += 1
    return done


def _blocks(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """Every statement list of the function (not of nested functions), outermost first."""
    yield body
    for st in body:
        if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in child_blocks(st):
                yield from _blocks(sub)


def _read_by_nested(body: list[ast.stmt]) -> set[str]:
    """The names nested functions read: their free variables and their default values."""
    out: set[str] = set()
    for n in walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            out.update(m.id for m in walk(n) if isinstance(m, ast.Name))
            out.update(closure_reads(n))
    return out


def _display(st: ast.stmt) -> tuple[str, list[ast.expr]] | None:
    if (
        isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and isinstance(st.value, (ast.List, ast.Tuple))
        and not any(isinstance(e, ast.Starred) for e in st.value.elts)
        and all(isinstance(e, (ast.Name, ast.Constant)) for e in st.value.elts)
    ):
        return st.targets[0].id, st.value.elts
    return None


class _Plan:
    def __init__(self, name: str, elts: list[ast.expr]) -> None:
        self.name = name
        self.elts = elts
        self.aliases = {name}
        self.uses: list[ast.Assign] = []  # statements that read the list (copies, unpacks, indexes)


def _plan(
    block: list[ast.stmt],
    i: int,
    stores: dict[str, int],
    loads: dict[str, int],
    excluded: set[str],
    consts: dict[str, int],
) -> _Plan | None:
    found = _display(block[i])
    if found is None:
        return None
    name, elts = found
    if stores.get(name) != 1 or name in excluded:
        return None
    plan = _Plan(name, elts)
    n = len(elts)
    after = ast.Module(body=block[i + 1 :], type_ignores=[])
    reads = 0
    pending = [name]
    while pending:
        cur = pending.pop()
        for st in (s for s in _statements(after.body) if isinstance(s, ast.Assign)):
            kind = _use(st, cur, n, consts)
            if kind is None:
                continue
            if kind == "copy":
                alias = st.targets[0].id  # type: ignore[attr-defined]
                # (bound in this very block, so it is bound wherever it is read after)
                if (
                    stores.get(alias) != 1
                    or alias in excluded
                    or alias in plan.aliases
                    or not any(st is b for b in block[i + 1 :])
                ):
                    return None
                plan.aliases.add(alias)
                pending.append(alias)
            plan.uses.append(st)
            reads += 1
    # every read of every alias is one of the uses found, after the display in this block
    if sum(loads.get(a, 0) for a in plan.aliases) != reads:
        return None
    return plan


def int_constant(e: ast.expr) -> int | None:
    """The value of an integer constant (``-1`` included: normalising folds signs), else None."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    return None


def _index(e: ast.expr, consts: dict[str, int]) -> int | None:
    """The index ``e`` stands for, when it is an integer constant (or a name bound once to one)."""
    if isinstance(e, ast.Name):
        return consts.get(e.id)
    return int_constant(e)


def read_of(st: ast.stmt, names: set[str], consts: dict[str, int]) -> tuple[str, Any] | None:
    """How the assignment ``st`` reads a container under one of ``names`` as a whole or at a
    constant key: ``("copy", name)`` (``t = c``), ``("unpack", n)`` (``a, b = c``, into
    ``n`` names), ``("index", key)`` (``t = c[key]``, a string or an integer constant, or a
    name bound once to one); None for any other statement."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
        return None
    target, value = st.targets[0], st.value
    if isinstance(value, ast.Name) and value.id in names:
        if isinstance(target, ast.Name):
            return "copy", target.id
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            return "unpack", len(target.elts)
        return None
    if (
        isinstance(target, ast.Name)
        and isinstance(value, ast.Subscript)
        and isinstance(value.value, ast.Name)
        and value.value.id in names
        and (k := _key(value.slice, consts)) is not None
    ):
        return "index", k
    return None


def _use(st: ast.Assign, name: str, n: int, consts: dict[str, int]) -> str | None:
    """How ``st`` reads the list ``name`` of ``n`` elements: 'copy', 'unpack', 'index', or None."""
    r = read_of(st, {name}, consts)
    if r is None:
        return None
    kind, what = r
    if (
        kind == "copy"
        or (kind == "unpack" and what == n)
        or (kind == "index" and type(what) is int and -n <= what < n)
    ):
        return kind
    return None


def _rewrite(
    block: list[ast.stmt], i: int, plan: _Plan, namer: Namer, consts: dict[str, int]
) -> None:
    display = block[i]
    parts = [namer.fresh(f"{plan.name.strip('_')[:12]}_{k}_") for k in range(len(plan.elts))]
    block[i : i + 1] = [ast.copy_location(_assign(p, e), display) for p, e in zip(parts, plan.elts)]
    # each use (by id) and the assignments (target, part) that replace it: none for an alias
    # (the casts: _use has checked each use's shape)
    replaced_by: dict[int, list[tuple[str, str]]] = {}
    for st in plan.uses:
        target, value = st.targets[0], st.value
        if isinstance(value, ast.Name) and isinstance(target, ast.Name):  # an alias
            replaced_by[id(st)] = []
        elif isinstance(value, ast.Name):  # unpack
            elts = cast(ast.Tuple, target).elts
            replaced_by[id(st)] = [(cast(ast.Name, e).id, parts[k]) for k, e in enumerate(elts)]
        else:
            index = cast(int, _index(cast(ast.Subscript, value).slice, consts))
            replaced_by[id(st)] = [(cast(ast.Name, target).id, parts[index % len(parts)])]
    for block_ in _all_blocks_containing(block, plan.uses):
        j = 0
        while j < len(block_):
            node = block_[j]
            if id(node) in replaced_by:
                new = [
                    ast.copy_location(_assign(t, ast.Name(id=p, ctx=ast.Load())), node)
                    for t, p in replaced_by[id(node)]
                ]
                block_[j : j + 1] = new
                j += len(new)
                continue
            j += 1


def _all_blocks_containing(
    block: list[ast.stmt], uses: Sequence[ast.stmt]
) -> Iterator[list[ast.stmt]]:
    targets = {id(u) for u in uses}
    for b in _blocks(block):
        if any(id(s) in targets for s in b):
            yield b


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0)


def hoist_constant_reads(ir: IRFunction, namer: Namer) -> list[tuple[str, Any, str]]:
    """Read a parameter's elements at constant keys once, on entry, when the function reads
    it only that way (a dict of model parameters read in a loop): ``params["a"]`` in the
    body becomes a copy of ``_params_a``, read before the body runs.

    Only in a function that stores into no element or attribute and calls no method (a
    parameter could be changed through another name for it). Returns
    ``(parameter, key, name)`` for each element read on entry. The plus-function
    (``reverse.FunctionBuilder``) tests on entry that each parameter is a dict holding
    the keys (a list or tuple long enough, for integer keys), so no read fails earlier
    than it would have; when not, it runs the transform made without this (as for a
    rebound inlined name). It tests before returning that each element is still the one
    read, raising otherwise (something the call ran changed the parameter).
    """
    hoisted: list[tuple[str, Any, str]] = []
    if not _indexes_a_parameter(ir.body, set(ir.scope.params)):
        return hoisted  # (nothing to hoist: the name counts below walk the whole function)
    stores, loads, consts = name_counts(ir.body)
    nested = _read_by_nested(ir.body)
    if _writes_containers(ir.body):
        return hoisted  # (a parameter may be changed through another name for it)
    looped = {
        id(st)
        for loop in _statements(ir.body)
        if isinstance(loop, (ast.For, ast.While))
        for st in _statements(loop.body + loop.orelse)
    }
    assigns = [st for st in _statements(ir.body) if isinstance(st, ast.Assign)]
    reads: list[ast.Assign] = []
    for p in ir.scope.params:
        if stores.get(p) or p in ir.boxed or p in nested or not loads.get(p):
            continue
        found = []
        for st in assigns:
            r = read_of(st, {p}, consts)
            if r is not None and r[0] == "index":
                found.append((st, r[1]))
        if len(found) != loads[p] or (len(found) < 2 and id(found[0][0]) not in looped):
            continue  # read some other way, or just once: nothing to gain
        names: dict[Any, str] = {}
        for st, key in found:
            if (type(key), key) not in names:
                names[(type(key), key)] = namer.fresh(
                    f"{p}_{key}_" if isinstance(key, int) or str(key).isidentifier() else f"{p}_"
                )
                hoisted.append((p, key, names[(type(key), key)]))
                # (the read on entry keeps the line of the first read it replaces)
                reads.append(
                    ast.copy_location(
                        _assign(
                            names[(type(key), key)],
                            ast.Subscript(
                                value=ast.Name(id=p, ctx=ast.Load()),
                                slice=ast.Constant(value=key),
                                ctx=ast.Load(),
                            ),
                        ),
                        st,
                    )
                )
            st.value = ast.Name(id=names[(type(key), key)], ctx=ast.Load())
    ir.body[0:0] = reads
    return hoisted


def _indexes_a_parameter(body: list[ast.stmt], params: set[str]) -> bool:
    """Whether an assignment reads an element of a parameter (``t = p[k]``)."""
    return any(
        isinstance(st, ast.Assign)
        and isinstance(st.value, ast.Subscript)
        and isinstance(st.value.value, ast.Name)
        and st.value.value.id in params
        for st in _statements(body)
    )


def _writes_containers(body: list[ast.stmt]) -> bool:
    """Whether the function stores into or deletes from an element or attribute, or calls
    a method (``append``, ``update``, ...)."""
    for n in walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(
            n.ctx, (ast.Store, ast.Del)
        ):
            return True
        if isinstance(n, ast.Call) and getattr(n, "dp_op", None) == "callmethod":
            return True
    return False


def _key(e: ast.expr, consts: dict[str, int]) -> Any:
    """A constant key (a string, or an integer, or a name bound once to one), else None."""
    if isinstance(e, ast.Constant) and type(e.value) in (str, int):
        return e.value
    return _index(e, consts)
