"""Specialisation: the general variant of a segment as a replay program
(``runtime.calls.replay_segment``) instead of generated reverse code."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from . import syntax
from .ssa import _SSA
from .syntax import C, N, S, _locate_all, _NotReplayable, call, tuple_

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class ReplayRules(Builder):
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
        try:
            return _ReplayPlan(self, ssa).build()
        except _NotReplayable:
            return None

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


def _replay_operands(v: ast.expr) -> list[ast.expr]:
    """The operands of an inline operation a replay program reverses."""
    if isinstance(v, ast.BinOp):
        return [v.left, v.right]
    if isinstance(v, ast.UnaryOp):
        return [v.operand]
    return v.args  # type: ignore[attr-defined]  # (a call)


class _ReplayPlan:
    """A segment's general variant and its reverse as a replay program, being built: slots
    number the names the program moves sensitivity between; ``users`` are the persistent
    adjoints it reads and writes; the record holds the backprops and values it reads."""

    def __init__(self, builder: Any, ssa: _SSA) -> None:
        self.b = builder
        self.ssa = ssa
        self.slots: dict[str, int] = {}
        self.users: list[str] = []  # the persistent adjoints the program reads and writes
        self.user_positions: dict[str, int] = {}
        self.init: list[tuple[int, int]] = []
        self.inputs: dict[str, int] = {}
        self.steps: list[tuple[ast.stmt, list[str]]] = []
        self.fwd: list[ast.stmt] = []
        self.rec: list[str] = []
        self.rec_positions: dict[str, int] = {}  # name -> its 1-based place in the record

    def build(self) -> tuple[list[ast.stmt], list[str], Any] | None:
        """Raises _NotReplayable when an operand is a name the program cannot track."""
        ssa = self.ssa
        for s in ssa.stmts:
            if not self.replayable(s):
                return None
            self.forward(s)
        for name in ssa.defined:
            if ssa.is_final(name):
                self.init.append((self.slot(name), self.user_index(ssa.user_name(name))))
        program = [step for s, r_names in reversed(self.steps) for step in self.step(s, r_names)]
        taken = {ssa.user_name(n) for n in ssa.defined if ssa.is_final(n)}
        # an input whose name a final definition also has starts from zero: its adjoint was the
        # final value's, taken by the program
        self.init.extend((k, self.user_index(n)) for n, k in self.inputs.items() if n not in taken)
        result = tuple(self.inputs.get(u, -1) for u in self.users)
        plan = (len(self.slots), tuple(self.init), tuple(program), result)
        return self.fwd, self.rec, (self.users, plan)

    def slot(self, name: str) -> int:
        k = self.slots.get(name)
        if k is None:
            k = self.slots[name] = len(self.slots)
        return k

    def user_index(self, name: str) -> int:
        k = self.user_positions.get(name)
        if k is None:
            k = self.user_positions[name] = len(self.users)
            self.users.append(name)
        return k

    def contributes(self, name: str) -> int | None:
        """The slot of a name an operation hands sensitivity to (None: not tracked)."""
        b = self.b
        if name in b.const_names:
            return None
        if name not in self.ssa.defined:
            if name in b.boxed or name.startswith(syntax.PFX):
                raise _NotReplayable
            if name not in self.inputs:
                self.inputs[name] = self.slot(name)
                self.user_index(name)
        return self.slot(name)

    def replayable(self, s: ast.stmt) -> bool:
        """Arithmetic (inline operations), copies and values that carry no sensitivity,
        assigned to names that are not boxed."""
        b = self.b
        kind = getattr(s, "dp_kind", "")
        if (
            kind not in ("inline", "nondiff", "copy")
            or not isinstance(s, ast.Assign)
            or not isinstance(s.targets[0], ast.Name)
            or getattr(s, "dp_unpack", False)
        ):
            return False
        name = s.targets[0].id
        if name in b.boxed or self.ssa.user_name(name) in b.boxed:
            return False
        v = s.value
        if kind == "inline":
            if not (
                isinstance(v, (ast.BinOp, ast.UnaryOp))
                or (
                    isinstance(v, ast.Call)
                    and not v.keywords
                    and getattr(v, "dp_op", None) is None
                    and b.is_static_chain(v.func)
                )
            ):
                return False
            return not any(isinstance(a, ast.Starred) for a in _replay_operands(v))
        return not (kind == "copy" and (not isinstance(v, ast.Name) or v.id in b.boxed))

    def forward(self, s: ast.stmt) -> None:
        f, r_names, _ = self.b.general_stmt(s, self.ssa)
        _locate_all(f, s)
        self.fwd.extend(f)
        for n in r_names:
            if n not in self.rec_positions:
                self.rec.append(n)
                self.rec_positions[n] = len(self.rec)
        self.steps.append((s, r_names))

    def step(self, s: Any, r_names: list[str]) -> list[tuple[Any, ...]]:
        """The program's step reversing ``s`` (none for a value without sensitivity)."""
        dst = self.slot(s.targets[0].id)
        v = s.value
        if s.dp_kind == "copy":
            src = self.contributes(v.id)
            return [(dst, src)] if src is not None else []
        if s.dp_kind != "inline":
            return []
        args = []
        for pos, a in enumerate(_replay_operands(v), 1):
            if isinstance(a, ast.Name):
                k = self.contributes(a.id)
                if k is not None:
                    if a.id not in self.rec_positions:
                        raise _NotReplayable
                    args.append((pos, self.rec_positions[a.id], k))
        return [(self.rec_positions[r_names[0]], dst, tuple(args))]
