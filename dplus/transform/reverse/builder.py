"""The reverse transform: from the normalised core to the AST of a plus-function.

``FunctionBuilder`` here keeps the walk (the entry, the record, blocks, ``if``); how each
construct is reversed is in its mixins, one module per family (the table is in this
package's docstring).

A plus-function runs the primal statements and, at the end of each straight-line
*segment*, pushes one record of the values its reverse needs. Its backprop pops the
records in reverse order and runs generated reverse code. Segments made only of
arithmetic and inline-able calls get two forward variants behind a type guard: a float
fast path whose reverse is straight-line Python copied from the rules' lambda bodies,
and the general path, which calls each operation's transform and its backprop.
Control flow pushes what the reverse needs to retrace it: branch flags, loop counts.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import attrs

from ..normalize.core import IRFunction, Namer, closure_reads
from ..scopes import names_bound_by
from ..trees import clone, walk
from . import syntax
from .calls import CallRules
from .containers import ContainerRules
from .exceptions import ExceptionRules
from .fast_loops import FastLoopRules
from .fast_paths import FastPathRules
from .loops import LoopRules
from .replay import ReplayRules
from .segments import SegmentRules
from .ssa import _SSA
from .statements import StatementRules
from .syntax import (
    _TRY_STAR,
    FAST_PATHS,
    C,
    FastParts,
    Helpers,
    N,
    S,
    _assigned_names,
    _gen_zero,
    _is_number_const,
    _locate,
    _locate_all,
    _procresult,
    _set_prefix,
    assign,
    attr,
    call,
    tuple_,
    unpack,
)

__all__ = ["build_plus_function", "Helpers"]


# ---------------------------------------------------------------------------
# the builder: entry, records, blocks; the rules by construct are its mixins


class FunctionBuilder(
    SegmentRules,
    FastPathRules,
    ReplayRules,
    StatementRules,
    ContainerRules,
    CallRules,
    LoopRules,
    FastLoopRules,
    ExceptionRules,
):
    """Builds the plus-function for one IRFunction (nested ones recursively)."""

    def __init__(
        self,
        ir: IRFunction,
        namer: Namer,
        helpers: Helpers,
        globals_: dict,
        *,
        top_level: bool,
        outer_free: tuple[str, ...] = (),
        fast: bool = True,
        nestable: bool = False,
    ) -> None:
        self.ir = ir
        self.namer = namer
        self.h = helpers
        self.globals = globals_
        self.top_level = top_level
        self.nestable = nestable
        self.fast = fast and not nestable and FAST_PATHS[0]
        self.boxed: set[str] = getattr(ir, "boxed", set())
        self.adjoint_names: dict[str, str] = {}
        self.persistent: set[str] = set()
        self.key_names: dict[str, str] = {}
        self.outer_free = outer_free
        self.in_try = 0
        self.read_count: dict[str, int] = {}
        self.store_count: dict[str, int] = {}
        self.defined_before: set[str] = set()  # names the statements before, in this block, assign
        # loop targets bound to a tuple on every iteration (items of the builtin zip and enumerate)
        self.tuple_items: set[str] = set()
        # straight-line code (no loop, try or with): every record is made at most once per
        # call, so it is kept in a variable of its own, not pushed on a tape
        self.straight = False
        self.def_segment: dict[str, int] = {}
        self.Z = self.h.ref(_gen_zero(), "Z")
        self.internal = {syntax.ABOX, syntax.PUSH, syntax.POP, syntax.TAPE}
        # names bound to constants with no sensitivity (gen_zero, captured from generated code)
        self.const_names: set[str] = set()
        # every segment built, in order: its fast variant's parts, or None (c_For reads it)
        self.segment_log: list[FastParts | None] = []
        self.specialized: Specialized | None = None
        # a nested function with default values: their sensitivities follow its closure's
        self.defaults_in_closure = False

    # ---------------------------------------------------------------- names
    def adj(self, name: str) -> str:
        a = self.adjoint_names.get(name)
        if a is None:
            a = self.namer.fresh("A_" + name.strip("_")[:20] + "_")
            self.adjoint_names[name] = a
        return a

    def key(self, name: str) -> str:
        k = self.key_names.get(name)
        if k is None:
            k = f"{syntax.PFX}cell_{name}"
            self.key_names[name] = k
        return k

    def helper(self, value: Any, hint: str) -> ast.Name:
        return N(self.h.ref(value, hint))

    def rt(self, name: str) -> ast.Name:
        from ...runtime import ops as runtime_ops

        return self.helper(runtime_ops.helper_named(name), name)

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
                    call(
                        self.rt("keyword_dict_sensitivity"),
                        N(syntax.PFX + "kwobj"),
                        N(self.adj(p)),
                        N(syntax.ABOX),
                    )
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

    # ---------------------------------------------------------------- the record
    def push(self, value: ast.expr, slot: str | None = None) -> ast.stmt:
        """Record ``value``; in straight-line code, in the variable ``slot`` its reverse reads."""
        if self.nestable:  # an immutable chain of records: only tuples, differentiable again
            return assign(syntax.TAPE, tuple_([value, N(syntax.TAPE)]))
        if self.straight:
            return assign(slot, value)
        return ast.Expr(call(syntax.PUSH, value))

    def pop_into(
        self, names: list[str], whole: bool = False, slot: str | None = None
    ) -> list[ast.stmt]:
        """Statements that take the last record into ``names`` (unpacked, or whole into names[0])."""
        if self.straight:
            return [assign(names[0], N(slot))] if whole else [unpack(names, N(slot))]
        if self.nestable:
            if whole:
                return [unpack([names[0], syntax.PFX + "stack"], N(syntax.PFX + "stack"))]
            rec = self.namer.fresh("rec")
            return [
                unpack([rec, syntax.PFX + "stack"], N(syntax.PFX + "stack")),
                unpack(names, N(rec)),
            ]
        if whole:
            return [assign(names[0], call(syntax.POP))]
        return [unpack(names, call(syntax.POP))]

    def mark(self, name: str) -> ast.stmt:
        if self.nestable:
            return assign(name, N(syntax.TAPE))
        return assign(name, call(self.helper(len, "len"), N(syntax.TAPE)))

    def truncate(self, mark: str) -> ast.stmt:
        if self.nestable:
            return assign(syntax.TAPE, N(mark))
        return ast.Delete(
            targets=[
                ast.Subscript(
                    value=N(syntax.TAPE),
                    slice=ast.Slice(lower=N(mark), upper=None, step=None),
                    ctx=ast.Del(),
                )
            ]
        )

    # ---------------------------------------------------------------- analysis
    def count_reads(self, stmts: list[ast.stmt]) -> None:
        """How many places read each name, a closure's free variables and defaults included
        (closures made in nested blocks too: a read missed here would let a segment treat
        the closure's variable as read only by itself)."""
        count = self.read_count
        for s in stmts:
            for n in walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    count[n.id] = count.get(n.id, 0) + 1
                elif isinstance(n, ast.FunctionDef):
                    for name in closure_reads(n):
                        count[name] = count.get(name, 0) + 1

    def count_stores(self, stmts: list[ast.stmt]) -> None:
        """How many places assign each name (anywhere in the function, nested blocks included)."""
        count = self.store_count
        for n in (n for st in stmts for n in walk(st)):
            for name in names_bound_by(n):
                count[name] = count.get(name, 0) + 1
        for name in self.ir.scope.params:
            count[name] = count.get(name, 0) + 1

    def zero_on_entry(self, ssa: _SSA) -> set[str]:
        """Inputs of a segment whose adjoint is zero when its reverse starts: assigned once in
        the function, by an earlier statement of the same block, and read only in this segment."""
        if not self.fast:
            return set()
        return {
            name
            for name, k in ssa.input_reads.items()
            if name in self.defined_before
            and self.store_count.get(name) == 1
            and self.read_count.get(name) == k
            and name not in self.boxed
        }

    # ---------------------------------------------------------------- blocks
    def block(
        self, stmts: list[ast.stmt], bound: tuple[str, ...] = ()
    ) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """Forward statements, and the reverse statements in the order they run.

        ``bound`` names what is assigned on entry to the block (a loop's target).
        """
        fwd: list[ast.stmt] = []
        rev_parts: list[list[ast.stmt]] = []
        run: list[ast.stmt] = []
        outer_defined = self.defined_before
        self.defined_before = set(bound)

        def flush() -> None:
            if run:
                for seg in self.segments(run):
                    f, r = self.segment(seg)
                    fwd.extend(f)
                    rev_parts.append(r)
                    for st in seg:
                        self.defined_before.update(_assigned_names(st))
                run.clear()

        for s in stmts:
            if isinstance(s, (ast.Assign, ast.Delete, ast.FunctionDef)):
                run.append(s)
                continue
            zs = self.zip_statement(s, run)
            if zs is not None:
                run.pop()
            flush()
            if zs is not None:
                f, r = self.loop_over_zip(zs, s)
            else:
                f, r = self.compound(s)
            fwd.extend(f)
            rev_parts.append(r)
        flush()
        self.defined_before = outer_defined
        rev: list[ast.stmt] = []
        for part in reversed(rev_parts):
            rev.extend(part)
        return fwd, rev

    def is_comprehension_append(self, s: ast.stmt) -> bool:
        """``_ = _comp.append(v)``: a list comprehension (or generator expression) appending
        a name or a number to the list it builds, which no other code can reach."""
        if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)):
            return False
        v = s.value
        if not (
            isinstance(v, ast.Call)
            and getattr(v, "dp_op", None) == "callmethod"
            and getattr(v, "dp_comp_result", False)
            and not v.keywords
            and len(v.args) == 3
        ):
            return False
        comp, meth, item = v.args
        return (
            isinstance(comp, ast.Name)
            and comp.id not in self.boxed
            and isinstance(meth, ast.Constant)
            and meth.value == "append"
            and (isinstance(item, ast.Name) or _is_number_const(item))
        )

    def native_attribute_read(self, target: str, v: ast.Attribute) -> Any:
        """``target = obj.attr`` of a number the object holds itself, run natively (first-order
        code): ``runtime_ops.own_number_attribute`` reads it (or says to take the rule), the
        reverse adds the sensitivity into the object's entry (``own_attribute_back``)."""
        if (
            self.nestable
            or not self.fast
            or not isinstance(v.value, ast.Name)
            or v.value.id == target  # (``p = p.next``: the test assigns the target first)
        ):
            return None
        obj = v.value.id
        read = call(self.rt("own_number_attribute"), N(obj), C(v.attr))
        test = ast.Compare(
            left=ast.NamedExpr(target=ast.Name(id=target, ctx=ast.Store()), value=read),
            ops=[ast.IsNot()],
            comparators=[self.rt("NOT_OWN")],
        )

        def reverse(A: ast.expr) -> ast.expr:
            return call(self.rt("own_attribute_back"), N(obj), C(v.attr), A, N(syntax.ABOX))

        return test, [], reverse

    def native_attribute_write(self, target: ast.Attribute, v: ast.expr) -> Any:
        """``obj.attr = v`` on a tracked object, run natively (first-order code): the reverse
        takes the attribute's sensitivity out of the object's entry, as ``setattr_plus``'s."""
        if self.nestable or not self.fast or not isinstance(target.value, ast.Name):
            return None
        obj = target.value.id
        test = call(self.rt("store_own_attribute"), N(obj), C(target.attr), clone(v))
        back = call(self.rt("own_attribute_write_back"), N(obj), C(target.attr), N(syntax.ABOX))
        return test, [], back

    # ---------------------------------------------------------------- compound statements
    def compound(self, s: ast.stmt) -> tuple[list[ast.stmt], list[ast.stmt]]:
        method = getattr(self, "c_" + type(s).__name__)
        fwd, rev = method(s)
        _locate_all(fwd, s)
        _locate_all(rev, s)
        return fwd, rev

    def c_If(self, s: ast.If) -> tuple[list[ast.stmt], list[ast.stmt]]:
        bf, br = self.block(s.body)
        of, orr = self.block(s.orelse)
        if not br and not orr:
            return [ast.If(test=s.test, body=bf or [ast.Pass()], orelse=of)], []
        flag = self.namer.fresh("took")
        bf = bf + [self.push(C(True), flag)]
        of = of + [self.push(C(False), flag)]
        pop = [] if self.straight else self.pop_into([flag], whole=True)
        return [ast.If(test=s.test, body=bf, orelse=of)], pop + [
            ast.If(test=N(flag), body=br or [ast.Pass()], orelse=orr)
        ]

    def _native(self, s: ast.stmt) -> tuple[list[ast.stmt], list[ast.stmt]]:
        return [s], []

    c_Raise = _native
    c_Assert = _native
    c_Pass = _native
    c_Nonlocal = _native
    c_Import = _native
    c_ImportFrom = _native
    c_Global = _native
    c_Expr = _native


# ---------------------------------------------------------------------------
# the entry point


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


def build_plus_function(
    ir: IRFunction,
    namer: Namer,
    helpers: Helpers,
    globals_: dict,
    outer_free: tuple[str, ...],
    nestable: bool = False,
    prefix: str = "_dp_",
    const_names: set[str] | None = None,
    specialized: Specialized | None = None,
) -> ast.FunctionDef:
    """``specialized``: what the transform assumes (inlined calls, elements read on entry)."""
    _set_prefix(prefix)
    b = FunctionBuilder(
        ir, namer, helpers, globals_, top_level=True, outer_free=outer_free, nestable=nestable
    )
    b.const_names = set(const_names or ())
    b.specialized = specialized
    plus = b.build()
    # the whole body one fast segment: fused.py may build f__grad for vector parameters
    plus.dp_fusable = bool(plus.dp_fused is None and b.fast and plus.dp_simple)
    return plus
