"""The plus-function's ``def``: how the reversed body (the blocks :class:`~.builder.FunctionBuilder`
walks) becomes a function taking the primal's arguments and returning its result with a backprop,
and what a first-order transform was made assuming (:class:`Specialized`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..normalize.core import Core
from . import syntax
from .builder_type import Specialized
from .syntax import (
    C,
    N,
    S,
    _locate,
    _locate_statements,
    _procresult,
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


def _hoisted_by_parameter(hoisted: list[tuple[str, Any, str]]) -> list[tuple[str, tuple, tuple]]:
    out: dict[str, tuple[list, list]] = {}
    for p, key, name in hoisted:
        keys, names = out.setdefault(p, ([], []))
        keys.append(key)
        names.append(name)
    return [(p, tuple(k), tuple(n)) for p, (k, n) in out.items()]


class EntryRules(Builder):
    """Methods of :class:`FunctionBuilder`: the plus-function's ``def`` around the reversed body:
    its signature, the prologue (tape, keys of boxed variables), the backprop's ``def``, and the
    tests of what a specialised transform assumed."""

    # ---------------------------------------------------------------- entry
    def build(self) -> Core:
        """The plus-function of ``self.ir``: its body reversed (``block``) inside its ``def``
        (an ``ast.FunctionDef`` noted ``dp_simple``, ``dp_by_value``, ``dp_fused``)."""
        ir = self.ir
        has_blocks = self.count_names(ir.body)
        self.straight = self.fast and not has_blocks
        self.decide_deferral()
        fwd, rev = self.block(ir.body)
        return _PlusDef(self, fwd, rev).build()

    def one_fast_segment(self) -> bool:
        """Whether the body may be one fast segment, as ``fused_gradient`` asks: the test a
        build without general variants (``defer_general``) makes first, so that a function
        with no fused gradient is built once, in full."""
        ir = self.ir
        args = ir.args
        return (
            self.top_level
            and not (args.posonlyargs or args.kwonlyargs or args.kwarg or args.vararg)
            and not args.defaults
            and self.straight
            and not self.nestable
            and not self.boxed
            and not ir.outer_boxed
            and all(isinstance(st, ast.Assign) for st in ir.body)
            and len(self.segments_of_body()) == 1
        )

    def not_inlined(self, checks: list[tuple[str, str]]) -> ast.expr:
        """True when a global whose calls were inlined is no longer the function inlined."""
        tests: list[ast.expr] = [
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


def _arguments(
    args: list[ast.arg],
    vararg: ast.arg | None = None,
    kwonlyargs: list[ast.arg] | None = None,
    kw_defaults: list[ast.expr | None] | None = None,
    kwarg: ast.arg | None = None,
) -> ast.arguments:
    return ast.arguments(
        posonlyargs=[],
        args=args,
        vararg=vararg,
        kwonlyargs=kwonlyargs or [],
        kw_defaults=kw_defaults or [],
        kwarg=kwarg,
        defaults=[],
    )


class _PlusDef:
    """The ``def`` of one plus-function around its forward and reverse statements. Its
    parameters are the primal's (``simple``: positional parameters only; ``only_varargs``:
    with ``*args``), or else ``*args, sig, **kw``, bound in the prologue by
    ``bind_arguments``; its backprop returns the closure's and the parameters' sensitivities
    in the same shape."""

    def __init__(self, builder: Builder, fwd: list[ast.stmt], rev: list[ast.stmt]) -> None:
        self.b = builder
        self.fwd = fwd
        self.rev = rev
        ir = builder.ir
        self.ir = ir
        args = ir.args
        self.args = args
        no_other = not args.posonlyargs and not args.kwonlyargs and not args.kwarg
        self.simple = no_other and not args.vararg and not args.defaults
        self.only_varargs = no_other and args.vararg is not None and not args.defaults
        self.params = [a.arg for a in args.posonlyargs + args.args]
        self.all_params = list(ir.scope.params)
        self.prologue: list[ast.stmt] = []
        self.bp_body: list[ast.stmt] = []

    def build(self) -> Core:
        b, ir = self.b, self.ir
        self.start_prologue()
        plus_args = self.signature()
        free_by_value = b.by_value_freevars()
        self.start_backprop(free_by_value)
        param_sens = self.parameter_sensitivities()
        closure = [self.taken(v) for v in free_by_value]
        self.bp_body.append(ast.Return(value=self.returned(closure, param_sens)))
        bp_name = f"{ir.name}__backprop" if not ir.is_lambda else "lambda__backprop"
        bp = ast.FunctionDef(
            name=bp_name,
            args=_arguments([ast.arg(arg=syntax.PFX + "A"), ast.arg(arg=syntax.ABOX)]),
            body=self.bp_body,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        finish: list[ast.stmt] = (
            [assign(syntax.PFX + "record", N(syntax.TAPE))] if b.nestable else []
        )
        if b.specialized is not None:
            self.check_specialized(b.specialized, finish)
        result = call(b.helper(_procresult(), "ProcResult"), N(ir.retval), N(bp_name))
        fdef: Core = ast.FunctionDef(
            name=f"{ir.name}__plus" if not ir.is_lambda else "lambda__plus",
            args=plus_args,
            body=self.prologue + self.fwd + finish + [bp, ast.Return(value=result)],
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef.dp_simple = self.simple or self.only_varargs
        fdef.dp_by_value = free_by_value
        fdef.dp_fused = b.fused_gradient(self.params) if self.simple and b.top_level else None
        fdef.lineno = fdef.end_lineno = ir.lineno
        fdef.col_offset = fdef.end_col_offset = 0
        if b.top_level:  # one pass over the whole tree, nested plus-functions included
            (_locate_statements if b.nestable else _locate)(fdef, ir.lineno)
        return fdef

    def start_prologue(self) -> None:
        """The tape (none in straight-line code) and the keys of the boxed variables owned here
        (and of free variables written through nonlocal in a top-level function: their owner
        is not transformed)."""
        b, ir = self.b, self.ir
        if b.nestable:
            self.prologue.append(assign(syntax.TAPE, C(None)))
        elif not b.straight:
            self.prologue += [
                assign(syntax.TAPE, ast.List(elts=[], ctx=ast.Load())),
                assign(syntax.PUSH, attr(syntax.TAPE, "append")),
            ]
        owned_boxed = sorted(b.boxed - ir.outer_boxed)
        if b.top_level:
            owned_boxed += [
                n for n in sorted(ir.outer_boxed) if n in ir.scope.nonlocals or n in ir.scope.free
            ]
        for n in owned_boxed:
            self.prologue.append(assign(b.key(n), call(b.rt("CellKey"), C(n))))

    def vararg(self) -> str:
        """The name of the ``*args`` parameter (there is one: ``only_varargs``)."""
        assert self.args.vararg is not None
        return self.args.vararg.arg

    def signature(self) -> ast.arguments:
        """The plus-function's parameters (binding the primal's in the prologue if needed)."""
        b = self.b
        positional = [ast.arg(arg=p) for p in self.params]
        if self.simple:
            return _arguments(positional)
        if self.only_varargs:
            return _arguments(positional, vararg=ast.arg(arg=self.vararg()))
        plus_args = _arguments(
            [],
            vararg=ast.arg(arg=syntax.PFX + "args"),
            kwonlyargs=[ast.arg(arg=syntax.PFX + "sig")],
            kw_defaults=[C(None)],
            kwarg=ast.arg(arg=syntax.PFX + "kw"),
        )
        binding = [N(syntax.PFX + "sig"), N(syntax.PFX + "args"), N(syntax.PFX + "kw")]
        if b.defaults_in_closure:
            # the default values again, as a value of their own: at the next order, the
            # defaults' sensitivities reach them through bind_arguments' rule
            plus_args.kwonlyargs.append(ast.arg(arg=syntax.PFX + "defaults"))
            plus_args.kw_defaults.append(C(None))
            binding.append(N(syntax.PFX + "defaults"))
        self.prologue.append(unpack(self.all_params, call(b.rt("bind_arguments"), *binding)))
        return plus_args

    def start_backprop(self, free_by_value: tuple[str, ...]) -> None:
        """How the backprop reads the record, its adjoints set to zero, the result's adjoint,
        then the reversed body."""
        b, ir = self.b, self.ir
        if b.nestable:
            # differentiable again: a copy of the record, popped with list.pop (both have rules)
            # the backprop captures the finished record under a name assigned once, so at the
            # next order it is a by-value closure variable, not a rebound (boxed) one
            self.bp_body.append(assign(syntax.PFX + "stack", N(syntax.PFX + "record")))
        elif not b.straight:
            reader = attr(call(b.helper(reversed, "reversed"), N(syntax.TAPE)), "__next__")
            self.bp_body.append(assign(syntax.POP, reader))
        adjoint_vars = sorted(
            set(b.adjoint_values)
            | {b.adj(p) for p in self.all_params}
            | {b.adj(v) for v in free_by_value}
            | {b.adj(ir.retval)}
        )
        if adjoint_vars:
            self.bp_body.append(ast.Assign(targets=[S(a) for a in adjoint_vars], value=N(b.Z)))
        self.bp_body.append(assign(b.adj(ir.retval), N(syntax.PFX + "A")))
        self.bp_body += self.rev

    def taken(self, name: str) -> ast.expr:
        """A parameter's or a free variable's sensitivity: popped from Abox if boxed."""
        b = self.b
        if name in b.boxed:
            return call(attr(syntax.ABOX, "pop"), N(b.key(name)), N(b.Z))
        return N(b.adj(name))

    def parameter_sensitivities(self) -> list[ast.expr]:
        b, args = self.b, self.args
        param_sens: list[ast.expr] = []
        for p in self.all_params:
            if p not in b.boxed and args.kwarg is not None and p == args.kwarg.arg:
                # the **kwargs dict is mutable: its sensitivity is in Abox
                self.prologue.append(assign(syntax.PFX + "kwobj", N(p)))
                param_sens.append(
                    call(
                        b.rt("keyword_dict_sensitivity"),
                        N(syntax.PFX + "kwobj"),
                        N(b.adj(p)),
                        N(syntax.ABOX),
                    )
                )
            else:
                param_sens.append(self.taken(p))
        return param_sens

    def returned(self, closure: list[ast.expr], param_sens: list[ast.expr]) -> ast.expr:
        """What the backprop returns: the closure's sensitivity, then the parameters'."""
        b = self.b
        if self.simple:
            return tuple_([tuple_(closure)] + param_sens)
        if self.only_varargs:
            # counted on entry: the backprop may rebind the parameter's name from a record
            self.prologue.append(
                assign(syntax.PFX + "nvar", call(b.helper(len, "len"), N(self.vararg())))
            )
            return ast.BinOp(
                left=tuple_([tuple_(closure)] + param_sens[:-1]),
                op=ast.Add(),
                right=call(b.rt("closure_parts"), param_sens[-1], N(syntax.PFX + "nvar")),
            )

        def bound() -> list[ast.expr]:
            return [N(syntax.PFX + "sig"), N(syntax.PFX + "args"), N(syntax.PFX + "kw")]

        closure_sens: ast.expr = tuple_(closure)
        all_sens: ast.expr = tuple_(param_sens)
        if b.defaults_in_closure:
            # (each parameter's sensitivity is taken once: a boxed one is popped from Abox)
            self.bp_body.append(assign(syntax.PFX + "param_sens", all_sens))
            all_sens = N(syntax.PFX + "param_sens")
            defaults = call(b.rt("default_sensitivities"), *bound(), N(syntax.PFX + "param_sens"))
            closure_sens = ast.BinOp(left=closure_sens, op=ast.Add(), right=defaults)
        return call(b.rt("unbind_sensitivities"), *bound(), closure_sens, all_sens, N(syntax.ABOX))

    def check_specialized(self, spec: Specialized, finish: list[ast.stmt]) -> None:
        """On entry, the unspecialised transform runs when an assumption fails; after the
        forward, the inlined globals and the elements read on entry are tested again."""
        b = self.b
        if self.simple:
            fargs: list[ast.expr] = [N(p) for p in self.params]
            fkw: list[ast.keyword] = []
        elif self.only_varargs:
            vararg = ast.Starred(value=N(self.vararg()), ctx=ast.Load())
            fargs, fkw = [N(p) for p in self.params] + [vararg], []
        else:
            fargs = [ast.Starred(value=N(syntax.PFX + "args"), ctx=ast.Load())]
            fkw = [ast.keyword(arg=None, value=N(syntax.PFX + "kw"))]
        self.prologue.append(
            ast.If(
                test=b.not_specialized(spec),
                body=[  # (after the arguments are bound)
                    ast.Return(
                        value=call(b.helper(spec.fallback, "unspecialized"), *fargs, keywords=fkw)
                    )
                ],
                orelse=[],
            )
        )
        if spec.inlined:
            names = C(tuple(g for g, _ in spec.inlined))
            finish.append(
                ast.If(
                    test=b.not_inlined(spec.inlined),
                    body=[ast.Expr(call(b.rt("inline_rebound"), names))],
                    orelse=[],
                )
            )
        for p, keys, values in _hoisted_by_parameter(spec.hoisted):
            check = call(b.rt("check_hoisted"), N(p), C(keys), tuple_([N(v) for v in values]), C(p))
            finish.append(ast.Expr(check))
