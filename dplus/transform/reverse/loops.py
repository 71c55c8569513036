"""``for`` and ``while``: iteration counts, routing element sensitivities."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..normalize.core import Core
from ..trees import clone, walk
from . import syntax
from .syntax import C, FastParts, N, S, _assigned_names, _is_name, assign, attr, call, tuple_

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class LoopRules(Builder):
    """Methods of :class:`FunctionBuilder`: ``for`` and ``while``: iteration counts, routing element sensitivities."""

    def zip_statement(self, s: ast.stmt, run: list[ast.stmt]) -> ast.Assign | None:
        """The statement ``it = zip(xs, ys, ...)`` just before ``for ... in it`` (made by
        normalizing ``for ... in zip(xs, ys, ...)``), when its loop may run over the lists."""
        name = getattr(s, "dp_zip_of", None)
        if not (
            name
            and run
            and isinstance(s, ast.For)
            and self.fast
            and not self.nestable
            and not self.in_try
        ):
            return None
        zs = run[-1]
        if (
            isinstance(zs, ast.Assign)
            and _is_name(zs.targets[0], name)
            and isinstance(zs.value, ast.Call)
            and isinstance(zs.value.func, ast.Name)
            and all(isinstance(a, ast.Name) for a in zs.value.args)
        ):
            return zs
        return None

    def loop_over_zip(self, zs: ast.Assign, s: Core) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """``it = zip(...)`` and ``for ... in it``: the zip statement's code goes inside the
        loop's general branch when :meth:`loop_over_lists` makes another, before it otherwise."""
        zip_fwd: list[ast.stmt] = []
        zip_rev: list[ast.stmt] = []
        for seg in self.segments([zs]):
            f, r = self.segment(seg)
            zip_fwd += f
            zip_rev = r + zip_rev
        self.defined_before.update(_assigned_names(zs))
        s.dp_zip_general = (zs, zip_fwd, zip_rev)
        f, r = self.compound(s)
        if getattr(s, "dp_zip_general", None) is None:
            return f, r
        s.dp_zip_general = None
        return zip_fwd + f, r + zip_rev

    def loop_common(
        self, body_stmts: list[ast.stmt], stop: str | None, bound: tuple[str, ...] = ()
    ) -> tuple[list[ast.stmt], list[ast.stmt], str]:
        bf, br = self.block(body_stmts, bound)
        n = self.namer.fresh("n")
        bf = bf + [ast.AugAssign(target=S(n), op=ast.Add(), value=C(1))]
        if stop:
            bf.append(ast.If(test=N(stop), body=[ast.Break()], orelse=[]))
        return bf, br, n

    def c_For(self, s: Core) -> tuple[list[ast.stmt], list[ast.stmt]]:
        target = s.target.id
        if getattr(s, "dp_tuple_items", False) and target not in self.boxed:
            self.tuple_items.add(target)
        # the target's adjoint is zero when each iteration's reverse starts (routing resets it)
        logged = len(self.segment_log)
        bf, br, n = self.loop_common(s.body, getattr(s, "dp_stop", None), (target,))
        it = s.iter
        rec_it = it.id if isinstance(it, ast.Name) else None
        itv = self.namer.fresh("it")
        A_t = self.adj(target)
        # (a live iterator's items are routed as each iteration is reversed: map's calls of
        # its function read variables the body may rebind, and their backprops must run then)
        batched = (
            self.fast
            and not getattr(s, "dp_live_iter", False)
            and (getattr(s, "dp_fresh_iter", False) or not self.may_mutate(s.body))
        )
        parts = self.segment_log[logged:]
        if (
            batched
            and not getattr(s, "dp_stop", None)
            and len(parts) == 1
            and parts[0] is not None
            and all(isinstance(st, ast.Assign) for st in s.body)
        ):
            return self.loop_with_fast_prefix(s, parts[0], bf, br, n, itv, rec_it)
        fresh = getattr(s, "dp_fresh_iter", False)
        src_name = self.namer.fresh("loop_src")
        src: ast.expr = clone(it) if fresh else N(src_name)
        fwd = [] if fresh else [self.loop_iterable(src_name, it)]
        stop = getattr(s, "dp_stop", None)
        watched = self.nestable and getattr(s, "dp_live_iter", False)
        if watched:  # (a lazy builtin's items made at once: runtime.live_again.live_item_taken)
            bf = [ast.Expr(call(self.rt("live_item_taken"), clone(src), N(n)))] + bf
        fwd += [
            assign(n, C(0)),
            ast.For(target=S(target), iter=clone(src), body=bf, orelse=[], type_comment=None),
        ]
        if watched:
            stopped = N(stop) if stop else C(False)
            fwd.append(ast.Expr(call(self.rt("live_iteration_done"), clone(src), N(n), stopped)))
        length = self.namer.fresh("len")
        fwd.append(self.push(tuple_([clone(src), N(n), self.list_length(s, src)])))
        route = self.namer.fresh("route")
        i = self.namer.fresh("i")
        rev_body = list(br)
        # The elements' sensitivities go back to the iterable all at once after the loop,
        # unless the body may write into the list it iterates (then each goes back when its
        # iteration is reversed, before the reverse of earlier writes), and at higher orders
        # (where the routing needs rules of its own).
        back: ast.stmt
        if batched:
            back = ast.Assign(
                targets=[ast.Subscript(value=N(route), slice=N(i), ctx=ast.Store())], value=N(A_t)
            )
        else:
            back = ast.Expr(
                call(self.rt("route_back"), N(route), N(i), N(A_t), N(syntax.ABOX))
                if self.nestable
                else call(attr(route, "back"), N(i), N(A_t), N(syntax.ABOX))
            )
        every = None if fresh else self.namer.fresh("every")
        rev_body.append(self.routed(A_t, back, every))
        start: ast.expr = (
            ast.BinOp(left=ast.List(elts=[N(self.Z)], ctx=ast.Load()), op=ast.Mult(), right=N(n))
            if batched
            else call(self.rt("iteration_router"), N(itv), N(n), N(length))
            if self.nestable
            else call(self.rt("iteration_router"), N(itv), N(n), N(length), N(syntax.ABOX))
        )
        rev = self.pop_into([itv, n, length])
        if every is not None:
            rev += self.generator_route(every, itv, n, length, batched)
            start = ast.IfExp(
                test=N(every),
                body=call(
                    self.rt("generator_route"), N(itv), N(n), N(length), N(syntax.ABOX), C(batched)
                ),
                orelse=start,
            )
        rev += [
            assign(route, start),
            ast.For(
                target=S(i),
                iter=call(
                    self.helper(range, "range"),
                    ast.BinOp(left=N(n), op=ast.Sub(), right=C(1)),
                    C(-1),
                    C(-1),
                ),
                body=rev_body,
                orelse=[],
                type_comment=None,
            ),
        ]
        if batched:
            result = call(self.rt("route_all"), N(itv), N(route), N(syntax.ABOX), N(length))
        elif self.nestable:
            result = call(self.rt("route_result"), N(route))
        else:
            result = call(attr(route, "result"))
        if rec_it is not None or batched:
            rev.append(self.hand_back(rec_it, itv, result))
        return fwd, rev

    def list_length(self, s: ast.For, src: ast.expr | None = None) -> ast.expr:
        """What a loop records of its iterable's length where it ends (``runtime.routers.list_length``):
        a list iterated may be resized before the loop's reverse routes its elements' sensitivities.
        A fresh list (``zip``, ``enumerate``, ...) is not: ``-1``, with no call."""
        if getattr(s, "dp_fresh_iter", False):
            return C(-1)
        return call(self.rt("list_length"), clone(src if src is not None else s.iter))

    def loop_iterable(self, src: str, it: ast.expr) -> ast.stmt:
        """``src = it``, or for a generator its ``GeneratorTaker`` (``runtime.generators``): the
        loop iterates ``src`` and records it, so that each iteration's value goes back to the
        resumption that produced it."""
        from ...runtime.generators import Generator

        is_generator = ast.Compare(
            left=call(self.helper(type, "type"), clone(it)),
            ops=[ast.Is()],
            comparators=[self.helper(Generator, "Generator")],
        )
        return assign(
            src,
            ast.IfExp(
                test=is_generator, body=call(self.rt("loop_iterable"), clone(it)), orelse=clone(it)
            ),
        )

    def generator_route(
        self, every: str, itv: str, n: str, length: str, batched: bool
    ) -> list[ast.stmt]:
        """``every = the loop iterated a generator``: then each iteration is routed as it is
        reversed, a zero sensitivity too (its resumption is reversed there)."""
        from ...runtime.generators import GeneratorTaker

        return [
            assign(
                every,
                ast.Compare(
                    left=call(self.helper(type, "type"), N(itv)),
                    ops=[ast.Is()],
                    comparators=[self.helper(GeneratorTaker, "GeneratorTaker")],
                ),
            )
        ]

    def routed(self, A_t: str, back: ast.stmt, every: str | None = None) -> ast.If:
        """``if A_t is not Z: <back>; A_t = Z``: an iteration's element sensitivity, routed
        (also a zero one when ``every``: a generator's resumption is reversed there)."""
        test: ast.expr = ast.Compare(left=N(A_t), ops=[ast.IsNot()], comparators=[N(self.Z)])
        if every is not None:
            test = ast.BoolOp(op=ast.Or(), values=[test, N(every)])
        return ast.If(test=test, body=[back, assign(A_t, N(self.Z))], orelse=[])

    def hand_back(self, rec_it: str | None, itv: str, result: ast.expr) -> ast.stmt:
        """After a loop's reverse: the iterable (a name) gets the sensitivity its routing returns."""
        if rec_it is None:
            return ast.Expr(result)
        self.persistent.add(rec_it)
        A_it = self.adj(rec_it)
        if self.nestable:
            return assign(
                A_it, call(self.rt("accumulate"), N(A_it), N(itv), result, N(syntax.ABOX))
            )
        # (a list's elements' sensitivities went to its entry: usually nothing is left, no call)
        routed = self.namer.fresh("routed")
        return ast.If(
            test=ast.Compare(
                left=ast.NamedExpr(target=S(routed), value=result),
                ops=[ast.IsNot()],
                comparators=[N(self.Z)],
            ),
            body=[
                assign(
                    A_it, call(self.rt("accumulate"), N(A_it), N(itv), N(routed), N(syntax.ABOX))
                )
            ],
            orelse=[],
        )

    def loop_with_fast_prefix(
        self,
        s: Core,
        fast: FastParts,
        bf: list[ast.stmt],
        br: list[ast.stmt],
        n: str,
        itv: str,
        rec_it: str | None,
    ) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """A loop whose body is one fast segment: over ``zip`` of lists of numbers, the loop
        over the lists themselves (:meth:`loop_over_lists`) when the guard can be tested once;
        otherwise, or when that test fails, :meth:`fast_prefix_loop`."""
        fwd, rev = self.fast_prefix_loop(s, fast, bf, br, n, itv, rec_it)
        general = getattr(s, "dp_zip_general", None)
        lists = self.loop_over_lists(s, fast) if general is not None else None
        if general is None or lists is None:
            return fwd, rev
        test, lists_fwd, lists_rev, rec = lists
        _, zip_fwd, zip_rev = general
        s.dp_zip_general = None  # (taken: the zip statement's code is in the general branch)
        fwd = [
            ast.If(
                test=test,
                body=lists_fwd,
                orelse=zip_fwd + fwd + [self.push(tuple_([C(False)]), rec)],
            )
        ]
        rev = ([] if self.straight else self.pop_into([rec], whole=True)) + [
            ast.If(
                test=ast.Subscript(value=N(rec), slice=C(0), ctx=ast.Load()),
                body=lists_rev,
                orelse=rev + zip_rev,
            )
        ]
        return fwd, rev

    def c_While(self, s: ast.While) -> tuple[list[ast.stmt], list[ast.stmt]]:
        bf, br, n = self.loop_common(s.body, getattr(s, "dp_stop", None))
        fwd = [assign(n, C(0)), ast.While(test=C(True), body=bf, orelse=[]), self.push(N(n))]
        count = self.namer.fresh("count")
        rev = self.pop_into([count], whole=True) + [
            ast.For(
                target=S(self.namer.fresh("k")),
                iter=call(self.helper(range, "range"), N(count)),
                body=br or [ast.Pass()],
                orelse=[],
                type_comment=None,
            )
        ]
        return fwd, rev

    def may_mutate(self, body: list[ast.stmt]) -> bool:
        """Whether running ``body`` may change a list: a store or delete into a subscript or
        attribute, or a call that is not inline float arithmetic or a non-differentiable builtin."""
        for node in (n for st in body for n in walk(st)):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(
                node.ctx, (ast.Store, ast.Del)
            ):
                return True
            if (
                isinstance(node, ast.Call)
                and not getattr(node, "dp_builtin", False)
                and self.inline_rule(node)[0] is None
            ):
                return True
        return False
