"""Specialisation: the general variant of a segment as a replay program
(``runtime.calls.replay_segment``) instead of generated reverse code."""

from __future__ import annotations

import ast
from typing import Any

from . import syntax
from .ssa import _SSA
from .syntax import C, N, S, _locate_all, _NotReplayable, call, tuple_


class ReplayRules:
    """Methods of :class:`FunctionBuilder`: specialisation: the general variant of a segment as a replay program"""

    def replay_plan(self, ssa: _SSA) -> tuple[list[ast.stmt], list[str], Any] | None:
        """The general variant of a segment of arithmetic (operations, copies, values that
        carry no sensitivity), its reverse as data: the forward as
        :meth:`general_segment` writes it, the names it records, and ``(names, program)``
        for :func:`runtime.calls.replay_segment`, which reads the backprops and values from the
        record. None for any other segment, or one that touches a boxed name.

        The variant runs only when the segment's float guard fails, so its reverse need not
        be straight-line code; as a program it is a few nodes instead of a third of the
        generated tree, and the transformation is that much faster."""
        slots: dict[str, int] = {}
        users: list[str] = []  # the persistent adjoints the program reads and writes
        init: list[tuple[int, int]] = []
        inputs: dict[str, int] = {}
        steps: list[tuple[ast.stmt, list[str]]] = []

        def slot(name: str) -> int:
            k = slots.get(name)
            if k is None:
                k = slots[name] = len(slots)
            return k

        user_positions: dict[str, int] = {}

        def user_index(name: str) -> int:
            k = user_positions.get(name)
            if k is None:
                k = user_positions[name] = len(users)
                users.append(name)
            return k

        def contributes(name: str) -> int | None:
            """The slot of a name an operation hands sensitivity to (None: not tracked)."""
            if name in self.const_names:
                return None
            if name not in ssa.defined:
                if name in self.boxed or name.startswith(syntax.PFX):
                    raise _NotReplayable
                if name not in inputs:
                    inputs[name] = slot(name)
                    user_index(name)
            return slot(name)

        fwd: list[ast.stmt] = []
        rec: list[str] = []
        rec_positions: dict[str, int] = {}  # name -> its 1-based place in the record
        try:
            for s in ssa.stmts:
                kind = getattr(s, "dp_kind", "")
                if (
                    kind not in ("inline", "nondiff", "copy")
                    or not isinstance(s, ast.Assign)
                    or not isinstance(s.targets[0], ast.Name)
                    or getattr(s, "dp_unpack", False)
                ):
                    return None
                name = s.targets[0].id
                if name in self.boxed or ssa.user_name(name) in self.boxed:
                    return None
                v = s.value
                if kind == "inline":
                    operands = (
                        [v.left, v.right]
                        if isinstance(v, ast.BinOp)
                        else [v.operand]
                        if isinstance(v, ast.UnaryOp)
                        else list(v.args)
                        if isinstance(v, ast.Call)
                        and not v.keywords
                        and getattr(v, "dp_op", None) is None
                        and self.is_static_chain(v.func)
                        else None
                    )
                    if operands is None or any(isinstance(a, ast.Starred) for a in operands):
                        return None
                elif kind == "copy" and (not isinstance(v, ast.Name) or v.id in self.boxed):
                    return None
                f, r_names, _ = self.general_stmt(s, ssa)
                _locate_all(f, s)
                fwd.extend(f)
                for n in r_names:
                    if n not in rec_positions:
                        rec.append(n)
                        rec_positions[n] = len(rec)
                steps.append((s, r_names))
            for name in ssa.defined:
                if ssa.is_final(name):
                    init.append((slot(name), user_index(ssa.user_name(name))))
            program: list[tuple] = []
            for s, r_names in reversed(steps):
                dst = slot(s.targets[0].id)
                v = s.value
                if s.dp_kind == "copy":
                    src = contributes(v.id)
                    if src is not None:
                        program.append((dst, src))
                elif s.dp_kind == "inline":
                    operands = (
                        [v.left, v.right]
                        if isinstance(v, ast.BinOp)
                        else [v.operand]
                        if isinstance(v, ast.UnaryOp)
                        else v.args
                    )
                    args = []
                    for pos, a in enumerate(operands, 1):
                        if isinstance(a, ast.Name):
                            k = contributes(a.id)
                            if k is not None:
                                if a.id not in rec_positions:
                                    raise _NotReplayable
                                args.append((pos, rec_positions[a.id], k))
                    program.append((rec_positions[r_names[0]], dst, tuple(args)))
        except _NotReplayable:
            return None
        taken = {ssa.user_name(n) for n in ssa.defined if ssa.is_final(n)}
        # an input whose name a final definition also has starts from zero: its adjoint was the
        # final value's, taken by the program
        init.extend((k, user_index(n)) for n, k in inputs.items() if n not in taken)
        result = tuple(inputs.get(u, -1) for u in users)
        return fwd, rec, (users, (len(slots), tuple(init), tuple(program), result))

    def replay_reverse(
        self, replay: tuple[list[ast.stmt], list[str], Any], rec: str
    ) -> list[ast.stmt]:
        """``adjoints = replay_segment(program, record, adjoints, Abox)``."""
        users, program = replay[2]
        adjoints = [self.adj(u) for u in users]
        run = call(
            self.rt("replay_segment"),
            C(program),
            N(rec),
            tuple_([N(a) for a in adjoints]),
            N(syntax.ABOX),
        )
        if not adjoints:
            return [ast.Expr(run)]
        return [
            ast.Assign(
                targets=[ast.Tuple(elts=[S(a) for a in adjoints], ctx=ast.Store())], value=run
            )
        ]
