"""Specialisation: float fast segments under a type guard, and the fused gradient of a
function whose body is one fast segment."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ...rules import InlineRule
from ..peephole import simplify_reverse
from ..trees import clone
from . import syntax
from .ssa import _SSA, _AdjointAccumulator
from .syntax import (
    _NUM_TYPES,
    _POWERS,
    C,
    FastParts,
    N,
    S,
    _is_number_const,
    _locate,
    _names_read,
    assign,
    attr,
    call,
    tuple_,
    unpack,
)
from .templates import _whole_power_gradient, template_for


class FastPathRules:
    """Methods of :class:`FunctionBuilder`: specialisation: float fast segments under a type guard, and the fused gradient of a"""

    def fused_gradient(
        self,
        params: list[str],
        signature: list[str] | None = None,
        prologue: list[ast.stmt] | None = None,
        finish: Callable[[list[ast.expr]], list[ast.stmt]] | None = None,
    ) -> ast.FunctionDef | None:
        """``grad``'s whole computation in one function, for a body that is one float fast
        segment: the segment's forward, then at once its reverse from the sensitivity 1.0,
        returning the parameters' sensitivities (``None`` when a guard fails, or the result
        is not a float: the caller then takes the general way, which computes the same).

        A small formula then costs no record, closure, ``ProcResult`` or boundary fold. The
        segment is only arithmetic and inline-able calls on numbers, so running it again on
        the general way repeats no effect. Only for the outermost ``grad`` with float
        arguments and the default sensitivity (``api._make_gradient`` decides).

        ``signature``, ``prologue`` and ``finish`` let ``fused.py`` wrap the same body in a
        function of other parameters (lists whose elements become ``params``): its
        parameters, statements run first (a ``return None`` there sends the call the
        general way), and the statements that return the sensitivities, given them as
        expressions in the order of ``params``.
        """
        ir = self.ir
        if not (
            self.straight
            and not self.nestable
            and not self.boxed
            and not ir.outer_boxed
            and len(self.segment_log) == 1
            and isinstance(self.segment_log[0], FastParts)
            and all(isinstance(st, ast.Assign) for st in ir.body)
        ):
            return None
        parts = self.segment_log[0]
        ret = [c.value.id for c in parts.copy_back if c.targets[0].id == ir.retval]
        if parts.lead or len(ret) != 1 or parts.stores:
            return None
        flt, typ = self.helper(float, "float"), self.helper(type, "type")
        adjoints = sorted(set(self.adjoint_names.values()) | {self.adj(p) for p in params})
        sens: list[ast.expr] = [
            ast.IfExp(
                test=ast.Compare(left=N(self.adj(p)), ops=[ast.Is()], comparators=[N(self.Z)]),
                body=C(0.0),
                orelse=N(self.adj(p)),
            )
            for p in params
        ]
        reverse = [
            ast.Assign(targets=[S(a) for a in adjoints], value=N(self.Z)),
            assign(self.adj(ir.retval), C(1.0)),
            *[clone(x) for x in parts.rev],
            *(finish(sens) if finish is not None else [ast.Return(value=tuple_(sens))]),
        ]
        is_float = ast.Compare(left=call(typ, N(ret[0])), ops=[ast.Is()], comparators=[flt])
        body = [
            ast.If(
                test=clone(parts.guard),
                body=[clone(x) for x in parts.fwd]
                + [ast.If(test=is_float, body=reverse, orelse=[])],
                orelse=[],
            ),
            ast.Return(value=C(None)),
        ]
        if signature is None:  # floats only (ints, bools and objects take the general way)
            signature = params
            not_floats = [
                ast.Compare(
                    left=call(clone(typ), N(p)), ops=[ast.IsNot()], comparators=[clone(flt)]
                )
                for p in params
            ]
            if not_floats:
                body.insert(
                    0,
                    ast.If(
                        test=ast.BoolOp(op=ast.Or(), values=not_floats)
                        if len(not_floats) > 1
                        else not_floats[0],
                        body=[ast.Return(value=C(None))],
                        orelse=[],
                    ),
                )
        body[:0] = prologue or []
        if self.specialized is not None:  # a rebound global: the general way
            body.insert(
                0,
                ast.If(
                    test=self.not_specialized(self.specialized),
                    body=[ast.Return(value=C(None))],
                    orelse=[],
                ),
            )
        fdef = ast.FunctionDef(
            name=f"{ir.name}__grad",
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in signature],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body=body,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef.lineno = fdef.end_lineno = ir.lineno
        fdef.col_offset = fdef.end_col_offset = 0
        _locate(fdef, ir.lineno)
        return fdef

    def fast_segment(
        self, ssa: _SSA
    ) -> (
        tuple[list[ast.stmt], list[str], list[ast.stmt], ast.expr, list[str], list[ast.expr]] | None
    ):
        fwd: list[ast.stmt] = []
        saved: list[str] = []
        guards: list[ast.expr] = []
        guarded_inputs: set[str] = set()
        number_guarded: list[str] = []  # names whose values must be numbers, in order
        ops: list[tuple[ast.stmt, InlineRule | None]] = []
        # where each name defined here got its value: a name to type-guard, None for a number
        # an inline operation or a non-differentiable statement made, or "" when no guard can
        # see it (a later unpack's target)
        source: dict[str, str | None] = {}
        hoisted = ssa.leading_unpack_stmts()
        # the accumulator is made first: the forward needs to know which adjoints start at zero
        rev: list[ast.stmt] = []
        acc = _AdjointAccumulator(self, ssa, rev, fast=True)
        fresh_zero = acc.fresh_zero

        def must_be_numbers(exprs: list[ast.expr]) -> bool:
            """Guard the names among ``exprs`` as numbers where they come from outside the
            segment (through copies); False when one's value no guard can see."""
            for e in exprs:
                if isinstance(e, ast.Name):
                    g = (
                        source.get(e.id, e.id)
                        if e.id in source
                        else (e.id if e.id in ssa.inputs else None)
                    )
                    if g == "":
                        return False
                    if g is not None and g not in guarded_inputs:
                        guarded_inputs.add(g)
                        number_guarded.append(g)
            return True

        stored: dict[str, list[str]] = {}  # a displayed list -> its elements' sensitivities (names)
        displayed: dict[str, ast.stmt] = {}
        for s in ssa.stmts:
            k = s.dp_kind
            if k == "unpack":
                if s not in hoisted:
                    fwd.append(clone(s))
                for e in s.targets[0].elts:
                    source[e.id] = e.id if s in hoisted else ""
                if s.value.id not in saved and not self.direct_unpack(s.value.id, fresh_zero):
                    saved.append(s.value.id)
                ops.append((s, None))
                continue
            if k == "display":
                # a list of numbers, stored below: its elements are guarded like operands
                target = s.targets[0].id
                if target not in ssa.local_temps:
                    return None
                if not must_be_numbers(s.value.elts):
                    return None
                source[target] = ""
                displayed[target] = s
                fwd.append(ast.copy_location(assign(target, clone(s.value)), s))
                ops.append((s, None))
                continue
            if k == "store":
                # ``xs[i] = L`` on a list with an int index, both unchanged since the guard
                t, L = s.targets[0], s.value.id
                obj, idx = t.value.id, t.slice
                before_guard = {
                    e.id for u in hoisted for e in u.targets[0].elts
                }  # (leading unpacks)
                if (
                    L not in displayed
                    or L in stored
                    or (obj in ssa.defined and obj not in before_guard)
                    or (
                        isinstance(idx, ast.Name)
                        and idx.id in ssa.defined
                        and idx.id not in before_guard
                    )
                ):
                    return None
                typ = self.helper(type, "type")
                guards.append(
                    ast.Compare(
                        left=call(typ, N(obj)),
                        ops=[ast.Is()],
                        comparators=[self.helper(list, "list")],
                    )
                )
                if isinstance(idx, ast.Name):
                    guards.append(
                        ast.Compare(
                            left=call(clone(typ), N(idx.id)),
                            ops=[ast.Is()],
                            comparators=[self.helper(int, "int")],
                        )
                    )
                w = self.namer.fresh("write")
                fwd += [
                    ast.copy_location(ast.Assign(targets=[clone(t)], value=N(L)), s),
                    ast.copy_location(
                        assign(
                            w,
                            ast.IfExp(
                                test=ast.Compare(
                                    left=clone(idx), ops=[ast.GtE()], comparators=[C(0)]
                                ),
                                body=clone(idx),
                                orelse=ast.BinOp(
                                    left=clone(idx),
                                    op=ast.Add(),
                                    right=call(self.helper(len, "len"), N(obj)),
                                ),
                            ),
                        ),
                        s,
                    ),
                ]
                for x in (obj, w, L):
                    if x not in saved:
                        saved.append(x)
                stored[L] = [self.namer.fresh("s") for _ in displayed[L].value.elts]
                s.dp_write = w
                ops.append((s, None))
                continue
            if k == "append":
                # a number appended to the comprehension's own list (a list from its start)
                comp, _, item = s.value.args
                if comp.id in ssa.defined or not must_be_numbers([item]):
                    return None
                fwd += [
                    ast.copy_location(ast.Expr(call(attr(comp.id, "append"), clone(item))), s),
                    ast.copy_location(assign(s.targets[0].id, C(None)), s),
                ]
                if comp.id not in saved:
                    saved.append(comp.id)
                source[s.targets[0].id] = None
                ops.append((s, None))
                continue
            target = s.targets[0].id
            v = s.value
            if k == "copy":
                source[target] = source.get(v.id, v.id) if v.id in source else v.id
            elif k != "nondiff" or not isinstance(v, ast.Name):
                source[target] = None
            if k == "inline":
                rule, fn = self.inline_rule(v)
                if not must_be_numbers(self.operands(v)):
                    return None
                if fn is not None:
                    fname = self.helper(fn, getattr(fn, "__name__", "fn"))
                    guards.append(
                        ast.Compare(left=clone(v.func), ops=[ast.Is()], comparators=[fname])
                    )
                    fwd.append(
                        ast.copy_location(
                            assign(target, call(fname, *[clone(a) for a in v.args])), s
                        )
                    )
                else:
                    fwd.append(ast.copy_location(assign(target, clone(v)), s))
                ops.append((s, rule))
            else:
                fwd.append(ast.copy_location(assign(target, clone(v)), s))
                ops.append((s, None))
        if set(displayed) != set(stored):
            return None
        # reverse
        for s, rule in reversed(ops):
            k = s.dp_kind
            if k == "unpack":
                self.unpack_reverse(s, acc)
                continue
            if k == "store":
                # the slot's sensitivity and the list's entry, as numbers (``store_display_numbers``)
                L = s.value.id
                acc.out.append(
                    unpack(
                        stored[L],
                        call(
                            self.rt("store_display_numbers"),
                            N(s.targets[0].value.id),
                            N(s.dp_write),
                            N(L),
                            C(len(stored[L])),
                            N(syntax.ABOX),
                        ),
                    )
                )
                continue
            if k == "append":
                # the appended number's sensitivity, off the end of the list's entry
                acc.take(s.targets[0].id)
                comp, _, item = s.value.args
                if isinstance(item, ast.Name) and not self.is_module_constant(item.id):
                    back = self.namer.fresh("s")
                    acc.out.append(
                        assign(
                            back, call(self.rt("append_back_number"), N(comp.id), N(syntax.ABOX))
                        )
                    )
                    acc.add(item.id, N(back))
                else:
                    acc.out.append(
                        ast.Expr(call(self.rt("append_back_number"), N(comp.id), N(syntax.ABOX)))
                    )
                continue
            if k == "display":
                acc.take(s.targets[0].id)  # (a local temporary read only by its store: nothing)
                for e, sk in reversed(list(zip(s.value.elts, stored[s.targets[0].id]))):
                    if isinstance(e, ast.Name) and not self.is_module_constant(e.id):
                        acc.add(e.id, N(sk))
                continue
            target = s.targets[0].id
            A = acc.take(target)
            if k == "nondiff":
                continue
            if k == "copy":
                if A is not None:
                    # only a copy of a number guarded here may add its adjoint with ``+``: a
                    # tuple's adjoint is a tuple, OneHot or TupleAccumulator (``+`` would
                    # concatenate or fail), so it takes the linear interface's ``add``
                    root = source.get(target)
                    acc.add(s.value.id, A, any_type=root is not None and root not in guarded_inputs)
                continue
            if A is None:
                continue
            operands = self.operands(s.value)
            for o, g in zip(operands, rule.grads):
                if g is None or not isinstance(o, ast.Name) or self.is_module_constant(o.id):
                    continue  # (a number read from the module: the backprop would discard its adjoint)
                expr = _whole_power_gradient(rule, operands, A) if o is operands[0] else None
                if expr is None:
                    tmpl = template_for(g, self.h)
                    mapping = dict(zip(tmpl.params, [A, N(target)] + [clone(x) for x in operands]))
                    expr = tmpl.instantiate(mapping)
                for used in _names_read(expr):
                    if used in ssa.all_names and used not in saved:
                        saved.append(used)
                acc.add(o.id, expr)
        acc.finish()
        persistent = set(self.adjoint_names.values())
        rev[:] = simplify_reverse(
            rev,
            {
                t.id
                for st in rev
                for t in getattr(st, "targets", ())
                if isinstance(t, ast.Name) and t.id not in persistent
            },
        )
        unique: dict[str, ast.expr] = {}
        for g in guards:  # (two stores with one index test it once)
            unique.setdefault(ast.dump(g), g)
        guards = list(unique.values())
        checks = [clone(g) for g in guards]
        if number_guarded:
            guards.insert(0, self.number_guard(number_guarded))
        guard = (
            ast.BoolOp(op=ast.And(), values=guards)
            if len(guards) > 1
            else (guards[0] if guards else C(True))
        )
        return fwd, saved, rev, guard, number_guarded, checks

    def may_be_complex(self, s: ast.Assign) -> bool:
        """An inline ``x ** y`` without a whole constant exponent: complex for a negative
        real base (``(-1.75) ** 0.5``), the one inline operation that leaves the reals."""
        rule, _ = self.inline_rule(s.value)
        if rule is None or rule.fn not in _POWERS:
            return False
        exponent = self.operands(s.value)[-1]
        return not (
            _is_number_const(exponent)
            and (type(exponent.value) is int or float(exponent.value).is_integer())
        )

    def numbers_kept(self, ssa: _SSA, numbers: list[str]) -> frozenset[str]:
        """The user names that hold numbers (``int`` or ``float``) after the fast variant ran
        when the names in ``numbers`` held numbers before: arithmetic and the inline rules
        keep numbers numbers, except ``**`` (a negative base to a fractional power is complex)
        unless its exponent is a whole constant. What a loop that tests its guard once needs."""
        num = set(numbers)
        for s in ssa.stmts:
            k = s.dp_kind
            if k in ("unpack", "store", "append"):
                continue  # (a leading unpack's targets are in ``numbers`` when the guard tests them)
            target = s.targets[0].id
            v = s.value
            if k == "inline":
                ok = all(
                    _is_number_const(o) or isinstance(o, ast.Name) and o.id in num
                    for o in self.operands(v)
                )
                rule, _ = self.inline_rule(v)
                if rule.fn in _POWERS:
                    exponent = self.operands(v)[-1]
                    ok = (
                        ok
                        and _is_number_const(exponent)
                        and (type(exponent.value) is int or exponent.value.is_integer())
                    )
            elif k == "copy":
                ok = v.id in num
            else:
                ok = isinstance(v, ast.Constant) and type(v.value) in _NUM_TYPES
            if ok:
                num.add(target)
            else:
                num.discard(target)
        return frozenset(user for user, new in ssa.version.items() if new in num)

    def number_guard(self, names: list[str]) -> ast.expr:
        """``names`` all hold numbers: tested as all floats first (one chained identity
        test, ``type(a) is type(b) is float``: the common case), then as numbers of any
        kind (``int`` or ``float``; inline, as ints are common: indices, counters)."""
        typ, num = self.helper(type, "type"), self.helper(_NUM_TYPES, "NUM")
        types_ = [call(clone(typ), N(g)) for g in names]
        floats = ast.Compare(
            left=types_[0],
            ops=[ast.Is() for _ in names],
            comparators=types_[1:] + [self.helper(float, "float")],
        )
        tests = [
            ast.Compare(left=clone(t), ops=[ast.In()], comparators=[clone(num)]) for t in types_
        ]
        numbers = ast.BoolOp(op=ast.And(), values=tests) if len(tests) > 1 else tests[0]
        return ast.BoolOp(op=ast.Or(), values=[floats, numbers])

    def operands(self, v: ast.expr) -> list[ast.expr]:
        if isinstance(v, ast.BinOp):
            return [v.left, v.right]
        if isinstance(v, ast.UnaryOp):
            return [v.operand]
        if isinstance(v, ast.Call):
            return list(v.args)
        return []
