"""Which statements run together (segments) and the general path of a segment."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ...rules import InlineRule, inline_rule_for
from ..normalize.core import Core
from ..trees import walk
from . import syntax
from .attribute_segments import AttributeSegmentRules
from .ssa import _SSA, _AdjointAccumulator
from .syntax import (
    BINOPS,
    UNARYOPS,
    C,
    FastParts,
    N,
    _deletes_name,
    _is_atom,
    _is_name,
    _is_number_const,
    _locate_all,
    assign,
    tuple_,
    unpack,
)
from .templates import template_for

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class SegmentRules(AttributeSegmentRules):
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

    def guard_test(self, guard: ast.expr) -> tuple[list[ast.stmt], ast.expr]:
        """Statements to run first and the test choosing a segment's fast variant. The guard
        reads the segment's inputs before any of its statements runs: one that may be unbound
        here (assigned only on some paths) makes the guard fail, and the general variant runs
        the statements in order, raising where the program raises (a division by zero before
        the read of the unbound name)."""
        scope = self.ir.scope
        maybe_unbound = any(
            isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)  # (not a read's target: ``(v := xs[i])``)
            and n.id in scope.assigned
            and n.id not in self.bound_here
            and n.id not in self.boxed
            for n in walk(guard)
        )
        if not maybe_unbound:
            return [], guard
        ok = self.namer.fresh("fast")
        attempt = ast.Try(
            body=[assign(ok, guard)],
            handlers=[
                ast.ExceptHandler(
                    type=self.helper(NameError, "NameError"), name=None, body=[assign(ok, C(False))]
                )
            ],
            orelse=[],
            finalbody=[],
        )
        return [attempt], N(ok)

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
        """'inline', 'nondiff', 'copy', 'unpack', 'display', 'store', 'append', 'read' or
        'general' (the first-order container kinds: :meth:`container_kind`)."""
        if getattr(s, "dp_unpack", False):
            return "unpack"
        if self.fast and not self.in_try:
            k = self.container_kind(s)
            if k is not None:
                return k
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

    def container_kind(self, s: ast.stmt) -> str | None:
        """The kinds of first-order code that read or write containers in a fast segment.

        'display' and 'store' are ``L = [a, b]`` and ``xs[i] = L`` for a list displayed only
        to be stored: :meth:`segments` keeps them fast only in pairs. 'append' is a
        comprehension appending a value to its own result list (``_comp.append(x * y)``),
        which joins the fast segment computing the value. 'read' is ``v = xs[i]``
        (:meth:`is_element_read`; :meth:`segments` decides where it may join)."""
        if self.is_comprehension_append(s):
            return "append"
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            return None
        t, v = s.targets[0], s.value
        if isinstance(t, ast.Name) and t.id not in self.boxed:
            if (
                isinstance(v, ast.List)
                and self.read_count.get(t.id) == 1
                and all(isinstance(e, ast.Name) or _is_number_const(e) for e in v.elts)
            ):
                return "display"
            if self.is_element_read(v):
                return "read"
            if (
                isinstance(v, ast.Attribute)
                and self.is_plain_attribute(v)
                and isinstance(v.value, ast.Name)
                and v.value.id != t.id  # (not ``p = p.next``)
            ):
                return "attr_read"
        if self.is_plain_attribute(t) and isinstance(v, ast.Name) and v.id not in self.boxed:
            return "attr_write"
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
        return None

    def is_element_read(self, v: ast.expr) -> bool:
        """``xs[i]`` on a name with an index held in a name or an ``int`` literal: a fast
        segment may read it in its guard when ``xs`` is a list and ``i`` an ``int`` in range
        (first-order code; see :meth:`FastSegment.read_forward`)."""
        return (
            isinstance(v, ast.Subscript)
            and isinstance(v.value, ast.Name)
            and v.value.id not in self.boxed
            and (
                isinstance(v.slice, ast.Name)
                and v.slice.id not in self.boxed
                or isinstance(v.slice, ast.Constant)
                and type(v.slice.value) is int
            )
        )

    def read_joins(self, s: Core, cur: list[Core]) -> bool:
        """Whether the element read ``s`` may join the fast segment ``cur``: its guard reads
        the element before any statement of the segment runs, so every statement before it
        must be pure arithmetic on numbers (nothing that could change the list or raise
        first), and the list and the index must not be assigned there (leading unpacks run
        before the guard), except a list that is a row read just before (``data[i][0]``)."""
        assigned: set[str] = set()
        rows: set[str] = set()
        for x in cur:
            if x.dp_kind == "unpack":
                continue
            if not self.cannot_raise(x):
                return False
            if isinstance(x.targets[0], ast.Name):  # (not an attribute assigned)
                (rows if getattr(x, "dp_row", False) else assigned).add(x.targets[0].id)
        v = s.value
        return v.value.id not in assigned and not (
            isinstance(v.slice, ast.Name) and (v.slice.id in assigned or v.slice.id in rows)
        )

    def cannot_raise(self, x: Core) -> bool:
        """A statement of a fast segment that neither raises nor changes a list: a read, a
        copy, a constant, ``+``, ``-`` or ``*`` on numbers. An element read may follow only
        these in its segment, as its guard runs before them: were the list unbound there,
        the guard's error must be the one the program raises first."""
        k = x.dp_kind
        if k in ("read", "copy", "attr_read", "attr_write"):
            return True  # (an attribute of a class the guard found plain: no user code)
        v = x.value
        if k == "nondiff":
            return isinstance(v, ast.Constant)
        return k == "inline" and (
            isinstance(v, ast.BinOp)
            and type(v.op) in (ast.Add, ast.Sub, ast.Mult)
            or isinstance(v, ast.UnaryOp)
            and type(v.op) in (ast.USub, ast.UAdd)
        )

    def is_row(self, s: Core, run: list[Core], position: int, kinds: list[str]) -> bool:
        """``row = data[i]`` read only by the element read right after it (``row[j]``) and
        by stores into its elements (``row[j] = v``, an augmented assignment): the guard may
        read it too, testing it is a list or tuple instead of a number."""
        target = s.targets[0].id
        if position + 1 >= len(run) or kinds[position + 1] != "read":
            return False
        v = run[position + 1].value
        stores = sum(
            1
            for st, k in zip(run[position + 2 :], kinds[position + 2 :])
            if k in ("store", "write")
            and _is_name(st.targets[0].value, target)
            and not _is_name(st.targets[0].slice, target)
            and not _is_name(st.value, target)
        )
        return (
            v.value.id == target
            and self.read_count.get(target) == 1 + stores
            and not _is_name(v.slice, target)
        )

    def write_joins(self, s: Core, cur: list[Core]) -> bool:
        """Whether ``xs[i] = v`` may join the fast segment ``cur``: ``v`` a number the segment
        computed or read; the list and the index are tested by the guard, so neither may be
        assigned in the segment before it (but a row read there, ``pos[i][0] += ...``)."""
        t = s.targets[0]
        if t.value.id in self.boxed or isinstance(t.slice, ast.Name) and t.slice.id in self.boxed:
            return False
        assigned = {
            x.targets[0].id
            for x in cur
            if x.dp_kind != "unpack"
            and isinstance(x.targets[0], ast.Name)
            and not getattr(x, "dp_row", False)
        }
        rows = {x.targets[0].id for x in cur if getattr(x, "dp_row", False)}
        if s.value.id not in self.numbers_of(cur):
            return False  # (a value from elsewhere may be no number: the guard would fail)
        # the guard tests the list and the index before the segment runs: names a read
        # before it in the segment reads too (where the program would fail first, were one
        # unbound), or nothing before it may raise
        read_here = {x.value.value.id for x in cur if x.dp_kind == "read"} | {
            x.value.slice.id
            for x in cur
            if x.dp_kind == "read" and isinstance(x.value.slice, ast.Name)
        }
        tested = [t.value.id] + ([t.slice.id] if isinstance(t.slice, ast.Name) else [])
        if not all(n in read_here or n in rows for n in tested) and not all(
            x.dp_kind == "unpack" or self.cannot_raise(x) for x in cur
        ):
            return False
        return not (
            t.value.id in assigned
            or isinstance(t.slice, ast.Name)
            and (t.slice.id in assigned or t.slice.id in rows)
        )

    def container_names(self, run: list[Core], kinds: list[str]) -> set[str]:
        """Names subscripted or whose attributes are read: containers, not numbers (what a
        segment with element or attribute reads needs to know)."""
        if "read" not in kinds and "attr_read" not in kinds:
            return set()
        return {
            n.value.id
            for st in run
            for n in walk(st)
            if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name)
        }

    def joining_kind(
        self,
        s: Core,
        k: str,
        cur: list[Core] | None,
        containers: set[str],
        as_numbers: set[str],
    ) -> str:
        """``k`` ('write', 'attr_read' or 'attr_write') when ``s`` joins the fast segment
        ``cur`` (None: the segment before is not fast), else 'general'. An attribute read
        opens a segment of its own when it may; a write stores a number the segment made,
        so never does."""
        if k == "write":
            return k if cur is not None and self.write_joins(s, cur) else "general"
        if k == "attr_read":
            target = s.targets[0].id
            if target in containers or target not in as_numbers:
                return "general"
            return k if cur is None or self.attribute_read_joins(s, cur) else "general"
        if cur is not None and self.attribute_write_joins(s, cur, self.numbers_of(cur)):
            return k
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
        # a store of something else may still join as a number written into a list
        kinds = [
            (("write" if k == "store" else "general") if k in ("display", "store") else k)
            if i not in paired
            else k
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
        containers = self.container_names(run, kinds)
        as_numbers = self.used_as_numbers(run, kinds, last_read)
        for position, (s, k) in enumerate(zip(run, kinds)):
            if k == "read":
                # a read whose value is subscripted or has attributes read is no number: it
                # stays general, unless it is a row read by the element read after it
                row = self.is_row(s, run, position, kinds)
                if s.targets[0].id in containers and not row:
                    k = "general"
                elif cur_fast and not self.read_joins(s, cur):
                    k = "general"
                # (a read opening a segment leads it: nothing runs before its guard)
                s.dp_row = row and k == "read"
            if k in ("write", "attr_read", "attr_write"):
                k = self.joining_kind(s, k, cur if cur_fast else None, containers, as_numbers)
            s.dp_kind = k
            if self.in_try:
                segs.append([s])
                continue
            fastish = k in (
                "inline",
                "nondiff",
                "copy",
                "unpack",
                "display",
                "store",
                "append",
                "read",
                "write",
                "attr_read",
                "attr_write",
            )
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
        replay = None
        if fast is None:
            gen_fwd, gen_rec, gen_rev = self.general_segment(ssa, compact=compact)
        elif not self.defer_general:
            # (named apart: a build that leaves it out names everything else the same)
            with self.namer.apart():
                replay = self.replay_plan(ssa)
                if replay is not None:
                    gen_fwd, gen_rec, gen_rev = replay
                else:
                    gen_fwd, gen_rec, gen_rev = self.general_segment(ssa, compact=compact)
        else:  # only the fast variant: the fused gradient's build (transformer.fused_first)
            gen_fwd, gen_rec, gen_rev = [], [], []
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
                list(ssa.defined) + ssa.fast_only,
                list(numbers),
                checks,
                self.numbers_kept(ssa, numbers),
                # (a read's reverse writes into Abox too, and its guard reads per iteration)
                any(
                    st.dp_kind in ("store", "append", "read", "write", "attr_read", "attr_write")
                    for st in ssa.stmts
                ),
            )
        )
        gen_fwd = gen_fwd[
            len(ssa.leading_unpack_stmts()) :
        ]  # each unpack's forward is one statement
        rec = self.namer.fresh("rec")
        fwd_fast = fast_fwd + [self.push(tuple_([C(True)] + [N(x) for x in fast_rec]), rec)]
        fwd_gen = gen_fwd + [self.push(tuple_([C(False)] + [N(x) for x in gen_rec]), rec)]
        test_first, test = self.guard_test(guard)
        fwd = (
            ssa.leading_unpacks()
            + test_first
            + [ast.If(test=test, body=fwd_fast, orelse=fwd_gen)]
            + ssa.copy_back()
        )
        with self.namer.apart():
            gen_reverse = (
                self.replay_reverse(replay, rec)
                if replay is not None
                else [unpack(["_"] + gen_rec, N(rec))] + (gen_rev or [ast.Pass()])
            )
        rev = ([] if self.straight else self.pop_into([rec], whole=True)) + [
            ast.If(
                test=ast.Subscript(value=N(rec), slice=C(0), ctx=ast.Load()),
                body=[unpack(["_"] + fast_rec, N(rec))] + (fast_rev or [ast.Pass()]),
                orelse=gen_reverse,
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
            plans.append((s, rev_fn))
        for s, rev_fn in reversed(plans):
            start = len(rev)
            rev_fn(acc)
            # its reverse too: a refusal raised there names the statement's line, not the
            # segment's first (the segment takes several statements)
            _locate_all(rev[start:], s)
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
