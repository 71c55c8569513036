"""Normalising: rewrite a function body into a small core language (A-normal form).

After this pass every expression operand is a name or a constant, every statement does at
most one operation, and control flow is only ``if``, ``for``, ``while True``, ``try``,
``with``: ``break``, ``continue`` and early ``return`` become flags, comprehensions become
loops, ``and``/``or``/conditional expressions become ``if`` statements, lambdas become
nested ``def``\\ s. The reverse transform only has to know this core.
"""

from __future__ import annotations

import ast
import builtins
import itertools
from typing import Any

import attrs

from .errors import UnsupportedSyntaxError
from .scopes import Scope
from .sharing import unshared_aug_targets
from .trees import walk

__all__ = ["IRFunction", "normalize_function", "Namer", "closure_reads"]

Atom = ast.Name | ast.Constant


# builtins registered as non-differentiable (primitives/builtins.py) that generated code calls directly
_NONDIFF_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "range",
        "len",
        "isinstance",
        "issubclass",
        "type",
        "bool",
        "any",
        "all",
        "id",
        "hash",
        "repr",
        "str",
        "callable",
        "hasattr",
        "ord",
        "chr",
        "int",
        "round",
    )
}
_FRESH_LIST_BUILTINS = {
    name: getattr(builtins, name)
    for name in ("zip", "enumerate", "map", "filter", "reversed", "sorted")
}
_TUPLE_ITEM_BUILTINS = {name: getattr(builtins, name) for name in ("zip", "enumerate")}
_ZIP = {"zip": builtins.zip}
# builtins that see the caller's namespace (normalize gives them the user's)
_INTROSPECTION_BUILTINS = {
    name: getattr(builtins, name) for name in ("locals", "vars", "dir", "globals", "eval", "exec")
}
UNBOUND = "<dplus: a variable not bound yet>"  # (a constant in generated code: a str)
# lazy in Python: a loop over them sees the writes its body makes into the lists they read
_LIVE_BUILTINS = {name: getattr(builtins, name) for name in ("zip", "enumerate", "reversed")}
_LIVE_CALLERS = {name: getattr(builtins, name) for name in ("map", "filter")}
# calls that cannot write into a list: builtins and functions of these modules, by their names
_PURE_BUILTINS = {
    "abs",
    "min",
    "max",
    "sum",
    "len",
    "range",
    "float",
    "int",
    "round",
    "pow",
    "divmod",
    "isinstance",
    "bool",
    "str",
    "repr",
    "type",
    "print",
    "complex",
    "any",
    "all",
    "hash",
    "id",
}
_PURE_MODULES = {"math", "cmath"}


class Namer:
    """Fresh names that cannot collide with the user's."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.generated: set[str] = set()
        self.counter = itertools.count(1)

    def fresh(self, hint: str = "") -> str:
        while True:
            name = f"_{hint}{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                self.generated.add(name)
                return name


@attrs.define
class IRFunction:
    name: str
    args: ast.arguments  # the user's parameters (defaults are atoms of the enclosing scope)
    body: list[ast.stmt]
    scope: Scope
    retval: str
    filename: str
    lineno: int
    children: list[IRFunction] = attrs.field(factory=list)
    is_lambda: bool = False
    boxed: set[str] = attrs.field(factory=set)
    ret_flag: str | None = None
    outer_boxed: set[str] = attrs.field(
        factory=set
    )  # boxed variables owned by an enclosing function


def closure_reads(fdef: ast.AST) -> list[str]:
    """The enclosing function's names that a nested function of the core reads: the
    variables it (or a function inside it) closes over, and the atoms its default values
    are. Its ``def`` statement holds no body, so walking it finds none of them."""
    if not hasattr(fdef, "dp_ir"):
        return []
    defaults = list(getattr(fdef, "dp_defaults", [])) + [
        d for d in getattr(fdef, "dp_kw_defaults", []) if d is not None
    ]
    return sorted(fdef.dp_ir.scope.free) + [d.id for d in defaults if isinstance(d, ast.Name)]


@attrs.define
class _LoopCtx:
    esc: str | None  # set when the rest of the iteration must be skipped
    brk: str | None  # set when the loop must stop
    broke: str | None  # set by a break statement (for loop else)


def _name(id_: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _const(v: Any) -> ast.Constant:
    return ast.Constant(value=v)


def _internal(op: str, args: list[ast.expr]) -> ast.Call:
    """A call of one of the transformer's own operations (its callee is not a user name)."""
    node = ast.Call(func=ast.Constant(value=op), args=args, keywords=[])
    node.dp_op = op
    return node


_OP_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}


def _parenthesized(e: ast.expr) -> str:
    """The source of ``e`` as the right operand of a binary operator."""
    text = ast.unparse(e)
    return (
        f"({text})"
        if isinstance(e, (ast.BinOp, ast.BoolOp, ast.IfExp, ast.Compare, ast.Lambda, ast.NamedExpr))
        else text
    )


def _assign(target: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    node = ast.Assign(targets=[_name(target, ast.Store())], value=value)
    return ast.copy_location(node, like)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def _contains_escape(stmts: list[ast.stmt], loops_too: bool = True) -> tuple[bool, bool]:
    """(has break/continue reaching this level, has return) in ``stmts``.

    Only statement lists are searched (these statements hold no expressions); a loop's
    body is inside the loop, its ``else`` clause is not (a ``break`` there leaves the
    loop around it)."""
    brk = ret = False
    todo = [(s, False) for s in stmts]
    while todo:
        node, in_loop = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Return):
            ret = True
        elif isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            brk = True
        inner = in_loop or isinstance(node, _LOOPS)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if block:
                here = in_loop if field == "orelse" else inner
                todo.extend((c, here) for c in block)
    return brk, ret


