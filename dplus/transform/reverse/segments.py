"""Which statements run together (segments) and the general path of a segment."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ...rules import InlineRule, inline_rule_for
from ..normalize.core import Core
from ..trees import walk
from . import syntax
from .ssa import _SSA, _AdjointAccumulator
from .syntax import (
    BINOPS,
    UNARYOPS,
    C,
    FastParts,
    N,
    _deletes_name,
    _is_atom,
    _is_number_const,
    _locate_all,
    tuple_,
    unpack,
)
from .templates import template_for

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class SegmentRules(Builder):
    """Methods of :class:`FunctionBuilder`: which statements run together (segments) and the general path of a segment."""

    # ---------------------------------------------------------------- classification
    def inline_rule(self, value: ast.expr) -> tuple[InlineRule | None, Any]:
        """(rule, callee) when ``value`` may run on the float fast path."""
        if (
            isinstance(value, ast.BinOp)
            and not getattr(value, "dp_inplace", False)
            or (
                isinstance(value, ast.BinOp)
                and type(value.op)
                in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
            )
        ):
            fn = BINOPS.get(type(value.op))
            if fn is None:
                return None, None
            if not all(
                _is_atom(x) and (isinstance(x, ast.Name) or _is_number_const(x))
                for x in (value.left, value.right)
            ):
                return None, None
            return inline_rule_for(fn), None
        if isinstance(value, ast.UnaryOp) and type(value.op) in (ast.USub, ast.UAdd):
            if isinstance(value.operand, ast.Name) or _is_number_const(value.operand):
                return inline_rule_for(UNARYOPS[type(value.op)]), None
            return None, None
        if (
            isinstance(value, ast.Call)
            and not value.keywords
            and all(isinstance(a, ast.Name) or _is_number_const(a) for a in value.args)
        ):
            fn = self.resolve_static(value.func)
            if fn is None:
                return None, None
            rule = inline_rule_for(fn)
            if rule is not None and rule.arity == len(value.args):
                return rule, fn
        return None, None

    def resolve_static(self, func: ast.expr) -> Any:
        """The object a global dotted name refers to now (for choosing an inline rule)."""
        if not self.is_static_chain(func):
            return None
        parts = []
        node: Core = func
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        import builtins

        if node.id in self.globals:
            obj = self.globals[node.id]
        elif hasattr(builtins, node.id):
            obj = getattr(builtins, node.id)
        else:
            return None
        for p in reversed(parts):
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj

    def is_static_chain(self, func: ast.expr) -> bool:
        node = func
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        scope = self.ir.scope
        return not (
            scope.is_local(node.id)
            or node.id in scope.params
            or node.id in scope.free
            or node.id in self.namer.generated
            or node.id.startswith(syntax.PFX)
        )

    def on_constants_only(self, v: ast.Call) -> bool:
        """A call of a module-level callee whose arguments are all literals or module-level
        names (see ``runtime.calls.call_on_constants``)."""
        if not self.is_static_chain(v.func) or self.nestable and v.keywords:
            return False
        operands = list(v.args) + [k.value for k in v.keywords]
        return all(
            isinstance(a, ast.Constant) or isinstance(a, ast.Name) and self.is_module_constant(a.id)
            for a in operands
        ) and not any(isinstance(a, ast.Starred) for a in v.args)

    def is_module_constant(self, name: str) -> bool:
        """``name`` is read from the module (or builtins) and never bound in this function:
        the backprop returns no sensitivity for it (closure sensitivities are for enclosing
        functions' variables only), so a number's adjoint need not be computed."""
        scope = self.ir.scope
        if name in self.const_names:
            return True
        return not (
            name in scope.assigned
            or name in scope.params
            or name in scope.free
            or name in self.boxed
            or name in self.namer.generated
            or name.startswith(syntax.PFX)
        )

    def kind(self, s: ast.stmt) -> str:
        """'inline', 'nondiff', 'copy', 'unpack', 'display', 'store', 'append' or 'general'.

        'display' and 'store' (first-order code) are ``L = [a, b]`` and ``xs[i] = L`` for a
        list displayed only to be stored: :meth:`segments` keeps them fast only in pairs.
        'append' (first-order code) is a comprehension appending a value to its own result
        list (``_comp.append(x * y)``), which joins the fast segment computing the value."""
        if getattr(s, "dp_unpack", False):
            return "unpack"
        if self.fast and not self.in_try and self.is_comprehension_append(s):
            return "append"
        if self.fast and not self.in_try and isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            if (
                isinstance(t, ast.Name)
                and isinstance(v, ast.List)
                and t.id not in self.boxed
                and self.read_count.get(t.id) == 1
                and all(isinstance(e, ast.Name) or _is_number_const(e) for e in v.elts)
            ):
                return "display"
            if (
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and isinstance(v, ast.Name)
                and (
                    isinstance(t.slice, ast.Name)
                    or isinstance(t.slice, ast.Constant)
                    and type(t.slice.value) is int
                )
            ):
                return "store"
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            target = s.targets[0].id
            v = s.value
            if target in self.boxed:
                return "general"
            if isinstance(v, ast.Constant):
                return "nondiff"
            if isinstance(v, ast.Name):
                if v.id in self.const_names:
                    return "nondiff"
                return "general" if v.id in self.boxed else "copy"
            if isinstance(v, (ast.Compare, ast.JoinedStr)) or (
                isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
            ):
                return "nondiff"
            if (
                isinstance(v, ast.Call)
                and getattr(v, "dp_builtin", False)
                or self.builds_builtin_exception(s)
            ):
                return "nondiff"
            if self.fast and not self.in_try:
                rule, _ = self.inline_rule(v)
                if rule is not None and all(
                    template_for(g, self.h) is not None for g in rule.grads if g is not None
                ):
                    return "inline"
        return "general"

    def segments(self, run: list[Core]) -> list[list[Core]]:
        segs: list[list[Core]] = []
        cur: list[Core] = []
        cur_fast = False
        kinds = [self.kind(s) for s in run]
        # a display and the store of it stay fast together, or neither does
        displays = {
            s.targets[0].id: i for i, (s, k) in enumerate(zip(run, kinds)) if k == "display"
        }
        paired: set[int] = set()
        for j, (s, k) in enumerate(zip(run, kinds)):
            if k == "store" and displays.get(s.value.id, j) < j:
                paired.update((displays[s.value.id], j))
        kinds = [
            ("general" if k in ("display", "store") and i not in paired else k)
            for i, k in enumerate(kinds)
        ]
        # where each name is last read by arithmetic (a copy or a return takes a complex as it is)
        last_read = {
            n.id: i
            for i, (st, k) in enumerate(zip(run, kinds))
            if k == "inline"
            for n in walk(st.value)
            if isinstance(n, ast.Name)
        }
        for position, (s, k) in enumerate(zip(run, kinds)):
            s.dp_kind = k
            if self.in_try:
                segs.append([s])
                continue
            fastish = k in ("inline", "nondiff", "copy", "unpack", "display", "store", "append")
            # an unpack leads its segment: its targets are type-guarded after it runs
            leads = k == "unpack" and any(getattr(x, "dp_kind", "") != "unpack" for x in cur)
            if cur and (fastish != cur_fast or leads or _deletes_name(s)):
                segs.append(cur)
                cur = []
            cur_fast = fastish
            cur.append(s)
            if (
                k == "inline"
                and self.may_be_complex(s)
                and last_read.get(s.targets[0].id, -1) > position
            ):
                # a real power that may be complex ends its segment: the fast variant's
                # templates assume real numbers, so arithmetic on it tests its type first
                segs.append(cur)
                cur = []
        if cur:
            segs.append(cur)
        if self.in_try or self.nestable:
            # (merged in differentiable-again code, the fourth derivative of sin failed to add
            # a tuple and a float: not understood yet, so that code keeps its segments)
            return segs
        # runs with no inline operation take the general way whatever their kind: neighbours
        # of that sort become one segment, one record (a read, an unpack, a copy, a store)
        merged: list[list[ast.stmt]] = []
        last_general = False
        for seg in segs:
            general = not any(s.dp_kind == "inline" for s in seg)
            if merged and general and last_general and not _deletes_name(seg[0]):
                merged[-1].extend(seg)
            else:
                merged.append(seg)
            last_general = general
        return merged

    # ---------------------------------------------------------------- segments
    def segment(self, seg: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
        ssa = _SSA(self, seg)
        has_inline = any(getattr(s, "dp_kind", "") == "inline" for s in seg)
        # (the general variant of a segment with a fast one runs only when its guard fails:
        # written compactly, its reverse a replayed program or calls where a float's
        # sensitivity would be added inline)
        compact = has_inline and self.fast
        # None also when an operand's type cannot be guarded before the segment runs
        fast = self.fast_segment(ssa) if compact else None
        replay = self.replay_plan(ssa) if fast is not None else None
        if replay is not None:
            gen_fwd, gen_rec, gen_rev = replay
        else:
            gen_fwd, gen_rec, gen_rev = self.general_segment(ssa, compact=compact)
        if fast is None:
            self.segment_log.append(None)
            slot = self.namer.fresh("rec")
            fwd = (
                gen_fwd
                + ([self.push(tuple_([N(x) for x in gen_rec]), slot)] if gen_rec else [])
                + ssa.copy_back()
            )
            rev = (self.pop_into(gen_rec, slot=slot) if gen_rec else []) + gen_rev
            _locate_all(fwd, seg[0])
            _locate_all(rev, seg[0])
            return fwd, rev
        fast_fwd, fast_rec, fast_rev, guard, numbers, checks = fast
        # (the statements themselves, shared with the code emitted below: a loop that uses
        # them clones them)
        self.segment_log.append(
            FastParts(
                ssa.leading_unpacks(),
                guard,
                fast_fwd,
                list(fast_rec),
                fast_rev,
                ssa.copy_back(),
                list(ssa.defined),
                list(numbers),
                checks,
                self.numbers_kept(ssa, numbers),
                any(st.dp_kind in ("store", "append") for st in ssa.stmts),
            )
        )
        gen_fwd = gen_fwd[
            len(ssa.leading_unpack_stmts()) :
        ]  # each unpack's forward is one statement
        rec = self.namer.fresh("rec")
        fwd_fast = fast_fwd + [self.push(tuple_([C(True)] + [N(x) for x in fast_rec]), rec)]
        fwd_gen = gen_fwd + [self.push(tuple_([C(False)] + [N(x) for x in gen_rec]), rec)]
        fwd = (
            ssa.leading_unpacks()
            + [ast.If(test=guard, body=fwd_fast, orelse=fwd_gen)]
            + ssa.copy_back()
        )
        rev = ([] if self.straight else self.pop_into([rec], whole=True)) + [
            ast.If(
                test=ast.Subscript(value=N(rec), slice=C(0), ctx=ast.Load()),
                body=[unpack(["_"] + fast_rec, N(rec))] + (fast_rev or [ast.Pass()]),
                orelse=(
                    self.replay_reverse(replay, rec)
                    if replay is not None
                    else [unpack(["_"] + gen_rec, N(rec))] + (gen_rev or [ast.Pass()])
                ),
            ),
        ]
        _locate_all(fwd, seg[0])
        _locate_all(rev, seg[0])
        return fwd, rev

    def general_segment(
        self, ssa: _SSA, compact: bool = False
    ) -> tuple[list[ast.stmt], list[str], list[ast.stmt]]:
        fwd: list[ast.stmt] = []
        rec: list[str] = []
        rev: list[ast.stmt] = []
        acc = _AdjointAccumulator(self, ssa, rev, fast=False)
        acc.compact = compact
        acc.stored_displays = self.stored_displays(ssa)
        recorded: set[str] = set()
        plans = []
        for s in ssa.stmts:
            f, r_names, rev_fn = self.general_stmt(s, ssa)
            _locate_all(f, s)  # tracebacks point at the statement's own line
            fwd.extend(f)
            for n in r_names:
                if n not in recorded:
                    recorded.add(n)
                    rec.append(n)
            plans.append(rev_fn)
        for rev_fn in reversed(plans):
            rev_fn(acc)
        acc.finish()
        return fwd, rec, rev

    def stored_displays(self, ssa: _SSA) -> dict[str, tuple[int, str | None]]:
        """The lists displayed in this segment whose only use is to be stored into a list
        here (``L = [a, b]; xs[i] = L``): the store's reverse takes the display's element
        sensitivities in the same call (``store_display_back``). Maps each to the name of its
        parts, set when the store's reverse is written (first-order code only)."""
        if self.nestable or not self.fast:
            return {}
        displayed = {
            st.targets[0].id: len(st.value.elts)
            for st in ssa.stmts
            if isinstance(st, ast.Assign)
            and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.List)
            and not any(isinstance(e, ast.Starred) for e in st.value.elts)
        }
        out: dict[str, tuple[int, str | None]] = {}
        for st in ssa.stmts:
            if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Subscript)):
                continue
            t, v = st.targets[0], st.value
            if (
                isinstance(v, ast.Name)
                and v.id in displayed
                and isinstance(t.value, ast.Name)
                and not isinstance(t.slice, ast.Slice)
                and v.id not in self.boxed
                and ssa.user_name(v.id) == v.id
                and self.read_count.get(v.id) == 1
            ):
                out[v.id] = (displayed[v.id], None)
        return out
