"""Subscripts, list reads and writes, displays and ``del``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..trees import clone
from . import syntax
from .ssa import _AdjointAccumulator
from .syntax import _SEQ_TYPES, C, N, assign, attr, call

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class ContainerRules(Builder):
    """Methods of :class:`FunctionBuilder`: subscripts, list reads and writes, displays and ``del``."""

    def native_key(self, test: ast.expr, obj: ast.Name, idx: ast.expr) -> ast.expr:
        """``test``, and, for an index held in a variable, that it is read natively: an int, or
        any key but a slice of a dict. (Another key of a list or a tuple, an object with
        ``__index__``, goes to the rule, which converts it once as Python does.)"""
        if isinstance(idx, ast.Constant):
            return test
        key_type = call(self.helper(type, "type"), clone(idx))
        an_int = ast.Compare(left=key_type, ops=[ast.Is()], comparators=[self.helper(int, "int")])
        a_dict_key = ast.BoolOp(
            op=ast.And(),
            values=[
                ast.Compare(
                    left=call(self.helper(type, "type"), N(obj.id)),
                    ops=[ast.Is()],
                    comparators=[self.helper(dict, "dict")],
                ),
                ast.Compare(
                    left=clone(key_type),
                    ops=[ast.IsNot()],
                    comparators=[self.helper(slice, "slice")],
                ),
            ],
        )
        native_key = ast.BoolOp(op=ast.Or(), values=[an_int, a_dict_key])
        return ast.BoolOp(op=ast.And(), values=[test, native_key])

    def key_is_a_display(self, acc: _AdjointAccumulator, idx: ast.expr) -> bool:
        """Whether the key of a subscript is a tuple display with a variable among its items
        (``obj[x, y]``, whose key the normalizer bound to a name): a rule may give its items
        sensitivities (a rule that gives a key held otherwise one raises: ``read_back``)."""
        if not isinstance(idx, ast.Name):
            return False
        return acc.ssa.origin.get(idx.id, idx.id) in self.tuple_displays()

    def sequence_read(self, name: str, obj: ast.Name, idx: ast.expr, s: ast.stmt) -> Any:
        """``name = obj[idx]``: native for lists, tuples and dicts (the record keeps the length), else the rule."""
        kind = self.namer.fresh("read")
        r = self.namer.fresh("r")
        seq = self.helper(_SEQ_TYPES, "SEQ")
        test = ast.Compare(
            left=call(self.helper(type, "type"), N(obj.id)), ops=[ast.In()], comparators=[seq]
        )
        fwd = [
            ast.If(
                test=self.native_key(test, obj, idx),
                body=[
                    assign(name, ast.Subscript(value=N(obj.id), slice=clone(idx), ctx=ast.Load())),
                    assign(kind, call(self.helper(len, "len"), N(obj.id))),
                ],
                orelse=[
                    assign(r, call(self.rt("getitem_plus"), N(obj.id), clone(idx))),
                    assign(name, attr(r, "primal")),
                    assign(kind, attr(r, "backprop")),
                ],
            )
        ]
        record = [obj.id, kind, name]
        if isinstance(idx, ast.Name):
            record.insert(1, idx.id)

        def rev(acc: _AdjointAccumulator) -> None:
            A = acc.take(name)
            if A is None:
                # nothing to hand back, but a rule's backprop may restore container layouts
                return
            if self.key_is_a_display(acc, idx):
                # the key's items may take a sensitivity (np.r_[x, y]): the rule's backprop
                # gives the object's and the key's
                g = self.namer.fresh("g")
                acc.out.append(
                    assign(
                        g,
                        call(
                            self.rt("read_back_keyed"),
                            N(obj.id),
                            clone(idx),
                            N(kind),
                            N(name),
                            A,
                            N(syntax.ABOX),
                        ),
                    )
                )
                acc.add_value(obj.id, ast.Subscript(value=N(g), slice=C(0), ctx=ast.Load()))
                assert isinstance(idx, ast.Name)
                acc.add_value(idx.id, ast.Subscript(value=N(g), slice=C(1), ctx=ast.Load()))
                return
            if obj.id in acc.ssa.defined or obj.id in self.boxed or self.nestable:
                acc.add_value(
                    obj.id,
                    call(
                        self.rt("read_back"),
                        N(obj.id),
                        clone(idx),
                        N(kind),
                        N(name),
                        A,
                        N(syntax.ABOX),
                    ),
                )
                return
            a = self.adj(obj.id)
            acc.fresh_zero.discard(a)
            back = assign(
                a,
                call(
                    self.rt("read_back_into"),
                    N(a),
                    N(obj.id),
                    clone(idx),
                    N(kind),
                    N(name),
                    A,
                    N(syntax.ABOX),
                ),
            )
            if not (self.fast and isinstance(A, ast.Name)):
                acc.out.append(back)
                return
            # (a list element's sensitivity went to its own entry: usually nothing to do, no call)
            acc.out.append(
                ast.If(
                    test=ast.BoolOp(
                        op=ast.Or(),
                        values=[
                            ast.Compare(left=clone(A), ops=[ast.IsNot()], comparators=[N(self.Z)]),
                            ast.Compare(
                                left=call(self.helper(type, "type"), N(kind)),
                                ops=[ast.IsNot()],
                                comparators=[self.helper(int, "int")],
                            ),
                        ],
                    ),
                    body=[back],
                    orelse=[],
                )
            )

        return fwd, record, rev

    def native_append(
        self, target: str, v: ast.Call
    ) -> tuple[ast.expr, list[ast.stmt], ast.expr] | None:
        """``obj.append(x)`` on a list, run natively (first-order code): the reverse takes the
        element's sensitivity off the end of the list's entry (``runtime.list_writes.append_back``)."""
        args = v.args
        if (
            self.nestable
            or not self.fast
            or len(args) != 3
            or v.keywords
            or not isinstance(args[0], ast.Name)
            or not (isinstance(args[1], ast.Constant) and args[1].value == "append")
            or isinstance(args[2], ast.Starred)
        ):
            return None
        obj = args[0].id
        test = ast.Compare(
            left=call(self.helper(type, "type"), N(obj)),
            ops=[ast.Is()],
            comparators=[self.helper(list, "list")],
        )
        run = [ast.Expr(call(attr(obj, "append"), clone(args[2]))), assign(target, C(None))]
        return test, run, call(self.rt("append_back"), N(obj), N(syntax.ABOX))

    def list_write(self, obj: ast.Name, idx: ast.expr, v: ast.expr, s: ast.stmt) -> Any:
        """``obj[idx] = v``: native for lists (the record keeps the index), else the rule."""
        kind = self.namer.fresh("write")
        r = self.namer.fresh("r")
        typ = self.helper(type, "type")
        tests: list[ast.expr] = [
            ast.Compare(
                left=call(typ, N(obj.id)), ops=[ast.Is()], comparators=[self.helper(list, "list")]
            )
        ]
        if not (isinstance(idx, ast.Constant) and type(idx.value) is int):
            tests.append(
                ast.Compare(
                    left=call(clone(typ), clone(idx)),
                    ops=[ast.Is()],
                    comparators=[self.helper(int, "int")],
                )
            )
        # stored first (an index out of range raises as in the primal), then made non-negative
        store = ast.Assign(
            targets=[ast.Subscript(value=N(obj.id), slice=clone(idx), ctx=ast.Store())],
            value=clone(v),
        )
        written = ast.IfExp(
            test=ast.Compare(left=clone(idx), ops=[ast.GtE()], comparators=[C(0)]),
            body=clone(idx),
            orelse=ast.BinOp(
                left=clone(idx), op=ast.Add(), right=call(self.helper(len, "len"), N(obj.id))
            ),
        )
        fwd = [
            ast.If(
                test=ast.BoolOp(op=ast.And(), values=tests) if len(tests) > 1 else tests[0],
                body=[store, assign(kind, written)],
                orelse=[
                    assign(r, call(self.rt("setitem_plus"), N(obj.id), clone(idx), clone(v))),
                    assign(kind, attr(r, "backprop")),
                ],
            )
        ]
        record = [obj.id, kind]
        if isinstance(idx, ast.Name):
            record.append(idx.id)
        if isinstance(v, ast.Name) and v.id not in record:
            record.append(v.id)

        def rev(acc: _AdjointAccumulator) -> None:
            stored = getattr(acc, "stored_displays", {})
            if isinstance(v, ast.Name) and v.id in stored:
                n, _ = stored[v.id]
                parts = self.namer.fresh("parts")
                stored[v.id] = (n, parts)
                acc.out.append(
                    assign(
                        parts,
                        call(
                            self.rt("store_display_back"),
                            N(obj.id),
                            N(kind),
                            N(v.id),
                            C(n),
                            N(syntax.ABOX),
                        ),
                    )
                )
                return
            moved = call(self.rt("write_back"), N(obj.id), N(kind), N(syntax.ABOX))
            if isinstance(v, ast.Name):
                acc.add_value(v.id, moved)
            else:
                acc.out.append(ast.Expr(moved))

        return fwd, record, rev

    def slice_expr(self, sl: ast.expr) -> ast.expr:
        if isinstance(sl, ast.Slice):
            return call(
                self.helper(slice, "slice"),
                *[x if x is not None else C(None) for x in (sl.lower, sl.upper, sl.step)],
            )
        return sl

    def display(self, name: str, builder: str, elts: list[ast.expr], s: ast.stmt) -> Any:
        if (
            builder in ("build_tuple", "build_list")
            and self.fast
            and not any(isinstance(e, ast.Starred) for e in elts)
        ):
            return self.native_display(name, builder == "build_list", elts)
        if any(isinstance(e, ast.Starred) for e in elts):
            spec = tuple(isinstance(e, ast.Starred) for e in elts)
            args = [e.value if isinstance(e, ast.Starred) else e for e in elts]
            return self.call_like(name, self.rt(builder + "_star"), [C(spec)] + args, [], s, skip=1)
        return self.call_like(name, self.rt(builder), list(elts), [], s)

    def native_display(self, name: str, is_list: bool, elts: list[ast.expr]) -> Any:
        """``name = [a, b]`` or ``(a, b)`` built as Python builds it; the reverse splits its sensitivity."""
        node = (ast.List if is_list else ast.Tuple)(elts=[clone(e) for e in elts], ctx=ast.Load())
        names = [e.id for e in elts if isinstance(e, ast.Name)]
        record = ([name] if is_list else []) + [n for n in dict.fromkeys(names) if n != name]

        def rev(acc: _AdjointAccumulator) -> None:
            A = acc.take(name)
            stored = getattr(acc, "stored_displays", {}).get(name)
            if stored is not None and stored[1] is not None:
                # the store's reverse took the elements' sensitivities (``store_display_back``)
                sources = [stored[1]]
                if A is not None:  # (and anything else the list received, the usual way)
                    sources.append(self.namer.fresh("parts"))
                    acc.out.append(
                        assign(
                            sources[1],
                            call(
                                self.rt("list_display_parts"),
                                A,
                                N(name),
                                C(len(elts)),
                                N(syntax.ABOX),
                            ),
                        )
                    )
            else:
                if A is None and not is_list:
                    return
                sources = [self.namer.fresh("parts")]
                if is_list:
                    split = call(
                        self.rt("list_display_parts"),
                        A or N(self.Z),
                        N(name),
                        C(len(elts)),
                        N(syntax.ABOX),
                    )
                else:
                    assert A is not None  # (a tuple with no sensitivity returned above)
                    split = call(self.rt("tuple_items"), A, C(len(elts)))
                acc.out.append(assign(sources[0], split))
            for parts in sources:
                for k in reversed(range(len(elts))):
                    e = elts[k]
                    if isinstance(e, ast.Name):
                        acc.add_value(
                            e.id, ast.Subscript(value=N(parts), slice=C(k), ctx=ast.Load())
                        )

        return [assign(name, node)], record, rev

    def delete_stmt(self, s: ast.Delete) -> Any:
        t = s.targets[0]
        if isinstance(t, ast.Name):

            def rev_del(acc: _AdjointAccumulator) -> None:
                pass

            return [clone(s)], [], rev_del
        if isinstance(t, ast.Subscript):
            return self.call_like(
                None, self.rt("delitem_plus"), [t.value, self.slice_expr(t.slice)], [], s
            )
        # (the core language deletes one name, item or attribute at a time)
        assert isinstance(t, ast.Attribute)
        return self.call_like(None, self.rt("delattr_plus"), [t.value, C(t.attr)], [], s)