def _may_escape(stmt: ast.stmt) -> bool:
    b, r = _contains_escape([stmt], True)
    return b or r


class Normalizer:
    def __init__(
        self, scope: Scope, namer: Namer, filename: str, globals_: dict, boxed_here: set[str]
    ) -> None:
        self.scope = scope
        self.namer = namer
        self.filename = filename
        self.globals = globals_
        self.out: list[ast.stmt] = []
        self.loop: _LoopCtx | None = None
        self.ret_flag: str | None = None
        self.retval = namer.fresh("ret")
        self.children: list[IRFunction] = []
        self.boxed = boxed_here  # names read through explicit copies (cells)
        self.local_names = scope.locals | set(scope.params)
        # names an assignment expression rebinds: read into a temp, so that a read before
        # the rebinding, in the same expression, keeps the value it had (``f(x, (x := 2))``)
        self.walrus_targets = {
            n.target.id for n in walk(scope.node) if isinstance(n, ast.NamedExpr)
        }
        body = scope.node.body if isinstance(scope.node.body, list) else []
        self.unshared = unshared_aug_targets(
            scope, body, boxed_here, globals_
        )  # ``a op= b`` may rebind ``a``
        # dplus's own rule code (differentiated at higher orders) never depends on laziness:
        # its loops stay over lists, whose next-order rules exist
        self.own_code = str(globals_.get("__name__", "")).startswith("dplus.")
        # names bound to a lazy builtin's iterator (``it = map(f, xs)``): Python's live one
        self.lazy_names = (
            set()
            if self.own_code
            else {
                st.targets[0].id
                for st in _walk_no_scopes_body(body)
                if isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and self.makes_lazy_iterator(st.value)
            }
        )

    # ------------------------------------------------------------------ errors
    def unsupported(self, node: ast.AST, what: str, fix: str = "") -> UnsupportedSyntaxError:
        line = getattr(node, "lineno", "?")
        msg = f"{what} cannot be differentiated by dplus ({self.filename}, line {line})"
        if fix:
            msg += f": {fix}"
        err = UnsupportedSyntaxError(msg)
        err.filename = self.filename
        err.lineno = line if isinstance(line, int) else None
        return err

    # ------------------------------------------------------------------ helpers
    def emit(self, stmt: ast.stmt) -> None:
        self.out.append(stmt)

    def temp(self, value: ast.expr, like: ast.AST) -> ast.Name:
        t = self.namer.fresh()
        self.emit(_assign(t, value, like))
        return _name(t)

    def sub(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        saved = self.out
        self.out = []
        try:
            self.stmts(stmts)
            return self.out
        finally:
            self.out = saved

    def capture(self, fn: Any) -> list[ast.stmt]:
        saved = self.out
        self.out = []
        try:
            fn()
            return self.out
        finally:
            self.out = saved

    # ------------------------------------------------------------------ statements
    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        _, has_ret = _contains_escape(body, True)
        early = has_ret and not (
            len(
                [
                    n
                    for n in walk(ast.Module(body=body, type_ignores=[]))
                    if isinstance(n, ast.Return)
                ]
            )
            == 1
            and isinstance(body[-1], ast.Return)
            and not any(isinstance(n, ast.Return) for s in body[:-1] for n in _walk_no_scopes(s))
        )
        self.emit(ast.copy_location(_assign(self.retval, _const(None), body[0]), body[0]))
        if early:
            self.ret_flag = self.namer.fresh("returned")
            self.emit(_assign(self.ret_flag, _const(False), body[0]))
        self.stmts(body)
        return self.out

    def stmts(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s)
            if i + 1 < len(stmts) and _may_escape(s):
                flag = self.escape_flag()
                if flag is not None:
                    rest = self.sub(stmts[i + 1 :])
                    if rest:
                        test = self.temp(ast.UnaryOp(op=ast.Not(), operand=_name(flag)), s)
                        self.emit(
                            ast.copy_location(ast.If(test=test, body=rest, orelse=[]), stmts[i + 1])
                        )
                return

    def escape_flag(self) -> str | None:
        if self.loop is not None and self.loop.esc is not None:
            return self.loop.esc
        return self.ret_flag

    def stmt(self, s: ast.stmt) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise self.unsupported(s, f"the statement {type(s).__name__}")
        method(s)

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
            self.mark_live(self.out[-1])
        for target in s.targets:
            self.assign_to(target, value, s)

    def assign_display_elementwise(self, s: ast.Assign) -> bool:
        """``obj.x, obj.y = a + b, c`` (targets other than distinct plain names, a display of
        as many values): each value is evaluated into a temporary, in order, then assigned to
        its target, in order, as Python does, with no tuple made and unpacked. (Distinct
        plain names keep the native unpack, which scalar replacement takes apart.)"""
        if len(s.targets) != 1:
            return False
        target, value = s.targets[0], s.value
        if not (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)
        ):
            return False
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if len(names) == len(target.elts) and len(set(names)) == len(names):
            return False
        parts = []
        for e in value.elts:
            atom = self.expr(e)
            # (a name may be rebound by an earlier target: its value is taken now)
            parts.append(self.temp(atom, e) if isinstance(atom, ast.Name) else atom)
        for t, part in zip(target.elts, parts):
            self.assign_to(t, part, s)
        return True

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
        see the old value of the target (see :mod:`dplus.sharing`), so an array may be replaced
        by a new one; ``"shared"`` otherwise, and ``dp_where`` then describes the statement
        for the refusal of an array."""
        node = ast.BinOp(left=cur, op=s.op, right=v)
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

    def assign_to(self, target: ast.expr, value: Atom, like: ast.AST) -> None:
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
                value.dp_shared = True
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
            and len({e.id for e in target.elts}) == len(target.elts)
            and isinstance(value, ast.Name)
        ):
            # a, b = v: unpacked natively; the reverse builds (Aa, Ab) for v
            names = [ast.Name(id=e.id, ctx=ast.Store()) for e in target.elts]
            node = ast.copy_location(
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

    def exit_loops(self, s: ast.AST) -> None:
        if self.loop is not None:
            if self.loop.esc:
                self.emit(_assign(self.loop.esc, _const(True), s))
            if self.loop.brk:
                self.emit(_assign(self.loop.brk, _const(True), s))
            if self.loop.broke:
                # a return leaves the loop as a break does: its ``else`` clause does not run
                self.emit(_assign(self.loop.broke, _const(True), s))

    def s_Break(self, s: ast.Break) -> None:
        assert self.loop is not None
        self.emit(_assign(self.loop.esc, _const(True), s))
        self.emit(_assign(self.loop.brk, _const(True), s))
        if self.loop.broke:
            self.emit(_assign(self.loop.broke, _const(True), s))

    def s_Continue(self, s: ast.Continue) -> None:
        assert self.loop is not None
        self.emit(_assign(self.loop.esc, _const(True), s))

    def loop_ctx(self, body: list[ast.stmt], orelse: list[ast.stmt], is_while: bool) -> _LoopCtx:
        b, r = _contains_escape(body, True)
        # break/continue directly in this loop (not in inner loops)
        direct = _contains_escape(body, False)[0]
        needs = direct or (r and self.ret_flag is not None)
        esc = self.namer.fresh("skip") if needs else None
        brk = self.namer.fresh("stop") if (needs or is_while) else None
        broke = self.namer.fresh("broke") if (orelse and needs) else None
        return _LoopCtx(esc, brk, broke)

    def loop_body(
        self, ctx: _LoopCtx, prologue: list[ast.stmt], body: list[ast.stmt], like: ast.AST
    ) -> list[ast.stmt]:
        saved = self.loop
        self.loop = ctx
        try:
            out = list(prologue)
            if ctx.esc:
                out.append(_assign(ctx.esc, _const(False), like))
            out += self.sub(body)
            # an early return inside an inner loop must stop this loop too
            return out
        finally:
            self.loop = saved

    def s_For(self, s: ast.For) -> None:
        # ``for ... in zip(xs, ...)`` (``enumerate``, ``reversed``) whose body may write into a list:
        # iterated as Python does, lazily over the live lists, not over a list of their items
        live = not self.own_code and (
            (self.calls_builtin(s.iter, _LIVE_BUILTINS) and self.may_write_lists(s.body))
            or (self.calls_builtin(s.iter, _LIVE_CALLERS) and self.calls_observably(s.iter, s.body))
        )
        fresh = self.makes_fresh_list(s.iter) and not live
        tuple_items = self.calls_builtin(s.iter, _TUPLE_ITEM_BUILTINS) and not live
        # ``for ... in zip(a, b)``: the reverse transform may run the loop over the lists themselves
        zips = (
            self.calls_builtin(s.iter, _ZIP)
            and bool(s.iter.args)
            and not s.iter.keywords
            and not any(isinstance(a, ast.Starred) for a in s.iter.args)
        ) and not live
        it = self.expr(s.iter)
        if live:
            self.mark_live(self.out[-1])
        live = live or (isinstance(s.iter, ast.Name) and s.iter.id in self.lazy_names)
        ctx = self.loop_ctx(s.body, s.orelse, False)
        if ctx.brk:
            self.emit(_assign(ctx.brk, _const(False), s))
        if ctx.broke:
            self.emit(_assign(ctx.broke, _const(False), s))
        if isinstance(s.target, ast.Name) and s.target.id not in self.boxed:
            self.check_store(s.target.id, s)
            target = _name(s.target.id, ast.Store())
            prologue: list[ast.stmt] = []
        else:
            elem = self.namer.fresh("item")
            target = _name(elem, ast.Store())
            prologue = self.capture(lambda: self.assign_to(s.target, _name(elem), s))
        body = self.loop_body(ctx, prologue, s.body, s)
        node = ast.copy_location(
            ast.For(target=target, iter=it, body=body, orelse=[], type_comment=None), s
        )
        node.dp_stop = ctx.brk
        node.dp_fresh_iter = fresh
        node.dp_tuple_items = tuple_items
        node.dp_zip_of = it.id if zips and isinstance(it, ast.Name) else None
        node.dp_live_iter = live
        self.emit(node)
        self.after_loop(ctx, s)

    def may_write_lists(self, body: list[ast.stmt]) -> bool:
        """Whether running ``body`` may write into a list: a store or delete into a subscript or
        attribute, or a call other than of a builtin or a ``math``/``cmath`` function."""
        for node in _walk_no_scopes_body(body):
            if getattr(node, "dp_comp_result", False):
                continue
            if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(
                node.ctx, (ast.Store, ast.Del)
            ):
                return True
            if isinstance(node, ast.Call) and not self.is_pure_call(node.func):
                return True
        return False

    def makes_lazy_iterator(self, e: ast.expr) -> bool:
        return self.calls_builtin(e, _LIVE_BUILTINS) or self.calls_builtin(e, _LIVE_CALLERS)

    @staticmethod
    def mark_live(stmt: ast.stmt) -> None:
        """Mark the call ``stmt`` assigns (``t = zip(...)``) to be made as Python's live iterator."""
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            stmt.value.dp_live = True

    def calls_observably(self, call: ast.Call, body: list[ast.stmt]) -> bool:
        """Whether a loop over ``map(f, ...)`` / ``filter(f, ...)`` could tell its items computed
        before the loop from items computed as the loop takes them: ``f`` may read what the body
        changes (it is not a builtin or ``math`` function), or the body may write into a list."""
        function = call.args[0] if call.args else None
        pure = (
            function is None
            or (isinstance(function, ast.Constant) and function.value is None)
            or self.is_pure_call(function)
        )
        return not pure or self.may_write_lists(body)

    def is_pure_call(self, func: ast.expr) -> bool:
        unshadowed = lambda name: name not in self.local_names and name not in self.scope.free
        if isinstance(func, ast.Name):
            return (
                func.id in _PURE_BUILTINS
                and unshadowed(func.id)
                and self.globals.get(func.id, getattr(builtins, func.id))
                is getattr(builtins, func.id)
            )
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and unshadowed(func.value.id)
        ):
            module = self.globals.get(func.value.id)
            return (
                getattr(module, "__name__", None) in _PURE_MODULES
                and type(module).__name__ == "module"
            )
        return False

    def makes_fresh_list(self, e: ast.expr) -> bool:
        """Whether ``e`` calls a builtin whose rule returns a new list no user code can reach
        (so a loop over it may hand the sensitivities of its elements back all at once)."""
        return self.calls_builtin(e, _FRESH_LIST_BUILTINS)

    def calls_builtin(self, e: ast.expr, table: dict[str, Any]) -> bool:
        """Whether ``e`` calls one of the builtins in ``table`` by its builtin name (not shadowed)."""
        if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in table):
            return False
        name = e.func.id
        sc = self.scope
        if name in sc.assigned or name in sc.free or name in sc.params:
            return False
        return self.globals.get(name, table[name]) is table[name]

    def after_loop(self, ctx: _LoopCtx, s: ast.For | ast.While) -> None:
        if s.orelse:
            orelse = self.sub(s.orelse)
            if ctx.broke:
                test = self.temp(ast.UnaryOp(op=ast.Not(), operand=_name(ctx.broke)), s)
                self.emit(
                    ast.copy_location(
                        ast.If(test=test, body=orelse or [ast.Pass()], orelse=[]), s.orelse[0]
                    )
                )
            else:
                self.out.extend(orelse)
        if (
            self.loop is not None
            and self.ret_flag is not None
            and _contains_escape(s.body, True)[1]
        ):
            # a return inside the loop leaves the enclosing loop too
            t = self.temp(_name(self.ret_flag), s)
            exit_stmts = self.capture(lambda: self.exit_loops(s))
            if exit_stmts:
                self.emit(ast.copy_location(ast.If(test=t, body=exit_stmts, orelse=[]), s))

    def s_While(self, s: ast.While) -> None:
        ctx = self.loop_ctx(s.body, s.orelse, True)
        self.emit(_assign(ctx.brk, _const(False), s))
        if ctx.broke:
            self.emit(_assign(ctx.broke, _const(False), s))
        saved = self.loop
        self.loop = ctx

        def prologue() -> None:
            test = self.expr(s.test)
            neg = self.temp(ast.UnaryOp(op=ast.Not(), operand=test), s)
            stop = [_assign(ctx.brk, _const(True), s)]
            if ctx.esc:
                stop.insert(0, _assign(ctx.esc, _const(True), s))
            self.emit(ast.copy_location(ast.If(test=neg, body=stop, orelse=[]), s))

        try:
            if ctx.esc:
                pro = [_assign(ctx.esc, _const(False), s)] + self.capture(prologue)
                rest = self.sub(s.body)
                if rest:
                    t = self.temp(ast.UnaryOp(op=ast.Not(), operand=_name(ctx.esc)), s)
                    # the temp was emitted into self.out; move it into the loop body
                    tstmt = self.out.pop()
                    body = pro + [tstmt, ast.copy_location(ast.If(test=t, body=rest, orelse=[]), s)]
                else:
                    body = pro
            else:
                pro = self.capture(prologue)
                rest = self.sub(s.body)
                ntest = self.namer.fresh()
                body = pro + [
                    _assign(ntest, ast.UnaryOp(op=ast.Not(), operand=_name(ctx.brk)), s),
                    ast.copy_location(
                        ast.If(test=_name(ntest), body=rest or [ast.Pass()], orelse=[]), s
                    ),
                ]
        finally:
            self.loop = saved
        node = ast.copy_location(ast.While(test=_const(True), body=body, orelse=[]), s)
        node.dp_stop = ctx.brk
        self.emit(node)
        self.after_loop(ctx, s)

    def s_Try(self, s: ast.Try) -> None:
        body = self.sub(s.body)
        handlers = []
        for h in s.handlers:
            typ = self.expr(h.type) if h.type is not None else None
            hb = self.sub(h.body)
            handlers.append(
                ast.copy_location(
                    ast.ExceptHandler(type=typ, name=h.name, body=hb or [ast.Pass()]), h
                )
            )
        orelse = self.sub(s.orelse)
        flag = self.escape_flag() if _may_escape(ast.Module(body=s.body, type_ignores=[])) else None
        if orelse and flag is not None:
            # a return (or break, continue) in the body leaves the try without running its
            # else clause: the normalised body only sets the flag and goes on
            test = _name(self.namer.fresh())
            orelse = [
                _assign(test.id, ast.UnaryOp(op=ast.Not(), operand=_name(flag)), s.orelse[0]),
                ast.copy_location(ast.If(test=test, body=orelse, orelse=[]), s.orelse[0]),
            ]
        final = self.sub(s.finalbody)
        if not handlers and not final:
            # ``try: ... finally: pass``: the body alone does the same (an exception leaves it as it
            # would leave the try), and a try with neither handlers nor a finally does not compile
            for st in body:
                self.emit(st)
            return
        self.emit(
            ast.copy_location(
                ast.Try(
                    body=body or [ast.Pass()], handlers=handlers, orelse=orelse, finalbody=final
                ),
                s,
            )
        )

    def s_TryStar(self, s: ast.AST) -> None:
        raise self.unsupported(s, "try/except* (exception groups)", "use try/except")

    def s_With(self, s: ast.With) -> None:
        items = []
        for item in s.items:
            cm = self.expr(item.context_expr)
            var = None
            post: list[ast.stmt] = []
            if item.optional_vars is not None:
                if isinstance(item.optional_vars, ast.Name):
                    var = _name(item.optional_vars.id, ast.Store())
                else:
                    tmp = self.namer.fresh()
                    var = _name(tmp, ast.Store())
                    post = self.capture(
                        lambda item=item, tmp=tmp: self.assign_to(item.optional_vars, _name(tmp), s)
                    )
            items.append((cm, var, post))
        body = self.sub(s.body)
        node_body = body or [ast.Pass()]
        for cm, var, post in reversed(items):
            node_body = [
                ast.copy_location(
                    ast.With(
                        items=[ast.withitem(context_expr=cm, optional_vars=var)],
                        body=post + node_body,
                    ),
                    s,
                )
            ]
        self.out.extend(node_body)

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

    def s_Import(self, s: ast.Import | ast.ImportFrom) -> None:
        self.emit(s)

    s_ImportFrom = s_Import

    def s_FunctionDef(self, s: ast.FunctionDef) -> None:
        decorators = [self.expr(d) for d in s.decorator_list]  # (evaluated first, as Python does)
        defaults = [self.expr(d) for d in s.args.defaults]
        kw_defaults = [self.expr(d) if d is not None else None for d in s.args.kw_defaults]
        self.nested_function(s, s.name, s.body, defaults, kw_defaults, False)
        # a decorator is a call applied to the plus-function, the nearest first
        for decorator in reversed(decorators):
            decorated = self.temp(
                ast.Call(func=decorator, args=[self.load_name(s.name, s)], keywords=[]), s
            )
            self.emit_assign_name(s.name, decorated, s)

    def s_AsyncFunctionDef(self, s: ast.AST) -> None:
        raise self.unsupported(s, "an async function")

    def s_AsyncFor(self, s: ast.AST) -> None:
        raise self.unsupported(s, "async for")

    def s_AsyncWith(self, s: ast.AST) -> None:
        raise self.unsupported(s, "async with")

    def s_ClassDef(self, s: ast.ClassDef) -> None:
        raise self.unsupported(
            s,
            f"the class definition {s.name!r} inside a differentiated function",
            "define the class at module level",
        )

    def s_Match(self, s: ast.Match) -> None:
        subject = self.expr(s.subject)
        cases = []
        for case in s.cases:
            body = self.sub(case.body)
            guard = case.guard  # a condition: evaluated natively, it carries no sensitivity
            prologue = self.capture(
                lambda case=case: self.capture_bindings(case.pattern, subject, s)
            )
            cases.append(
                ast.match_case(
                    pattern=case.pattern, guard=guard, body=prologue + (body or [ast.Pass()])
                )
            )
        node = ast.copy_location(ast.Match(subject=subject, cases=cases), s)
        self.emit(node)

    def capture_bindings(self, pattern: ast.pattern, subject: Atom, like: ast.AST) -> None:
        """Re-derive a pattern's captures from the subject by differentiable projections."""
        if isinstance(pattern, ast.MatchAs):
            if pattern.pattern is not None:
                self.capture_bindings(pattern.pattern, subject, like)
            if pattern.name:
                self.emit(_assign(pattern.name, subject, like))
        elif isinstance(pattern, ast.MatchSequence):
            star = [i for i, p in enumerate(pattern.patterns) if isinstance(p, ast.MatchStar)]
            n = len(pattern.patterns)
            if star:
                k = star[0]
                call = _internal("unpack_star", [subject, _const(k), _const(n - k - 1)])
            else:
                call = _internal("unpack", [subject, _const(n)])
            u = self.temp(call, like)
            for i, p in enumerate(pattern.patterns):
                part = self.temp(ast.Subscript(value=u, slice=_const(i), ctx=ast.Load()), like)
                if isinstance(p, ast.MatchStar):
                    if p.name:
                        self.emit(_assign(p.name, part, like))
                else:
                    self.capture_bindings(p, part, like)
        elif isinstance(pattern, ast.MatchMapping):
            for key, p in zip(pattern.keys, pattern.patterns):
                part = self.temp(ast.Subscript(value=subject, slice=key, ctx=ast.Load()), like)
                self.capture_bindings(p, part, like)
            if pattern.rest:
                raise self.unsupported(like, "a **rest capture in a mapping pattern")
        elif isinstance(pattern, ast.MatchClass):
            if pattern.patterns:
                names = self.temp(
                    _internal("match_args", [subject, _const(len(pattern.patterns))]), like
                )
                for i, p in enumerate(pattern.patterns):
                    attr = self.temp(
                        ast.Subscript(value=names, slice=_const(i), ctx=ast.Load()), like
                    )
                    part = self.temp(
                        ast.Call(func=_name("getattr"), args=[subject, attr], keywords=[]), like
                    )
                    self.capture_bindings(p, part, like)
            for attr, p in zip(pattern.kwd_attrs, pattern.kwd_patterns):
                part = self.temp(ast.Attribute(value=subject, attr=attr, ctx=ast.Load()), like)
                self.capture_bindings(p, part, like)
        elif isinstance(pattern, ast.MatchOr):
            if any(
                isinstance(n, (ast.MatchAs, ast.MatchStar)) and getattr(n, "name", None)
                for n in walk(pattern)
            ):
                raise self.unsupported(
                    like,
                    "captures inside an or-pattern",
                    "split the alternatives into separate cases",
                )
        # MatchValue / MatchSingleton / MatchStar alone bind nothing differentiable

    def nested_function(
        self,
        node: ast.AST,
        name: str,
        body: list[ast.stmt],
        defaults: list,
        kw_defaults: list,
        is_lambda: bool,
    ) -> None:
        child_scope = next((c for c in self.scope.children if c.node is node), None)
        if child_scope is None or getattr(node, "dp_reanalyse", False):
            # the node was rewritten (a closure inside a comprehension): analyse it afresh
            from .scopes import _analyse, resolve_free

            child_scope = _analyse(node)
            resolve_free(
                child_scope,
                self.local_names | self.scope.free | set(self.boxed) | self.namer.generated,
                set(),
            )
        ir = normalize_function(
            child_scope,
            self.namer,
            self.filename,
            self.globals,
            name,
            is_lambda,
            self.boxed_visible(child_scope),
        )
        self.children.append(ir)
        fdef = ast.FunctionDef(
            name=name,
            args=node.args,
            body=[ast.Pass()],
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef = ast.copy_location(fdef, node)
        fdef.dp_ir = ir
        fdef.dp_defaults = defaults
        fdef.dp_kw_defaults = kw_defaults
        self.emit(fdef)

    def boxed_visible(self, child: Scope) -> set[str]:
        """Boxed variables the child sees: this scope's boxed locals it uses, and ours from outside."""
        return {n for n in child.free if n in self.boxed}

    # ------------------------------------------------------------------ expressions
    def load_name(self, name: str, like: ast.AST) -> Atom:
        if name in self.boxed or name in self.walrus_targets:
            return self.temp(_name(name), like)
        return _name(name)

    def expr(self, e: ast.expr) -> Atom:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise self.unsupported(e, f"the expression {type(e).__name__}")
        return method(e)

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
            value = -a.value if isinstance(e.op, ast.USub) else +a.value
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
        name = e.func.id
        if name == "globals" and not e.args:
            node = ast.Call(func=_name("globals"), args=[], keywords=[])
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
            g = ast.Call(func=_name("globals"), args=[], keywords=[])
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
        frame = ast.Call(func=_name("locals"), args=[], keywords=[])
        frame.dp_builtin = True  # (only its keys are used: which variables are bound now)
        bound = self.temp(frame, e)
        values = []
        for n in names:
            test = ast.Compare(left=_const(n), ops=[ast.In()], comparators=[_name(bound.id)])
            pick = ast.copy_location(ast.IfExp(test=test, body=_name(n), orelse=_const(UNBOUND)), e)
            values.append(self.expr(pick))
        display = self.temp(ast.Dict(keys=[_const(n) for n in names], values=values), e)
        return self.temp(_internal("user_namespace", [display]), e)

    def e_Call(self, e: ast.Call) -> Atom:
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
            args = [obj, _const(e.func.attr)] + [self.expr(a) for a in e.args]
            node = _internal("callmethod", args)
            node.keywords = [ast.keyword(arg=k.arg, value=self.expr(k.value)) for k in e.keywords]
            # (a comprehension's own result list: reverse.py's fast segments may append to it)
            node.dp_comp_result = getattr(e, "dp_comp_result", False)
            return self.temp(node, e)
        if func is None:
            func = self.expr(e.func)
        args: list[ast.expr] = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                args.append(ast.Starred(value=self.expr(a.value), ctx=ast.Load()))
            else:
                args.append(self.expr(a))
        keywords = [ast.keyword(arg=k.arg, value=self.expr(k.value)) for k in e.keywords]
        node = ast.Call(func=func, args=args, keywords=keywords)
        if (
            self.calls_builtin(e, _NONDIFF_BUILTINS)
            and not any(isinstance(a, ast.Starred) for a in args)
            and all(k.arg is not None for k in keywords)
        ):
            node.dp_builtin = True  # zero derivative: called as it is, nothing recorded
        return self.temp(node, e)

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
                spec = None
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

    def e_Lambda(self, e: ast.Lambda) -> Atom:
        name = self.namer.fresh("lambda")
        defaults = [self.expr(d) for d in e.args.defaults]
        kw_defaults = [self.expr(d) if d is not None else None for d in e.args.kw_defaults]
        body = [ast.copy_location(ast.Return(value=e.body), e.body)]
        self.nested_function(e, name, body, defaults, kw_defaults, True)
        return _name(name)

    def comprehension(
        self, e: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, kind: str
    ) -> Atom:
        result = self.namer.fresh("comp")
        init = {
            "list": ast.List(elts=[], ctx=ast.Load()),
            "set": ast.Set(elts=[]),
            "dict": ast.Dict(keys=[], values=[]),
        }[kind]
        if kind == "set":
            init = ast.Call(func=_name("set"), args=[], keywords=[])
            init.dp_builtin = True
        self.emit(_assign(result, init, e))
        # rename the comprehension's own variables so they do not leak
        renames: dict[str, str] = {}
        for gen in e.generators:
            for n in walk(gen.target):
                if isinstance(n, ast.Name):
                    renames.setdefault(n.id, self.namer.fresh(n.id.strip("_")[:8] + "_"))
        e = _Renamer(renames).visit(e)
        for node in walk(e):
            if isinstance(node, (ast.Lambda, ast.FunctionDef)):
                used = {n.id for n in walk(node) if isinstance(n, ast.Name)}
                # closures made in a comprehension see its variable late-bound, as Python does
                self.boxed.update(v for v in renames.values() if v in used)
                node.dp_reanalyse = True

        # the first iterable is evaluated in the enclosing scope, the rest per iteration
        loops = self._comp_loops(e, 0, kind, result)
        self.stmts(loops)
        return _name(result)

    def _comp_loops(self, e: Any, i: int, kind: str, result: str) -> list[ast.stmt]:
        gen = e.generators[i]
        body: list[ast.stmt] = []
        if i + 1 < len(e.generators):
            body = self._comp_loops(e, i + 1, kind, result)
        elif kind == "dict":
            store = ast.Subscript(value=_name(result), slice=e.key, ctx=ast.Store())
            store.dp_comp_result = True
            body = [ast.copy_location(ast.Assign(targets=[store], value=e.value), e)]
        else:
            meth = "append" if kind == "list" else "add"
            call = ast.Call(
                func=ast.Attribute(value=_name(result), attr=meth, ctx=ast.Load()),
                args=[e.elt],
                keywords=[],
            )
            call.dp_comp_result = (
                True  # (into the comprehension's own new result: not a write the loop can see)
            )
            body = [ast.copy_location(ast.Expr(value=call), e)]
        for cond in reversed(gen.ifs):
            body = [ast.copy_location(ast.If(test=cond, body=body, orelse=[]), cond)]
        return [
            ast.copy_location(
                ast.For(target=gen.target, iter=gen.iter, body=body, orelse=[], type_comment=None),
                e,
            )
        ]

    def e_ListComp(self, e: ast.ListComp) -> Atom:
        return self.comprehension(e, "list")

    def e_GeneratorExp(self, e: ast.GeneratorExp) -> Atom:
        return self.comprehension(e, "list")

    def e_SetComp(self, e: ast.SetComp) -> Atom:
        return self.comprehension(e, "set")

    def e_DictComp(self, e: ast.DictComp) -> Atom:
        return self.comprehension(e, "dict")

    def e_Yield(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "yield (a generator)", "return a list instead")

    e_YieldFrom = e_Yield

    def e_Await(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "await (async code)")

    def e_Starred(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "a starred expression here")


class _Renamer(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.renames:
            return ast.copy_location(ast.Name(id=self.renames[node.id], ctx=node.ctx), node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        # defaults are evaluated where the lambda is made: they see the renamed variables
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            self.visit(d) if d is not None else None for d in node.args.kw_defaults
        ]
        shadowed = {a.arg for a in node.args.args + node.args.posonlyargs + node.args.kwonlyargs}
        inner = _Renamer({k: v for k, v in self.renames.items() if k not in shadowed})
        node.body = inner.visit(node.body)
        return node


class _YieldsToList(ast.NodeTransformer):
    """A generator function's body, differentiated: it runs to completion when called and
    returns the list of the values it yielded, in order (as generator expressions, ``map``
    and ``zip`` give lists inside differentiated code), so each value's sensitivity comes
    back to the expression that yielded it. What needs the generator itself is refused:
    the value of a ``yield`` expression (``send``) and a generator's ``return`` value."""

    def __init__(self, out: str, name: str, filename: str) -> None:
        self.out = out
        self.name = name
        self.filename = filename

    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        start = ast.copy_location(
            ast.Assign(
                targets=[_name(self.out, ast.Store())], value=ast.List(elts=[], ctx=ast.Load())
            ),
            body[0],
        )
        new = [self.visit(_deepcopy(st)) for st in body]
        end = ast.copy_location(ast.Return(value=_name(self.out)), body[-1])
        return [start] + new + [end]

    def _refuse(self, node: ast.AST, what: str) -> UnsupportedSyntaxError:
        line = getattr(node, "lineno", "?")
        err = UnsupportedSyntaxError(
            f"{what} in the generator function {self.name!r} cannot be differentiated by dplus ({self.filename}, line "
            f"{line}): inside differentiated code a generator runs to completion and gives the list of its values; "
            "use only `yield value` and `yield from iterable` statements"
        )
        err.filename = self.filename
        err.lineno = line if isinstance(line, int) else None
        return err

    def _collect(self, method: str, value: ast.expr, like: ast.AST) -> ast.Expr:
        call = ast.Call(
            func=ast.Attribute(value=_name(self.out), attr=method, ctx=ast.Load()),
            args=[value],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(value=call), like)

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        v = node.value
        if isinstance(v, ast.Yield):
            return self._collect(
                "append", self.visit(v.value) if v.value is not None else _const(None), node
            )
        if isinstance(v, ast.YieldFrom):
            return self._collect("extend", self.visit(v.value), node)
        return self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> ast.Return:
        if node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            raise self._refuse(node, "a generator's return value")
        return ast.copy_location(ast.Return(value=_name(self.out)), node)

    def visit_Yield(self, node: ast.Yield) -> ast.AST:
        raise self._refuse(node, "the value of a yield expression (generator.send)")

    visit_YieldFrom = visit_Yield

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        return node  # (its own yields are its own)

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef


class _ModuleNamespaceAccess(ast.NodeTransformer):
    """Reads and writes of the names a function declares ``global`` become reads and writes
    of the module's namespace, ``globals()[name]``: the namespace is a mutable container
    (a dict), so a write happens as in Python, once per call, and a value written and read
    back carries its sensitivity (SPEC section 5). Functions nested inside that do not bind
    the name read the same global, so their reads are rewritten too."""

    def __init__(self, names: set[str]) -> None:
        self.names = set(names)

    def visit_Global(self, node: ast.Global) -> ast.Global:
        return node

    def visit_NamedExpr(self, node: ast.NamedExpr) -> ast.NamedExpr:
        node.value = self.visit(node.value)
        if node.target.id in self.names:
            node.dp_global = True  # (its target must stay a name: Normalizer.e_NamedExpr writes it)
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id not in self.names:
            return node
        namespace = ast.Call(func=_name("globals"), args=[], keywords=[])
        access = ast.copy_location(
            ast.Subscript(value=namespace, slice=_const(node.id), ctx=node.ctx), node
        )
        access.dp_global = (
            True  # (a read falls back to the builtins, or raises NameError, as Python's)
        )
        return access

    def _nested(self, node: Any, params: list[str], body: list[ast.AST]) -> Any:
        declared = {
            n
            for st in body
            for sub in _walk_no_scopes(st)
            if isinstance(sub, ast.Global)
            for n in sub.names
        }
        bound = set(params) | {
            sub.id
            for st in body
            for sub in _walk_no_scopes(st)
            if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load)
        }
        inner = _ModuleNamespaceAccess((self.names - bound) | declared)
        for field in ("decorator_list",):
            setattr(node, field, [self.visit(d) for d in getattr(node, field, [])])
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            self.visit(d) if d is not None else None for d in node.args.kw_defaults
        ]
        if isinstance(node.body, list):
            node.body = [inner.visit(st) for st in node.body]
        else:
            node.body = inner.visit(node.body)
        return node

    @staticmethod
    def _params(args: ast.arguments) -> list[str]:
        every = (
            args.posonlyargs
            + args.args
            + args.kwonlyargs
            + [a for a in (args.vararg, args.kwarg) if a]
        )
        return [a.arg for a in every]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return self._nested(node, self._params(node.args), node.body)

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return self._nested(node, self._params(node.args), [node.body])


