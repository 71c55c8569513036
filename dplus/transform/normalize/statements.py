"""Assignments, ``del``, ``return``, ``raise``, ``assert``, ``global``, classes."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .core import _OP_SYMBOLS, Atom, Core, _assign, _const, _internal, _name, _parenthesized

if TYPE_CHECKING:
    from .normalizer_type import NormalizerState
else:
    NormalizerState = object  # (the mixins' shared interface, for the type checker only)


class StatementForms(NormalizerState):
    """Methods of :class:`Normalizer`: assignments, ``del``, ``return``, ``raise``, ``assert``, ``global``, classes."""

    def s_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant):
            return  # docstrings and bare constants
        if isinstance(s.value, (ast.Yield, ast.YieldFrom)):
            raise self.unsupported(s, "yield (a generator)", "return a list instead")
        if isinstance(s.value, ast.Await):
            raise self.unsupported(s, "await (async code)")
        self.expr(s.value)

    def s_Pass(self, s: ast.Pass) -> None:
        pass

    def s_Assign(self, s: ast.Assign) -> None:
        if self.assign_display_elementwise(s):
            return
        value = self.expr(s.value)
        if (
            len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id in self.lazy_names
            and self.makes_lazy_iterator(s.value)
        ):
            # kept for later: consumed after the program may have changed what it reads
            self.mark_live(self.out[-1], kept=True)
            stmt = self.out[-1]
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                stmt.value.dp_watched = self.read_by_one_loop(s.targets[0].id)  # type: ignore[attr-defined]
        for target in s.targets:
            self.assign_to(target, value, s)

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is not None:
            self.assign_to(s.target, self.expr(s.value), s)

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        target = s.target
        if isinstance(target, ast.Name):
            self.check_store(target.id, s)
            cur = self.load_name(target.id, s)
            v = self.expr(s.value)
            node = self.in_place_op(s, cur, v, shared=target.id not in self.unshared)
            if target.id in self.boxed:
                # a boxed variable is written from a name (its write moves the cell's sensitivity)
                self.emit_assign_name(target.id, self.temp(node, s), s)
            else:
                self.emit_assign_name(target.id, node, s)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value)
            idx = self.slice_(target.slice)
            cur = self.temp(ast.Subscript(value=obj, slice=idx, ctx=ast.Load()), s)
            v = self.expr(s.value)
            new = self.temp(self.in_place_op(s, cur, v, shared=True), s)
            self.emit(
                ast.copy_location(
                    ast.Assign(
                        targets=[ast.Subscript(value=obj, slice=idx, ctx=ast.Store())], value=new
                    ),
                    s,
                )
            )
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value)
            cur = self.temp(ast.Attribute(value=obj, attr=target.attr, ctx=ast.Load()), s)
            v = self.expr(s.value)
            new = self.temp(self.in_place_op(s, cur, v, shared=True), s)
            self.emit(
                ast.copy_location(
                    ast.Assign(
                        targets=[ast.Attribute(value=obj, attr=target.attr, ctx=ast.Store())],
                        value=new,
                    ),
                    s,
                )
            )
        else:
            raise self.unsupported(s, "this augmented assignment target")

    def in_place_op(self, s: ast.AugAssign, cur: Atom, v: Atom, shared: bool) -> ast.BinOp:
        """The operation of ``s``: ``dp_inplace`` is ``"unshared"`` when no other reference can
        see the old value of the target (see :mod:`dplus.transform.sharing`), so an array may be replaced
        by a new one; ``"shared"`` otherwise, and ``dp_where`` then describes the statement
        for the refusal of an array."""
        node: Core = ast.BinOp(left=cur, op=s.op, right=v)
        node.dp_inplace = "shared" if shared else "unshared"
        if shared:
            text = ast.unparse(s)
            target = ast.unparse(s.target)
            fix = f"{target} = {target} {_OP_SYMBOLS[type(s.op)]} {_parenthesized(s.value)}"
            node.dp_where = (text, f"{self.filename}, line {getattr(s, 'lineno', '?')}", fix)
        return node

    def check_store(self, name: str, s: ast.AST) -> None:
        pass  # (the names declared global are read and written as globals()[name])

    def emit_assign_name(self, name: str, value: ast.expr, like: ast.AST) -> None:
        self.check_store(name, like)
        self.emit(_assign(name, value, like))

    def assign_to(self, target: Core, value: Core, like: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.check_store(target.id, like)
            # retarget the statement that made a fresh temp instead of copying it
            last = self.out[-1] if self.out else None
            if (
                isinstance(value, ast.Name)
                and last is not None
                and isinstance(last, ast.Assign)
                and isinstance(last.targets[0], ast.Name)
                and last.targets[0].id == value.id
                and value.id.startswith("_")
                and value.id in self.namer.generated
                and value.id not in self.local_names
                and not getattr(value, "dp_shared", False)
                and not isinstance(last.value, ast.Name)
                and target.id not in self.boxed
            ):
                last.targets[0].id = target.id
                value.id = target.id
                shared: Core = value
                shared.dp_shared = True
                return
            self.emit(_assign(target.id, value, like))
        elif (
            isinstance(target, (ast.Tuple, ast.List))
            and len(target.elts) > 0
            and all(
                isinstance(e, ast.Name)
                and e.id not in self.boxed
                and e.id not in self.scope.globals_
                for e in target.elts
            )
            and len({e.id for e in target.elts}) == len(target.elts)  # type: ignore[attr-defined]
            and isinstance(value, ast.Name)
        ):
            # a, b = v: unpacked natively; the reverse builds (Aa, Ab) for v
            names: list[ast.expr] = [ast.Name(id=e.id, ctx=ast.Store()) for e in target.elts]  # type: ignore[attr-defined]
            node: Core = ast.copy_location(
                ast.Assign(targets=[ast.Tuple(elts=names, ctx=ast.Store())], value=value), like
            )
            node.dp_unpack = True
            self.emit(node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            star = [i for i, e in enumerate(elts) if isinstance(e, ast.Starred)]
            if len(star) > 1:
                raise self.unsupported(like, "two starred targets")
            if star:
                k = star[0]
                call = _internal("unpack_star", [value, _const(k), _const(len(elts) - k - 1)])
            else:
                call = _internal("unpack", [value, _const(len(elts))])
            u = self.temp(call, like)
            for i, e in enumerate(elts):
                part = self.temp(ast.Subscript(value=u, slice=_const(i), ctx=ast.Load()), like)
                self.assign_to(e.value if isinstance(e, ast.Starred) else e, part, like)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value)
            idx = self.slice_(target.slice)
            self.emit(
                ast.copy_location(
                    ast.Assign(
                        targets=[ast.Subscript(value=obj, slice=idx, ctx=ast.Store())], value=value
                    ),
                    like,
                )
            )
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value)
            self.emit(
                ast.copy_location(
                    ast.Assign(
                        targets=[ast.Attribute(value=obj, attr=target.attr, ctx=ast.Store())],
                        value=value,
                    ),
                    like,
                )
            )
        else:
            raise self.unsupported(like, f"assignment to {type(target).__name__}")

    def s_Delete(self, s: ast.Delete) -> None:
        for t in s.targets:
            if isinstance(t, ast.Name):
                self.check_store(t.id, s)
                self.emit(ast.copy_location(ast.Delete(targets=[_name(t.id, ast.Del())]), s))
            elif isinstance(t, ast.Subscript):
                obj = self.expr(t.value)
                idx = self.slice_(t.slice)
                self.emit(
                    ast.copy_location(
                        ast.Delete(targets=[ast.Subscript(value=obj, slice=idx, ctx=ast.Del())]), s
                    )
                )
            elif isinstance(t, ast.Attribute):
                obj = self.expr(t.value)
                self.emit(
                    ast.copy_location(
                        ast.Delete(targets=[ast.Attribute(value=obj, attr=t.attr, ctx=ast.Del())]),
                        s,
                    )
                )
            elif isinstance(t, (ast.Tuple, ast.List)):
                self.s_Delete(ast.copy_location(ast.Delete(targets=t.elts), s))
            else:
                raise self.unsupported(s, "this del target")

    def s_If(self, s: ast.If) -> None:
        test = self.expr(s.test)
        body = self.sub(s.body)
        orelse = self.sub(s.orelse)
        self.emit(ast.copy_location(ast.If(test=test, body=body or [ast.Pass()], orelse=orelse), s))

    def s_Return(self, s: ast.Return) -> None:
        value = self.expr(s.value) if s.value is not None else _const(None)
        self.emit(_assign(self.retval, value, s))
        if self.ret_flag is not None:
            self.emit(_assign(self.ret_flag, _const(True), s))
            self.exit_loops(s)

    def s_Raise(self, s: ast.Raise) -> None:
        exc = self.expr(s.exc) if s.exc is not None else None
        cause = self.expr(s.cause) if s.cause is not None else None
        self.emit(ast.copy_location(ast.Raise(exc=exc, cause=cause), s))

    def s_Assert(self, s: ast.Assert) -> None:
        test = self.expr(s.test)
        msg = None
        if s.msg is not None:
            m = self.namer.fresh()
            msg_stmts = self.capture(lambda: self.emit(_assign(m, self.expr(s.msg), s)))
            neg = self.temp(ast.UnaryOp(op=ast.Not(), operand=test), s)
            self.emit(
                ast.copy_location(
                    ast.If(
                        test=neg,
                        body=msg_stmts
                        + [
                            ast.Raise(
                                exc=ast.Call(
                                    func=_name("AssertionError"), args=[_name(m)], keywords=[]
                                ),
                                cause=None,
                            )
                        ],
                        orelse=[],
                    ),
                    s,
                )
            )
            return
        self.emit(ast.copy_location(ast.Assert(test=test, msg=msg), s))

    def s_Global(self, s: ast.Global) -> None:
        pass  # reads and writes of these names are globals()[name] (_ModuleNamespaceAccess)

    def s_Nonlocal(self, s: ast.Nonlocal) -> None:
        self.emit(s)

    def s_AsyncFunctionDef(self, s: ast.AST) -> None:
        raise self.unsupported(s, "an async function")

    def s_AsyncFor(self, s: ast.AST) -> None:
        raise self.unsupported(s, "async for")

    def s_AsyncWith(self, s: ast.AST) -> None:
        raise self.unsupported(s, "async with")
