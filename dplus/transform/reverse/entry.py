"""The plus-function's ``def``: how the reversed body (the blocks :class:`~.builder.FunctionBuilder`
walks) becomes a function taking the primal's arguments and returning its result with a backprop,
and what a first-order transform was made assuming (:class:`Specialized`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import attrs

from ..trees import walk
from . import syntax
from .syntax import (
    _TRY_STAR,
    C,
    N,
    S,
    _locate,
    _procresult,
    assign,
    attr,
    call,
    tuple_,
    unpack,
)


@attrs.frozen
class Specialized:
    """What a first-order transform was made assuming, tested on every call: the globals
    whose calls were inlined (``(global, guard)``), the parameters' elements read on entry
    (``(parameter, key, name)``), and the transform made without either, which runs
    when a test fails."""

    inlined: list[tuple[str, str]]
    hoisted: list[tuple[str, Any, str]]
    fallback: Callable[..., Any]


def _hoisted_by_parameter(hoisted: list[tuple[str, Any, str]]) -> list[tuple[str, tuple, tuple]]:
    out: dict[str, tuple[list, list]] = {}
    for p, key, name in hoisted:
        keys, names = out.setdefault(p, ([], []))
        keys.append(key)
        names.append(name)
    return [(p, tuple(k), tuple(n)) for p, (k, n) in out.items()]


class EntryRules:
    """Methods of :class:`FunctionBuilder`: the plus-function's ``def`` around the reversed body:
    its signature, the prologue (tape, keys of boxed variables), the backprop's ``def``, and the
    tests of what a specialised transform assumed."""

    # ---------------------------------------------------------------- entry
    def build(self) -> ast.FunctionDef:
        ir = self.ir
        scope = ir.scope
        self.count_reads(ir.body)
        self.count_stores(ir.body)
        self.straight = self.fast and not any(
            isinstance(
                n, (ast.For, ast.While, ast.Try, ast.With, ast.AsyncFor, ast.AsyncWith) + _TRY_STAR
            )
            for st in ir.body
            for n in walk(st)
        )
        fwd, rev = self.block(ir.body)
        args = ir.args
        simple = (
            not args.posonlyargs
            and not args.vararg
            and not args.kwonlyargs
            and not args.kwarg
            and not args.defaults
        )
        only_varargs = (
            not args.posonlyargs
            and args.vararg is not None
            and not args.kwonlyargs
            and not args.kwarg
            and not args.defaults
        )
        params = [a.arg for a in args.posonlyargs + args.args]
        all_params = list(scope.params)
        if self.nestable:
            prologue: list[ast.stmt] = [assign(syntax.TAPE, C(None))]
        elif self.straight:
            prologue = []
        else:
            prologue = [
                assign(syntax.TAPE, ast.List(elts=[], ctx=ast.Load())),
                assign(syntax.PUSH, attr(syntax.TAPE, "append")),
            ]
        # keys of boxed variables owned here (and of free variables written through nonlocal
        # in a top-level function: their owner is not transformed)
        owned_boxed = sorted(self.boxed - ir.outer_boxed)
        if self.top_level:
            owned_boxed += [
                n for n in sorted(ir.outer_boxed) if n in ir.scope.nonlocals or n in ir.scope.free
            ]
        for n in owned_boxed:
            prologue.append(assign(self.key(n), call(self.rt("CellKey"), C(n))))
        if simple:
            plus_args = ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in params],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            )
        elif only_varargs:
            plus_args = ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in params],
                vararg=ast.arg(arg=args.vararg.arg),
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            )
        else:
            plus_args = ast.arguments(
                posonlyargs=[],
                args=[],
                vararg=ast.arg(arg=syntax.PFX + "args"),
                kwonlyargs=[ast.arg(arg=syntax.PFX + "sig")],
                kw_defaults=[C(None)],
                kwarg=ast.arg(arg=syntax.PFX + "kw"),
                defaults=[],
            )
            binding = [N(syntax.PFX + "sig"), N(syntax.PFX + "args"), N(syntax.PFX + "kw")]
            if self.defaults_in_closure:
                # the default values again, as a value of their own: at the next order, the
                # defaults' sensitivities reach them through bind_arguments' rule
                plus_args.kwonlyargs.append(ast.arg(arg=syntax.PFX + "defaults"))
                plus_args.kw_defaults.append(C(None))
                binding.append(N(syntax.PFX + "defaults"))
            prologue.append(unpack(all_params, call(self.rt("bind_arguments"), *binding)))
        # backprop
        free_by_value = self.by_value_freevars()
        if self.nestable:
            # differentiable again: a copy of the record, popped with list.pop (both have rules)
            # the backprop captures the finished record under a name assigned once, so at the
            # next order it is a by-value closure variable, not a rebound (boxed) one
            bp_body: list[ast.stmt] = [assign(syntax.PFX + "stack", N(syntax.PFX + "record"))]
        elif self.straight:
            bp_body = []
        else:
            bp_body = [
                assign(
                    syntax.POP,
                    attr(call(self.helper(reversed, "reversed"), N(syntax.TAPE)), "__next__"),
                )
            ]
        adjoint_vars = sorted(
            set(self.adjoint_names.values())
            | {self.adj(p) for p in all_params}
            | {self.adj(v) for v in free_by_value}
            | {self.adj(ir.retval)}
        )
        if adjoint_vars:
            bp_body.append(ast.Assign(targets=[S(a) for a in adjoint_vars], value=N(self.Z)))
        bp_body.append(assign(self.adj(ir.retval), N(syntax.PFX + "A")))
        if ir.retval in self.boxed:
            pass
        bp_body += rev
        # sensitivities of parameters
        param_sens: list[ast.expr] = []
        for p in all_params:
            if p in self.boxed:
                param_sens.append(call(attr(syntax.ABOX, "pop"), N(self.key(p)), N(self.Z)))
            elif args.kwarg is not None and p == args.kwarg.arg:
                # the **kwargs dict is mutable: its sensitivity is in Abox
                prologue.append(assign(syntax.PFX + "kwobj", N(p)))
                param_sens.append(
                    call(self.rt("fold"), N(syntax.PFX + "kwobj"), N(self.adj(p)), N(syntax.ABOX))
                )
            else:
                param_sens.append(N(self.adj(p)))
        closure: list[ast.expr] = []
        for v in free_by_value:
            if v in self.boxed:
                closure.append(call(attr(syntax.ABOX, "pop"), N(self.key(v)), N(self.Z)))
            else:
                closure.append(N(self.adj(v)))
        if simple:
            ret = tuple_([tuple_(closure)] + param_sens)
        elif only_varargs:
            # counted on entry: the backprop may rebind the parameter's name from a record
            prologue.append(
                assign(syntax.PFX + "nvar", call(self.helper(len, "len"), N(args.vararg.arg)))
            )
            ret = ast.BinOp(
                left=tuple_([tuple_(closure)] + param_sens[:-1]),
                op=ast.Add(),
                right=call(self.rt("closure_parts"), param_sens[-1], N(syntax.PFX + "nvar")),
            )
        else:
            closure_sens: ast.expr = tuple_(closure)
            all_sens: ast.expr = tuple_(param_sens)
            if self.defaults_in_closure:
                # (each parameter's sensitivity is taken once: a boxed one is popped from Abox)
                bp_body.append(assign(syntax.PFX + "param_sens", all_sens))
                all_sens = N(syntax.PFX + "param_sens")
                closure_sens = ast.BinOp(
                    left=closure_sens,
                    op=ast.Add(),
                    right=call(
                        self.rt("default_sensitivities"),
                        N(syntax.PFX + "sig"),
                        N(syntax.PFX + "args"),
                        N(syntax.PFX + "kw"),
                        N(syntax.PFX + "param_sens"),
                    ),
                )
            ret = call(
                self.rt("unbind_sensitivities"),
                N(syntax.PFX + "sig"),
                N(syntax.PFX + "args"),
                N(syntax.PFX + "kw"),
                closure_sens,
                all_sens,
                N(syntax.ABOX),
            )
        bp_body.append(ast.Return(value=ret))
        bp_name = f"{ir.name}__backprop" if not ir.is_lambda else "lambda__backprop"
        bp = ast.FunctionDef(
            name=bp_name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=syntax.PFX + "A"), ast.arg(arg=syntax.ABOX)],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body=bp_body,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        finish = [assign(syntax.PFX + "record", N(syntax.TAPE))] if self.nestable else []
        if self.specialized is not None:
            spec = self.specialized
            if simple:
                fargs: list[ast.expr] = [N(p) for p in params]
                fkw: list[ast.keyword] = []
            elif only_varargs:
                fargs, fkw = (
                    [N(p) for p in params]
                    + [ast.Starred(value=N(args.vararg.arg), ctx=ast.Load())],
                    [],
                )
            else:
                fargs = [ast.Starred(value=N(syntax.PFX + "args"), ctx=ast.Load())]
                fkw = [ast.keyword(arg=None, value=N(syntax.PFX + "kw"))]
            prologue.append(
                ast.If(
                    test=self.not_specialized(spec),
                    body=[  # (after the arguments are bound)
                        ast.Return(
                            value=call(
                                self.helper(spec.fallback, "unspecialized"), *fargs, keywords=fkw
                            )
                        )
                    ],
                    orelse=[],
                )
            )
            if spec.inlined:
                names = C(tuple(g for g, _ in spec.inlined))
                finish.append(
                    ast.If(
                        test=self.not_inlined(spec.inlined),
                        body=[ast.Expr(call(self.rt("inline_rebound"), names))],
                        orelse=[],
                    )
                )
            for p, keys, values in _hoisted_by_parameter(spec.hoisted):
                finish.append(
                    ast.Expr(
                        call(
                            self.rt("check_hoisted"),
                            N(p),
                            C(keys),
                            tuple_([N(v) for v in values]),
                            C(p),
                        )
                    )
                )
        body = (
            prologue
            + fwd
            + finish
            + [
                bp,
                ast.Return(
                    value=call(self.helper(_procresult(), "ProcResult"), N(ir.retval), N(bp_name))
                ),
            ]
        )
        fdef = ast.FunctionDef(
            name=f"{ir.name}__plus" if not ir.is_lambda else "lambda__plus",
            args=plus_args,
            body=body,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef.dp_simple = simple or only_varargs
        fdef.dp_by_value = free_by_value
        fdef.dp_fused = self.fused_gradient(params) if simple and self.top_level else None
        fdef.lineno = fdef.end_lineno = ir.lineno
        fdef.col_offset = fdef.end_col_offset = 0
        if self.top_level:  # one pass over the whole tree, nested plus-functions included
            _locate(fdef, ir.lineno)
        return fdef

    def not_inlined(self, checks: list[tuple[str, str]]) -> ast.expr:
        """True when a global whose calls were inlined is no longer the function inlined."""
        tests = [
            ast.Compare(left=N(g), ops=[ast.IsNot()], comparators=[N(guard)]) for g, guard in checks
        ]
        return ast.BoolOp(op=ast.Or(), values=tests) if len(tests) > 1 else tests[0]

    def not_specialized(self, spec: Specialized) -> ast.expr:
        """True when an assumption the transform was made under fails for this call: an
        inlined global rebound, or a parameter whose elements are read on entry not holding
        the keys (``scalarize.hoist_constant_reads``)."""
        tests: list[ast.expr] = [self.not_inlined(spec.inlined)] if spec.inlined else []
        for p, keys, _ in _hoisted_by_parameter(spec.hoisted):
            tests.append(
                ast.UnaryOp(op=ast.Not(), operand=call(self.rt("holds_keys"), N(p), C(keys)))
            )
        return ast.BoolOp(op=ast.Or(), values=tests) if len(tests) > 1 else tests[0]

    def by_value_freevars(self) -> tuple[str, ...]:
        ir = self.ir
        if self.top_level:
            return tuple(self.outer_free)
        return tuple(sorted(n for n in ir.scope.free if n not in self.boxed))
