"""Peephole clean-up of a fast segment's reverse code.

The adjoint accumulator writes one statement per step of the chain rule, which leaves
copies (``_a43 = _a42``) and resets that are overwritten before anything reads them
(``_A_x = Z`` followed by ``_A_x = ...``). In a loop body each costs a few nanoseconds per
iteration, a tenth of a scalar reverse. Two rewrites, both exact:

- a copy ``t = u`` of one name into a temporary (a name no code after the list reads)
  assigned nowhere else is dropped, and ``t`` read as ``u``, when ``u`` is not assigned
  again before ``t``'s last read (or only given ``t`` back, which then is ``u = u`` and
  goes too);
- an assignment of a name or constant to a name that is assigned again before any
  statement reads it is dropped (the last assignment of each name stays: code after the
  list may read it; an expression stays, as evaluating it may raise).

Statements other than ``name = expression`` (an ``if`` that hands a tuple's parts back)
are barriers: every name they mention counts as read there, and every name they may
assign as assigned there, so nothing moves across them.
"""

from __future__ import annotations

import ast
import bisect

from .trees import walk

__all__ = ["simplify_reverse"]


def simplify_reverse(stmts: list[ast.stmt], temps: set[str]) -> list[ast.stmt]:
    """``stmts`` with copies into ``temps`` propagated and dead stores removed."""
    if any(_assigns_inside(s.value if _simple(s) else s) for s in stmts):  # type: ignore[attr-defined]
        return stmts
    out = list(stmts)
    while True:  # each rewrite can open the way for the other
        n = len(out)
        out = _drop_dead_stores(_propagate_copies(out, temps))
        if len(out) == n:
            return out


def _assigns_inside(node: ast.AST) -> bool:
    """Whether ``node`` holds an assignment expression (``(a := b)``)."""
    t = type(node)
    if t is ast.Name or t is ast.Constant:
        return False
    if t is ast.BinOp:
        return _assigns_inside(node.left) or _assigns_inside(node.right)  # type: ignore[attr-defined]
    if t is ast.UnaryOp:
        return _assigns_inside(node.operand)  # type: ignore[attr-defined]
    return any(isinstance(n, ast.NamedExpr) for n in walk(node))


def _simple(s: ast.stmt) -> bool:
    return isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)


