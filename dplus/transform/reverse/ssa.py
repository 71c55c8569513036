"""One segment in single-assignment form (``_SSA``) and the accumulator of its adjoints."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ..normalize.core import Core
from ..trees import clone, walk
from . import syntax
from .syntax import C, N, assign, call

# The builder is typed Any here: builder.py imports this module, so this one cannot import it.
FunctionBuilder = Any


class _SSA:
    """Renames the names a segment assigns again, so every value it records stays available."""

    def __init__(self, builder: FunctionBuilder, seg: list[ast.stmt]) -> None:
        self.b = builder
        self.version: dict[str, str] = {}
        self.origin: dict[str, str] = {}  # ssa name -> user/temp name
        self.inputs: set[str] = set()
        self.defined: dict[str, None] = {}  # in order of definition; a dict for O(1) membership
        self.all_names: set[str] = set()
        self.stmts: list[Core] = []
        self.local_temps: set[str] = set()
        self.input_reads: dict[str, int] = {}  # reads of names this segment does not define first
        reads: dict[str, int] = {}
        numeric: set[str] = set()  # user variables a fast-path statement defines here
        copies: set[str] = set()  # names a copy of another name defines here
        for s in seg:
            s2 = clone(s)
            s2.dp_kind = getattr(s, "dp_kind", "general")
            if s2.dp_kind in ("unpack", "inline") and not builder.nestable and builder.fast:
                targets = s2.targets[0].elts if s2.dp_kind == "unpack" else [s2.targets[0]]
                numeric.update(
                    t.id for t in targets if isinstance(t, ast.Name) and t.id not in builder.boxed
                )
            elif (
                s2.dp_kind == "copy"
                and not builder.nestable
                and builder.fast
                and s2.targets[0].id not in builder.boxed
            ):
                copies.add(s2.targets[0].id)  # (an inlined function's parameter, bound once)
            for n in self._rename_loads(s2):
                reads[n] = reads.get(n, 0) + 1
            if getattr(s2, "dp_unpack", False):
                for elt in s2.targets[0].elts:
                    name = elt.id
                    new = (
                        builder.namer.fresh(name.strip("_")[:12] + "_")
                        if (name in self.version or name in self.inputs)
                        else name
                    )
                    self.version[name] = new
                    self.origin[new] = name
                    elt.id = new
                    self.defined[new] = None
                    self.all_names.add(new)
                self.stmts.append(s2)
                continue
            if isinstance(s2, ast.Assign) and isinstance(s2.targets[0], ast.Name):
                name = s2.targets[0].id
                if name in builder.boxed:
                    self.stmts.append(s2)
                    continue
                if name in self.version or name in self.inputs:
                    new = builder.namer.fresh(name.strip("_")[:12] + "_")
                else:
                    new = name
                self.version[name] = new
                self.origin[new] = name
                s2.targets[0].id = new
                self.defined[new] = None
                self.all_names.add(new)
            elif isinstance(s2, ast.FunctionDef):
                self.version.pop(s2.name, None)
            self.stmts.append(s2)
        # values read only inside this segment (temps, and user variables read nowhere else,
        # not even by a closure) keep their adjoints in local variables
        for user, new in self.version.items():
            if user.startswith("_ret") or not (
                new in numeric
                or (user in builder.namer.generated and not builder.ir.scope.is_local(user))
                or (new in copies and builder.store_count.get(user) == 1)
            ):
                continue
            if builder.read_count.get(user, 0) == reads.get(new, 0) and user == new:
                self.local_temps.add(new)

    def _rename_loads(self, s: ast.stmt) -> list[str]:
        nodes: list[ast.AST] = []
        if isinstance(s, ast.Assign):
            nodes.append(s.value)
            t = s.targets[0]
            if not isinstance(t, ast.Name):
                nodes.append(t)
        elif isinstance(s, ast.Delete):
            nodes.extend(s.targets)
        elif isinstance(s, ast.FunctionDef):
            nodes.extend(getattr(s, "dp_defaults", []))
            nodes.extend(d for d in getattr(s, "dp_kw_defaults", []) if d is not None)
        seen: list[str] = []
        for root in nodes:
            for n in walk(root):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    if n.id in self.version:
                        n.id = self.version[n.id]
                        seen.append(n.id)
                    elif not n.id.startswith(syntax.PFX):
                        self.inputs.add(n.id)
                        self.all_names.add(n.id)
                        self.input_reads[n.id] = self.input_reads.get(n.id, 0) + 1
        return seen

    def leading_unpack_stmts(self) -> list[Core]:
        """The unpacks a fast segment starts with: run before its type guard, in both variants."""
        out = []
        for s in self.stmts:
            if getattr(s, "dp_kind", "") != "unpack":
                break
            out.append(s)
        return out

    def leading_unpacks(self) -> list[ast.stmt]:
        return [clone(s) for s in self.leading_unpack_stmts()]

    def copy_back(self) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for name, new in self.version.items():
            if new != name:
                out.append(assign(name, N(new)))
        return out

    def user_name(self, ssa_name: str) -> str:
        return self.origin.get(ssa_name, ssa_name)

    def is_final(self, ssa_name: str) -> bool:
        user = self.origin.get(ssa_name)
        return (
            user is not None
            and self.version.get(user) == ssa_name
            and ssa_name not in self.local_temps
        )


class _AdjointAccumulator:
    # (set by SegmentRules.general_segment: the displays stored into lists, by name)
    stored_displays: dict[str, tuple[int, str | None]]

    """Tracks, while writing a segment's reverse code, where each value's adjoint is.

    The adjoints of the values a segment leaves in its names are moved into locals at the
    start, so that contributions to the values those names held before go straight to the
    persistent adjoints.
    """

    def __init__(
        self, builder: FunctionBuilder, ssa: _SSA, out: list[ast.stmt] | None, fast: bool
    ) -> None:
        self.b = builder
        self.ssa = ssa
        self.out = out if out is not None else []
        self.fast = fast
        self.local: dict[str, str] = {}  # ssa name -> local adjoint variable
        # persistent adjoints known to be zero here and not yet added to
        self.fresh_zero: set[str] = {builder.adj(n) for n in builder.zero_on_entry(ssa)}
        self.added: set[str] = set()  # persistent adjoints this segment's reverse has added to
        self.compact = False  # a fallback variant: sensitivities added by calls, not inline
        for name in ssa.defined:
            if ssa.is_final(name):
                a = self.b.adj(ssa.user_name(name))
                tmp = self.b.namer.fresh("a")
                self.out.append(assign(tmp, N(a)))
                self.out.append(assign(a, N(self.b.Z)))
                self.local[name] = tmp
                self.fresh_zero.add(a)

    def take(self, ssa_name: str | None) -> ast.expr | None:
        """The adjoint of a value being defined here (consumed: the definition is reversed)."""
        if ssa_name is None:
            return None
        if ssa_name in self.local:
            return N(self.local.pop(ssa_name))
        if ssa_name in self.ssa.defined:
            return None  # never used: zero
        a = self.b.adj(ssa_name)
        tmp = self.b.namer.fresh("a")
        self.out.append(assign(tmp, N(a)))
        self.out.append(assign(a, N(self.b.Z)))
        return N(tmp)

    def add(self, ssa_name: str, contrib: ast.expr, any_type: bool = False) -> None:
        """Add a contribution to the adjoint of a number (fast path) or of an immutable value
        (``any_type``: of a value the fast path has not guarded as a number)."""
        if ssa_name in self.b.const_names:
            return
        fast = self.fast and not any_type
        op = (
            (lambda cur: ast.BinOp(left=N(cur), op=ast.Add(), right=contrib))
            if fast
            else (lambda cur: call(self.b.rt("add"), N(cur), contrib))
        )
        if ssa_name in self.ssa.defined:
            cur = self.local.get(ssa_name)
            if cur is None:
                v = self.b.namer.fresh("a")
                self.local[ssa_name] = v
                self.out.append(
                    assign(v, contrib if fast else call(self.b.rt("add"), N(self.b.Z), contrib))
                )
            else:
                self.out.append(assign(cur, op(cur)))
            return
        if ssa_name in self.b.boxed:
            self.out.append(
                ast.Expr(
                    call(
                        self.b.rt("accumulate_cell"),
                        N(syntax.ABOX),
                        N(self.b.key(ssa_name)),
                        C(None),
                        contrib,
                    )
                )
            )
            return
        a = self.b.adj(ssa_name)
        if a in self.fresh_zero:
            # the first contribution after the reset: no addition to gen_zero
            self.fresh_zero.discard(a)
            self.added.add(a)
            self.out.append(
                assign(a, contrib if fast else call(self.b.rt("add"), N(self.b.Z), contrib))
            )
            return
        if fast and a not in self.added:
            # the segment's first contribution: the adjoint may still be gen_zero (a loop's
            # variable, reset each iteration), whose + is a Python-level call; after this it
            # is a number
            self.added.add(a)
            is_zero = ast.Compare(left=N(a), ops=[ast.Is()], comparators=[N(self.b.Z)])
            self.out.append(assign(a, ast.IfExp(test=is_zero, body=contrib, orelse=op(a))))
            return
        self.out.append(assign(a, op(a)))

    def add_value(self, ssa_name: str, contrib: ast.expr, value_name: str | None = None) -> None:
        """Add a sensitivity of any type; mutable values hand it to Abox."""
        if ssa_name in self.b.const_names:
            return
        val = N(value_name or ssa_name)
        acc = self.b.rt("accumulate")
        if ssa_name in self.b.boxed:
            self.out.append(
                ast.Expr(
                    call(
                        self.b.rt("accumulate_cell"),
                        N(syntax.ABOX),
                        N(self.b.key(ssa_name)),
                        val,
                        contrib,
                    )
                )
            )
            return
        target, current = self._target(ssa_name)
        if self.b.fast and not isinstance(contrib, ast.Name):  # read twice below
            tmp = self.b.namer.fresh("s")
            self.out.append(assign(tmp, contrib))
            contrib = N(tmp)
        general: ast.expr = call(acc, N(current or self.b.Z), val, contrib, N(syntax.ABOX))
        if (
            not self.b.fast or self.compact
        ):  # differentiable-again code, general_paths_only(), a fallback
            self.out.append(assign(target, general))
            return
        # first-order code: a float's float sensitivity is added inline, not by a call
        flt = self.b.helper(float, "float")
        test = ast.BoolOp(
            op=ast.And(),
            values=[
                ast.Compare(
                    left=call(self.b.helper(type, "type"), clone(val)),
                    ops=[ast.Is()],
                    comparators=[flt],
                ),
                ast.Compare(
                    left=call(self.b.helper(type, "type"), clone(contrib)),
                    ops=[ast.Is()],
                    comparators=[clone(flt)],
                ),
            ],
        )
        inline = (
            clone(contrib)
            if current is None
            else ast.BinOp(left=N(current), op=ast.Add(), right=clone(contrib))
        )
        # a zero sensitivity changes nothing (a list's, handed to its entry already): no call
        unchanged = ast.Compare(left=clone(contrib), ops=[ast.Is()], comparators=[N(self.b.Z)])
        general = ast.IfExp(test=unchanged, body=N(current or self.b.Z), orelse=general)
        self.out.append(assign(target, ast.IfExp(test=test, body=inline, orelse=general)))

    def update(self, ssa_name: str, new: Callable[[ast.expr], ast.expr]) -> None:
        """``adjoint = new(adjoint)``: a runtime call folds a sensitivity into a value's adjoint."""
        target, current = self._target(ssa_name)
        self.out.append(assign(target, new(N(current or self.b.Z))))

    def _target(self, ssa_name: str) -> tuple[str, str | None]:
        """The variable that holds a value's adjoint, and its current name (None: zero)."""
        if ssa_name in self.ssa.defined:
            cur = self.local.get(ssa_name)
            if cur is None:
                return self.local.setdefault(ssa_name, self.b.namer.fresh("a")), None
            return cur, cur
        target = self.b.adj(ssa_name)
        current = None if target in self.fresh_zero else target
        self.fresh_zero.discard(target)
        return target, current

    def finish(self) -> None:
        self.local.clear()
