"""``for`` and ``while``, ``break`` and ``continue`` as flags, and what a loop's iterable is."""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Any

from ..trees import walk
from .core import (
    _FRESH_LIST_BUILTINS,
    _LIVE_BUILTINS,
    _LIVE_CALLERS,
    _PURE_BUILTINS,
    _PURE_MODULES,
    _SNAPSHOT_BUILTINS,
    _TUPLE_ITEM_BUILTINS,
    _ZIP,
    Core,
    _assign,
    _const,
    _contains_escape,
    _LoopCtx,
    _name,
)
from .rewrites import _walk_no_scopes_body

if TYPE_CHECKING:
    from .normalizer_type import NormalizerState
else:
    NormalizerState = object  # (the mixins' shared interface, for the type checker only)


def _call(func: str | ast.expr, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=_name(func) if isinstance(func, str) else func, args=args, keywords=[])


def _builtin_name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else ""


class LoopForms(NormalizerState):
    loop: _LoopCtx | None
    """Methods of :class:`Normalizer`: ``for`` and ``while``, ``break`` and ``continue`` as flags, and what a loop's iterable is."""

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
        saved: _LoopCtx | None = self.loop
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

    def s_For(self, s: Core) -> None:
        if self.loop_of_calls_as_python(s):
            return
        # ``for ... in zip(xs, ...)`` (``enumerate``, ``reversed``) whose body may write into a list:
        # iterated as Python does, lazily over the live lists, not over a list of their items
        live = not self.own_code and (
            (
                self.calls_builtin(s.iter, _LIVE_BUILTINS)
                and self.may_write_lists(s.body)
                and not self.iterates_snapshots(s.iter)
            )
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
            self.mark_inner_live(self.out[-1])
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
        node: Core = ast.copy_location(
            ast.For(target=target, iter=it, body=body, orelse=[], type_comment=None), s
        )
        node.dp_stop = ctx.brk
        node.dp_fresh_iter = fresh
        node.dp_tuple_items = tuple_items
        node.dp_zip_of = it.id if zips and isinstance(it, ast.Name) else None
        node.dp_live_iter = live
        self.emit(node)
        self.after_loop(ctx, s)

    def loop_of_calls_as_python(self, s: ast.For) -> bool:
        """``for t in map(f, xs, ys)`` / ``filter(f, xs)`` whose items computed before the loop
        could differ from Python's (``calls_observably``), written as Python runs it: ``f`` and
        the iterables evaluated once, in order, then ``for a, b in zip(xs, ys): t = f(a, b)``
        (``for u in xs: if not f(u): continue`` then ``t = u``). Each call then comes where
        Python makes it, at every order, and a body changing a list the iterator reads is what
        a loop over ``zip`` or a list already follows (``runtime.live_again`` at the next
        orders) instead of a refusal there."""
        call = s.iter
        if (
            self.own_code
            or not isinstance(call, ast.Call)
            or not self.calls_builtin(call, _LIVE_CALLERS)
            or call.keywords
            or any(isinstance(a, ast.Starred) for a in call.args)
            or not self.calls_observably(call, s.body)
        ):
            return False
        mapping = _builtin_name(call) == "map"
        given = len(call.args) - 1  # (the iterables)
        if given < 1 or (not mapping and given != 1):
            return False  # (an arity error, raised where Python raises it)
        if given > 1 and not self.calls_builtin(_call("zip", []), _ZIP):
            return False  # (zip shadowed: the live iterator, refused at the next order)
        held = [self.namer.fresh("calls") for _ in call.args]
        for name, value in zip(held, call.args):  # (the function, then each iterable)
            self.stmt(_assign(name, value, s))
        f = _name(held[0])
        sources: list[ast.expr] = [_name(n) for n in held[1:]]
        items = [self.namer.fresh("item") for _ in range(given)]
        taken: list[ast.expr] = [_name(n) for n in items]
        target: ast.expr = _name(items[0], ast.Store())
        if mapping:
            if given > 1:
                target = ast.Tuple(elts=[_name(n, ast.Store()) for n in items], ctx=ast.Store())
            iterable = sources[0] if given == 1 else _call("zip", sources)
            prologue: list[ast.stmt] = [ast.Assign(targets=[s.target], value=_call(f, taken))]
        else:
            iterable = sources[0]
            calls_nothing = isinstance(call.args[0], ast.Constant) and call.args[0].value is None
            kept = taken[0] if calls_nothing else _call(f, taken)
            skip = ast.If(
                test=ast.UnaryOp(op=ast.Not(), operand=kept), body=[ast.Continue()], orelse=[]
            )
            prologue = [skip, ast.Assign(targets=[s.target], value=taken[0])]
        loop = ast.For(target=target, iter=iterable, body=prologue + s.body, orelse=s.orelse)
        ast.copy_location(loop, s)
        for node in ast.walk(loop):
            if not hasattr(node, "lineno") and isinstance(node, (ast.stmt, ast.expr)):
                ast.copy_location(node, s)
        self.stmt(loop)
        return True

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

    def iterates_snapshots(self, call: ast.Call) -> bool:
        """Whether every iterable ``zip``/``enumerate``/``reversed`` is given is made in the call
        itself (a display, a comprehension, ``sorted(...)``, ``list(...)``): no name reaches
        it, so the body cannot change what the iterator reads (``enumerate(sorted(d))``)."""
        iterables = call.args[:1] if call.func.id == "enumerate" else call.args  # type: ignore[attr-defined]
        return bool(iterables) and all(
            isinstance(a, (ast.List, ast.ListComp, ast.Tuple, ast.Constant))
            or self.calls_builtin(a, _SNAPSHOT_BUILTINS)
            for a in iterables
        )

    def makes_lazy_iterator(self, e: ast.expr) -> bool:
        return self.calls_builtin(e, _LIVE_BUILTINS) or self.calls_builtin(e, _LIVE_CALLERS)

    @staticmethod
    def mark_live(stmt: ast.stmt, kept: bool = False) -> None:
        """Mark the call ``stmt`` assigns (``t = zip(...)``) to be made as Python's live iterator
        (``kept``: in a variable, so that it may be read again)."""
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            value: Core = stmt.value
            value.dp_live = True
            value.dp_kept = kept

    def mark_inner_live(self, stmt: ast.stmt) -> None:
        """Mark the lazy builtins' calls made for the arguments of the live call ``stmt``
        assigns (``enumerate(zip(xs, ys))``, ``zip(reversed(xs), ys)``): made at once, an inner
        iterator would read the lists before the body changes them, where Python's reads them
        as the loop goes."""
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            return
        names = {a.id for a in stmt.value.args if isinstance(a, ast.Name)}
        for earlier in reversed(self.out[:-1]):
            if not names:
                return
            if not (
                isinstance(earlier, ast.Assign)
                and len(earlier.targets) == 1
                and isinstance(earlier.targets[0], ast.Name)
            ):
                continue
            target = earlier.targets[0].id
            if target not in names:
                continue
            names.discard(target)
            if self.makes_lazy_iterator(earlier.value):
                self.mark_live(earlier, kept=True)
                # (made for the outer one, or kept in a variable only that one reads)
                earlier.value.dp_watched = (  # type: ignore[attr-defined]
                    target not in self.lazy_names or self.read_by_one_loop(target)
                )
                self.mark_inner_live(earlier)

    def read_by_one_loop(self, name: str) -> bool:
        """Whether the lazy iterator kept in ``name`` is bound once and read once, by a ``for``
        loop after it in the same block (as its iterable, or an argument of it): differentiated
        again, the list of its items made at once can stand for it, watched as the loop takes
        them (``runtime.live_again``). Read by ``next``, passed on or read twice, it cannot."""
        if name in self.scope.free or name in self.scope.params:
            return False
        stores = loads = 0
        for node in walk(self.scope.node):
            if isinstance(node, ast.Name) and node.id == name:
                stores += not isinstance(node.ctx, ast.Load)
                loads += isinstance(node.ctx, ast.Load)
            elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return False
        if stores != 1 or loads != 1:
            return False
        for node in walk(self.scope.node):
            for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if isinstance(block, list) and _bound_then_looped(block, name):
                    return True
        return False

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
            if not unshadowed(func.id):
                return False
            if func.id in _PURE_BUILTINS:
                return self.globals.get(func.id, getattr(builtins, func.id)) is getattr(
                    builtins, func.id
                )
            # a math function imported by name (``from math import cos``)
            fn = self.globals.get(func.id)
            return (
                type(fn).__name__ == "builtin_function_or_method"
                and getattr(fn, "__module__", None) in _PURE_MODULES
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
            stop: list[ast.stmt] = [_assign(ctx.brk, _const(True), s)]
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
        node: Core = ast.copy_location(ast.While(test=_const(True), body=body, orelse=[]), s)
        node.dp_stop = ctx.brk
        self.emit(node)
        self.after_loop(ctx, s)


def _bound_then_looped(block: list[ast.stmt], name: str) -> bool:
    """Whether ``block`` binds ``name`` (``name = ...``) and, after it, has a ``for`` loop
    iterating ``name`` or a call given ``name`` (``enumerate(name)``)."""
    bound = False
    for st in block:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == name
        ):
            bound = True
        elif bound and isinstance(st, ast.For):
            it = st.iter
            args = it.args if isinstance(it, ast.Call) else []
            if any(isinstance(e, ast.Name) and e.id == name for e in [it, *args]):
                return True
    return False
