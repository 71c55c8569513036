"""Expressions: each operand becomes a name or a constant."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .core import (
    _INTROSPECTION_BUILTINS,
    _NONDIFF_BUILTINS,
    UNBOUND,
    Atom,
    Core,
    _assign,
    _const,
    _internal,
    _name,
)

if TYPE_CHECKING:
    from .normalizer_type import NormalizerState
else:
    NormalizerState = object  # (the mixins' shared interface, for the type checker only)


class ExpressionForms(NormalizerState):
    """Methods of :class:`Normalizer`: expressions: each operand becomes a name or a constant."""

    def e_Constant(self, e: ast.Constant) -> Atom:
        return _const(e.value)

    def e_Name(self, e: ast.Name) -> Atom:
        return self.load_name(e.id, e)

    def e_BinOp(self, e: ast.BinOp) -> Atom:
        a = self.expr(e.left)
        b = self.expr(e.right)
        return self.temp(ast.BinOp(left=a, op=e.op, right=b), e)

    def e_UnaryOp(self, e: ast.UnaryOp) -> Atom:
        a = self.expr(e.operand)
        if (
            isinstance(e.op, (ast.USub, ast.UAdd))
            and isinstance(a, ast.Constant)
            and type(a.value) in (int, float, complex)
        ):
            # a signed number literal (-0.25, x ** -2) is a constant, not an operation
            number: Any = a.value
            value = -number if isinstance(e.op, ast.USub) else +number
            return ast.copy_location(ast.Constant(value=value), e)
        return self.temp(ast.UnaryOp(op=e.op, operand=a), e)

    def e_BoolOp(self, e: ast.BoolOp) -> Atom:
        t = self.namer.fresh()
        first = self.expr(e.values[0])
        self.emit(_assign(t, first, e))
        self.bool_rest(t, e.op, e.values[1:], e)
        return _name(t)

    def bool_rest(self, t: str, op: ast.boolop, values: list[ast.expr], e: ast.AST) -> None:
        if not values:
            return

        def rest() -> None:
            self.emit(_assign(t, self.expr(values[0]), e))
            self.bool_rest(t, op, values[1:], e)

        body = self.capture(rest)
        if isinstance(op, ast.And):
            self.emit(ast.copy_location(ast.If(test=_name(t), body=body, orelse=[]), e))
        else:
            neg = self.temp(ast.UnaryOp(op=ast.Not(), operand=_name(t)), e)
            self.emit(ast.copy_location(ast.If(test=neg, body=body, orelse=[]), e))

    def e_Compare(self, e: ast.Compare) -> Atom:
        left = self.expr(e.left)
        if len(e.ops) == 1:
            right = self.expr(e.comparators[0])
            return self.temp(ast.Compare(left=left, ops=e.ops, comparators=[right]), e)
        t = self.namer.fresh()

        def chain(left: Atom, ops: list, comps: list) -> None:
            right = self.expr(comps[0])
            self.emit(_assign(t, ast.Compare(left=left, ops=[ops[0]], comparators=[right]), e))
            if len(ops) > 1:
                body = self.capture(lambda: chain(right, ops[1:], comps[1:]))
                self.emit(ast.copy_location(ast.If(test=_name(t), body=body, orelse=[]), e))

        chain(left, list(e.ops), list(e.comparators))
        return _name(t)

    def e_IfExp(self, e: ast.IfExp) -> Atom:
        test = self.expr(e.test)
        t = self.namer.fresh()
        body = self.capture(lambda: self.emit(_assign(t, self.expr(e.body), e)))
        orelse = self.capture(lambda: self.emit(_assign(t, self.expr(e.orelse), e)))
        self.emit(ast.copy_location(ast.If(test=test, body=body, orelse=orelse), e))
        return _name(t)

    def e_NamedExpr(self, e: ast.NamedExpr) -> Atom:
        v = self.expr(e.value)
        if getattr(e, "dp_global", False):  # (name := v) of a name declared global
            namespace = ast.Call(func=_name("globals"), args=[], keywords=[])
            target = ast.Subscript(value=namespace, slice=_const(e.target.id), ctx=ast.Store())
            self.stmt(ast.copy_location(ast.Assign(targets=[target], value=v), e))
            return v
        self.check_store(e.target.id, e)
        self.emit(_assign(e.target.id, v, e))
        return self.load_name(e.target.id, e)

    def static_callee(self, f: ast.expr) -> ast.expr | None:
        """``math.sin`` or ``sin``: a dotted name rooted at a global; kept whole for fast paths."""
        node = f
        while isinstance(node, ast.Attribute):
            node = node.value
        if (
            isinstance(node, ast.Name)
            and node.id not in self.local_names
            and node.id not in self.scope.free
            and node.id not in self.namer.generated
        ):  # (a comprehension's list is a local)
            return f
        return None

    def introspection(self, e: ast.Call) -> Atom | None:
        """``locals()``, ``vars()``, ``dir()``, ``globals()``, and ``eval``/``exec`` of a string
        with no namespaces, as in the plain call: they see the user's names, not the
        generated function's (``None``: not one of these calls)."""
        if not self.calls_builtin(e, _INTROSPECTION_BUILTINS) or e.keywords:
            return None
        name = e.func.id  # type: ignore[attr-defined]  # (calls_builtin: a name)
        if name == "globals" and not e.args:
            node: Core = ast.Call(func=_name("globals"), args=[], keywords=[])
            node.dp_builtin = True  # the module's namespace: the generated code shares it
            return self.temp(node, e)
        if name in ("locals", "vars", "dir") and not e.args:
            ns = self.user_namespace(e)
            if name == "dir":
                return self.expr(
                    ast.copy_location(ast.Call(func=_name("sorted"), args=[ns], keywords=[]), e)
                )
            return ns
        if name in ("eval", "exec") and len(e.args) == 1 and not isinstance(e.args[0], ast.Starred):
            source = self.expr(e.args[0])
            g: Core = ast.Call(func=_name("globals"), args=[], keywords=[])
            g.dp_builtin = True
            node = ast.Call(
                func=_name(name),
                args=[source, self.temp(g, e), self.user_namespace(e)],
                keywords=[],
            )
            return self.temp(node, e)
        return None

    def user_namespace(self, e: ast.AST) -> Atom:
        """A dict of the user's local variables that are bound here, by value, as ``locals()``
        gives in the plain call; built as a display, so sensitivities reach the variables."""
        sc = self.scope
        names = [
            n
            for n in dict.fromkeys(list(sc.params) + sorted(sc.locals) + sorted(sc.free))
            if n not in self.namer.generated and n not in _INTROSPECTION_BUILTINS
        ]
        frame: Core = ast.Call(func=_name("locals"), args=[], keywords=[])
        frame.dp_builtin = True  # (only its keys are used: which variables are bound now)
        bound = self.temp(frame, e)
        values: list[ast.expr] = []
        for n in names:
            test = ast.Compare(left=_const(n), ops=[ast.In()], comparators=[_name(bound.id)])
            pick = ast.copy_location(ast.IfExp(test=test, body=_name(n), orelse=_const(UNBOUND)), e)
            values.append(self.expr(pick))
        display = self.temp(ast.Dict(keys=[_const(n) for n in names], values=values), e)
        return self.temp(_internal("user_namespace", [display]), e)

    def e_Call(self, e: ast.Call) -> Atom:
        op = getattr(e, "dp_op", None)
        if op is not None:
            # an operation of a rewritten definition (definitions.py): its arguments normalised
            return self.temp(_internal(op, [self.expr(a) for a in e.args]), e)
        special = self.introspection(e)
        if special is not None:
            return special
        if (
            isinstance(e.func, ast.Name)
            and e.func.id == "super"
            and not e.args
            and not e.keywords
            and self.scope.params
        ):
            # zero-argument super() reads the __class__ cell and the first argument
            e = ast.copy_location(
                ast.Call(
                    func=e.func, args=[_name("__class__"), _name(self.scope.params[0])], keywords=[]
                ),
                e,
            )
        func = self.static_callee(e.func)
        if (
            func is None
            and isinstance(e.func, ast.Attribute)
            and not any(isinstance(a, ast.Starred) for a in e.args)
            and not any(k.arg is None for k in e.keywords)
        ):
            # obj.method(args): one operation, so no bound method is made and wrapped
            obj = self.expr(e.func.value)
            parts: list[ast.expr] = [obj, _const(e.func.attr)]
            parts += [self.expr(a) for a in e.args]
            node: Core = _internal("callmethod", parts)
            node.keywords = [ast.keyword(arg=k.arg, value=self.expr(k.value)) for k in e.keywords]
            # (a comprehension's own result list: reverse.py's fast segments may append to it)
            node.dp_comp_result = getattr(e, "dp_comp_result", False)
            return self.temp(node, e)
        if func is None:
            func = self.expr(e.func)
        lazy = self.may_read_lazily(e)
        args: list[ast.expr] = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                args.append(ast.Starred(value=self.expr(a.value), ctx=ast.Load()))
            else:
                args.append(self.expr(a))
                if lazy and self.makes_lazy_iterator(a):
                    self.mark_passed_on(self.out[-1])
        keywords = []
        for k in e.keywords:
            keywords.append(ast.keyword(arg=k.arg, value=self.expr(k.value)))
            if lazy and self.makes_lazy_iterator(k.value):
                self.mark_passed_on(self.out[-1])
        call: Core = ast.Call(func=func, args=args, keywords=keywords)
        if (
            self.calls_builtin(e, _NONDIFF_BUILTINS)
            and not any(isinstance(a, ast.Starred) for a in args)
            and all(k.arg is not None for k in keywords)
        ) or getattr(e, "dp_nondiff_guard", False):  # (the test of an inlined method call)
            call.dp_builtin = True  # zero derivative: called as it is, nothing recorded
        return self.temp(call, e)

    def may_read_lazily(self, e: ast.Call) -> bool:
        """Whether ``e`` calls a function of the user's by name (a nested ``def`` or ``lambda``,
        a parameter, or a global Python function not of NumPy, SciPy or dplus), or ``any``,
        ``all`` or ``next``: a ``zip``, ``map``, ``enumerate``, ``filter`` or ``reversed`` it is
        given may be read in part or twice, as Python's iterator."""
        if not isinstance(e.func, ast.Name) or self.own_code:
            return False
        if self.calls_builtin(e, _MAY_STOP_EARLY):
            return True
        name = e.func.id
        if name in self.local_names or name in self.scope.free:
            return True
        fn = self.globals.get(name)
        module = str(getattr(fn, "__module__", None) or "")
        return type(fn).__name__ == "function" and not module.startswith(
            ("numpy", "scipy", "dplus")
        )

    @staticmethod
    def mark_passed_on(stmt: ast.stmt) -> None:
        """Mark the lazy builtin's call ``stmt`` assigns, given to a user's function, to be
        made as Python's live iterator at the first order (at a higher order: a list, as before)."""
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            value: Core = stmt.value
            value.dp_live = True
            value.dp_kept = True
            value.dp_live_first_order = True

    def e_Attribute(self, e: ast.Attribute) -> Atom:
        obj = self.expr(e.value)
        return self.temp(ast.Attribute(value=obj, attr=e.attr, ctx=ast.Load()), e)

    def slice_(self, s: ast.expr) -> ast.expr:
        if isinstance(s, ast.Slice):
            return ast.Slice(
                lower=self.expr(s.lower) if s.lower is not None else None,
                upper=self.expr(s.upper) if s.upper is not None else None,
                step=self.expr(s.step) if s.step is not None else None,
            )
        return self.expr(s)

    def e_Subscript(self, e: ast.Subscript) -> Atom:
        obj = self.expr(e.value)
        idx = self.slice_(e.slice)
        if getattr(e, "dp_global", False):
            return self.temp(_internal("read_global", [obj, idx]), e)
        return self.temp(ast.Subscript(value=obj, slice=idx, ctx=ast.Load()), e)

    def e_Slice(self, e: ast.Slice) -> Atom:
        return self.temp(
            ast.Call(
                func=_name("slice"),
                args=[
                    self.expr(x) if x is not None else _const(None)
                    for x in (e.lower, e.upper, e.step)
                ],
                keywords=[],
            ),
            e,
        )

    def elements(self, elts: list[ast.expr]) -> list[ast.expr]:
        out: list[ast.expr] = []
        for x in elts:
            if isinstance(x, ast.Starred):
                out.append(ast.Starred(value=self.expr(x.value), ctx=ast.Load()))
            else:
                out.append(self.expr(x))
        return out

    def e_Tuple(self, e: ast.Tuple) -> Atom:
        return self.temp(ast.Tuple(elts=self.elements(e.elts), ctx=ast.Load()), e)

    def e_List(self, e: ast.List) -> Atom:
        return self.temp(ast.List(elts=self.elements(e.elts), ctx=ast.Load()), e)

    def e_Set(self, e: ast.Set) -> Atom:
        return self.temp(ast.Set(elts=self.elements(e.elts)), e)

    def e_Dict(self, e: ast.Dict) -> Atom:
        keys: list[ast.expr | None] = []
        values: list[ast.expr] = []
        for k, v in zip(e.keys, e.values):
            keys.append(self.expr(k) if k is not None else None)
            values.append(self.expr(v))
        return self.temp(ast.Dict(keys=keys, values=values), e)

    def e_JoinedStr(self, e: ast.JoinedStr) -> Atom:
        values: list[ast.expr] = []
        for v in e.values:
            if isinstance(v, ast.FormattedValue):
                spec: ast.expr | None = None
                if v.format_spec is not None:
                    spec = self.expr(v.format_spec)
                    spec = ast.JoinedStr(
                        values=[ast.FormattedValue(value=spec, conversion=-1, format_spec=None)]
                    )
                values.append(
                    ast.FormattedValue(
                        value=self.expr(v.value), conversion=v.conversion, format_spec=spec
                    )
                )
            else:
                values.append(v)
        return self.temp(ast.JoinedStr(values=values), e)

    def e_Starred(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "a starred expression here")


_MAY_STOP_EARLY = {"any": any, "all": all, "next": next}
