"""Calls, operators and closures (nested ``def``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ...runtime.hooks import hooks
from ..normalize.core import Core, IRFunction
from ..trees import clone, unparse
from . import syntax
from .ssa import _SSA, _AdjointAccumulator
from .syntax import BINOPS, INPLACE, C, N, assign, attr, call, tuple_

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class CallRules(Builder):
    """Methods of :class:`FunctionBuilder`: calls, operators and closures (nested ``def``)."""

    def calls_directly(
        self, plus: ast.expr, args: list[ast.expr], keywords: list[ast.keyword]
    ) -> bool:
        """Whether a ``call(f, *args)`` of first-order code is written ``callee_plus(f)(*args)``
        (differentiable-again code keeps ``call``, which has a rule of its own)."""
        from ...runtime import calls as runtime_calls

        return (
            not self.nestable
            and isinstance(plus, ast.Name)
            and self.h.values.get(plus.id) is runtime_calls.call
            and not keywords
            and bool(args)
            and not any(isinstance(a, ast.Starred) for a in args)
        )

    def binop(self, name: str, v: ast.BinOp, s: ast.stmt) -> Any:
        """``name = left op right``; for ``a op= b`` (``dp_inplace``, see normalize's
        ``in_place_op``) the in-place operator (an array is changed in place), or, when
        nothing else can see the target's value, the operator computing a new value."""
        inplace = getattr(v, "dp_inplace", None)
        if not inplace:
            fn = BINOPS[type(v.op)]
        elif inplace == "unshared":
            fn = hooks.unshared_in_place(INPLACE[type(v.op)])
        else:
            fn = INPLACE[type(v.op)]
        fwd, record, rev = self.call_like(
            name,
            self.rt("binop_plus"),
            [self.helper(fn, fn.__name__), v.left, v.right],
            [],
            s,
            skip=1,
        )
        return fwd, record, rev

    def call_like(
        self,
        target: str | None,
        plus: ast.expr,
        args: list[ast.expr],
        keywords: list[ast.keyword],
        s: ast.stmt,
        skip: int = 0,
        callee: ast.expr | None = None,
        native: tuple[ast.expr, list[ast.stmt], Any] | None = None,
    ) -> Any:
        """``target = plus(*args, **keywords).primal``, recording the backprop and argument values.

        ``skip`` leading arguments are not differentiated (an operator, a callee passed to call).
        ``native``: ``(test, statements, reverse)``: when ``test`` holds, the statements do the
        operation instead (assigning the target, with no backprop), and ``reverse`` gives
        what the backprop would have returned (an expression, or a function of the target's
        sensitivity giving one).
        """
        if self.nestable and isinstance(plus, ast.Name) and plus.id in self.h.values:
            plus, args, skip = self.called_as_itself(plus, args, skip)
        bp = self.namer.fresh("bp")
        r = self.namer.fresh("r")
        fwd = self.call_forward(target, plus, args, keywords, bp, r, native)
        record = [bp]
        star_lens = self.record_arguments(fwd, record, args, skip, callee)
        double_star_keys = self.record_keywords(fwd, record, keywords)
        callee_var = (
            callee.id
            if callee is not None
            and isinstance(callee, ast.Name)
            and not self.is_static_chain(callee)
            and callee.id not in self.const_names
            else None
        )

        def rev(acc: _AdjointAccumulator) -> None:
            A = acc.take(target) if target is not None else None
            g = self.namer.fresh("g")
            acc.out.append(assign(g, self.backprop_call(bp, A, native)))
            if callee_var is not None:
                acc.add_value(callee_var, ast.Subscript(value=N(g), slice=C(0), ctx=ast.Load()))
            position = _Position()
            self.arguments_back(acc, g, args, skip, star_lens, position)
            self.keywords_back(acc, g, keywords, double_star_keys, position)

        return fwd, record, rev

    def called_as_itself(
        self, plus: ast.Name, args: list[ast.expr], skip: int
    ) -> tuple[ast.expr, list[ast.expr], int]:
        """In differentiable-again code, a transform other than the runtime's calls is called
        through ``call_plus``: its next transform must differentiate it again."""
        from ...runtime import calls as runtime_calls

        if self.h.values[plus.id] in (
            runtime_calls.call,
            runtime_calls.binop_plus,
            runtime_calls.call_on_constants,
        ):
            return plus, args, skip
        return self.rt("call_plus"), [plus] + list(args), skip + 1

    def call_forward(
        self,
        target: str | None,
        plus: ast.expr,
        args: list[ast.expr],
        keywords: list[ast.keyword],
        bp: str,
        r: str,
        native: tuple[ast.expr, list[ast.stmt], Any] | None,
    ) -> list[ast.stmt]:
        call_args: list[ast.expr] = []
        for a in args:
            if isinstance(a, ast.Starred):
                call_args.append(ast.Starred(value=clone(a.value), ctx=ast.Load()))
            else:
                call_args.append(clone(a))
        kws = [ast.keyword(arg=k.arg, value=clone(k.value)) for k in keywords]
        fwd: list[ast.stmt] = []
        if self.calls_directly(plus, call_args, kws):
            # ``callee_plus(f)(*args)``, not ``call(f, *args)``: no frame of dplus's between a
            # recursive function's levels
            fwd.append(assign(r, call(call(self.rt("callee_plus"), call_args[0]), *call_args[1:])))
        else:
            fwd.append(assign(r, call(clone(plus), *call_args, keywords=kws)))
        if target is not None:
            fwd.append(assign(target, attr(r, "primal")))
        fwd.append(assign(bp, attr(r, "backprop")))
        if native is not None:
            fwd = [ast.If(test=native[0], body=native[1] + [assign(bp, C(None))], orelse=fwd)]
        return fwd

    def record_arguments(
        self,
        fwd: list[ast.stmt],
        record: list[str],
        args: list[ast.expr],
        skip: int,
        callee: ast.expr | None,
    ) -> dict[int, str]:
        """Record the arguments' values (and each starred one's length, measured first)."""
        star_lens: dict[int, str] = {}
        for i, a in enumerate(args):
            node = a.value if isinstance(a, ast.Starred) else a
            if i < skip and not (
                callee is not None
                and isinstance(callee, ast.Name)
                and not self.is_static_chain(callee)
            ):
                continue
            if (
                isinstance(node, ast.Name)
                and node.id not in record
                and not node.id.startswith(syntax.PFX)
            ):
                record.append(node.id)
            if isinstance(a, ast.Starred):
                ln = self.namer.fresh("len")
                fwd.insert(0, assign(ln, call(self.rt("star_length"), clone(a.value))))
                star_lens[i] = ln
                record.append(ln)
        return star_lens

    def record_keywords(
        self, fwd: list[ast.stmt], record: list[str], keywords: list[ast.keyword]
    ) -> dict[int, str]:
        """Record the keyword arguments' values (and the keys a ``**`` argument had)."""
        double_star_keys: dict[int, str] = {}
        for j, k in enumerate(keywords):
            if isinstance(k.value, ast.Name) and k.value.id not in record:
                record.append(k.value.id)
            if k.arg is None and isinstance(k.value, ast.Name):
                # the keys the call read: the dict may shrink or grow before the reverse runs
                keys = self.namer.fresh("keys")
                fwd.insert(0, assign(keys, call(self.helper(tuple, "tuple"), clone(k.value))))
                double_star_keys[j] = keys
                record.append(keys)
        return double_star_keys

    def backprop_call(
        self, bp: str, A: ast.expr | None, native: tuple[ast.expr, list[ast.stmt], Any] | None
    ) -> ast.expr:
        """``bp(A, Abox)``; with a native variant, what it gives when it ran (``bp is None``)."""
        back: ast.expr = call(bp, A if A is not None else N(self.Z), N(syntax.ABOX))
        if native is None:
            return back
        native_back = native[2]
        if callable(native_back):
            native_back = native_back(clone(A) if A is not None else N(self.Z))
        return ast.IfExp(
            test=ast.Compare(left=N(bp), ops=[ast.Is()], comparators=[C(None)]),
            body=native_back,
            orelse=back,
        )

    def arguments_back(
        self,
        acc: _AdjointAccumulator,
        g: str,
        args: list[ast.expr],
        skip: int,
        star_lens: dict[int, str],
        position: _Position,
    ) -> None:
        """Each positional argument's part of the backprop's result ``g``."""
        for i, a in enumerate(args):
            if i < skip:
                continue
            if isinstance(a, ast.Starred):
                ln = star_lens[i]
                if isinstance(a.value, ast.Name):
                    acc.add_value(a.value.id, self.star_part(g, position, ln, a.value.id))
                position.dynamic.append(ln)
                continue
            if isinstance(a, ast.Name) and a.id not in self.const_names:
                acc.add_value(a.id, ast.Subscript(value=N(g), slice=position(), ctx=ast.Load()))
            position.fixed += 1

    def star_part(self, g: str, position: _Position, ln: str, name: str) -> ast.expr:
        """A starred argument's sensitivities: ``ln`` parts of ``g`` from ``position``."""
        if not self.nestable:
            return call(self.rt("star_sensitivity"), N(g), position(), N(ln), N(name))
        return ast.Subscript(
            value=N(g),
            slice=ast.Slice(
                lower=position(),
                upper=ast.BinOp(left=position(), op=ast.Add(), right=N(ln)),
                step=None,
            ),
            ctx=ast.Load(),
        )

    def keywords_back(
        self,
        acc: _AdjointAccumulator,
        g: str,
        keywords: list[ast.keyword],
        double_star_keys: dict[int, str],
        position: _Position,
    ) -> None:
        """Each keyword argument's part of the backprop's result ``g`` (its dict of them)."""
        for j, k in enumerate(keywords):
            if not isinstance(k.value, ast.Name):
                continue
            if k.arg is None:
                kw = call(self.rt("keyword_sensitivities"), N(g), position())
                acc.add_value(
                    k.value.id,
                    call(self.rt("double_star_sensitivity"), kw, N(double_star_keys[j])),
                )
            else:
                # (one operation with a rule of its own: no dict operations at the next order)
                acc.add_value(
                    k.value.id, call(self.rt("keyword_sensitivity"), N(g), position(), C(k.arg))
                )

    def closure_stmt(self, s: Core, ssa: _SSA) -> Any:
        ir: IRFunction = s.dp_ir
        child = self.nested(ir)
        # (a constant rebound in the nested function is a variable there)
        child.const_names = self.const_names - set(ir.scope.assigned) - set(ir.scope.params)
        child.key_names = dict(self.key_names)
        defaults = getattr(s, "dp_defaults", [])
        kw_defaults = getattr(s, "dp_kw_defaults", [])
        all_defaults = defaults + [d for d in kw_defaults if d is not None]
        child.defaults_in_closure = bool(all_defaults)
        plus = child.build()
        for k, v in child.key_names.items():
            self.key_names.setdefault(k, v)
        fwd: list[ast.stmt] = [plus]
        signature: str | None = None
        if not plus.dp_simple:
            bare = clone(ir.args)
            bare.defaults = []
            bare.kw_defaults = [None] * len(bare.kwonlyargs)
            for a in bare.posonlyargs + bare.args + bare.kwonlyargs + [bare.vararg, bare.kwarg]:
                if a is not None:
                    a.annotation = None
            sig = call(
                self.rt("make_signature"),
                C(unparse(bare)),
                tuple_([clone(d) for d in defaults]),
                ast.Dict(
                    keys=[C(a.arg) for a, d in zip(bare.kwonlyargs, kw_defaults) if d is not None],
                    values=[clone(d) for d in kw_defaults if d is not None],
                ),
            )
            # (held in a variable: the user's signature, shown by present_as_users too)
            signature = self.namer.fresh("sig")
            fwd.insert(0, assign(signature, sig))
            plus.args.kw_defaults = [N(signature)] + (
                [tuple_([clone(d) for d in all_defaults])] if all_defaults else []
            )
        fwd.append(assign(s.name, N(plus.name)))
        fwd.append(self.present_as_users(s.name, ir, signature))
        by_value = plus.dp_by_value
        s.dp_plus_name = plus.name
        s.dp_by_value = by_value
        # the closure's sensitivity: one part per variable it closes over, then one per default
        parts: list[str | None] = list(by_value) + [
            d.id if isinstance(d, ast.Name) and not self.is_module_constant(d.id) else None
            for d in all_defaults
        ]
        record = list(dict.fromkeys(v for v in parts if v is not None))

        def rev(acc: _AdjointAccumulator) -> None:
            if s.name in self.boxed:
                # a boxed function: every read added its sensitivity into the cell's entry
                A: ast.expr | None = call(attr(syntax.ABOX, "pop"), N(self.key(s.name)), N(self.Z))
            else:
                A = acc.take(s.name)
            if A is None or not record:
                return
            a = self.namer.fresh("clo")
            acc.out.append(assign(a, call(self.rt("closure_parts"), A, C(len(parts)))))
            for i, v in enumerate(parts):
                if v is not None:
                    acc.add_value(
                        v, ast.Subscript(value=N(a), slice=C(i), ctx=ast.Load()), value_name=v
                    )

        return fwd, record, rev

    def present_as_users(self, name_held: str, ir: IRFunction, signature: str | None) -> ast.stmt:
        """``runtime.arguments.present_as_users`` of the nested plus-function: the name,
        qualified name, docstring and parameters (``signature``: the variable holding them,
        for a function that binds its arguments itself) of the user's function, which a
        program may read (``f.__name__`` in a log line, ``inspect.signature``)."""
        node = ir.scope.node
        name = "<lambda>" if ir.is_lambda else getattr(node, "name", ir.name)
        args: list[ast.expr] = [N(name_held), C(name), C(ir.qualname or name)]
        doc = ast.get_docstring(node, clean=False) if isinstance(node, ast.FunctionDef) else None
        if doc is not None or signature is not None:
            args.append(C(doc))
        if signature is not None:
            args.append(N(signature))
        return ast.Expr(value=call(self.rt("present_as_users"), *args))


class _Position:
    """Where the next argument's sensitivity is in a backprop's result: a fixed count plus
    the lengths of the starred arguments before it (known when the call ran)."""

    def __init__(self) -> None:
        self.fixed = 1
        self.dynamic: list[str] = []

    def __call__(self) -> ast.expr:
        e: ast.expr = C(self.fixed)
        for d in self.dynamic:
            e = ast.BinOp(left=e, op=ast.Add(), right=N(d))
        return e
