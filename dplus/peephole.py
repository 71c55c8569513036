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

__all__ = ["simplify_reverse"]


def simplify_reverse(stmts: list[ast.stmt], temps: set[str]) -> list[ast.stmt]:
    """``stmts`` with copies into ``temps`` propagated and dead stores removed."""
    if any(isinstance(n, ast.NamedExpr) for s in stmts for n in ast.walk(s)):
        return stmts
    out = list(stmts)
    while True:  # each rewrite can open the way for the other
        n = len(out)
        out = _drop_dead_stores(_propagate_copies(out, temps))
        if len(out) == n:
            return out


def _simple(s: ast.stmt) -> bool:
    return isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)


def _stores(s: ast.stmt) -> set[str]:
    if _simple(s):
        return {s.targets[0].id}  # type: ignore[attr-defined]
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads(s: ast.stmt) -> set[str]:
    if _simple(s):
        return {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}  # a barrier: any mention


def _is_name(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _propagate_copies(stmts: list[ast.stmt], temps: set[str]) -> list[ast.stmt]:
    count: dict[str, int] = {}
    for s in stmts:
        for t in _stores(s):
            count[t] = count.get(t, 0) + 1
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if _simple(s) and isinstance(s.value, ast.Name):  # type: ignore[attr-defined]
            t, u = s.targets[0].id, s.value.id  # type: ignore[attr-defined]
            later = stmts[i + 1:]
            last_read = max((k for k, x in enumerate(later) if t in _reads(x)), default=-1)
            # u must keep its value up to the last read of t (a store in that very
            # statement happens after its right-hand side is read), or be given t back
            if t in temps and count[t] == 1 and t != u and all(
                    u not in _stores(x) or (_simple(x) and _is_name(x.value, t))  # type: ignore[attr-defined]
                    for x in later[:last_read]) and (last_read < 0 or _simple(later[last_read])
                                                     or u not in _stores(later[last_read])):
                for x in later[:last_read + 1]:
                    _RenameLoads(t, u).visit(x.value if _simple(x) else x)  # type: ignore[attr-defined]
                del stmts[i]
                count[t] = 0
                stmts[:] = [x for x in stmts if not (_simple(x) and _is_name(x.value, x.targets[0].id))]  # type: ignore[attr-defined]
                continue
        i += 1
    return stmts


def _drop_dead_stores(stmts: list[ast.stmt]) -> list[ast.stmt]:
    keep = [True] * len(stmts)
    for i, s in enumerate(stmts):
        if not (_simple(s) and isinstance(s.value, (ast.Name, ast.Constant))):  # type: ignore[attr-defined]
            continue
        t = s.targets[0].id  # type: ignore[attr-defined]
        for x in stmts[i + 1:]:
            if t in _reads(x) or (not _simple(x) and t in _stores(x)):
                break
            if t in _stores(x):
                keep[i] = False  # overwritten before anything read it
                break
    return [s for s, k in zip(stmts, keep) if k]


class _RenameLoads(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old and isinstance(node.ctx, ast.Load):
            node.id = self.new
        return node
