"""Specialisation: float fast segments under a type guard, and the fused gradient of a
function whose body is one fast segment."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..normalize.core import Core
from ..trees import clone, function_def
from .fast_segment import FastSegment, FastSegmentParts
from .ssa import _SSA
from .syntax import (
    _NUM_TYPES,
    _POWERS,
    C,
    FastParts,
    N,
    S,
    _is_number_const,
    _locate,
    assign,
    call,
    tuple_,
)

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class FastPathRules(Builder):
    """Methods of :class:`FunctionBuilder`: float fast segments under a type guard, and the
    fused gradient of a function whose body is one fast segment."""

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
        adjoints = sorted(self.adjoint_values | {self.adj(p) for p in params})
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
            not_floats: list[ast.expr] = [
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
        fdef = function_def(f"{ir.name}__grad", list(signature), body)
        fdef.lineno = fdef.end_lineno = ir.lineno
        fdef.col_offset = fdef.end_col_offset = 0
        _locate(fdef, ir.lineno)
        return fdef

    def fast_segment(self, ssa: _SSA) -> FastSegmentParts | None:
        """The fast variant of a segment (see :class:`~.fast_segment.FastSegment`), or None."""
        return FastSegment(self, ssa).build()

    def may_be_complex(self, s: Core) -> bool:
        """An inline ``x ** y`` without a whole constant exponent: complex for a negative
        real base (``(-1.75) ** 0.5``), the one inline operation that leaves the reals."""
        rule, _ = self.inline_rule(s.value)
        if rule is None or rule.fn not in _POWERS:
            return False
        exponent: Core = self.operands(s.value)[-1]
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
            if k == "attr_read":
                num.add(s.targets[0].id)  # (the guard tests it is a number; a copy of one)
                continue
            if k == "read":
                if not getattr(s, "dp_row", False):
                    num.add(s.targets[0].id)  # (the guard tests the element is a number)
                continue
            if k in ("unpack", "store", "append", "write", "attr_write"):
                continue  # (a leading unpack's targets are in ``numbers`` when the guard tests them)
            target = s.targets[0].id
            v = s.value
            if k == "inline":
                ok = all(
                    _is_number_const(o) or isinstance(o, ast.Name) and o.id in num
                    for o in self.operands(v)
                )
                rule, _ = self.inline_rule(v)
                assert rule is not None  # (an inline statement has an inline rule)
                if rule.fn in _POWERS:
                    exponent: Core = self.operands(v)[-1]
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
        tests: list[ast.expr] = [
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
