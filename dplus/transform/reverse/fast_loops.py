"""Specialisation of loops: a fast prefix loop over one fast segment (the loops over lists of
numbers are in :mod:`.list_loops`), with the items' sensitivities of a ``zip``/``enumerate``
loop collected as columns."""

from __future__ import annotations

import ast
from itertools import chain as _chain
from typing import TYPE_CHECKING

from ..normalize.core import Core
from ..scopes import names_bound_by
from ..trees import clone, walk
from . import syntax
from .syntax import (
    C,
    FastParts,
    N,
    S,
    _is_name,
    _propagated_reads,
    assign,
    attr,
    call,
    store_tuple,
    tuple_,
    unpack,
)

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class FastLoopRules(Builder):
    """Methods of :class:`FunctionBuilder`: a loop whose body is one fast segment, emitted as a
    fast prefix loop and the general loop over one iterator."""

    def no_prefix_for_generators(self, src: str, pend: str, prefix_loop: ast.stmt) -> ast.If:
        """``if type(src) is GeneratorTaker: pend = () else: <prefix_loop>``: a generator's
        values each go back to their resumption as the loop's reverse reaches them, so its
        iterations all take the general way."""
        from ...runtime.generators import GeneratorTaker

        return ast.If(
            test=ast.Compare(
                left=call(self.helper(type, "type"), N(src)),
                ops=[ast.Is()],
                comparators=[self.helper(GeneratorTaker, "GeneratorTaker")],
            ),
            body=[assign(pend, ast.Tuple(elts=[], ctx=ast.Load()))],
            orelse=[prefix_loop],
        )

    def route_of_generators(
        self, every: str | None, itv: str, n: str, total: ast.expr, length: str, zeros: ast.expr
    ) -> tuple[list[ast.stmt], ast.expr]:
        """With ``every`` (the loop's iterable may be a generator): the statement that sets it
        and the route, a ``GeneratorRoute`` for a generator; else nothing and ``zeros``."""
        if every is None:
            return [], zeros
        route = ast.IfExp(
            test=N(every),
            body=call(
                self.rt("generator_route"), N(itv), clone(total), N(length), N(syntax.ABOX), C(True)
            ),
            orelse=zeros,
        )
        return self.generator_route(every, itv, n, length, True), route

    def fast_prefix_loop(
        self,
        s: Core,
        fast: FastParts,
        bf: list[ast.stmt],
        br: list[ast.stmt],
        n: str,
        itv: str,
        rec_it: str | None,
    ) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """A loop whose body is one fast segment, run as two loops over one iterator.

        The first runs the fast variant while the guard holds, with no record per iteration
        on the tape: the values its reverse reads go into a column (a list of tuples, or of
        single values), except those unpacked from the items of a list the loop made itself
        (``zip``, ``enumerate``), which the reverse reads from the items again. At the first
        iteration whose guard fails, the rest of the iterator runs in the general loop,
        fast and general variants chosen per iteration as usual. The reverse runs the
        general loop's reverse, then the prefix's, the prefix reading its column backwards.
        """
        target = s.target.id
        A_t = self.adj(target)
        nf, iterv, pend = (
            self.namer.fresh("nf"),
            self.namer.fresh("iter"),
            self.namer.fresh("pending"),
        )
        from_items, invariant, column_names = self.prefix_records(s, fast)
        reads_items = any(x in from_items for x in fast.rec)
        inv = self.namer.fresh("invariant") if invariant else None
        col = self.namer.fresh("col") if column_names else None
        record = (
            N(column_names[0]) if len(column_names) == 1 else tuple_([N(x) for x in column_names])
        )
        prefix_body = (
            [clone(x) for x in fast.fwd]
            + ([ast.Expr(call(attr(col, "append"), record))] if col else [])
            + [clone(x) for x in fast.copy_back]
            + [ast.AugAssign(target=S(nf), op=ast.Add(), value=C(1))]
        )
        fwd: list[ast.stmt] = [assign(nf, C(0))]
        if col:
            fwd.append(assign(col, ast.List(elts=[], ctx=ast.Load())))
        # the items of zip and enumerate are tuples: unpacked by the for statements themselves
        direct = self.unpacked_items(s, fast, target)
        lead = [] if direct is not None else [clone(u) for u in fast.lead]
        item_target = store_tuple(direct) if direct is not None else S(target)
        item = tuple_([N(x) for x in direct]) if direct is not None else N(target)
        fresh = getattr(s, "dp_fresh_iter", False)
        src_name = self.namer.fresh("loop_src")
        src: ast.expr = clone(s.iter) if fresh else N(src_name)
        test_first, test = self.guard_test(clone(fast.guard))
        prefix_loop: ast.stmt = ast.For(
            target=clone(item_target),
            iter=N(iterv),
            body=[
                *lead,
                *test_first,
                ast.If(
                    test=test,
                    body=prefix_body,
                    orelse=[assign(pend, tuple_([item])), ast.Break()],
                ),
            ],
            orelse=[],
            type_comment=None,
        )
        if not fresh:
            fwd.append(self.loop_iterable(src_name, s.iter))
            prefix_loop = self.no_prefix_for_generators(src_name, pend, prefix_loop)
        fwd += [
            assign(iterv, call(self.helper(iter, "iter"), clone(src))),
            assign(pend, C(None)),
            prefix_loop,
            assign(n, C(0)),
            ast.If(
                test=ast.Compare(left=N(pend), ops=[ast.IsNot()], comparators=[C(None)]),
                body=[
                    ast.For(
                        target=S(target),
                        iter=call(self.helper(_chain, "chain"), N(pend), N(iterv)),
                        body=bf,
                        orelse=[],
                        type_comment=None,
                    )
                ],
                orelse=[],
            ),
            # (after no fast iteration an invariant may be unbound, as in the primal)
            self.push(
                tuple_(
                    [clone(src), N(nf), N(n), self.list_length(s, src)]
                    + ([N(col)] if col else [])
                    + (
                        [
                            ast.IfExp(
                                test=N(nf), body=tuple_([N(x) for x in invariant]), orelse=C(None)
                            )
                        ]
                        if inv
                        else []
                    )
                )
            ),
        ]
        # reverse: the general iterations (the last ones), then the prefix
        route, i = self.namer.fresh("route"), self.namer.fresh("i")
        every = None if fresh else self.namer.fresh("every")
        total = ast.BinOp(left=N(nf), op=ast.Add(), right=N(n))
        rev_body = list(br) + [
            self.routed(
                A_t,
                ast.Assign(
                    targets=[ast.Subscript(value=N(route), slice=N(i), ctx=ast.Store())],
                    value=N(A_t),
                ),
                every,
            )
        ]
        zeros: ast.expr = ast.BinOp(
            left=ast.List(elts=[N(self.Z)], ctx=ast.Load()), op=ast.Mult(), right=total
        )
        length = self.namer.fresh("len")
        is_generator, zeros = self.route_of_generators(every, itv, n, total, length, zeros)
        make_route = assign(route, zeros)
        rev: list[ast.stmt] = self.pop_into(
            [itv, nf, n, length] + ([col] if col else []) + ([inv] if inv else [])
        )
        rev += is_generator
        rev += [
            make_route,
            ast.If(
                test=N(n),
                body=[  # (usually none: every iteration took the fast way)
                    ast.For(
                        target=S(i),
                        iter=call(
                            self.helper(range, "range"),
                            ast.BinOp(left=clone(total), op=ast.Sub(), right=C(1)),
                            ast.BinOp(left=N(nf), op=ast.Sub(), right=C(1)),
                            C(-1),
                        ),
                        body=rev_body,
                        orelse=[],
                        type_comment=None,
                    )
                ],
                orelse=[],
            ),
        ]
        items = call(self.rt("prefix_reversed"), N(itv), N(nf))
        col_target: ast.expr = (
            (
                S(column_names[0])
                if len(column_names) == 1
                else ast.Tuple(elts=[S(x) for x in column_names], ctx=ast.Store())
            )
            if col
            else S("_")
        )
        loop_target: ast.expr
        source: ast.expr
        if col:
            column = call(self.helper(reversed, "reversed"), N(col))
            if reads_items:
                loop_target = ast.Tuple(elts=[clone(item_target), col_target], ctx=ast.Store())
                source = call(self.helper(zip, "zip"), items, column)
            else:
                loop_target, source = col_target, column
        elif reads_items:
            loop_target, source = clone(item_target), items
        else:
            loop_target, source = S(self.namer.fresh("k")), call(self.helper(range, "range"), N(nf))
        body = ([clone(u) for u in lead] if reads_items else []) + [clone(x) for x in fast.rev]
        # the items' sensitivities, last iteration first, when the reverse gives the target one
        gives_items = any(
            isinstance(t, ast.Name) and t.id == A_t
            for x in fast.rev
            for node in walk(x)
            if isinstance(node, ast.Assign)
            for t in node.targets
        )
        if inv:
            rev.append(ast.If(test=N(nf), body=[unpack(invariant, N(inv))], orelse=[]))
        columns = self.item_columns(s, body, A_t)
        if columns is not None:
            # the items' sensitivities collected as columns, one list per tuple position: the
            # zip or enumerate backprop takes them as they are, with no rows to transpose
            at, parts = columns
            make_route.value = ast.IfExp(
                test=N(n), body=make_route.value, orelse=C(None)
            )  # None: no general iteration
            cols = [None if _is_name(e, self.Z) else self.namer.fresh("col") for e in parts]
            body[at : at + 1] = [
                ast.Expr(call(c + "_append", e)) for c, e in zip(cols, parts) if c is not None
            ]
            for c in cols:
                if c is not None:
                    rev += [
                        assign(c, ast.List(elts=[], ctx=ast.Load())),
                        assign(c + "_append", attr(c, "append")),
                    ]
            loop = ast.For(target=loop_target, iter=source, body=body, orelse=[], type_comment=None)
            rev += self.unless_zero(
                body,
                [loop],
                [ast.Assign(targets=[S(c) for c in cols if c is not None], value=C(None))]
                if any(cols)
                else [],
            )
            listed = ast.List(elts=[C(None) if c is None else N(c) for c in cols], ctx=ast.Load())
            rev.append(
                self.hand_back(
                    rec_it,
                    itv,
                    call(self.rt("route_columns"), N(itv), N(route), N(nf), listed, N(syntax.ABOX)),
                )
            )
            return fwd, rev
        backwards = self.namer.fresh("prefix_route")
        prefix: list[ast.stmt] = []
        if gives_items:
            body += [ast.Expr(call(attr(backwards, "append"), N(A_t))), assign(A_t, N(self.Z))]
            prefix.append(assign(backwards, ast.List(elts=[], ctx=ast.Load())))
        prefix.append(
            ast.For(
                target=loop_target,
                iter=source,
                body=body or [ast.Pass()],
                orelse=[],
                type_comment=None,
            )
        )
        if gives_items:
            prefix += [
                ast.Expr(call(attr(backwards, "reverse"))),
                ast.Assign(
                    targets=[
                        ast.Subscript(
                            value=N(route),
                            slice=ast.Slice(lower=None, upper=N(nf), step=None),
                            ctx=ast.Store(),
                        )
                    ],
                    value=N(backwards),
                ),
            ]
        rev += self.unless_zero(body, prefix, [])
        if not gives_items:
            # the target read after the loop: its sensitivity is the last iteration's element's
            # (a general iteration's routing took it already; after no iteration it stays)
            rev.append(
                ast.If(
                    test=ast.BoolOp(
                        op=ast.And(),
                        values=[
                            N(nf),
                            ast.Compare(left=N(A_t), ops=[ast.IsNot()], comparators=[N(self.Z)]),
                        ],
                    ),
                    body=[
                        ast.Assign(
                            targets=[
                                ast.Subscript(
                                    value=N(route),
                                    slice=ast.BinOp(left=N(nf), op=ast.Sub(), right=C(1)),
                                    ctx=ast.Store(),
                                )
                            ],
                            value=N(A_t),
                        ),
                        assign(A_t, N(self.Z)),
                    ],
                    orelse=[],
                )
            )
        rev.append(
            self.hand_back(
                rec_it, itv, call(self.rt("route_all"), N(itv), N(route), N(syntax.ABOX), N(length))
            )
        )
        return fwd, rev

    def prefix_records(self, s: Core, fast: FastParts) -> tuple[set[str], list[str], list[str]]:
        """What a fast loop's reverse reads, by where it comes from: the names the items give
        again (unpacked from the tuples of a fresh list), the values the body never assigns (the
        same in every iteration: recorded once), and the rest (a column, one entry per iteration)."""
        target = s.target.id
        from_items: set[str] = set()
        if getattr(s, "dp_tuple_items", False):
            from_items.add(target)
            for u in fast.lead:
                if isinstance(u.value, ast.Name) and u.value.id == target:
                    from_items.update(e.id for e in u.targets[0].elts)
        bound_in_body = {name for st in s.body for n in walk(st) for name in names_bound_by(n)}
        invariant = [
            x
            for x in fast.rec
            if x not in from_items
            and x != target
            and x not in fast.defined
            and x not in bound_in_body
        ]
        column_names = [x for x in fast.rec if x not in from_items and x not in invariant]
        return from_items, invariant, column_names

    def unpacked_items(self, s: Core, fast: FastParts, target: str) -> list[str] | None:
        """The names a fast loop over tuples (``zip``, ``enumerate``) unpacks each item into
        first, for a target of the ``for`` statement itself, when nothing else reads the item."""
        if not (getattr(s, "dp_tuple_items", False) and len(fast.lead) == 1):
            return None
        u = fast.lead[0]
        t = u.targets[0]
        if not (
            isinstance(u.value, ast.Name) and u.value.id == target and isinstance(t, ast.Tuple)
        ):
            return None
        names = [e.id for e in t.elts if isinstance(e, ast.Name)]
        if len(names) != len(t.elts):
            return None
        if any(_is_name(n, target) for x in fast.fwd + fast.copy_back + fast.rev for n in walk(x)):
            return None
        return names

    def unless_zero(
        self, body: list[ast.stmt], run: list[ast.stmt], otherwise: list[ast.stmt]
    ) -> list[ast.stmt]:
        """``run`` behind a test that an adjoint the fast loop body ``body`` propagates is not
        zero: reverse code is linear in those adjoints, so when all are zero where the loop's
        reverse starts, every iteration's contributions are zero and the loop is skipped (a
        dense layer's row behind an inactive ReLU). An adjoint only added to (``a = a + c``,
        ``a = c if a is Z else a + c``) propagates nothing."""
        from_abox = {
            self.rt(name).id
            for name in (
                "store_display_numbers",
                "append_back_number",
                "write_back",
                "attributes_written_back",
            )
        }
        if any(isinstance(n, ast.Name) and n.id in from_abox for st in body for n in walk(st)):
            # (a store's or a comprehension append's reverse moves sensitivities out of Abox:
            # never skipped)
            return run
        persistent = self.adjoint_values
        flowing: list[str] = []
        for st in body:
            for read in _propagated_reads(st):
                if read in persistent and read not in flowing:
                    flowing.append(read)
        if not flowing:
            return run
        test = (
            ast.BoolOp(
                op=ast.Or(),
                values=[
                    ast.Compare(left=N(a), ops=[ast.IsNot()], comparators=[N(self.Z)])
                    for a in flowing
                ],
            )
            if len(flowing) > 1
            else ast.Compare(left=N(flowing[0]), ops=[ast.IsNot()], comparators=[N(self.Z)])
        )
        return [ast.If(test=test, body=run, orelse=otherwise)]

    def item_columns(
        self, s: ast.For, rev: list[ast.stmt], A_t: str
    ) -> tuple[int, list[ast.expr]] | None:
        """``(position, parts)`` when a fast loop body's reverse gives the item its sensitivity
        in one statement ``A_t = (parts...)`` at its top level and reads ``A_t`` nowhere else,
        and the items are tuples of a fresh list of the builtin ``zip`` or ``enumerate`` (whose
        sensitivity only that builtin's backprop reads)."""
        if not (getattr(s, "dp_fresh_iter", False) and getattr(s, "dp_tuple_items", False)):
            return None
        found = None
        for pos, st in enumerate(rev):
            mentions = any(_is_name(n, A_t) for n in walk(st))
            if not mentions:
                continue
            if found is not None or not (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and _is_name(st.targets[0], A_t)
                and isinstance(st.value, ast.Tuple)
                and st.value.elts
                and not any(_is_name(n, A_t) for n in walk(st.value))
            ):
                return None
            found = (pos, list(st.value.elts))
        return found
