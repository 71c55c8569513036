"""Assignments and unpacking outside fast segments: one statement of the general path."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..normalize.core import Core
from ..trees import clone
from . import syntax
from .builder_type import Reversed
from .ssa import _SSA, _AdjointAccumulator
from .syntax import UNARYOPS, C, N, assign, attr, call, tuple_

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)

# a statement's general path: its forward, the names its reverse reads, and its reverse


class StatementRules(Builder):
    """Methods of :class:`FunctionBuilder`: assignments and unpacking outside fast segments: one statement of the general path."""

    # ---------------------------------------------------------------- general statements
    def unpack_reverse(self, s: Core, acc: _AdjointAccumulator) -> None:
        parts = [acc.take(e.id) for e in s.targets[0].elts]
        if all(p is None for p in parts):
            return
        sens = tuple_([p if p is not None else N(self.Z) for p in parts])
        v = s.value.id
        if self.direct_unpack(v, acc.fresh_zero):
            # a tuple by construction whose adjoint is still zero: the tuple of the parts is it
            a = self.adj(v)
            acc.fresh_zero.discard(a)
            acc.out.append(assign(a, sens))
            return
        if not self.nestable and v not in self.ssa_defined_names(acc) and v not in self.boxed:
            # the common case, a tuple whose adjoint is still zero: the tuple of the parts is it
            a = self.adj(v)
            general: list[ast.stmt] = []
            saved, acc.out = acc.out, general
            if self.fast:  # one call; a list of numbers adds the parts into its entry
                self.unpack_back(acc, v, sens)
            else:
                acc.add_value(v, call(self.rt("unpack_sensitivity"), N(v), clone(sens)))
            acc.out = saved
            acc.out.append(
                ast.If(
                    test=ast.BoolOp(
                        op=ast.And(),
                        values=[
                            ast.Compare(
                                left=call(self.helper(type, "type"), N(v)),
                                ops=[ast.Is()],
                                comparators=[self.helper(tuple, "tuple")],
                            ),
                            ast.Compare(left=N(a), ops=[ast.Is()], comparators=[N(self.Z)]),
                        ],
                    ),
                    body=[assign(a, sens)],
                    orelse=general,
                )
            )
            return
        if (
            self.fast and v not in self.boxed
        ):  # (a value this segment made: a list read from a list)
            self.unpack_back(acc, v, sens)
            return
        acc.add_value(v, call(self.rt("unpack_sensitivity"), N(v), sens))

    def unpack_back(self, acc: _AdjointAccumulator, v: str, sens: ast.Tuple) -> None:
        """``adjoint(v) = unpack_back(adjoint(v), v, parts, Abox)``; when every part is a
        name, with its commonest case inline (a list of as many floats that has no entry
        yet takes the parts as its entry): the call cost more than the work, twice per
        particle-step in the particles' reverse."""

        def back(cur: ast.expr) -> ast.expr:
            return call(self.rt("unpack_back"), cur, N(v), clone(sens), N(syntax.ABOX))

        parts = sens.elts
        if not parts or not all(isinstance(p, ast.Name) and p.id != self.Z for p in parts):
            acc.update(v, back)
            return
        target, current = acc._target(v)
        typ, entries = self.helper(type, "type"), attr(syntax.ABOX, "_entries")
        key = call(self.helper(id, "id"), N(v))
        test = ast.BoolOp(
            op=ast.And(),
            values=[
                ast.Compare(
                    left=call(clone(typ), N(v)),
                    ops=[ast.Is()],
                    comparators=[self.helper(list, "list")],
                ),
                ast.Compare(
                    left=call(self.helper(len, "len"), N(v)),
                    ops=[ast.Eq()],
                    comparators=[C(len(parts))],
                ),
                ast.Compare(left=key, ops=[ast.NotIn()], comparators=[entries]),
                ast.Compare(
                    left=call(clone(typ), clone(parts[0])),
                    ops=[ast.Is() for _ in parts],
                    comparators=[call(clone(typ), clone(p)) for p in parts[1:]]
                    + [self.helper(float, "float")],
                ),
            ],
        )
        body: list[ast.stmt] = [
            ast.Assign(
                targets=[ast.Subscript(value=clone(entries), slice=clone(key), ctx=ast.Store())],
                value=tuple_([N(v), ast.List(elts=[clone(p) for p in parts], ctx=ast.Load())]),
            )
        ]
        if current is None:
            body.append(assign(target, N(self.Z)))
        acc.out.append(
            ast.If(test=test, body=body, orelse=[assign(target, back(N(current or self.Z)))])
        )

    def direct_unpack(self, v: str, fresh_zero: set[str]) -> bool:
        """Whether the reverse of unpacking ``v`` needs neither ``v`` nor a type test."""
        return self.fast and v in self.tuple_items and self.adj(v) in fresh_zero

    def ssa_defined_names(self, acc: _AdjointAccumulator) -> dict[str, None]:
        return acc.ssa.defined

    def general_stmt(self, s: Core, ssa: _SSA) -> Reversed:
        """A statement's general path: its forward, the names its reverse reads, its reverse."""
        if getattr(s, "dp_unpack", False):
            return [clone(s)], [s.value.id], lambda acc: self.unpack_reverse(s, acc)
        if isinstance(s, ast.FunctionDef):
            return self.closure_stmt(s, ssa)
        if isinstance(s, ast.Delete):
            return self.delete_stmt(s)
        target = s.targets[0]
        if isinstance(target, ast.Subscript):
            return self.subscript_write(target, s)
        if isinstance(target, ast.Attribute):
            return self.call_like(
                None,
                self.rt("setattr_plus"),
                [target.value, C(target.attr), s.value],
                [],
                s,
                native=self.native_attribute_write(target, s.value),
            )
        return self.name_assignment(target.id, s.value, s)

    def subscript_write(self, target: ast.Subscript, s: Core) -> Reversed:
        if (
            not self.nestable
            and not isinstance(target.slice, ast.Slice)
            and isinstance(target.value, ast.Name)
        ):
            return self.list_write(target.value, target.slice, s.value, s)
        return self.call_like(
            None,
            self.rt("setitem_plus"),
            [target.value, self.slice_expr(target.slice), s.value],
            [],
            s,
        )

    def name_assignment(self, name: str, v: Core, s: Core) -> Reversed:
        """``name = v``: boxed variables, constants and copies here; operations by the kind
        of ``v`` (the table ``VALUE_RULES``)."""
        kind = getattr(s, "dp_kind", "general")
        if name in self.boxed:
            return self.boxed_write(name, v)
        if isinstance(v, ast.Name) and v.id in self.boxed:
            return self.boxed_read(name, v.id)
        if kind == "nondiff" or isinstance(v, ast.Constant):

            def rev_nd(acc: _AdjointAccumulator) -> None:
                acc.take(name)

            return [assign(name, clone(v))], [], rev_nd
        if kind == "copy" or isinstance(v, ast.Name):

            def rev_copy(acc: _AdjointAccumulator) -> None:
                A = acc.take(name)
                if A is not None:
                    acc.add(v.id, A)

            return [assign(name, clone(v))], [], rev_copy
        rule = self.VALUE_RULES.get(type(v))
        if rule is None:
            raise NotImplementedError(ast.dump(v))
        return rule(self, name, v, s)

    def boxed_write(self, name: str, v: ast.expr) -> Reversed:
        """A write to a boxed variable: its sensitivity lives in Abox under the cell key."""
        fwd: list[ast.stmt] = (
            [assign(name, clone(v))] if not isinstance(v, ast.Name) or v.id != name else []
        )

        def rev_boxed(acc: _AdjointAccumulator) -> None:
            popped = call(attr(syntax.ABOX, "pop"), N(self.key(name)), N(self.Z))
            if isinstance(v, ast.Name):
                acc.add(v.id, popped)
            else:
                acc.out.append(ast.Expr(popped))

        return fwd, [], rev_boxed

    def boxed_read(self, name: str, boxed: str) -> Reversed:
        """``name = boxed`` of a boxed variable: the adjoint goes to its cell's key."""
        fwd: list[ast.stmt] = [assign(name, N(boxed))]

        def rev_read(acc: _AdjointAccumulator) -> None:
            A = acc.take(name)
            if A is not None:
                acc.out.append(
                    ast.Expr(
                        call(
                            self.rt("accumulate_cell"),
                            N(syntax.ABOX),
                            N(self.key(boxed)),
                            N(name),
                            A,
                        )
                    )
                )

        return fwd, [name], rev_read

    # -- ``name = v`` by the kind of ``v``

    def binop_value(self, name: str, v: ast.BinOp, s: ast.Assign) -> Reversed:
        return self.binop(name, v, s)

    def unaryop_value(self, name: str, v: ast.UnaryOp, s: ast.Assign) -> Reversed:
        fn = UNARYOPS[type(v.op)]
        return self.call_like(
            name, self.rt("call"), [self.helper(fn, fn.__name__), v.operand], [], s, skip=1
        )

    # the runtime operation of each operation normalize marks on a call (``dp_op``)
    CALL_OPS = {
        "unpack": "unpack_plus",
        "unpack_star": "unpack_star_plus",
        "match_args": "match_args_plus",
        "callmethod": "callmethod",
        "user_namespace": "user_namespace_plus",
        "read_global": "read_global_plus",
        # definitions rewritten before normalising (normalize/definitions.py)
        "build_class": "build_class_plus",
        "make_generator": "make_generator_plus",
        "iterate": "generator_iterate_plus",
        "take": "generator_take_plus",
        "delegate": "generator_iterate_plus",
        "resumed_at": "generator_resumed_at_plus",
        "step": "generator_step_plus",
        "close_delegate": "generator_close_delegate_plus",
        "generator_raised_again": "generator_raised_again_plus",  # (rewrites._YieldsToList)
    }

    def call_value(self, name: str, v: ast.Call, s: ast.Assign) -> Reversed:
        op = getattr(v, "dp_op", None)
        if op is not None:
            return self.call_like(
                name,
                self.rt(self.CALL_OPS[op]),
                list(v.args),
                list(v.keywords),
                s,
                native=self.native_append(name, v) if op == "callmethod" else None,
            )
        if getattr(v, "dp_live", False) and not (
            self.nestable and getattr(v, "dp_live_first_order", False)
        ):
            # a lazy builtin's iterator whose laziness the program may see (a loop that may
            # change what it reads, or kept for later): Python's live iterator
            kept = getattr(v, "dp_kept", False)
            if self.nestable:  # (made at once, watched: for a loop, or made for one)
                watched = not kept or getattr(v, "dp_watched", False)
                plus = self.rt("live_iteration_again" if watched else "kept_iteration_again")
            else:
                plus = self.rt("kept_iteration" if kept else "live_iteration")
        else:
            plus = self.rt("call_on_constants" if self.on_constants_only(v) else "call")
        return self.call_like(
            name, plus, [v.func] + list(v.args), list(v.keywords), s, skip=1, callee=v.func
        )

    def attribute_value(self, name: str, v: ast.Attribute, s: ast.Assign) -> Reversed:
        return self.call_like(
            name,
            self.rt("getattr_plus"),
            [v.value, C(v.attr)],
            [],
            s,
            native=self.native_attribute_read(name, v),
        )

    def subscript_value(self, name: str, v: ast.Subscript, s: ast.Assign) -> Reversed:
        if (
            not self.nestable
            and not isinstance(v.slice, ast.Slice)
            and isinstance(v.value, ast.Name)
        ):
            return self.sequence_read(name, v.value, v.slice, s)
        return self.call_like(
            name, self.rt("getitem_plus"), [v.value, self.slice_expr(v.slice)], [], s
        )

    def tuple_value(self, name: str, v: ast.Tuple, s: ast.Assign) -> Reversed:
        return self.display(name, "build_tuple", v.elts, s)

    def list_value(self, name: str, v: ast.List, s: ast.Assign) -> Reversed:
        return self.display(name, "build_list", v.elts, s)

    def set_value(self, name: str, v: ast.Set, s: ast.Assign) -> Reversed:
        return self.display(name, "build_set", v.elts, s)

    def dict_value(self, name: str, v: ast.Dict, s: ast.Assign) -> Reversed:
        parts: list[ast.expr] = []
        spec: list[bool] = []
        for k, val in zip(v.keys, v.values):
            if k is None:
                spec.append(True)
                parts.append(val)
            else:
                spec.append(False)
                parts.append(k)
                parts.append(val)
        return self.call_like(name, self.rt("build_dict"), [C(tuple(spec))] + parts, [], s, skip=1)

    VALUE_RULES: dict[type, Callable[..., Reversed]] = {
        ast.BinOp: binop_value,
        ast.UnaryOp: unaryop_value,
        ast.Call: call_value,
        ast.Attribute: attribute_value,
        ast.Subscript: subscript_value,
        ast.Tuple: tuple_value,
        ast.List: list_value,
        ast.Set: set_value,
        ast.Dict: dict_value,
    }