def _deepcopy(node: ast.AST) -> ast.AST:
    import copy

    return copy.deepcopy(node)


def _walk_no_scopes(node: ast.AST):
    """``node`` and the nodes under it outside nested functions, lambdas and classes
    (in no particular order; contexts skipped)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for f in n._fields:
            v = getattr(n, f, None)
            if type(v) is list:
                todo.extend(
                    c for c in v if isinstance(c, ast.AST) and not isinstance(c, _NEW_SCOPES)
                )
            elif isinstance(v, ast.AST) and not isinstance(v, _NEW_SCOPES) and f != "ctx":
                todo.append(v)


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walk_no_scopes_body(body: list[ast.stmt]):
    for s in body:
        if isinstance(s, _NEW_SCOPES):
            yield s  # (a def or class of the body: its own body is another scope)
        else:
            yield from _walk_no_scopes(s)


def normalize_function(
    scope: Scope,
    namer: Namer,
    filename: str,
    globals_: dict,
    name: str,
    is_lambda: bool,
    boxed_from_outside: set[str],
) -> IRFunction:
    node = scope.node
    body = (
        node.body
        if isinstance(node.body, list)
        else [ast.copy_location(ast.Return(value=node.body), node.body)]
    )
    if is_lambda and not isinstance(node.body, list):
        pass
    if isinstance(node, ast.FunctionDef) and any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk_no_scopes_body(body)
    ):
        body = _YieldsToList(namer.fresh("yielded"), name, filename).function_body(body)
    boxed = set(scope.boxed) | boxed_from_outside
    if scope.globals_:
        body = [_ModuleNamespaceAccess(scope.globals_).visit(_deepcopy(st)) for st in body]
    n = Normalizer(scope, namer, filename, globals_, boxed)
    stmts = n.function_body(body)
    ir = IRFunction(
        name,
        node.args,
        stmts,
        scope,
        n.retval,
        filename,
        node.lineno,
        n.children,
        is_lambda,
        n.boxed,
        n.ret_flag,
        set(boxed_from_outside),
    )
    return ir