def _stores(s: ast.stmt) -> set[str]:
    if _simple(s):
        return {s.targets[0].id}  # type: ignore[attr-defined]
    return {n.id for n in walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads(s: ast.stmt) -> set[str]:
    if _simple(s):
        return _names_in(s.value)  # type: ignore[attr-defined]
    return {n.id for n in walk(s) if isinstance(n, ast.Name)}  # a barrier: any mention


def _names_in(e: ast.expr) -> set[str]:
    """The names an expression reads: the shapes the accumulator writes without a walk."""
    t = type(e)
    if t is ast.Name:
        return {e.id}  # type: ignore[attr-defined]
    if t is ast.Constant:
        return set()
    if t is ast.BinOp:
        return _names_in(e.left) | _names_in(e.right)  # type: ignore[attr-defined]
    if t is ast.UnaryOp:
        return _names_in(e.operand)  # type: ignore[attr-defined]
    if t is ast.Call and not e.keywords:  # type: ignore[attr-defined]
        out = _names_in(e.func)  # type: ignore[attr-defined]
        for a in e.args:  # type: ignore[attr-defined]
            out |= _names_in(a)
        return out
    if t is ast.IfExp:
        return _names_in(e.test) | _names_in(e.body) | _names_in(e.orelse)  # type: ignore[attr-defined]
    if t is ast.Compare:
        out = _names_in(e.left)  # type: ignore[attr-defined]
        for c in e.comparators:  # type: ignore[attr-defined]
            out |= _names_in(c)
        return out
    if t is ast.Subscript:
        return _names_in(e.value) | _names_in(e.slice)  # type: ignore[attr-defined]
    return {n.id for n in walk(e) if isinstance(n, ast.Name)}


def _is_name(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _propagate_copies(stmts: list[ast.stmt], temps: set[str]) -> list[ast.stmt]:
    # each statement's reads and stores, computed once and kept up to date (renaming a
    # load changes its reads; nothing here changes a store); a dropped statement is only
    # marked dead, so the indexes of who reads and who stores each name stay valid, and
    # each copy costs a few lookups instead of a scan to the end of the list
    reads = [_reads(s) for s in stmts]
    stores = [_stores(s) for s in stmts]
    live = [True] * len(stmts)
    count: dict[str, int] = {}
    readers: dict[str, list[int]] = {}  # name -> the statements reading it, in order
    storers: dict[str, list[int]] = {}
    for k, (r, st) in enumerate(zip(reads, stores)):
        for t in st:
            count[t] = count.get(t, 0) + 1
            storers.setdefault(t, []).append(k)
        for t in r:
            readers.setdefault(t, []).append(k)
    for i, s in enumerate(stmts):
        if not (live[i] and _simple(s) and isinstance(s.value, ast.Name)):  # type: ignore[attr-defined]
            continue
        t, u = s.targets[0].id, s.value.id  # type: ignore[attr-defined]
        if t not in temps or count[t] != 1 or t == u:
            continue
        last = _last_reader(readers.get(t), t, i, reads, live)
        # u must keep its value up to the last read of t (a store in that very
        # statement happens after its right-hand side is read), or be given t back
        if any(
            live[k] and not (_simple(stmts[k]) and _is_name(stmts[k].value, t))  # type: ignore[attr-defined]
            for k in _between(storers.get(u, []), i, i if last is None else last)
        ):
            continue
        if last is not None and not _simple(stmts[last]) and u in stores[last]:
            continue
        renamed = []
        for k in [] if last is None else _between(readers[t], i, last + 1):
            if live[k] and t in reads[k]:
                x = stmts[k]
                _rename_loads(x.value if _simple(x) else x, t, u)  # type: ignore[attr-defined]
                reads[k] = (reads[k] - {t}) | {u}
                bisect.insort(readers.setdefault(u, []), k)
                renamed.append(k)
        live[i] = False
        count[t] = 0
        # a statement that gave t back is now u = u: gone too
        for k in renamed:
            x = stmts[k]
            if _simple(x) and _is_name(x.value, x.targets[0].id):  # type: ignore[attr-defined]
                live[k] = False
    return [s for s, keep in zip(stmts, live) if keep]


def _last_reader(
    readers: list[int] | None, t: str, i: int, reads: list[set[str]], live: list[bool]
) -> int | None:
    """The last live statement after ``i`` that reads ``t`` (None: none does). Entries that
    no longer read ``t`` are dropped from ``readers`` on the way."""
    while readers:
        k = readers[-1]
        if live[k] and t in reads[k]:
            return k if k > i else None
        readers.pop()
    return None


def _between(indexes: list[int], lo: int, hi: int) -> list[int]:
    """The entries of the sorted ``indexes`` strictly between ``lo`` and ``hi``."""
    return indexes[bisect.bisect_right(indexes, lo) : bisect.bisect_left(indexes, hi)]


def _drop_dead_stores(stmts: list[ast.stmt]) -> list[ast.stmt]:
    reads = [_reads(s) for s in stmts]
    stores = [_stores(s) for s in stmts]
    keep = [True] * len(stmts)
    next_mention: dict[str, int] = {}  # name -> the first statement after this one that mentions it
    for i in range(len(stmts) - 1, -1, -1):
        s = stmts[i]
        if _simple(s) and isinstance(s.value, (ast.Name, ast.Constant)):  # type: ignore[attr-defined]
            t = s.targets[0].id  # type: ignore[attr-defined]
            k = next_mention.get(t)
            if k is not None and t not in reads[k] and _simple(stmts[k]) and t in stores[k]:
                keep[i] = False  # overwritten before anything read it
        for name in reads[i]:
            next_mention[name] = i
        for name in stores[i]:
            next_mention[name] = i
    return [s for s, k in zip(stmts, keep) if k]


def _rename_loads(node: ast.AST, old: str, new: str) -> None:
    for n in walk(node):
        if type(n) is ast.Name and n.id == old and isinstance(n.ctx, ast.Load):
            n.id = new
