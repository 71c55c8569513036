"""Specialisation of loops over lists of numbers (``zip(xs, ys, ...)``): when the arguments are
lists of numbers and the guard holds on entry, the loop runs over the lists themselves and its
reverse hands each list its column of sensitivities (``zip_lists_back``), by one comprehension
per column when no adjoint is carried from one iteration to the next (``mapped_columns``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..scopes import names_bound_by
from ..trees import clone, substituted, walk
from . import syntax
from .syntax import (
    C,
    FastParts,
    N,
    S,
    _is_name,
    _names_read,
    assign,
    attr,
    call,
    tuple_,
    unpack,
)

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class ListLoopRules(Builder):
    """Methods of :class:`FunctionBuilder`: a fast loop over ``zip`` of lists of numbers, run over the
    lists themselves, whose reverse hands each list its column of sensitivities."""

    def loop_over_lists(
        self, s: ast.For, fast: FastParts
    ) -> tuple[ast.expr, list[ast.stmt], list[ast.stmt], str] | None:
        """``for a, b in zip(xs, ys)`` whose body is one fast segment, run over the lists
        themselves when they are lists of numbers and the guard holds on entry.

        The guard is tested once, not per iteration: the items are numbers (one C-level pass
        per list), the names the body assigns stay numbers (``FastParts.closed``), and the
        rest does not change in the loop. The forward records copies of the lists' first
        ``nf`` elements instead of the list of tuples ``zip`` makes; the reverse reads them
        backwards and hands each list its column of sensitivities. ``None`` when the loop is
        not of this shape. Returns the entry test, the forward, the reverse (which reads the
        record ``rec``) and ``rec``.
        """
        if fast.stores:
            return None  # (the body could write into the lists the loop reads)
        zs = s.dp_zip_general[0]
        srcs = [a.id for a in zs.value.args]
        target = s.target.id
        A_t = self.adj(target)
        direct = self.unpacked_items(s, fast, target)
        if direct is None or len(direct.elts) != len(srcs):
            return None
        items = {e.id for e in direct.elts}
        bound_in_body = {name for st in s.body for n in walk(st) for name in names_bound_by(n)}
        if any(
            g in bound_in_body and g not in items and g not in fast.closed for g in fast.numbers
        ):
            return None  # (a name the body assigns might stop being a number)
        from_items, invariant, column_names = self.prefix_records(s, fast)
        body = [clone(x) for x in fast.rev]
        columns = self.item_columns(s, body, A_t)
        if columns is None and any(_is_name(n, A_t) for x in body for n in walk(x)):
            return None
        if columns is not None and len(columns[1]) != len(srcs):
            return None
        rec, nf = self.namer.fresh("lists"), self.namer.fresh("nf")
        lists, lens, copies = (
            self.namer.fresh("lists"),
            self.namer.fresh("lens"),
            self.namer.fresh("copies"),
        )
        col = self.namer.fresh("col") if column_names else None
        inv = self.namer.fresh("invariant") if invariant else None
        typ = self.helper(type, "type")
        tests: list[ast.expr] = [
            ast.Compare(
                left=call(clone(typ), N(x)), ops=[ast.Is()], comparators=[self.helper(list, "list")]
            )
            for x in srcs
        ]
        tests.append(
            ast.Compare(
                left=clone(zs.value.func), ops=[ast.Is()], comparators=[self.helper(zip, "zip")]
            )
        )
        entry_numbers = [g for g in fast.numbers if g not in items]
        if entry_numbers:
            tests.append(self.number_guard(entry_numbers))
        tests += [clone(c) for c in fast.checks]
        tests.append(call(self.rt("all_numbers"), *[N(x) for x in srcs]))
        test = ast.BoolOp(op=ast.And(), values=tests)
        # forward
        record = (
            N(column_names[0]) if len(column_names) == 1 else tuple_([N(x) for x in column_names])
        )
        length = lambda x: call(self.helper(len, "len"), N(x))
        fwd: list[ast.stmt] = [
            assign(lens, tuple_([length(x) for x in srcs])),
            assign(nf, call(self.helper(min, "min"), N(lens))),
        ]
        if col:
            fwd.append(assign(col, ast.List(elts=[], ctx=ast.Load())))
        fwd.append(
            ast.For(
                target=clone(direct),
                iter=call(self.helper(zip, "zip"), *[N(x) for x in srcs]),
                body=[clone(x) for x in fast.fwd]
                + ([ast.Expr(call(attr(col, "append"), record))] if col else [])
                + [clone(x) for x in fast.copy_back]
                or [ast.Pass()],
                orelse=[],
                type_comment=None,
            )
        )
        firsts = [
            ast.Subscript(
                value=N(x), slice=ast.Slice(lower=None, upper=N(nf), step=None), ctx=ast.Load()
            )
            for x in srcs
        ]
        fwd.append(
            self.push(
                tuple_(
                    [C(True), tuple_([N(x) for x in srcs]), N(lens), tuple_(firsts), N(nf)]
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
                ),
                rec,
            )
        )
        # reverse
        rev: list[ast.stmt] = [
            unpack(
                ["_", lists, lens, copies, nf] + ([col] if col else []) + ([inv] if inv else []),
                N(rec),
            )
        ]
        if inv:
            rev.append(ast.If(test=N(nf), body=[unpack(invariant, N(inv))], orelse=[]))
        reversed_ = self.helper(reversed, "reversed")
        sources = [
            call(clone(reversed_), ast.Subscript(value=N(copies), slice=C(j), ctx=ast.Load()))
            for j in range(len(srcs))
        ]
        item_target = clone(direct)
        if col:
            col_target: ast.expr = (
                S(column_names[0])
                if len(column_names) == 1
                else ast.Tuple(elts=[S(x) for x in column_names], ctx=ast.Store())
            )
            loop_target: ast.expr = ast.Tuple(elts=[item_target, col_target], ctx=ast.Store())
            source = call(
                self.helper(zip, "zip"),
                call(self.helper(zip, "zip"), *sources),
                call(clone(reversed_), N(col)),
            )
        else:
            loop_target, source = item_target, call(self.helper(zip, "zip"), *sources)
        if columns is None:  # the items get no sensitivity
            rev += self.unless_zero(
                body,
                [
                    ast.For(
                        target=loop_target,
                        iter=source,
                        body=body or [ast.Pass()],
                        orelse=[],
                        type_comment=None,
                    )
                ],
                [],
            )
            return test, fwd, rev, rec
        at, parts = columns
        cols = [None if _is_name(e, self.Z) else self.namer.fresh("col") for e in parts]
        none = (
            [ast.Assign(targets=[S(c) for c in cols if c is not None], value=C(None))]
            if any(cols)
            else []
        )
        listed = ast.List(elts=[C(None) if c is None else N(c) for c in cols], ctx=ast.Load())
        mapped = self.mapped_columns(body, at, parts)
        if mapped is not None:
            # each iteration's sensitivities depend on its own values only: one comprehension
            # per column, in the loop's order, over the copies (and the recorded column)
            named = [
                (x.id, ast.Subscript(value=N(copies), slice=C(j), ctx=ast.Load()))
                for j, x in enumerate(direct.elts)
            ]
            if col:
                named.append((column_names[0] if len(column_names) == 1 else column_names, N(col)))
            run = [
                assign(c, self.comprehension(e, named, nf))
                for c, e in zip(cols, mapped)
                if c is not None
            ]
            rev += self.unless_zero(body, run, none)
            rev.append(
                ast.Expr(
                    call(
                        self.rt("zip_lists_back"),
                        N(lists),
                        N(lens),
                        listed,
                        N(syntax.ABOX),
                        C(False),
                    )
                )
            )
            return test, fwd, rev, rec
        body[at : at + 1] = [
            ast.Expr(call(c + "_append", e)) for c, e in zip(cols, parts) if c is not None
        ]
        for c in cols:
            if c is not None:
                rev += [
                    assign(c, ast.List(elts=[], ctx=ast.Load())),
                    assign(c + "_append", attr(c, "append")),
                ]
        loop = ast.For(
            target=loop_target, iter=source, body=body or [ast.Pass()], orelse=[], type_comment=None
        )
        rev += self.unless_zero(body, [loop], none)
        rev.append(
            ast.Expr(
                call(self.rt("zip_lists_back"), N(lists), N(lens), listed, N(syntax.ABOX), C(True))
            )
        )
        return test, fwd, rev, rec

    def mapped_columns(
        self, body: list[ast.stmt], at: int, parts: list[ast.expr]
    ) -> list[ast.expr] | None:
        """The items' sensitivities as expressions of one iteration's values, when the reverse
        loop body only assigns temporaries (no adjoint carried from one iteration to the next)
        before ``A_t = (parts...)`` at ``at``; ``None`` otherwise."""
        persistent = set(self.adjoint_names.values())
        temps: dict[str, ast.expr] = {}
        for k, st in enumerate(body):
            if k == at:
                continue
            if not (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
            ):
                return None
            name = st.targets[0].id
            if name in persistent:
                return None
            temps[name] = substituted(st.value, dict(temps))
        # (the adjoints the expressions read are not assigned in the loop: the same in every iteration)
        out = [substituted(e, dict(temps)) for e in parts]
        if any(sum(1 for _ in walk(e)) > 60 for e in out):
            return None  # (temporaries read several times, written out again: kept as a loop)
        return out

    def comprehension(self, e: ast.expr, named: list[tuple[Any, ast.expr]], nf: str) -> ast.expr:
        """``[e for x, c in zip(xs, cs)]`` over the sources (name or names, list) that ``e`` reads;
        ``[e] * nf`` when it reads none."""
        uses = set(_names_read(e))
        needed = [(t, src) for t, src in named if (uses & set(t if isinstance(t, list) else [t]))]
        if not needed:
            return ast.BinOp(left=ast.List(elts=[e], ctx=ast.Load()), op=ast.Mult(), right=N(nf))

        def target(t: Any) -> ast.expr:
            return (
                ast.Tuple(elts=[S(x) for x in t], ctx=ast.Store()) if isinstance(t, list) else S(t)
            )

        if len(needed) == 1:
            tgt, it = target(needed[0][0]), needed[0][1]
        else:
            tgt = ast.Tuple(elts=[target(t) for t, _ in needed], ctx=ast.Store())
            it = call(self.helper(zip, "zip"), *[src for _, src in needed])
        return ast.ListComp(
            elt=e, generators=[ast.comprehension(target=tgt, iter=it, ifs=[], is_async=0)]
        )
