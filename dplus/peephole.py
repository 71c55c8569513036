"""Peephole clean-up of a fast segment's reverse: straight-line assignments to names.

The adjoint accumulator writes one statement per step of the chain rule, which leaves
copies (``_a43 = _a42``) and resets that are overwritten before anything reads them
(``_A_x = Z`` followed by ``_A_x = ...``). In a loop body each costs a few nanoseconds per
iteration, a tenth of a scalar reverse. Two rewrites, both exact:

- a copy ``t = u`` of one name into a name assigned nowhere else is dropped, and ``t``
  read as ``u``, when ``u`` is not assigned again before ``t``'s last read (or only
  given ``t`` back, which then is ``u = u`` and goes too);
- an assignment of a name or constant to a name that is assigned again before any
  statement reads it is dropped (the last assignment of each name stays: code after the
  list may read it; an expression stays, as evaluating it may raise).

Only lists made entirely of single-target assignments of expressions without side effects
on names are rewritten (what the fast reverse is); anything else is returned unchanged.
"""

from __future__ import annotations

import ast

__all__ = ["simplify_reverse"]


def simplify_reverse(stmts: list[ast.stmt], temps: set[str]) -> list[ast.stmt]:
    """``stmts`` with copies into ``temps`` (names no other code reads) propagated and dead
    stores removed; unchanged unless every statement is ``name = expression``."""
    if not all(isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
               and not any(isinstance(n, ast.NamedExpr) for n in ast.walk(s.value)) for s in stmts):
        return stmts
    out = list(stmts)
    while True:  # each rewrite can open the way for the other
        n = len(out)
        out = _drop_dead_stores(_propagate_copies(out, temps))
        if len(out) == n:
            return out


def _target(s: ast.Assign) -> str:
    return s.targets[0].id  # type: ignore[attr-defined]


def _is_name(e: ast.expr, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _reads(s: ast.Assign) -> set[str]:
    return {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}


def _propagate_copies(stmts: list[ast.Assign], temps: set[str]) -> list[ast.Assign]:
    stores: dict[str, int] = {}
    for s in stmts:
        stores[_target(s)] = stores.get(_target(s), 0) + 1
    i = 0
    while i < len(stmts):
        s = stmts[i]
        t = _target(s)
        if (isinstance(s.value, ast.Name) and t in temps and stores[t] == 1 and s.value.id != t):
            u = s.value.id
            later = stmts[i + 1:]
            last_read = max((k for k, x in enumerate(later) if t in _reads(x)), default=-1)
            # u must keep its value up to the last read of t (a store in that very
            # statement happens after its right-hand side is read), or be given t back
            if all(_target(x) != u or _is_name(x.value, t) for x in later[:last_read]):
                for x in later[:last_read + 1]:
                    _Rename(t, u).visit(x.value)
                del stmts[i]
                stores[t] = 0
                stmts[:] = [x for x in stmts if not (_is_name(x.value, _target(x)))]  # u = u
                continue
        i += 1
    return stmts


def _drop_dead_stores(stmts: list[ast.Assign]) -> list[ast.Assign]:
    keep = [True] * len(stmts)
    for i, s in enumerate(stmts):
        if not isinstance(s.value, (ast.Name, ast.Constant)):
            continue
        t = _target(s)
        for x in stmts[i + 1:]:
            if t in _reads(x):
                break
            if _target(x) == t:
                keep[i] = False  # overwritten before anything read it
                break
    return [s for s, k in zip(stmts, keep) if k]


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node
