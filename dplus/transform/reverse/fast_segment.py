"""Specialisation: one float fast segment, built statement by statement.

The forward runs the segment's statements with plain Python operators under a type guard;
the reverse is straight-line code built from the inline rules' lambda bodies. Each kind of
statement a fast segment holds (``SegmentRules.kind``) has one method for its forward and one
for its reverse, in the tables at the end of :class:`FastSegment`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ...rules import InlineRule
from ..normalize.core import Core
from ..peephole import simplify_reverse
from ..trees import clone
from . import syntax
from .builder_type import FastSegmentParts
from .ssa import _SSA, _AdjointAccumulator
from .syntax import _NUM_TYPES, C, N, S, _names_read, assign, attr, call, unpack
from .templates import _whole_power_gradient, template_for

if TYPE_CHECKING:
    from .builder_type import Builder

_INDEXED_TYPES = frozenset({list, tuple})  # what a fast segment reads an element of


class FastSegment:
    """The fast variant of one segment being built: its forward, the values its reverse
    reads (``saved``), the tests of its guard, and its reverse."""

    def __init__(self, builder: Builder, ssa: _SSA) -> None:
        self.b = builder
        self.ssa = ssa
        self.fwd: list[ast.stmt] = []
        self.saved: list[str] = []
        self.saved_set: set[str] = set()  # (saved, searched once per operand read)
        self.guards: list[ast.expr] = []
        self.guarded_inputs: set[str] = set()
        self.number_guarded: list[str] = []  # names whose values must be numbers, in order
        self.ops: list[tuple[Core, InlineRule | None]] = []
        # where each name defined here got its value: a name to type-guard, None for a number
        # an inline operation or a non-differentiable statement made, or "" when no guard can
        # see it (a later unpack's target)
        self.source: dict[str, str | None] = {}
        self.hoisted = ssa.leading_unpack_stmts()
        # the accumulator is made first: the forward needs to know which adjoints start at zero
        self.rev: list[ast.stmt] = []
        self.acc = _AdjointAccumulator(builder, ssa, self.rev, fast=True)
        # a displayed list -> its elements' sensitivities (names)
        self.stored: dict[str, list[str]] = {}
        self.displayed: dict[str, Core] = {}
        # names the forward makes that the SSA does not know (recorded per iteration in a loop)
        self.fresh_saved: list[str] = []
        self.rows: set[str] = set()  # row reads' targets (lists or tuples the guard read)
        # attributes: per object name, the names read and assigned here (its class is tested
        # once, before the first read); the first read of each (object, name); and the
        # reverse's parts, the reads' sensitivities and the assignments' taken back
        self.attributes: dict[str, tuple[list[str], list[str]]] = {}
        for st in ssa.stmts:
            if st.dp_kind == "attr_read":
                read, _ = self.attributes.setdefault(st.value.value.id, ([], []))
                if st.value.attr not in read:
                    read.append(st.value.attr)
            elif st.dp_kind == "attr_write":
                _, written = self.attributes.setdefault(st.targets[0].value.id, ([], []))
                if st.targets[0].attr not in written:
                    written.append(st.targets[0].attr)
        self.classes_tested: set[str] = set()
        self.first_read: dict[tuple[str, str], str] = {}
        self.read_back: dict[str, list[tuple[str, ast.expr]]] = {}
        self.written_back: dict[str, list[tuple[str, str]]] = {}

    def build(self) -> FastSegmentParts | None:
        """The segment's fast variant, or None when one of its statements cannot take it."""
        for s in self.ssa.stmts:
            if not self.FORWARD.get(s.dp_kind, FastSegment.assignment_forward)(self, s):
                return None
        if set(self.displayed) != set(self.stored):
            return None
        self.attributes_written_back()
        for s, rule in reversed(self.ops):
            self.REVERSE.get(s.dp_kind, FastSegment.assignment_reverse)(self, s, rule)
        self.attributes_read_back()
        self.acc.finish()
        self.simplify()
        self.ssa.fast_only = self.fresh_saved
        return self.fwd, self.saved, self.rev, *self.guard()

    def save(self, name: str) -> None:
        if name not in self.saved_set:
            self.saved_set.add(name)
            self.saved.append(name)

    def must_be_numbers(self, exprs: list[ast.expr]) -> bool:
        """Guard the names among ``exprs`` as numbers where they come from outside the
        segment (through copies); False when one's value no guard can see."""
        for e in exprs:
            if isinstance(e, ast.Name):
                g = (
                    self.source.get(e.id, e.id)
                    if e.id in self.source
                    else (e.id if e.id in self.ssa.inputs else None)
                )
                if g == "":
                    return False
                if g is not None and g not in self.guarded_inputs:
                    self.guarded_inputs.add(g)
                    self.number_guarded.append(g)
        return True

    # -- the forward, by kind of statement: False when the segment cannot be fast

    def unpack_forward(self, s: Any) -> bool:
        if s not in self.hoisted:
            self.fwd.append(clone(s))
        for e in s.targets[0].elts:
            self.source[e.id] = e.id if s in self.hoisted else ""
        if s.value.id not in self.saved_set and not self.b.direct_unpack(
            s.value.id, self.acc.fresh_zero
        ):
            self.save(s.value.id)
        self.ops.append((s, None))
        return True

    def display_forward(self, s: Any) -> bool:
        """A list of numbers, stored below: its elements are guarded like operands."""
        target = s.targets[0].id
        if target not in self.ssa.local_temps or not self.must_be_numbers(s.value.elts):
            return False
        self.source[target] = ""
        self.displayed[target] = s
        self.fwd.append(ast.copy_location(assign(target, clone(s.value)), s))
        self.ops.append((s, None))
        return True

    def store_forward(self, s: Any) -> bool:
        """``xs[i] = L`` on a list with an int index, both unchanged since the guard."""
        b, ssa = self.b, self.ssa
        t, L = s.targets[0], s.value.id
        obj, idx = t.value.id, t.slice
        before_guard = {e.id for u in self.hoisted for e in u.targets[0].elts}  # (leading unpacks)
        if (
            L not in self.displayed
            or L in self.stored
            or (obj in ssa.defined and obj not in before_guard)
            or (isinstance(idx, ast.Name) and idx.id in ssa.defined and idx.id not in before_guard)
        ):
            return False
        w = b.namer.fresh("write")
        position = self.write_position(obj, idx)
        self.fwd += [
            ast.copy_location(ast.Assign(targets=[clone(t)], value=N(L)), s),
            ast.copy_location(assign(w, position), s),
        ]
        for x in (obj, w, L):
            self.save(x)
        self.stored[L] = [b.namer.fresh("s") for _ in self.displayed[L].value.elts]
        s.dp_write = w
        self.ops.append((s, None))
        return True

    def write_position(self, obj: str, idx: ast.expr) -> ast.expr:
        """The guard's tests that ``obj`` is a list and a name index an ``int``, and the
        position ``obj[idx] = ...`` writes (a negative index counted from the end)."""
        b = self.b
        typ = b.helper(type, "type")
        self.guards.append(
            ast.Compare(
                left=call(typ, N(obj)), ops=[ast.Is()], comparators=[b.helper(list, "list")]
            )
        )
        if isinstance(idx, ast.Name):
            self.guards.append(
                ast.Compare(
                    left=call(clone(typ), N(idx.id)),
                    ops=[ast.Is()],
                    comparators=[b.helper(int, "int")],
                )
            )
        return ast.IfExp(
            test=ast.Compare(left=clone(idx), ops=[ast.GtE()], comparators=[C(0)]),
            body=clone(idx),
            orelse=ast.BinOp(
                left=clone(idx), op=ast.Add(), right=call(b.helper(len, "len"), N(obj))
            ),
        )

    def read_forward(self, s: Any) -> bool:
        """``v = xs[i]`` read in the guard, after tests that make it a pure read of a number:
        ``xs`` a list or tuple, ``i`` an ``int`` in range, the element a number (``SegmentRules.
        read_joins`` put it where nothing in the segment runs before it). A row read just
        for the element read after it (``data[i][0]``) tests its element is a list or tuple.
        Out of range, the general variant raises the IndexError where the program would."""
        b = self.b
        target, obj, idx = s.targets[0].id, s.value.value.id, s.value.slice
        before_guard = {e.id for u in self.hoisted for e in u.targets[0].elts}
        if any(
            n in self.ssa.defined and n not in before_guard and n not in self.rows
            for n in [obj] + ([idx.id] if isinstance(idx, ast.Name) else [])
        ) or (isinstance(idx, ast.Name) and idx.id in self.rows):
            return False
        typ = b.helper(type, "type")
        indexed = b.helper(_INDEXED_TYPES, "INDEXED")
        if obj not in self.rows:  # (a row's type is tested where it is read)
            self.guards.append(
                ast.Compare(left=call(typ, N(obj)), ops=[ast.In()], comparators=[indexed])
            )
        if isinstance(idx, ast.Name):
            self.guards.append(
                ast.Compare(
                    left=call(clone(typ), N(idx.id)),
                    ops=[ast.Is()],
                    comparators=[b.helper(int, "int")],
                )
            )
        n = b.namer.fresh("len")
        length = ast.NamedExpr(target=S(n), value=call(b.helper(len, "len"), N(obj)))
        element = ast.NamedExpr(
            target=S(target), value=ast.Subscript(value=N(obj), slice=clone(idx), ctx=ast.Load())
        )
        row = getattr(s, "dp_row", False)
        self.guards += [
            ast.Compare(
                left=ast.UnaryOp(op=ast.USub(), operand=length),
                ops=[ast.LtE(), ast.Lt()],
                comparators=[clone(idx), N(n)],
            ),
            ast.Compare(
                left=call(clone(typ), element),
                ops=[ast.In()],
                comparators=[clone(indexed) if row else b.helper(_NUM_TYPES, "NUM")],
            ),
        ]
        if row:
            self.rows.add(target)
            self.source[target] = ""  # (no number: only the element read after it reads it)
            self.save(target)
        else:
            self.source[target] = None
        for x in [obj, n] + ([idx.id] if isinstance(idx, ast.Name) else []):
            self.save(x)
        self.fresh_saved.append(n)
        s.dp_length = n
        self.ops.append((s, None))
        return True

    def write_forward(self, s: Any) -> bool:
        """``xs[i] = v``, ``v`` a number: ``xs`` a list and ``i`` an ``int`` (the guard
        tests them: unchanged since, or a row this guard read); stored where the program
        stores it, so an index out of range raises there."""
        b, t, v = self.b, s.targets[0], s.value
        obj, idx = t.value.id, t.slice
        before_guard = {e.id for u in self.hoisted for e in u.targets[0].elts}
        if (
            v.id in self.displayed
            or any(
                n in self.ssa.defined and n not in before_guard and n not in self.rows
                for n in [obj] + ([idx.id] if isinstance(idx, ast.Name) else [])
            )
            or isinstance(idx, ast.Name)
            and idx.id in self.rows
            or not self.must_be_numbers([v])
        ):
            return False
        w = b.namer.fresh("write")
        position = self.write_position(obj, idx)
        if isinstance(idx, ast.Constant) and type(idx.value) is int and idx.value >= 0:
            position = C(idx.value)
        self.fwd += [
            ast.copy_location(ast.Assign(targets=[clone(t)], value=N(v.id)), s),
            ast.copy_location(assign(w, position), s),
        ]
        self.save(obj)
        self.save(w)
        self.fresh_saved.append(w)
        s.dp_write = w
        self.ops.append((s, None))
        return True

    def append_forward(self, s: Any) -> bool:
        """A number appended to the comprehension's own list (a list from its start)."""
        comp, _, item = s.value.args
        if comp.id in self.ssa.defined or not self.must_be_numbers([item]):
            return False
        self.fwd += [
            ast.copy_location(ast.Expr(call(attr(comp.id, "append"), clone(item))), s),
            ast.copy_location(assign(s.targets[0].id, C(None)), s),
        ]
        self.save(comp.id)
        self.source[s.targets[0].id] = None
        self.ops.append((s, None))
        return True

    def class_tested(self, obj: str) -> None:
        """The guard's test that ``obj``'s class is plain for the attributes the segment
        reads and assigns of it (``PLAIN_ATTRIBUTES``), before its first read of one."""
        if obj in self.classes_tested:
            return
        self.classes_tested.add(obj)
        read, written = self.attributes[obj]
        key = ast.Tuple(
            elts=[call(self.b.helper(type, "type"), N(obj)), C(tuple(read)), C(tuple(written))],
            ctx=ast.Load(),
        )
        self.guards.append(
            ast.Subscript(value=self.b.rt("PLAIN_ATTRIBUTES"), slice=key, ctx=ast.Load())
        )
        self.save(obj)

    def attribute_read_forward(self, s: Any) -> bool:
        """``v = obj.name`` read in the guard, once the class is found plain for it:
        ``getattr(obj, name, None)`` is then what the instance holds (or None), with no user
        code run; the guard tests it is a number. ``SegmentRules.attribute_read_joins`` put it
        where nothing in the segment before it could change it. A second read of the same
        attribute is a copy of the first."""
        target, obj, name = s.targets[0].id, s.value.value.id, s.value.attr
        before_guard = {e.id for u in self.hoisted for e in u.targets[0].elts}
        if obj in self.ssa.defined and obj not in before_guard:
            return False
        self.source[target] = None
        first = self.first_read.get((obj, name))
        if first is not None:
            self.fwd.append(ast.copy_location(assign(target, N(first)), s))
            s.dp_first = first
            self.ops.append((s, None))
            return True
        self.first_read[(obj, name)] = target
        self.class_tested(obj)
        read = call(self.b.helper(getattr, "getattr"), N(obj), C(name), C(None))
        self.guards.append(
            ast.Compare(
                left=call(self.b.helper(type, "type"), ast.NamedExpr(target=S(target), value=read)),
                ops=[ast.In()],
                comparators=[self.b.helper(_NUM_TYPES, "NUM")],
            )
        )
        s.dp_first = None
        self.ops.append((s, None))
        return True

    def attribute_write_forward(self, s: Any) -> bool:
        """``obj.name = v``, ``v`` a number, assigned where the program assigns it: the guard
        found ``obj``'s class plain for it, so that stores ``v`` in the instance, running no
        user code."""
        t, v = s.targets[0], s.value
        before_guard = {e.id for u in self.hoisted for e in u.targets[0].elts}
        if (
            t.value.id in self.ssa.defined
            and t.value.id not in before_guard
            or v.id in self.displayed
            or not self.must_be_numbers([v])
        ):
            return False
        self.class_tested(t.value.id)
        self.fwd.append(ast.copy_location(ast.Assign(targets=[clone(t)], value=N(v.id)), s))
        self.ops.append((s, None))
        return True

    def assignment_forward(self, s: Any) -> bool:
        """``target = value`` of the kinds copy, nondiff, inline (and the others)."""
        k = s.dp_kind
        target = s.targets[0].id
        v = s.value
        if k == "copy":
            self.source[target] = self.source.get(v.id, v.id) if v.id in self.source else v.id
        elif k != "nondiff" or not isinstance(v, ast.Name):
            self.source[target] = None
        if k != "inline":
            self.fwd.append(ast.copy_location(assign(target, clone(v)), s))
            self.ops.append((s, None))
            return True
        rule, fn = self.b.inline_rule(v)
        if not self.must_be_numbers(self.b.operands(v)):
            return False
        if fn is not None:
            fname = self.b.helper(fn, getattr(fn, "__name__", "fn"))
            self.guards.append(ast.Compare(left=clone(v.func), ops=[ast.Is()], comparators=[fname]))
            self.fwd.append(
                ast.copy_location(assign(target, call(fname, *[clone(a) for a in v.args])), s)
            )
        else:
            self.fwd.append(ast.copy_location(assign(target, clone(v)), s))
        self.ops.append((s, rule))
        return True

    # -- the reverse, by kind of statement, last statement first

    def unpack_reverse(self, s: Any, rule: InlineRule | None) -> None:
        self.b.unpack_reverse(s, self.acc)

    def store_reverse(self, s: Any, rule: InlineRule | None) -> None:
        """The slot's sensitivity and the list's entry, as numbers (``store_display_numbers``)."""
        L = s.value.id
        numbers = call(
            self.b.rt("store_display_numbers"),
            N(s.targets[0].value.id),
            N(s.dp_write),
            N(L),
            C(len(self.stored[L])),
            N(syntax.ABOX),
        )
        self.acc.out.append(unpack(self.stored[L], numbers))

    def read_reverse(self, s: Any, rule: InlineRule | None) -> None:
        """The element's sensitivity into the list's entry, or into the tuple's adjoint (a
        local one for a tuple a leading unpack or a row read made): ``read_back_number_into``;
        a row's by the general ``read_back_into``."""
        target = s.targets[0].id
        A = self.acc.take(target)
        if A is None:
            return
        obj, idx, Abox = s.value.value.id, s.value.slice, N(syntax.ABOX)
        if target in self.rows:
            back = self.b.rt("read_back_into")
            rest = [N(s.dp_length), N(target), A, Abox]
        else:
            back = self.b.rt("read_back_number_into")
            rest = [N(s.dp_length), A, Abox]
        self.acc.update(obj, lambda adj: call(back, adj, N(obj), clone(idx), *rest))

    def write_reverse(self, s: Any, rule: InlineRule | None) -> None:
        """The slot's sensitivity, moved out of the list's entry to the number stored."""
        b = self.b
        moved = call(b.rt("write_back"), N(s.targets[0].value.id), N(s.dp_write), N(syntax.ABOX))
        v = s.value.id
        if b.is_module_constant(v):
            self.acc.out.append(ast.Expr(moved))
            return
        back = b.namer.fresh("s")
        self.acc.out.append(assign(back, moved))
        self.acc.add(v, N(back))

    def append_reverse(self, s: Any, rule: InlineRule | None) -> None:
        """The appended number's sensitivity, off the end of the list's entry."""
        b, acc = self.b, self.acc
        acc.take(s.targets[0].id)
        comp, _, item = s.value.args
        if isinstance(item, ast.Name) and not b.is_module_constant(item.id):
            back = b.namer.fresh("s")
            acc.out.append(assign(back, self.taken_back(comp.id)))
            acc.add(item.id, N(back))
        else:
            acc.out.append(ast.Expr(self.taken_back(comp.id)))

    def taken_back(self, comp: str) -> ast.expr:
        return call(self.b.rt("append_back_number"), N(comp), N(syntax.ABOX))

    def display_reverse(self, s: Any, rule: InlineRule | None) -> None:
        self.acc.take(s.targets[0].id)  # (a local temporary read only by its store: nothing)
        for e, sk in reversed(list(zip(s.value.elts, self.stored[s.targets[0].id]))):
            if isinstance(e, ast.Name) and not self.b.is_module_constant(e.id):
                self.acc.add(e.id, N(sk))

    def attribute_read_reverse(self, s: Any, rule: InlineRule | None) -> None:
        """A copy's sensitivity to the first read; the first read's kept for
        :meth:`attributes_read_back`, after the segment's other reverses."""
        target = s.targets[0].id
        A = self.acc.take(target)
        if A is None:
            return
        if s.dp_first is not None:
            self.acc.add(s.dp_first, A)
            return
        self.read_back.setdefault(s.value.value.id, []).append((s.value.attr, A))

    def attributes_read_back(self) -> None:
        """One call per object: the reads' sensitivities into its entry, last read first
        (``attributes_read_back``). The guard read them before the segment's assignments,
        none of the same names (``attribute_read_joins``): so after those are reversed."""
        for obj, backs in self.read_back.items():
            call_back = call(
                self.b.rt("attributes_read_back"),
                N(obj),
                C(tuple(name for name, _ in backs)),
                ast.Tuple(elts=[A for _, A in backs], ctx=ast.Load()),
                N(syntax.ABOX),
            )
            self.acc.out.append(ast.Expr(call_back))

    def attributes_written_back(self) -> None:
        """One call per object, before the segment's other reverses: the sensitivities of
        the values assigned to its attributes, moved out of its entry, last assignment first
        (``attributes_written_back``); :meth:`attribute_write_reverse` adds each to its value."""
        for s, _ in reversed(self.ops):
            if s.dp_kind == "attr_write":
                t = s.targets[0]
                s.dp_back = self.b.namer.fresh("s")
                self.written_back.setdefault(t.value.id, []).append((t.attr, s.dp_back))
        for obj, backs in self.written_back.items():
            taken = call(
                self.b.rt("attributes_written_back"),
                N(obj),
                C(tuple(name for name, _ in backs)),
                N(syntax.ABOX),
            )
            self.acc.out.append(unpack([back for _, back in backs], taken))

    def attribute_write_reverse(self, s: Any, rule: InlineRule | None) -> None:
        if not self.b.is_module_constant(s.value.id):
            self.acc.add(s.value.id, N(s.dp_back))

    def assignment_reverse(self, s: Any, rule: InlineRule | None) -> None:
        k = s.dp_kind
        target = s.targets[0].id
        A = self.acc.take(target)
        if k == "nondiff":
            return
        if k == "copy":
            if A is not None:
                # only a copy of a number guarded here may add its adjoint with ``+``: a
                # tuple's adjoint is a tuple, OneHot or TupleAccumulator (``+`` would
                # concatenate or fail), so it takes the linear interface's ``add``
                root = self.source.get(target)
                any_type = root is not None and root not in self.guarded_inputs
                self.acc.add(s.value.id, A, any_type=any_type)
            return
        if A is None:
            return
        assert rule is not None  # (an inline statement: the rest are nondiff or copies)
        self.inline_reverse(s, rule, A)

    def inline_reverse(self, s: Any, rule: InlineRule, A: ast.expr) -> None:
        """Each operand's adjoint gets the rule's gradient (its lambda body, instantiated)."""
        b = self.b
        target = s.targets[0].id
        operands = b.operands(s.value)
        for o, g in zip(operands, rule.grads):
            if g is None or not isinstance(o, ast.Name) or b.is_module_constant(o.id):
                continue  # (a number read from the module: the backprop would discard its adjoint)
            expr = _whole_power_gradient(rule, operands, A) if o is operands[0] else None
            if expr is None:
                tmpl = template_for(g, b.h)
                assert tmpl is not None  # (SegmentRules.kind: "inline" when every one parses)
                mapping = dict(zip(tmpl.params, [A, N(target)] + [clone(x) for x in operands]))
                expr = tmpl.instantiate(mapping)
            for used in _names_read(expr):
                if used in self.ssa.all_names:
                    self.save(used)
            self.acc.add(o.id, expr)

    # -- the end

    def simplify(self) -> None:
        persistent = self.b.adjoint_values
        self.rev[:] = simplify_reverse(
            self.rev,
            {
                t.id
                for st in self.rev
                for t in getattr(st, "targets", ())
                if isinstance(t, ast.Name) and t.id not in persistent
            },
        )

    def guard(self) -> tuple[ast.expr, list[str], list[ast.expr]]:
        """The guard, the names it tests as numbers, and its other tests."""
        unique: dict[str, ast.expr] = {}
        for g in self.guards:  # (two stores with one index test it once)
            unique.setdefault(ast.dump(g), g)
        guards = list(unique.values())
        checks = [clone(g) for g in guards]
        if self.number_guarded:
            guards.insert(0, self.b.number_guard(self.number_guarded))
        if len(guards) > 1:
            guard: ast.expr = ast.BoolOp(op=ast.And(), values=guards)
        else:
            guard = guards[0] if guards else C(True)
        return guard, self.number_guarded, checks

    FORWARD = {
        "unpack": unpack_forward,
        "display": display_forward,
        "store": store_forward,
        "append": append_forward,
        "read": read_forward,
        "write": write_forward,
        "attr_read": attribute_read_forward,
        "attr_write": attribute_write_forward,
    }
    REVERSE = {
        "unpack": unpack_reverse,
        "store": store_reverse,
        "append": append_reverse,
        "display": display_reverse,
        "read": read_reverse,
        "write": write_reverse,
        "attr_read": attribute_read_reverse,
        "attr_write": attribute_write_reverse,
    }
