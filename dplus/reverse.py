"""The reverse transform: from the normalised core to the AST of a plus-function.

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
import operator
from itertools import chain as _chain
from typing import Any
from collections.abc import Callable

import attrs

from .normalize import IRFunction, Namer, closure_reads
from .peephole import simplify_reverse
from .rules import InlineRule, inline_rule_for
from .scopes import names_bound_by
from .trees import clone, substituted, unparse, walk

__all__ = ["build_plus_function", "Helpers"]

_NUM_TYPES = frozenset({float, int})
_POWERS = (operator.pow, operator.ipow, pow)
FAST_PATHS = [True]  # False: only the general path (transformer.general_paths_only, for tests)
_SEQ_TYPES = frozenset({list, tuple, dict})

# Names of generated variables start with PFX, chosen per transform so that it never occurs
# in the source being transformed (which may itself be generated code: derivatives of
# derivatives). Set by build_plus_function under the transformer's lock.
PFX = "_dp_"
ABOX = PUSH = POP = TAPE = ""


def _set_prefix(p: str) -> None:
    global PFX, ABOX, PUSH, POP, TAPE
    PFX = p
    ABOX, PUSH, POP, TAPE = p + "Abox", p + "push", p + "pop", p + "tape"


_set_prefix("_dp_")


def choose_prefix(names: set[str]) -> str:
    for c in "pqrstuvwxyz":
        p = f"_d{c}_"
        if not any(n.startswith(p) for n in names):
            return p
    i = 0
    while any(n.startswith(f"_dp{i}_") for n in names):
        i += 1
    return f"_dp{i}_"


BINOPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
INPLACE: dict[type, Any] = {
    ast.Add: operator.iadd,
    ast.Sub: operator.isub,
    ast.Mult: operator.imul,
    ast.Div: operator.itruediv,
    ast.FloorDiv: operator.ifloordiv,
    ast.Mod: operator.imod,
    ast.Pow: operator.ipow,
    ast.MatMult: operator.imatmul,
    ast.LShift: operator.ilshift,
    ast.RShift: operator.irshift,
    ast.BitOr: operator.ior,
    ast.BitXor: operator.ixor,
    ast.BitAnd: operator.iand,
}
UNARYOPS: dict[type, Any] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}


class _NotReplayable(Exception):
    """A segment whose general variant cannot be a replayed program (see replay_plan)."""


class Helpers:
    """The values generated code refers to by name (bound as closure cells)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}
        self.templates: dict[Any, Any] = {}

    def ref(self, value: Any, hint: str) -> str:
        key = id(value)
        name = self._by_id.get(key)
        if name is not None and self.values[name] is value:
            return name
        base = PFX + "".join(c if c.isalnum() else "_" for c in hint)
        name = base
        i = 1
        while name in self.values and self.values[name] is not value:
            i += 1
            name = f"{base}{i}"
        self.values[name] = value
        self._by_id[key] = name
        return name


_TRY_STAR: tuple[type, ...] = (ast.TryStar,) if hasattr(ast, "TryStar") else ()


@attrs.frozen
class FastParts:
    """A segment's fast variant, in pieces: its leading unpacks, the type guard, the forward
    statements, the names its reverse reads, the reverse statements, and the copies back to
    the user's names, and the names the segment assigns."""

    lead: list[ast.stmt]
    guard: ast.expr
    fwd: list[ast.stmt]
    rec: list[str]
    rev: list[ast.stmt]
    copy_back: list[ast.stmt]
    defined: list[str]  # the names the segment assigns (after renaming)
    numbers: list[str] = attrs.field(factory=list)  # the names the guard tests for numbers
    checks: list[ast.expr] = attrs.field(
        factory=list
    )  # the guard's other tests (an inlined callee is still the one inlined)
    closed: frozenset[str] = (
        frozenset()
    )  # user names the segment leaves holding numbers when the guard held
    stores: bool = False  # whether the segment writes into a list (its reverse reads Abox)


_LOAD, _STORE = ast.Load(), ast.Store()  # stateless: shared by every generated name


def N(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=_LOAD)


def S(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=_STORE)


def C(v: Any) -> ast.Constant:
    return ast.Constant(value=v)


def assign(target: str | ast.expr, value: ast.expr) -> ast.Assign:
    t = S(target) if isinstance(target, str) else target
    return ast.Assign(targets=[t], value=value)


def call(fn: str | ast.expr, *args: ast.expr, keywords: list | None = None) -> ast.Call:
    f = N(fn) if isinstance(fn, str) else fn
    return ast.Call(func=f, args=list(args), keywords=keywords or [])


def attr(obj: str | ast.expr, name: str) -> ast.Attribute:
    o = N(obj) if isinstance(obj, str) else obj
    return ast.Attribute(value=o, attr=name, ctx=ast.Load())


def tuple_(elts: list[ast.expr]) -> ast.Tuple:
    return ast.Tuple(elts=elts, ctx=ast.Load())


def unpack(names: list[str], value: ast.expr) -> ast.stmt:
    if len(names) == 1:
        return assign(ast.Tuple(elts=[S(names[0])], ctx=ast.Store()), value)
    return assign(ast.Tuple(elts=[S(n) for n in names], ctx=ast.Store()), value)


def _is_atom(e: ast.AST | None) -> bool:
    return isinstance(e, (ast.Name, ast.Constant))


def _is_name(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _propagated_reads(st: ast.stmt) -> set[str]:
    """The names whose values a statement of reverse code carries into its result: all it
    reads, except the target's own value where the statement only adds to it."""
    target = (
        st.targets[0].id
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        else None
    )
    v = getattr(st, "value", None) if target is not None else None
    if (
        isinstance(v, ast.IfExp)
        and isinstance(v.test, ast.Compare)
        and _is_name(v.test.left, target)
        and isinstance(v.orelse, ast.BinOp)
        and isinstance(v.orelse.op, ast.Add)
        and _is_name(v.orelse.left, target)
    ):
        parts: list[ast.AST] = [
            v.test.comparators[0],
            v.body,
            v.orelse.right,
        ]  # a = c if a is Z else a + c
    elif isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and _is_name(v.left, target):
        parts = [v.right]  # a = a + c
    else:
        parts = [st]
    reads = {
        n.id
        for p in parts
        for n in walk(p)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    if parts[0] is not st and target in reads:  # c reads a itself: a propagates
        reads.add(target)
    return reads


def _names_read(node: ast.AST) -> list[str]:
    return [n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _is_number_const(e: ast.AST) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) in (int, float)


# ---------------------------------------------------------------------------
# inline templates


class _ResolveChains(ast.NodeTransformer):
    def __init__(self, globals_: dict, params: set[str], helpers: Helpers) -> None:
        self.globals = globals_
        self.params = params
        self.helpers = helpers

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        parts = []
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.params and root.id in self.globals:
            import types as _types

            obj = self.globals[root.id]
            if isinstance(obj, _types.ModuleType):
                for p in reversed(parts):
                    obj = getattr(obj, p)
                return ast.copy_location(
                    ast.Name(id=self.helpers.ref(obj, parts[0]), ctx=ast.Load()), node
                )
        return self.generic_visit(node)


class Template:
    """A rule's gradient lambda as an expression with holes for A, r and the arguments."""

    def __init__(self, fn: Callable, helpers: Helpers) -> None:
        parsed = _PARSED_TEMPLATES.get(fn)
        if parsed is None:
            parsed = _PARSED_TEMPLATES[fn] = _parse_template(fn)
        self.params, body, refs = parsed
        # the values the template refers to, under this build's names for them
        rename = {}
        for name, (value, hint) in refs.items():
            mine = helpers.ref(value, hint)
            if mine != name:
                rename[name] = N(mine)
        self.body = substituted(body, rename) if rename else body
        self.uses = set(_names_read(self.body))

    def instantiate(self, mapping: dict[str, ast.expr]) -> ast.expr:
        return substituted(self.body, mapping)


class _RecordingHelpers(Helpers):
    """Helpers that remember the hint each name was made from."""

    def __init__(self) -> None:
        super().__init__()
        self.hints: dict[str, str] = {}

    def ref(self, value: Any, hint: str) -> str:
        name = super().ref(value, hint)
        self.hints[name] = hint
        return name


def _parse_template(fn: Callable) -> tuple[list[str], ast.expr, dict[str, tuple[Any, str]]]:
    """A gradient lambda's parameters, its body with every free name and module chain
    (``math.cos``) replaced by a helper name, and each helper name's ``(value, hint)``.
    Parsed once per lambda: each build renames the helpers to its own names."""
    from .source import function_source

    node = function_source(fn).node
    if not isinstance(node, ast.Lambda):
        raise ValueError("inline gradients must be lambdas")
    params = [a.arg for a in node.args.args]
    helpers = _RecordingHelpers()
    # dotted names of modules (math.cos) become the objects themselves: no lookups at run time
    body = _ResolveChains(fn.__globals__, set(params), helpers).visit(clone(node.body))
    # free names of the template refer to the rule module's globals
    rename: dict[str, ast.expr] = {}
    for name in set(_names_read(body)):
        if name in params or name in helpers.values:
            continue
        if name in fn.__globals__:
            value = fn.__globals__[name]
        else:
            import builtins

            value = getattr(builtins, name)
        rename[name] = N(helpers.ref(value, name))
    body = substituted(body, rename)
    return (
        params,
        body,
        {name: (value, helpers.hints[name]) for name, value in helpers.values.items()},
    )


# parsed gradient lambdas, by lambda (rules live as long as the process)
_PARSED_TEMPLATES: dict[Callable, tuple[list[str], ast.expr, dict[str, tuple[Any, str]]]] = {}


def _whole_power_gradient(
    rule: InlineRule, operands: list[ast.expr], A: ast.expr
) -> ast.expr | None:
    """The base's sensitivity for ``x ** c``, ``c`` a whole constant, on numbers: ``A * (c *
    x ** (c - 1))``, ``A * (2 * x)`` for a square. The rule's template also covers
    complex results and computes ``c * r / x`` (one pow fewer, other rounding); a real base
    to a whole power is real, and a reader of the generated code sees the textbook rule.
    None for any other operation."""
    if rule.fn not in (operator.pow, operator.ipow) or len(operands) != 2:
        return None
    e = operands[1]
    if not (
        isinstance(e, ast.Constant)
        and type(e.value) in (int, float)
        and float(e.value).is_integer()
    ):
        return None
    c, x = e.value, clone(operands[0])
    if c == 0:
        d: ast.expr = C(0.0)
    elif c == 1:
        return clone(A)
    elif c == 2:
        d = ast.BinOp(left=C(c), op=ast.Mult(), right=x)
    else:
        d = ast.BinOp(
            left=C(c), op=ast.Mult(), right=ast.BinOp(left=x, op=ast.Pow(), right=C(c - 1))
        )
    return ast.BinOp(left=clone(A), op=ast.Mult(), right=d)


def template_for(fn: Callable, helpers: Helpers) -> Template | None:
    """The inline template of a gradient lambda, built once per build (helpers) and function."""
    cache = helpers.templates
    if fn in cache:
        return cache[fn]
    try:
        t: Template | None = Template(fn, helpers)
    except Exception:
        t = None
    cache[fn] = t
    return t


# ---------------------------------------------------------------------------
# the builder


class FunctionBuilder:
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
        self.internal = {ABOX, PUSH, POP, TAPE}
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
            k = f"{PFX}cell_{name}"
            self.key_names[name] = k
        return k

    def helper(self, value: Any, hint: str) -> ast.Name:
        return N(self.h.ref(value, hint))

    def rt(self, name: str) -> ast.Name:
        from . import runtime_ops

        return self.helper(getattr(runtime_ops, name), name)

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
            prologue: list[ast.stmt] = [assign(TAPE, C(None))]
        elif self.straight:
            prologue = []
        else:
            prologue = [
                assign(TAPE, ast.List(elts=[], ctx=ast.Load())),
                assign(PUSH, attr(TAPE, "append")),
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
                vararg=ast.arg(arg=PFX + "args"),
                kwonlyargs=[ast.arg(arg=PFX + "sig")],
                kw_defaults=[C(None)],
                kwarg=ast.arg(arg=PFX + "kw"),
                defaults=[],
            )
            binding = [N(PFX + "sig"), N(PFX + "args"), N(PFX + "kw")]
            if self.defaults_in_closure:
                # the default values again, as a value of their own: at the next order, the
                # defaults' sensitivities reach them through bind_arguments' rule
                plus_args.kwonlyargs.append(ast.arg(arg=PFX + "defaults"))
                plus_args.kw_defaults.append(C(None))
                binding.append(N(PFX + "defaults"))
            prologue.append(unpack(all_params, call(self.rt("bind_arguments"), *binding)))
        # backprop
        free_by_value = self.by_value_freevars()
        if self.nestable:
            # differentiable again: a copy of the record, popped with list.pop (both have rules)
            # the backprop captures the finished record under a name assigned once, so at the
            # next order it is a by-value closure variable, not a rebound (boxed) one
            bp_body: list[ast.stmt] = [assign(PFX + "stack", N(PFX + "record"))]
        elif self.straight:
            bp_body = []
        else:
            bp_body = [
                assign(POP, attr(call(self.helper(reversed, "reversed"), N(TAPE)), "__next__"))
            ]
        adjoint_vars = sorted(
            set(self.adjoint_names.values())
            | {self.adj(p) for p in all_params}
            | {self.adj(v) for v in free_by_value}
            | {self.adj(ir.retval)}
        )
        if adjoint_vars:
            bp_body.append(ast.Assign(targets=[S(a) for a in adjoint_vars], value=N(self.Z)))
        bp_body.append(assign(self.adj(ir.retval), N(PFX + "A")))
        if ir.retval in self.boxed:
            pass
        bp_body += rev
        # sensitivities of parameters
        param_sens: list[ast.expr] = []
        for p in all_params:
            if p in self.boxed:
                param_sens.append(call(attr(ABOX, "pop"), N(self.key(p)), N(self.Z)))
            elif args.kwarg is not None and p == args.kwarg.arg:
                # the **kwargs dict is mutable: its sensitivity is in Abox
                prologue.append(assign(PFX + "kwobj", N(p)))
                param_sens.append(call(self.rt("fold"), N(PFX + "kwobj"), N(self.adj(p)), N(ABOX)))
            else:
                param_sens.append(N(self.adj(p)))
        closure: list[ast.expr] = []
        for v in free_by_value:
            if v in self.boxed:
                closure.append(call(attr(ABOX, "pop"), N(self.key(v)), N(self.Z)))
            else:
                closure.append(N(self.adj(v)))
        if simple:
            ret = tuple_([tuple_(closure)] + param_sens)
        elif only_varargs:
            # counted on entry: the backprop may rebind the parameter's name from a record
            prologue.append(assign(PFX + "nvar", call(self.helper(len, "len"), N(args.vararg.arg))))
            ret = ast.BinOp(
                left=tuple_([tuple_(closure)] + param_sens[:-1]),
                op=ast.Add(),
                right=call(self.rt("closure_parts"), param_sens[-1], N(PFX + "nvar")),
            )
        else:
            closure_sens: ast.expr = tuple_(closure)
            all_sens: ast.expr = tuple_(param_sens)
            if self.defaults_in_closure:
                # (each parameter's sensitivity is taken once: a boxed one is popped from Abox)
                bp_body.append(assign(PFX + "param_sens", all_sens))
                all_sens = N(PFX + "param_sens")
                closure_sens = ast.BinOp(
                    left=closure_sens,
                    op=ast.Add(),
                    right=call(
                        self.rt("default_sensitivities"),
                        N(PFX + "sig"),
                        N(PFX + "args"),
                        N(PFX + "kw"),
                        N(PFX + "param_sens"),
                    ),
                )
            ret = call(
                self.rt("unbind_sensitivities"),
                N(PFX + "sig"),
                N(PFX + "args"),
                N(PFX + "kw"),
                closure_sens,
                all_sens,
                N(ABOX),
            )
        bp_body.append(ast.Return(value=ret))
        bp_name = f"{ir.name}__backprop" if not ir.is_lambda else "lambda__backprop"
        bp = ast.FunctionDef(
            name=bp_name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=PFX + "A"), ast.arg(arg=ABOX)],
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
        finish = [assign(PFX + "record", N(TAPE))] if self.nestable else []
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
                fargs = [ast.Starred(value=N(PFX + "args"), ctx=ast.Load())]
                fkw = [ast.keyword(arg=None, value=N(PFX + "kw"))]
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

    def fused_gradient(
        self,
        params: list[str],
        signature: list[str] | None = None,
        prologue: list[ast.stmt] | None = None,
        finish: Callable[[list[ast.expr]], list[ast.stmt]] | None = None,
    ) -> ast.FunctionDef | None:
        """``grad``'s whole computation in one function, for a body that is one float fast
        segment: the segment's forward, then at once its reverse from the sensitivity 1.0,
        returning the parameters' sensitivities (``None`` when a guard fails, or the result
        is not a float: the caller then takes the general way, which computes the same).

        A small formula then costs no record, closure, ``ProcResult`` or boundary fold. The
        segment is only arithmetic and inline-able calls on numbers, so running it again on
        the general way repeats no effect. Only for the outermost ``grad`` with float
        arguments and the default sensitivity (``api._make_gradient`` decides).

        ``signature``, ``prologue`` and ``finish`` let ``fused.py`` wrap the same body in a
        function of other parameters (lists whose elements become ``params``): its
        parameters, statements run first (a ``return None`` there sends the call the
        general way), and the statements that return the sensitivities, given them as
        expressions in the order of ``params``.
        """
        ir = self.ir
        if not (
            self.straight
            and not self.nestable
            and not self.boxed
            and not ir.outer_boxed
            and len(self.segment_log) == 1
            and isinstance(self.segment_log[0], FastParts)
            and all(isinstance(st, ast.Assign) for st in ir.body)
        ):
            return None
        parts = self.segment_log[0]
        ret = [c.value.id for c in parts.copy_back if c.targets[0].id == ir.retval]
        if parts.lead or len(ret) != 1 or parts.stores:
            return None
        flt, typ = self.helper(float, "float"), self.helper(type, "type")
        adjoints = sorted(set(self.adjoint_names.values()) | {self.adj(p) for p in params})
        sens: list[ast.expr] = [
            ast.IfExp(
                test=ast.Compare(left=N(self.adj(p)), ops=[ast.Is()], comparators=[N(self.Z)]),
                body=C(0.0),
                orelse=N(self.adj(p)),
            )
            for p in params
        ]
        reverse = [
            ast.Assign(targets=[S(a) for a in adjoints], value=N(self.Z)),
            assign(self.adj(ir.retval), C(1.0)),
            *[clone(x) for x in parts.rev],
            *(finish(sens) if finish is not None else [ast.Return(value=tuple_(sens))]),
        ]
        is_float = ast.Compare(left=call(typ, N(ret[0])), ops=[ast.Is()], comparators=[flt])
        body = [
            ast.If(
                test=clone(parts.guard),
                body=[clone(x) for x in parts.fwd]
                + [ast.If(test=is_float, body=reverse, orelse=[])],
                orelse=[],
            ),
            ast.Return(value=C(None)),
        ]
        if signature is None:  # floats only (ints, bools and objects take the general way)
            signature = params
            not_floats = [
                ast.Compare(
                    left=call(clone(typ), N(p)), ops=[ast.IsNot()], comparators=[clone(flt)]
                )
                for p in params
            ]
            if not_floats:
                body.insert(
                    0,
                    ast.If(
                        test=ast.BoolOp(op=ast.Or(), values=not_floats)
                        if len(not_floats) > 1
                        else not_floats[0],
                        body=[ast.Return(value=C(None))],
                        orelse=[],
                    ),
                )
        body[:0] = prologue or []
        if self.specialized is not None:  # a rebound global: the general way
            body.insert(
                0,
                ast.If(
                    test=self.not_specialized(self.specialized),
                    body=[ast.Return(value=C(None))],
                    orelse=[],
                ),
            )
        fdef = ast.FunctionDef(
            name=f"{ir.name}__grad",
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in signature],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body=body,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef.lineno = fdef.end_lineno = ir.lineno
        fdef.col_offset = fdef.end_col_offset = 0
        _locate(fdef, ir.lineno)
        return fdef

    def by_value_freevars(self) -> tuple[str, ...]:
        ir = self.ir
        if self.top_level:
            return tuple(self.outer_free)
        return tuple(sorted(n for n in ir.scope.free if n not in self.boxed))

    # ---------------------------------------------------------------- the record
    def push(self, value: ast.expr, slot: str | None = None) -> ast.stmt:
        """Record ``value``; in straight-line code, in the variable ``slot`` its reverse reads."""
        if self.nestable:  # an immutable chain of records: only tuples, differentiable again
            return assign(TAPE, tuple_([value, N(TAPE)]))
        if self.straight:
            return assign(slot, value)
        return ast.Expr(call(PUSH, value))

    def pop_into(
        self, names: list[str], whole: bool = False, slot: str | None = None
    ) -> list[ast.stmt]:
        """Statements that take the last record into ``names`` (unpacked, or whole into names[0])."""
        if self.straight:
            return [assign(names[0], N(slot))] if whole else [unpack(names, N(slot))]
        if self.nestable:
            if whole:
                return [unpack([names[0], PFX + "stack"], N(PFX + "stack"))]
            rec = self.namer.fresh("rec")
            return [unpack([rec, PFX + "stack"], N(PFX + "stack")), unpack(names, N(rec))]
        if whole:
            return [assign(names[0], call(POP))]
        return [unpack(names, call(POP))]

    def mark(self, name: str) -> ast.stmt:
        if self.nestable:
            return assign(name, N(TAPE))
        return assign(name, call(self.helper(len, "len"), N(TAPE)))

    def truncate(self, mark: str) -> ast.stmt:
        if self.nestable:
            return assign(TAPE, N(mark))
        return ast.Delete(
            targets=[
                ast.Subscript(
                    value=N(TAPE),
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

    def loop_over_zip(self, zs: ast.Assign, s: ast.For) -> tuple[list[ast.stmt], list[ast.stmt]]:
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

    # ---------------------------------------------------------------- classification
    def inline_rule(self, value: ast.expr) -> tuple[InlineRule | None, Any]:
        """(rule, callee) when ``value`` may run on the float fast path."""
        if (
            isinstance(value, ast.BinOp)
            and not getattr(value, "dp_inplace", False)
            or (
                isinstance(value, ast.BinOp)
                and type(value.op)
                in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
            )
        ):
            fn = BINOPS.get(type(value.op))
            if fn is None:
                return None, None
            if not all(
                _is_atom(x) and (isinstance(x, ast.Name) or _is_number_const(x))
                for x in (value.left, value.right)
            ):
                return None, None
            return inline_rule_for(fn), None
        if isinstance(value, ast.UnaryOp) and type(value.op) in (ast.USub, ast.UAdd):
            if isinstance(value.operand, ast.Name) or _is_number_const(value.operand):
                return inline_rule_for(UNARYOPS[type(value.op)]), None
            return None, None
        if (
            isinstance(value, ast.Call)
            and not value.keywords
            and all(isinstance(a, ast.Name) or _is_number_const(a) for a in value.args)
        ):
            fn = self.resolve_static(value.func)
            if fn is None:
                return None, None
            rule = inline_rule_for(fn)
            if rule is not None and rule.arity == len(value.args):
                return rule, fn
        return None, None

    def resolve_static(self, func: ast.expr) -> Any:
        """The object a global dotted name refers to now (for choosing an inline rule)."""
        if not self.is_static_chain(func):
            return None
        parts = []
        node = func
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        import builtins

        if node.id in self.globals:
            obj = self.globals[node.id]
        elif hasattr(builtins, node.id):
            obj = getattr(builtins, node.id)
        else:
            return None
        for p in reversed(parts):
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj

    def is_static_chain(self, func: ast.expr) -> bool:
        node = func
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        scope = self.ir.scope
        return not (
            scope.is_local(node.id)
            or node.id in scope.params
            or node.id in scope.free
            or node.id in self.namer.generated
            or node.id.startswith(PFX)
        )

    def on_constants_only(self, v: ast.Call) -> bool:
        """A call of a module-level callee whose arguments are all literals or module-level
        names (see ``runtime_ops.call_on_constants``)."""
        if not self.is_static_chain(v.func) or self.nestable and v.keywords:
            return False
        operands = list(v.args) + [k.value for k in v.keywords]
        return all(
            isinstance(a, ast.Constant) or isinstance(a, ast.Name) and self.is_module_constant(a.id)
            for a in operands
        ) and not any(isinstance(a, ast.Starred) for a in v.args)

    def is_module_constant(self, name: str) -> bool:
        """``name`` is read from the module (or builtins) and never bound in this function:
        the backprop returns no sensitivity for it (closure sensitivities are for enclosing
        functions' variables only), so a number's adjoint need not be computed."""
        scope = self.ir.scope
        return not (
            name in scope.assigned
            or name in scope.params
            or name in scope.free
            or name in self.boxed
            or name in self.namer.generated
            or name.startswith(PFX)
        )

    def kind(self, s: ast.stmt) -> str:
        """'inline', 'nondiff', 'copy', 'unpack', 'display', 'store', 'append' or 'general'.

        'display' and 'store' (first-order code) are ``L = [a, b]`` and ``xs[i] = L`` for a
        list displayed only to be stored: :meth:`segments` keeps them fast only in pairs.
        'append' (first-order code) is a comprehension appending a value to its own result
        list (``_comp.append(x * y)``), which joins the fast segment computing the value."""
        if getattr(s, "dp_unpack", False):
            return "unpack"
        if self.fast and not self.in_try and self.is_comprehension_append(s):
            return "append"
        if self.fast and not self.in_try and isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            if (
                isinstance(t, ast.Name)
                and isinstance(v, ast.List)
                and t.id not in self.boxed
                and self.read_count.get(t.id) == 1
                and all(isinstance(e, ast.Name) or _is_number_const(e) for e in v.elts)
            ):
                return "display"
            if (
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and isinstance(v, ast.Name)
                and (
                    isinstance(t.slice, ast.Name)
                    or isinstance(t.slice, ast.Constant)
                    and type(t.slice.value) is int
                )
            ):
                return "store"
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            target = s.targets[0].id
            v = s.value
            if target in self.boxed:
                return "general"
            if isinstance(v, ast.Constant):
                return "nondiff"
            if isinstance(v, ast.Name):
                if v.id in self.const_names:
                    return "nondiff"
                return "general" if v.id in self.boxed else "copy"
            if isinstance(v, (ast.Compare, ast.JoinedStr)) or (
                isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
            ):
                return "nondiff"
            if (
                isinstance(v, ast.Call)
                and getattr(v, "dp_builtin", False)
                or self.builds_builtin_exception(s)
            ):
                return "nondiff"
            if self.fast and not self.in_try:
                rule, _ = self.inline_rule(v)
                if rule is not None and all(
                    template_for(g, self.h) is not None for g in rule.grads if g is not None
                ):
                    return "inline"
        return "general"

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

    def segments(self, run: list[ast.stmt]) -> list[list[ast.stmt]]:
        segs: list[list[ast.stmt]] = []
        cur: list[ast.stmt] = []
        cur_fast = False
        kinds = [self.kind(s) for s in run]
        # a display and the store of it stay fast together, or neither does
        displays = {
            s.targets[0].id: i for i, (s, k) in enumerate(zip(run, kinds)) if k == "display"
        }
        paired = set()
        for j, (s, k) in enumerate(zip(run, kinds)):
            if k == "store" and displays.get(s.value.id, j) < j:
                paired.update((displays[s.value.id], j))
        kinds = [
            ("general" if k in ("display", "store") and i not in paired else k)
            for i, k in enumerate(kinds)
        ]
        # where each name is last read by arithmetic (a copy or a return takes a complex as it is)
        last_read = {
            n.id: i
            for i, (st, k) in enumerate(zip(run, kinds))
            if k == "inline"
            for n in walk(st.value)
            if isinstance(n, ast.Name)
        }
        for position, (s, k) in enumerate(zip(run, kinds)):
            s.dp_kind = k
            if self.in_try:
                segs.append([s])
                continue
            fastish = k in ("inline", "nondiff", "copy", "unpack", "display", "store", "append")
            # an unpack leads its segment: its targets are type-guarded after it runs
            leads = k == "unpack" and any(getattr(x, "dp_kind", "") != "unpack" for x in cur)
            if cur and (fastish != cur_fast or leads or _deletes_name(s)):
                segs.append(cur)
                cur = []
            cur_fast = fastish
            cur.append(s)
            if (
                k == "inline"
                and self.may_be_complex(s)
                and last_read.get(s.targets[0].id, -1) > position
            ):
                # a real power that may be complex ends its segment: the fast variant's
                # templates assume real numbers, so arithmetic on it tests its type first
                segs.append(cur)
                cur = []
        if cur:
            segs.append(cur)
        if self.in_try or self.nestable:
            # (merged in differentiable-again code, the fourth derivative of sin failed to add
            # a tuple and a float: not understood yet, so that code keeps its segments)
            return segs
        # runs with no inline operation take the general way whatever their kind: neighbours
        # of that sort become one segment, one record (a read, an unpack, a copy, a store)
        merged: list[list[ast.stmt]] = []
        last_general = False
        for seg in segs:
            general = not any(s.dp_kind == "inline" for s in seg)
            if merged and general and last_general and not _deletes_name(seg[0]):
                merged[-1].extend(seg)
            else:
                merged.append(seg)
            last_general = general
        return merged

    # ---------------------------------------------------------------- segments
    def segment(self, seg: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
        ssa = _SSA(self, seg)
        has_inline = any(getattr(s, "dp_kind", "") == "inline" for s in seg)
        # (the general variant of a segment with a fast one runs only when its guard fails:
        # written compactly, its reverse a replayed program or calls where a float's
        # sensitivity would be added inline)
        compact = has_inline and self.fast
        # None also when an operand's type cannot be guarded before the segment runs
        fast = self.fast_segment(ssa) if compact else None
        replay = self.replay_plan(ssa) if fast is not None else None
        if replay is not None:
            gen_fwd, gen_rec, gen_rev = replay
        else:
            gen_fwd, gen_rec, gen_rev = self.general_segment(ssa, compact=compact)
        if fast is None:
            self.segment_log.append(None)
            slot = self.namer.fresh("rec")
            fwd = (
                gen_fwd
                + ([self.push(tuple_([N(x) for x in gen_rec]), slot)] if gen_rec else [])
                + ssa.copy_back()
            )
            rev = (self.pop_into(gen_rec, slot=slot) if gen_rec else []) + gen_rev
            _locate_all(fwd, seg[0])
            _locate_all(rev, seg[0])
            return fwd, rev
        fast_fwd, fast_rec, fast_rev, guard, numbers, checks = fast
        # (the statements themselves, shared with the code emitted below: a loop that uses
        # them clones them)
        self.segment_log.append(
            FastParts(
                ssa.leading_unpacks(),
                guard,
                fast_fwd,
                list(fast_rec),
                fast_rev,
                ssa.copy_back(),
                list(ssa.defined),
                list(numbers),
                checks,
                self.numbers_kept(ssa, numbers),
                any(st.dp_kind in ("store", "append") for st in ssa.stmts),
            )
        )
        gen_fwd = gen_fwd[
            len(ssa.leading_unpack_stmts()) :
        ]  # each unpack's forward is one statement
        rec = self.namer.fresh("rec")
        fwd_fast = fast_fwd + [self.push(tuple_([C(True)] + [N(x) for x in fast_rec]), rec)]
        fwd_gen = gen_fwd + [self.push(tuple_([C(False)] + [N(x) for x in gen_rec]), rec)]
        fwd = (
            ssa.leading_unpacks()
            + [ast.If(test=guard, body=fwd_fast, orelse=fwd_gen)]
            + ssa.copy_back()
        )
        rev = ([] if self.straight else self.pop_into([rec], whole=True)) + [
            ast.If(
                test=ast.Subscript(value=N(rec), slice=C(0), ctx=ast.Load()),
                body=[unpack(["_"] + fast_rec, N(rec))] + (fast_rev or [ast.Pass()]),
                orelse=(
                    self.replay_reverse(replay, rec)
                    if replay is not None
                    else [unpack(["_"] + gen_rec, N(rec))] + (gen_rev or [ast.Pass()])
                ),
            ),
        ]
        _locate_all(fwd, seg[0])
        _locate_all(rev, seg[0])
        return fwd, rev

    def fast_segment(
        self, ssa: _SSA
    ) -> (
        tuple[list[ast.stmt], list[str], list[ast.stmt], ast.expr, list[str], list[ast.expr]] | None
    ):
        fwd: list[ast.stmt] = []
        saved: list[str] = []
        guards: list[ast.expr] = []
        guarded_inputs: set[str] = set()
        number_guarded: list[str] = []  # names whose values must be numbers, in order
        ops: list[tuple[ast.stmt, InlineRule | None]] = []
        # where each name defined here got its value: a name to type-guard, None for a number
        # an inline operation or a non-differentiable statement made, or "" when no guard can
        # see it (a later unpack's target)
        source: dict[str, str | None] = {}
        hoisted = ssa.leading_unpack_stmts()
        # the accumulator is made first: the forward needs to know which adjoints start at zero
        rev: list[ast.stmt] = []
        acc = _AdjointAccumulator(self, ssa, rev, fast=True)
        fresh_zero = acc.fresh_zero

        def must_be_numbers(exprs: list[ast.expr]) -> bool:
            """Guard the names among ``exprs`` as numbers where they come from outside the
            segment (through copies); False when one's value no guard can see."""
            for e in exprs:
                if isinstance(e, ast.Name):
                    g = (
                        source.get(e.id, e.id)
                        if e.id in source
                        else (e.id if e.id in ssa.inputs else None)
                    )
                    if g == "":
                        return False
                    if g is not None and g not in guarded_inputs:
                        guarded_inputs.add(g)
                        number_guarded.append(g)
            return True

        stored: dict[str, list[str]] = {}  # a displayed list -> its elements' sensitivities (names)
        displayed: dict[str, ast.stmt] = {}
        for s in ssa.stmts:
            k = s.dp_kind
            if k == "unpack":
                if s not in hoisted:
                    fwd.append(clone(s))
                for e in s.targets[0].elts:
                    source[e.id] = e.id if s in hoisted else ""
                if s.value.id not in saved and not self.direct_unpack(s.value.id, fresh_zero):
                    saved.append(s.value.id)
                ops.append((s, None))
                continue
            if k == "display":
                # a list of numbers, stored below: its elements are guarded like operands
                target = s.targets[0].id
                if target not in ssa.local_temps:
                    return None
                if not must_be_numbers(s.value.elts):
                    return None
                source[target] = ""
                displayed[target] = s
                fwd.append(ast.copy_location(assign(target, clone(s.value)), s))
                ops.append((s, None))
                continue
            if k == "store":
                # ``xs[i] = L`` on a list with an int index, both unchanged since the guard
                t, L = s.targets[0], s.value.id
                obj, idx = t.value.id, t.slice
                before_guard = {
                    e.id for u in hoisted for e in u.targets[0].elts
                }  # (leading unpacks)
                if (
                    L not in displayed
                    or L in stored
                    or (obj in ssa.defined and obj not in before_guard)
                    or (
                        isinstance(idx, ast.Name)
                        and idx.id in ssa.defined
                        and idx.id not in before_guard
                    )
                ):
                    return None
                typ = self.helper(type, "type")
                guards.append(
                    ast.Compare(
                        left=call(typ, N(obj)),
                        ops=[ast.Is()],
                        comparators=[self.helper(list, "list")],
                    )
                )
                if isinstance(idx, ast.Name):
                    guards.append(
                        ast.Compare(
                            left=call(clone(typ), N(idx.id)),
                            ops=[ast.Is()],
                            comparators=[self.helper(int, "int")],
                        )
                    )
                w = self.namer.fresh("write")
                fwd += [
                    ast.copy_location(ast.Assign(targets=[clone(t)], value=N(L)), s),
                    ast.copy_location(
                        assign(
                            w,
                            ast.IfExp(
                                test=ast.Compare(
                                    left=clone(idx), ops=[ast.GtE()], comparators=[C(0)]
                                ),
                                body=clone(idx),
                                orelse=ast.BinOp(
                                    left=clone(idx),
                                    op=ast.Add(),
                                    right=call(self.helper(len, "len"), N(obj)),
                                ),
                            ),
                        ),
                        s,
                    ),
                ]
                for x in (obj, w, L):
                    if x not in saved:
                        saved.append(x)
                stored[L] = [self.namer.fresh("s") for _ in displayed[L].value.elts]
                s.dp_write = w
                ops.append((s, None))
                continue
            if k == "append":
                # a number appended to the comprehension's own list (a list from its start)
                comp, _, item = s.value.args
                if comp.id in ssa.defined or not must_be_numbers([item]):
                    return None
                fwd += [
                    ast.copy_location(ast.Expr(call(attr(comp.id, "append"), clone(item))), s),
                    ast.copy_location(assign(s.targets[0].id, C(None)), s),
                ]
                if comp.id not in saved:
                    saved.append(comp.id)
                source[s.targets[0].id] = None
                ops.append((s, None))
                continue
            target = s.targets[0].id
            v = s.value
            if k == "copy":
                source[target] = source.get(v.id, v.id) if v.id in source else v.id
            elif k != "nondiff" or not isinstance(v, ast.Name):
                source[target] = None
            if k == "inline":
                rule, fn = self.inline_rule(v)
                if not must_be_numbers(self.operands(v)):
                    return None
                if fn is not None:
                    fname = self.helper(fn, getattr(fn, "__name__", "fn"))
                    guards.append(
                        ast.Compare(left=clone(v.func), ops=[ast.Is()], comparators=[fname])
                    )
                    fwd.append(
                        ast.copy_location(
                            assign(target, call(fname, *[clone(a) for a in v.args])), s
                        )
                    )
                else:
                    fwd.append(ast.copy_location(assign(target, clone(v)), s))
                ops.append((s, rule))
            else:
                fwd.append(ast.copy_location(assign(target, clone(v)), s))
                ops.append((s, None))
        if set(displayed) != set(stored):
            return None
        # reverse
        for s, rule in reversed(ops):
            k = s.dp_kind
            if k == "unpack":
                self.unpack_reverse(s, acc)
                continue
            if k == "store":
                # the slot's sensitivity and the list's entry, as numbers (``store_display_numbers``)
                L = s.value.id
                acc.out.append(
                    unpack(
                        stored[L],
                        call(
                            self.rt("store_display_numbers"),
                            N(s.targets[0].value.id),
                            N(s.dp_write),
                            N(L),
                            C(len(stored[L])),
                            N(ABOX),
                        ),
                    )
                )
                continue
            if k == "append":
                # the appended number's sensitivity, off the end of the list's entry
                acc.take(s.targets[0].id)
                comp, _, item = s.value.args
                if isinstance(item, ast.Name) and not self.is_module_constant(item.id):
                    back = self.namer.fresh("s")
                    acc.out.append(
                        assign(back, call(self.rt("append_back_number"), N(comp.id), N(ABOX)))
                    )
                    acc.add(item.id, N(back))
                else:
                    acc.out.append(
                        ast.Expr(call(self.rt("append_back_number"), N(comp.id), N(ABOX)))
                    )
                continue
            if k == "display":
                acc.take(s.targets[0].id)  # (a local temporary read only by its store: nothing)
                for e, sk in reversed(list(zip(s.value.elts, stored[s.targets[0].id]))):
                    if isinstance(e, ast.Name) and not self.is_module_constant(e.id):
                        acc.add(e.id, N(sk))
                continue
            target = s.targets[0].id
            A = acc.take(target)
            if k == "nondiff":
                continue
            if k == "copy":
                if A is not None:
                    # only a copy of a number guarded here may add its adjoint with ``+``: a
                    # tuple's adjoint is a tuple, OneHot or TupleAccumulator (``+`` would
                    # concatenate or fail), so it takes the linear interface's ``add``
                    root = source.get(target)
                    acc.add(s.value.id, A, any_type=root is not None and root not in guarded_inputs)
                continue
            if A is None:
                continue
            operands = self.operands(s.value)
            for o, g in zip(operands, rule.grads):
                if g is None or not isinstance(o, ast.Name) or self.is_module_constant(o.id):
                    continue  # (a number read from the module: the backprop would discard its adjoint)
                expr = _whole_power_gradient(rule, operands, A) if o is operands[0] else None
                if expr is None:
                    tmpl = template_for(g, self.h)
                    mapping = dict(zip(tmpl.params, [A, N(target)] + [clone(x) for x in operands]))
                    expr = tmpl.instantiate(mapping)
                for used in _names_read(expr):
                    if used in ssa.all_names and used not in saved:
                        saved.append(used)
                acc.add(o.id, expr)
        acc.finish()
        persistent = set(self.adjoint_names.values())
        rev[:] = simplify_reverse(
            rev,
            {
                t.id
                for st in rev
                for t in getattr(st, "targets", ())
                if isinstance(t, ast.Name) and t.id not in persistent
            },
        )
        unique: dict[str, ast.expr] = {}
        for g in guards:  # (two stores with one index test it once)
            unique.setdefault(ast.dump(g), g)
        guards = list(unique.values())
        checks = [clone(g) for g in guards]
        if number_guarded:
            guards.insert(0, self.number_guard(number_guarded))
        guard = (
            ast.BoolOp(op=ast.And(), values=guards)
            if len(guards) > 1
            else (guards[0] if guards else C(True))
        )
        return fwd, saved, rev, guard, number_guarded, checks

    def may_be_complex(self, s: ast.Assign) -> bool:
        """An inline ``x ** y`` without a whole constant exponent: complex for a negative
        real base (``(-1.75) ** 0.5``), the one inline operation that leaves the reals."""
        rule, _ = self.inline_rule(s.value)
        if rule is None or rule.fn not in _POWERS:
            return False
        exponent = self.operands(s.value)[-1]
        return not (
            _is_number_const(exponent)
            and (type(exponent.value) is int or float(exponent.value).is_integer())
        )

    def numbers_kept(self, ssa: _SSA, numbers: list[str]) -> frozenset[str]:
        """The user names that hold numbers (``int`` or ``float``) after the fast variant ran
        when the names in ``numbers`` held numbers before: arithmetic and the inline rules
        keep numbers numbers, except ``**`` (a negative base to a fractional power is complex)
        unless its exponent is a whole constant. What a loop that tests its guard once needs."""
        num = set(numbers)
        for s in ssa.stmts:
            k = s.dp_kind
            if k in ("unpack", "store", "append"):
                continue  # (a leading unpack's targets are in ``numbers`` when the guard tests them)
            target = s.targets[0].id
            v = s.value
            if k == "inline":
                ok = all(
                    _is_number_const(o) or isinstance(o, ast.Name) and o.id in num
                    for o in self.operands(v)
                )
                rule, _ = self.inline_rule(v)
                if rule.fn in _POWERS:
                    exponent = self.operands(v)[-1]
                    ok = (
                        ok
                        and _is_number_const(exponent)
                        and (type(exponent.value) is int or exponent.value.is_integer())
                    )
            elif k == "copy":
                ok = v.id in num
            else:
                ok = isinstance(v, ast.Constant) and type(v.value) in _NUM_TYPES
            if ok:
                num.add(target)
            else:
                num.discard(target)
        return frozenset(user for user, new in ssa.version.items() if new in num)

    def number_guard(self, names: list[str]) -> ast.expr:
        """``names`` all hold numbers: tested as all floats first (one chained identity
        test, ``type(a) is type(b) is float``: the common case), then as numbers of any
        kind (``int`` or ``float``; inline, as ints are common: indices, counters)."""
        typ, num = self.helper(type, "type"), self.helper(_NUM_TYPES, "NUM")
        types_ = [call(clone(typ), N(g)) for g in names]
        floats = ast.Compare(
            left=types_[0],
            ops=[ast.Is() for _ in names],
            comparators=types_[1:] + [self.helper(float, "float")],
        )
        tests = [
            ast.Compare(left=clone(t), ops=[ast.In()], comparators=[clone(num)]) for t in types_
        ]
        numbers = ast.BoolOp(op=ast.And(), values=tests) if len(tests) > 1 else tests[0]
        return ast.BoolOp(op=ast.Or(), values=[floats, numbers])

    def operands(self, v: ast.expr) -> list[ast.expr]:
        if isinstance(v, ast.BinOp):
            return [v.left, v.right]
        if isinstance(v, ast.UnaryOp):
            return [v.operand]
        if isinstance(v, ast.Call):
            return list(v.args)
        return []

    def general_segment(
        self, ssa: _SSA, compact: bool = False
    ) -> tuple[list[ast.stmt], list[str], list[ast.stmt]]:
        fwd: list[ast.stmt] = []
        rec: list[str] = []
        rev: list[ast.stmt] = []
        acc = _AdjointAccumulator(self, ssa, rev, fast=False)
        acc.compact = compact
        acc.stored_displays = self.stored_displays(ssa)
        recorded: set[str] = set()
        plans = []
        for s in ssa.stmts:
            f, r_names, rev_fn = self.general_stmt(s, ssa)
            _locate_all(f, s)  # tracebacks point at the statement's own line
            fwd.extend(f)
            for n in r_names:
                if n not in recorded:
                    recorded.add(n)
                    rec.append(n)
            plans.append(rev_fn)
        for rev_fn in reversed(plans):
            rev_fn(acc)
        acc.finish()
        return fwd, rec, rev

    def replay_plan(self, ssa: _SSA) -> tuple[list[ast.stmt], list[str], Any] | None:
        """The general variant of a segment of arithmetic (operations, copies, values that
        carry no sensitivity), its reverse as data: the forward as
        :meth:`general_segment` writes it, the names it records, and ``(names, program)``
        for :func:`runtime_ops.replay_segment`, which reads the backprops and values from the
        record. None for any other segment, or one that touches a boxed name.

        The variant runs only when the segment's float guard fails, so its reverse need not
        be straight-line code; as a program it is a few nodes instead of a third of the
        generated tree, and the transformation is that much faster."""
        slots: dict[str, int] = {}
        users: list[str] = []  # the persistent adjoints the program reads and writes
        init: list[tuple[int, int]] = []
        inputs: dict[str, int] = {}
        steps: list[tuple[ast.stmt, list[str]]] = []

        def slot(name: str) -> int:
            k = slots.get(name)
            if k is None:
                k = slots[name] = len(slots)
            return k

        user_positions: dict[str, int] = {}

        def user_index(name: str) -> int:
            k = user_positions.get(name)
            if k is None:
                k = user_positions[name] = len(users)
                users.append(name)
            return k

        def contributes(name: str) -> int | None:
            """The slot of a name an operation hands sensitivity to (None: not tracked)."""
            if name in self.const_names:
                return None
            if name not in ssa.defined:
                if name in self.boxed or name.startswith(PFX):
                    raise _NotReplayable
                if name not in inputs:
                    inputs[name] = slot(name)
                    user_index(name)
            return slot(name)

        fwd: list[ast.stmt] = []
        rec: list[str] = []
        rec_positions: dict[str, int] = {}  # name -> its 1-based place in the record
        try:
            for s in ssa.stmts:
                kind = getattr(s, "dp_kind", "")
                if (
                    kind not in ("inline", "nondiff", "copy")
                    or not isinstance(s, ast.Assign)
                    or not isinstance(s.targets[0], ast.Name)
                    or getattr(s, "dp_unpack", False)
                ):
                    return None
                name = s.targets[0].id
                if name in self.boxed or ssa.user_name(name) in self.boxed:
                    return None
                v = s.value
                if kind == "inline":
                    operands = (
                        [v.left, v.right]
                        if isinstance(v, ast.BinOp)
                        else [v.operand]
                        if isinstance(v, ast.UnaryOp)
                        else list(v.args)
                        if isinstance(v, ast.Call)
                        and not v.keywords
                        and getattr(v, "dp_op", None) is None
                        and self.is_static_chain(v.func)
                        else None
                    )
                    if operands is None or any(isinstance(a, ast.Starred) for a in operands):
                        return None
                elif kind == "copy" and (not isinstance(v, ast.Name) or v.id in self.boxed):
                    return None
                f, r_names, _ = self.general_stmt(s, ssa)
                _locate_all(f, s)
                fwd.extend(f)
                for n in r_names:
                    if n not in rec_positions:
                        rec.append(n)
                        rec_positions[n] = len(rec)
                steps.append((s, r_names))
            for name in ssa.defined:
                if ssa.is_final(name):
                    init.append((slot(name), user_index(ssa.user_name(name))))
            program: list[tuple] = []
            for s, r_names in reversed(steps):
                dst = slot(s.targets[0].id)
                v = s.value
                if s.dp_kind == "copy":
                    src = contributes(v.id)
                    if src is not None:
                        program.append((dst, src))
                elif s.dp_kind == "inline":
                    operands = (
                        [v.left, v.right]
                        if isinstance(v, ast.BinOp)
                        else [v.operand]
                        if isinstance(v, ast.UnaryOp)
                        else v.args
                    )
                    args = []
                    for pos, a in enumerate(operands, 1):
                        if isinstance(a, ast.Name):
                            k = contributes(a.id)
                            if k is not None:
                                if a.id not in rec_positions:
                                    raise _NotReplayable
                                args.append((pos, rec_positions[a.id], k))
                    program.append((rec_positions[r_names[0]], dst, tuple(args)))
        except _NotReplayable:
            return None
        taken = {ssa.user_name(n) for n in ssa.defined if ssa.is_final(n)}
        # an input whose name a final definition also has starts from zero: its adjoint was the
        # final value's, taken by the program
        init.extend((k, user_index(n)) for n, k in inputs.items() if n not in taken)
        result = tuple(inputs.get(u, -1) for u in users)
        return fwd, rec, (users, (len(slots), tuple(init), tuple(program), result))

    def replay_reverse(
        self, replay: tuple[list[ast.stmt], list[str], Any], rec: str
    ) -> list[ast.stmt]:
        """``adjoints = replay_segment(program, record, adjoints, Abox)``."""
        users, program = replay[2]
        adjoints = [self.adj(u) for u in users]
        run = call(
            self.rt("replay_segment"), C(program), N(rec), tuple_([N(a) for a in adjoints]), N(ABOX)
        )
        if not adjoints:
            return [ast.Expr(run)]
        return [
            ast.Assign(
                targets=[ast.Tuple(elts=[S(a) for a in adjoints], ctx=ast.Store())], value=run
            )
        ]

    def stored_displays(self, ssa: _SSA) -> dict[str, tuple[int, str | None]]:
        """The lists displayed in this segment whose only use is to be stored into a list
        here (``L = [a, b]; xs[i] = L``): the store's reverse takes the display's element
        sensitivities in the same call (``store_display_back``). Maps each to the name of its
        parts, set when the store's reverse is written (first-order code only)."""
        if self.nestable or not self.fast:
            return {}
        displayed = {
            st.targets[0].id: len(st.value.elts)
            for st in ssa.stmts
            if isinstance(st, ast.Assign)
            and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.List)
            and not any(isinstance(e, ast.Starred) for e in st.value.elts)
        }
        out: dict[str, tuple[int, str | None]] = {}
        for st in ssa.stmts:
            if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Subscript)):
                continue
            t, v = st.targets[0], st.value
            if (
                isinstance(v, ast.Name)
                and v.id in displayed
                and isinstance(t.value, ast.Name)
                and not isinstance(t.slice, ast.Slice)
                and v.id not in self.boxed
                and ssa.user_name(v.id) == v.id
                and self.read_count.get(v.id) == 1
            ):
                out[v.id] = (displayed[v.id], None)
        return out

    # ---------------------------------------------------------------- general statements
    def unpack_reverse(self, s: ast.Assign, acc: _AdjointAccumulator) -> None:
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
            return call(self.rt("unpack_back"), cur, N(v), clone(sens), N(ABOX))

        parts = sens.elts
        if not parts or not all(isinstance(p, ast.Name) and p.id != self.Z for p in parts):
            acc.update(v, back)
            return
        target, current = acc._target(v)
        typ, entries = self.helper(type, "type"), attr(ABOX, "_entries")
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

    def general_stmt(
        self, s: ast.stmt, ssa: _SSA
    ) -> tuple[list[ast.stmt], list[str], Callable[[_AdjointAccumulator], None]]:
        if getattr(s, "dp_unpack", False):
            return [clone(s)], [s.value.id], lambda acc: self.unpack_reverse(s, acc)
        if isinstance(s, ast.FunctionDef):
            return self.closure_stmt(s, ssa)
        if isinstance(s, ast.Delete):
            return self.delete_stmt(s)
        target = s.targets[0]
        v = s.value
        if isinstance(target, ast.Subscript):
            if (
                not self.nestable
                and not isinstance(target.slice, ast.Slice)
                and isinstance(target.value, ast.Name)
            ):
                return self.list_write(target.value, target.slice, v, s)
            return self.call_like(
                None,
                self.rt("setitem_plus"),
                [target.value, self.slice_expr(target.slice), v],
                [],
                s,
            )
        if isinstance(target, ast.Attribute):
            return self.call_like(
                None,
                self.rt("setattr_plus"),
                [target.value, C(target.attr), v],
                [],
                s,
                native=self.native_attribute_write(target, v),
            )
        name = target.id
        kind = getattr(s, "dp_kind", "general")
        if name in self.boxed:
            # a write to a boxed variable: its sensitivity lives in Abox under the cell key
            fwd = [assign(name, clone(v))] if not isinstance(v, ast.Name) or v.id != name else []

            def rev_boxed(acc: _AdjointAccumulator) -> None:
                popped = call(attr(ABOX, "pop"), N(self.key(name)), N(self.Z))
                if isinstance(v, ast.Name):
                    acc.add(v.id, popped)
                else:
                    acc.out.append(ast.Expr(popped))

            return fwd, [], rev_boxed
        if isinstance(v, ast.Name) and v.id in self.boxed:
            fwd = [assign(name, N(v.id))]

            def rev_read(acc: _AdjointAccumulator) -> None:
                A = acc.take(name)
                if A is not None:
                    acc.out.append(
                        ast.Expr(
                            call(self.rt("accumulate_cell"), N(ABOX), N(self.key(v.id)), N(name), A)
                        )
                    )

            return fwd, [name], rev_read
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
        if isinstance(v, ast.BinOp):
            return self.binop(name, v, s)
        if isinstance(v, ast.UnaryOp):
            fn = UNARYOPS[type(v.op)]
            return self.call_like(
                name, self.rt("call"), [self.helper(fn, fn.__name__), v.operand], [], s, skip=1
            )
        if isinstance(v, ast.Call):
            op = getattr(v, "dp_op", None)
            if op is not None:
                fn_name = {
                    "unpack": "unpack_plus",
                    "unpack_star": "unpack_star_plus",
                    "match_args": "match_args_plus",
                    "callmethod": "callmethod",
                    "user_namespace": "user_namespace_plus",
                    "read_global": "read_global_plus",
                }[op]
                return self.call_like(
                    name,
                    self.rt(fn_name),
                    list(v.args),
                    list(v.keywords),
                    s,
                    native=self.native_append(name, v) if op == "callmethod" else None,
                )
            if getattr(v, "dp_live", False):
                # a lazy builtin's iterator whose laziness the program may see (a loop that may
                # change what it reads, or kept for later): Python's live iterator
                plus = self.rt("live_iteration_again" if self.nestable else "live_iteration")
            else:
                plus = self.rt("call_on_constants" if self.on_constants_only(v) else "call")
            return self.call_like(
                name, plus, [v.func] + list(v.args), list(v.keywords), s, skip=1, callee=v.func
            )
        if isinstance(v, ast.Attribute):
            return self.call_like(
                name,
                self.rt("getattr_plus"),
                [v.value, C(v.attr)],
                [],
                s,
                native=self.native_attribute_read(name, v),
            )
        if isinstance(v, ast.Subscript):
            if (
                not self.nestable
                and not isinstance(v.slice, ast.Slice)
                and isinstance(v.value, ast.Name)
            ):
                return self.sequence_read(name, v.value, v.slice, s)
            return self.call_like(
                name, self.rt("getitem_plus"), [v.value, self.slice_expr(v.slice)], [], s
            )
        if isinstance(v, ast.Tuple):
            return self.display(name, "build_tuple", v.elts, s)
        if isinstance(v, ast.List):
            return self.display(name, "build_list", v.elts, s)
        if isinstance(v, ast.Set):
            return self.display(name, "build_set", v.elts, s)
        if isinstance(v, ast.Dict):
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
            return self.call_like(
                name, self.rt("build_dict"), [C(tuple(spec))] + parts, [], s, skip=1
            )
        raise NotImplementedError(ast.dump(v))

    def not_a_slice(self, test: ast.expr, idx: ast.expr) -> ast.expr:
        """``test``, and, for an index held in a variable, that it is not a slice at run time."""
        if isinstance(idx, ast.Constant):
            return test
        not_slice = ast.Compare(
            left=call(self.helper(type, "type"), clone(idx)),
            ops=[ast.IsNot()],
            comparators=[self.helper(slice, "slice")],
        )
        return ast.BoolOp(op=ast.And(), values=[test, not_slice])

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
                test=self.not_a_slice(test, idx),
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
            if obj.id in acc.ssa.defined or obj.id in self.boxed or self.nestable:
                acc.add_value(
                    obj.id,
                    call(self.rt("read_back"), N(obj.id), clone(idx), N(kind), N(name), A, N(ABOX)),
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
                    N(ABOX),
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
        element's sensitivity off the end of the list's entry (``runtime_ops.append_back``)."""
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
        return test, run, call(self.rt("append_back"), N(obj), N(ABOX))

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
            return call(self.rt("own_attribute_back"), N(obj), C(v.attr), A, N(ABOX))

        return test, [], reverse

    def native_attribute_write(self, target: ast.Attribute, v: ast.expr) -> Any:
        """``obj.attr = v`` on a tracked object, run natively (first-order code): the reverse
        takes the attribute's sensitivity out of the object's entry, as ``setattr_plus``'s."""
        if self.nestable or not self.fast or not isinstance(target.value, ast.Name):
            return None
        obj = target.value.id
        test = call(self.rt("store_own_attribute"), N(obj), C(target.attr), clone(v))
        back = call(self.rt("own_attribute_write_back"), N(obj), C(target.attr), N(ABOX))
        return test, [], back

    def list_write(self, obj: ast.Name, idx: ast.expr, v: ast.expr, s: ast.stmt) -> Any:
        """``obj[idx] = v``: native for lists (the record keeps the index), else the rule."""
        kind = self.namer.fresh("write")
        r = self.namer.fresh("r")
        typ = self.helper(type, "type")
        tests = [
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
                            N(ABOX),
                        ),
                    )
                )
                return
            moved = call(self.rt("write_back"), N(obj.id), N(kind), N(ABOX))
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
                            call(self.rt("list_display_parts"), A, N(name), C(len(elts)), N(ABOX)),
                        )
                    )
            else:
                if A is None and not is_list:
                    return
                sources = [self.namer.fresh("parts")]
                split = (
                    call(
                        self.rt("list_display_parts"),
                        A or N(self.Z),
                        N(name),
                        C(len(elts)),
                        N(ABOX),
                    )
                    if is_list
                    else call(self.rt("tuple_items"), A, C(len(elts)))
                )
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
        return self.call_like(None, self.rt("delattr_plus"), [t.value, C(t.attr)], [], s)

    def calls_directly(
        self, plus: ast.expr, args: list[ast.expr], keywords: list[ast.keyword]
    ) -> bool:
        """Whether a ``call(f, *args)`` of first-order code is written ``callee_plus(f)(*args)``
        (differentiable-again code keeps ``call``, which has a rule of its own)."""
        from . import runtime_ops

        return (
            not self.nestable
            and isinstance(plus, ast.Name)
            and self.h.values.get(plus.id) is runtime_ops.call
            and not keywords
            and bool(args)
            and not any(isinstance(a, ast.Starred) for a in args)
        )

    def binop(self, name: str, v: ast.BinOp, s: ast.stmt) -> Any:
        """``name = left op right``; for ``a op= b`` (``dp_inplace``, see normalize's
        ``in_place_op``) the in-place operator, and when the target may be shared, a test
        that refuses to change an array in place first."""
        inplace = getattr(v, "dp_inplace", None)
        if not inplace:
            fn = BINOPS[type(v.op)]
        elif inplace == "unshared":
            from dplus.primitives.operators import UNSHARED_IN_PLACE

            fn = UNSHARED_IN_PLACE[INPLACE[type(v.op)]]
        else:
            fn = INPLACE[type(v.op)]
        fwd, record, rev = self.call_like(
            name,
            self.rt("binop_plus"),
            [self.helper(fn, fn.__name__), v.left, v.right],
            [],
            s,
            skip=1,
        )
        where = getattr(v, "dp_where", None)
        if where is not None and isinstance(v.left, ast.Name):
            fwd = [ast.Expr(call(self.rt("refuse_array_in_place"), clone(v.left), C(where)))] + fwd
        return fwd, record, rev

    def call_like(
        self,
        target: str | None,
        plus: ast.expr,
        args: list[ast.expr],
        keywords: list[ast.keyword],
        s: ast.stmt,
        skip: int = 0,
        callee: ast.expr | None = None,
        native: tuple[ast.expr, list[ast.stmt], Any] | None = None,
    ) -> Any:
        """``target = plus(*args, **keywords).primal``, recording the backprop and argument values.

        ``skip`` leading arguments are not differentiated (an operator, a callee passed to call).
        ``native``: ``(test, statements, reverse)``: when ``test`` holds, the statements do the
        operation instead (assigning the target, with no backprop), and ``reverse`` gives
        what the backprop would have returned (an expression, or a function of the target's
        sensitivity giving one).
        """
        if self.nestable and isinstance(plus, ast.Name) and plus.id in self.h.values:
            from . import runtime_ops

            if self.h.values[plus.id] not in (
                runtime_ops.call,
                runtime_ops.binop_plus,
                runtime_ops.call_on_constants,
            ):
                # a transform called as the function it is: its next transform must differentiate it again
                args = [plus] + list(args)
                plus = self.rt("call_plus")
                skip += 1
        bp = self.namer.fresh("bp")
        r = self.namer.fresh("r")
        fwd: list[ast.stmt] = []
        call_args: list[ast.expr] = []
        for a in args:
            if isinstance(a, ast.Starred):
                call_args.append(ast.Starred(value=clone(a.value), ctx=ast.Load()))
            else:
                call_args.append(clone(a))
        kws = [ast.keyword(arg=k.arg, value=clone(k.value)) for k in keywords]
        if self.calls_directly(plus, call_args, kws):
            # ``callee_plus(f)(*args)``, not ``call(f, *args)``: no frame of dplus's between a
            # recursive function's levels
            fwd.append(assign(r, call(call(self.rt("callee_plus"), call_args[0]), *call_args[1:])))
        else:
            fwd.append(assign(r, call(clone(plus), *call_args, keywords=kws)))
        if target is not None:
            fwd.append(assign(target, attr(r, "primal")))
        fwd.append(assign(bp, attr(r, "backprop")))
        if native is not None:
            fwd = [ast.If(test=native[0], body=native[1] + [assign(bp, C(None))], orelse=fwd)]
        record = [bp]
        star_lens: dict[int, str] = {}
        for i, a in enumerate(args):
            node = a.value if isinstance(a, ast.Starred) else a
            if i < skip and not (
                callee is not None
                and isinstance(callee, ast.Name)
                and not self.is_static_chain(callee)
            ):
                continue
            if isinstance(node, ast.Name) and node.id not in record and not node.id.startswith(PFX):
                record.append(node.id)
            if isinstance(a, ast.Starred):
                ln = self.namer.fresh("len")
                fwd.insert(0, assign(ln, call(self.helper(len, "len"), clone(a.value))))
                star_lens[i] = ln
                record.append(ln)
        double_star_keys: dict[int, str] = {}
        for j, k in enumerate(keywords):
            if isinstance(k.value, ast.Name) and k.value.id not in record:
                record.append(k.value.id)
            if k.arg is None and isinstance(k.value, ast.Name):
                # the keys the call read: the dict may shrink or grow before the reverse runs
                keys = self.namer.fresh("keys")
                fwd.insert(0, assign(keys, call(self.helper(tuple, "tuple"), clone(k.value))))
                double_star_keys[j] = keys
                record.append(keys)
        is_callee_var = (
            callee is not None and isinstance(callee, ast.Name) and not self.is_static_chain(callee)
        )

        def rev(acc: _AdjointAccumulator) -> None:
            A = acc.take(target) if target is not None else None
            g = self.namer.fresh("g")
            back: ast.expr = call(bp, A if A is not None else N(self.Z), N(ABOX))
            if native is not None:
                native_back = native[2]
                if callable(native_back):
                    native_back = native_back(clone(A) if A is not None else N(self.Z))
                back = ast.IfExp(
                    test=ast.Compare(left=N(bp), ops=[ast.Is()], comparators=[C(None)]),
                    body=native_back,
                    orelse=back,
                )
            acc.out.append(assign(g, back))
            if is_callee_var:
                acc.add_value(callee.id, ast.Subscript(value=N(g), slice=C(0), ctx=ast.Load()))
            fixed = 1
            dynamic: list[str] = []

            def position() -> ast.expr:
                e: ast.expr = C(fixed)
                for d in dynamic:
                    e = ast.BinOp(left=e, op=ast.Add(), right=N(d))
                return e

            for i, a in enumerate(args):
                if i < skip:
                    continue
                if isinstance(a, ast.Starred):
                    ln = star_lens[i]
                    if isinstance(a.value, ast.Name):
                        if self.nestable:
                            part = ast.Subscript(
                                value=N(g),
                                slice=ast.Slice(
                                    lower=position(),
                                    upper=ast.BinOp(left=position(), op=ast.Add(), right=N(ln)),
                                    step=None,
                                ),
                                ctx=ast.Load(),
                            )
                        else:
                            part = call(
                                self.rt("star_sensitivity"), N(g), position(), N(ln), N(a.value.id)
                            )
                        acc.add_value(a.value.id, part)
                    dynamic.append(ln)
                    continue
                if isinstance(a, ast.Name) and a.id not in self.const_names:
                    acc.add_value(a.id, ast.Subscript(value=N(g), slice=position(), ctx=ast.Load()))
                fixed += 1
            for j, k in enumerate(keywords):
                if not isinstance(k.value, ast.Name):
                    continue
                if k.arg is None:
                    kw = call(self.rt("keyword_sensitivities"), N(g), position())
                    acc.add_value(
                        k.value.id,
                        call(self.rt("double_star_sensitivity"), kw, N(double_star_keys[j])),
                    )
                else:
                    # (one operation with a rule of its own: no dict operations at the next order)
                    acc.add_value(
                        k.value.id, call(self.rt("keyword_sensitivity"), N(g), position(), C(k.arg))
                    )

        return fwd, record, rev

    def closure_stmt(self, s: ast.FunctionDef, ssa: _SSA) -> Any:
        ir: IRFunction = s.dp_ir
        child = FunctionBuilder(
            ir,
            self.namer,
            self.h,
            self.globals,
            top_level=False,
            fast=self.fast,
            nestable=self.nestable,
        )
        child.const_names = self.const_names
        child.key_names = dict(self.key_names)
        defaults = getattr(s, "dp_defaults", [])
        kw_defaults = getattr(s, "dp_kw_defaults", [])
        all_defaults = defaults + [d for d in kw_defaults if d is not None]
        child.defaults_in_closure = bool(all_defaults)
        plus = child.build()
        for k, v in child.key_names.items():
            self.key_names.setdefault(k, v)
        fwd: list[ast.stmt] = [plus]
        if not plus.dp_simple:
            bare = clone(ir.args)
            bare.defaults = []
            bare.kw_defaults = [None] * len(bare.kwonlyargs)
            for a in bare.posonlyargs + bare.args + bare.kwonlyargs + [bare.vararg, bare.kwarg]:
                if a is not None:
                    a.annotation = None
            sig = call(
                self.rt("make_signature"),
                C(unparse(bare)),
                tuple_([clone(d) for d in defaults]),
                tuple_([clone(d) if d is not None else C(None) for d in kw_defaults]),
            )
            plus.args.kw_defaults = [sig] + (
                [tuple_([clone(d) for d in all_defaults])] if all_defaults else []
            )
        fwd.append(assign(s.name, N(plus.name)))
        by_value = plus.dp_by_value
        s.dp_plus_name = plus.name
        s.dp_by_value = by_value
        # the closure's sensitivity: one part per variable it closes over, then one per default
        parts: list[str | None] = list(by_value) + [
            d.id if isinstance(d, ast.Name) and not self.is_module_constant(d.id) else None
            for d in all_defaults
        ]
        record = list(dict.fromkeys(v for v in parts if v is not None))

        def rev(acc: _AdjointAccumulator) -> None:
            if s.name in self.boxed:
                # a boxed function: every read added its sensitivity into the cell's entry
                A: ast.expr | None = call(attr(ABOX, "pop"), N(self.key(s.name)), N(self.Z))
            else:
                A = acc.take(s.name)
            if A is None or not record:
                return
            a = self.namer.fresh("clo")
            acc.out.append(assign(a, call(self.rt("closure_parts"), A, C(len(parts)))))
            for i, v in enumerate(parts):
                if v is not None:
                    acc.add_value(
                        v, ast.Subscript(value=N(a), slice=C(i), ctx=ast.Load()), value_name=v
                    )

        return fwd, record, rev

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

    def loop_common(
        self, body_stmts: list[ast.stmt], stop: str | None, bound: tuple[str, ...] = ()
    ) -> tuple[list[ast.stmt], list[ast.stmt], str]:
        bf, br = self.block(body_stmts, bound)
        n = self.namer.fresh("n")
        bf = bf + [ast.AugAssign(target=S(n), op=ast.Add(), value=C(1))]
        if stop:
            bf.append(ast.If(test=N(stop), body=[ast.Break()], orelse=[]))
        return bf, br, n

    def c_For(self, s: ast.For) -> tuple[list[ast.stmt], list[ast.stmt]]:
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
        fwd = [
            assign(n, C(0)),
            ast.For(target=S(target), iter=clone(it), body=bf, orelse=[], type_comment=None),
        ]
        length = self.namer.fresh("len")
        fwd.append(self.push(tuple_([clone(it), N(n), self.list_length(s)])))
        route = self.namer.fresh("route")
        i = self.namer.fresh("i")
        rev_body = list(br)
        # The elements' sensitivities go back to the iterable all at once after the loop,
        # unless the body may write into the list it iterates (then each goes back when its
        # iteration is reversed, before the reverse of earlier writes), and at higher orders
        # (where the routing needs rules of its own).
        if batched:
            back = ast.Assign(
                targets=[ast.Subscript(value=N(route), slice=N(i), ctx=ast.Store())], value=N(A_t)
            )
        else:
            back = ast.Expr(
                call(self.rt("route_back"), N(route), N(i), N(A_t), N(ABOX))
                if self.nestable
                else call(attr(route, "back"), N(i), N(A_t), N(ABOX))
            )
        rev_body.append(self.routed(A_t, back))
        start = (
            ast.BinOp(left=ast.List(elts=[N(self.Z)], ctx=ast.Load()), op=ast.Mult(), right=N(n))
            if batched
            else call(self.rt("iteration_router"), N(itv), N(n), N(length))
        )
        rev = self.pop_into([itv, n, length]) + [
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
            result = call(self.rt("route_all"), N(itv), N(route), N(ABOX), N(length))
        elif self.nestable:
            result = call(self.rt("route_result"), N(route))
        else:
            result = call(attr(route, "result"))
        if rec_it is not None or batched:
            rev.append(self.hand_back(rec_it, itv, result))
        return fwd, rev

    def list_length(self, s: ast.For) -> ast.expr:
        """What a loop records of its iterable's length where it ends (``runtime_ops.list_length``):
        a list iterated may be resized before the loop's reverse routes its elements' sensitivities.
        A fresh list (``zip``, ``enumerate``, ...) is not: ``-1``, with no call."""
        if getattr(s, "dp_fresh_iter", False):
            return C(-1)
        return call(self.rt("list_length"), clone(s.iter))

    def routed(self, A_t: str, back: ast.stmt) -> ast.If:
        """``if A_t is not Z: <back>; A_t = Z``: an iteration's element sensitivity, routed."""
        return ast.If(
            test=ast.Compare(left=N(A_t), ops=[ast.IsNot()], comparators=[N(self.Z)]),
            body=[back, assign(A_t, N(self.Z))],
            orelse=[],
        )

    def hand_back(self, rec_it: str | None, itv: str, result: ast.expr) -> ast.stmt:
        """After a loop's reverse: the iterable (a name) gets the sensitivity its routing returns."""
        if rec_it is None:
            return ast.Expr(result)
        self.persistent.add(rec_it)
        A_it = self.adj(rec_it)
        if self.nestable:
            return assign(A_it, call(self.rt("accumulate"), N(A_it), N(itv), result, N(ABOX)))
        # (a list's elements' sensitivities went to its entry: usually nothing is left, no call)
        routed = self.namer.fresh("routed")
        return ast.If(
            test=ast.Compare(
                left=ast.NamedExpr(target=S(routed), value=result),
                ops=[ast.IsNot()],
                comparators=[N(self.Z)],
            ),
            body=[assign(A_it, call(self.rt("accumulate"), N(A_it), N(itv), N(routed), N(ABOX)))],
            orelse=[],
        )

    def loop_with_fast_prefix(
        self,
        s: ast.For,
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
        if lists is None:
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
                    call(self.rt("zip_lists_back"), N(lists), N(lens), listed, N(ABOX), C(False))
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
            ast.Expr(call(self.rt("zip_lists_back"), N(lists), N(lens), listed, N(ABOX), C(True)))
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

    def fast_prefix_loop(
        self,
        s: ast.For,
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
        lead = [] if direct else [clone(u) for u in fast.lead]
        item_target = direct if direct else S(target)
        item = clone(direct) if direct else N(target)
        if direct:
            item.ctx = ast.Load()
            for e in item.elts:
                e.ctx = ast.Load()
        fwd += [
            assign(iterv, call(self.helper(iter, "iter"), clone(s.iter))),
            assign(pend, C(None)),
            ast.For(
                target=clone(item_target),
                iter=N(iterv),
                body=[
                    *lead,
                    ast.If(
                        test=clone(fast.guard),
                        body=prefix_body,
                        orelse=[assign(pend, tuple_([item])), ast.Break()],
                    ),
                ],
                orelse=[],
                type_comment=None,
            ),
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
                    [clone(s.iter), N(nf), N(n), self.list_length(s)]
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
        total = ast.BinOp(left=N(nf), op=ast.Add(), right=N(n))
        rev_body = list(br) + [
            self.routed(
                A_t,
                ast.Assign(
                    targets=[ast.Subscript(value=N(route), slice=N(i), ctx=ast.Store())],
                    value=N(A_t),
                ),
            )
        ]
        make_route = assign(
            route,
            ast.BinOp(left=ast.List(elts=[N(self.Z)], ctx=ast.Load()), op=ast.Mult(), right=total),
        )
        length = self.namer.fresh("len")
        rev: list[ast.stmt] = self.pop_into(
            [itv, nf, n, length] + ([col] if col else []) + ([inv] if inv else [])
        ) + [
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
        column = call(self.helper(reversed, "reversed"), N(col)) if col else None
        col_target: ast.expr = (
            (
                S(column_names[0])
                if len(column_names) == 1
                else ast.Tuple(elts=[S(x) for x in column_names], ctx=ast.Store())
            )
            if col
            else S("_")
        )
        if reads_items and col:
            loop_target: ast.expr = ast.Tuple(
                elts=[clone(item_target), col_target], ctx=ast.Store()
            )
            source: ast.expr = call(self.helper(zip, "zip"), items, column)
        elif reads_items:
            loop_target, source = clone(item_target), items
        elif col:
            loop_target, source = col_target, column
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
                    call(self.rt("route_columns"), N(itv), N(route), N(nf), listed, N(ABOX)),
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
                rec_it, itv, call(self.rt("route_all"), N(itv), N(route), N(ABOX), N(length))
            )
        )
        return fwd, rev

    def prefix_records(self, s: ast.For, fast: FastParts) -> tuple[set[str], list[str], list[str]]:
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

    def unpacked_items(self, s: ast.For, fast: FastParts, target: str) -> ast.Tuple | None:
        """The names a fast loop over tuples (``zip``, ``enumerate``) unpacks each item into
        first, as a target for the ``for`` statement itself, when nothing else reads the item."""
        if not (getattr(s, "dp_tuple_items", False) and len(fast.lead) == 1):
            return None
        u = fast.lead[0]
        t = u.targets[0]
        if not (
            isinstance(u.value, ast.Name)
            and u.value.id == target
            and isinstance(t, ast.Tuple)
            and all(isinstance(e, ast.Name) for e in t.elts)
        ):
            return None
        if any(_is_name(n, target) for x in fast.fwd + fast.copy_back + fast.rev for n in walk(x)):
            return None
        return ast.Tuple(elts=[S(e.id) for e in t.elts], ctx=ast.Store())

    def unless_zero(
        self, body: list[ast.stmt], run: list[ast.stmt], otherwise: list[ast.stmt]
    ) -> list[ast.stmt]:
        """``run`` behind a test that an adjoint the fast loop body ``body`` propagates is not
        zero: reverse code is linear in those adjoints, so when all are zero where the loop's
        reverse starts, every iteration's contributions are zero and the loop is skipped (a
        dense layer's row behind an inactive ReLU). An adjoint only added to (``a = a + c``,
        ``a = c if a is Z else a + c``) propagates nothing."""
        from_abox = {self.rt("store_display_numbers").id, self.rt("append_back_number").id}
        if any(isinstance(n, ast.Name) and n.id in from_abox for st in body for n in walk(st)):
            # (a store's or a comprehension append's reverse moves sensitivities out of Abox:
            # never skipped)
            return run
        persistent = set(self.adjoint_names.values())
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

    def c_Try(self, s: ast.Try) -> tuple[list[ast.stmt], list[ast.stmt]]:
        self.in_try += 1
        try:
            p = self.namer.fresh("done")
            mark = self.namer.fresh("mark")
            body_fwd: list[ast.stmt] = []
            body_revs: list[list[ast.stmt]] = []
            compound_idx: list[int] = []
            for k, stmt in enumerate(s.body):
                f, r = self.block([stmt])
                body_fwd.append(self.mark(mark))
                body_fwd.extend(f)
                body_fwd.append(assign(p, C(k + 1)))
                body_revs.append(r)
                if (
                    not isinstance(stmt, (ast.Assign, ast.Delete, ast.FunctionDef, ast.Pass))
                    and r
                    and not self.atomic_if(stmt)
                ):
                    compound_idx.append(k)
            handlers = []
            handler_revs = []
            for hi, h in enumerate(s.handlers):
                hf, hr = self.block(h.body)
                hbody = [self.truncate(mark)]
                hbody += hf + [self.push(tuple_([N(p), C(hi)]))]
                handlers.append(ast.ExceptHandler(type=h.type, name=h.name, body=hbody))
                handler_revs.append(hr)
        finally:
            self.in_try -= 1
        ef, er = self.block(s.orelse)
        ff, fr = self.block(s.finalbody)
        else_fwd = ef + [self.push(tuple_([N(p), C(-1)]))]
        if handlers:
            # a DplusError (dplus cannot run or differentiate what the body does) leaves the
            # function whatever the user's handlers catch: handled, the program would go on
            # differently than without grad
            from .errors import DplusError

            handlers.insert(
                0,
                ast.ExceptHandler(
                    type=self.helper(DplusError, "DplusError"),
                    name=None,
                    body=[ast.Raise(exc=None, cause=None)],
                ),
            )
            fwd = [
                assign(p, C(0)),
                self.mark(mark),
                ast.Try(body=body_fwd, handlers=handlers, orelse=else_fwd, finalbody=ff),
            ]
        else:  # try/finally: the body either completes (then "else" runs) or the exception leaves
            fwd = [
                assign(p, C(0)),
                self.mark(mark),
                ast.Try(
                    body=body_fwd + else_fwd, handlers=[], orelse=[], finalbody=ff or [ast.Pass()]
                ),
            ]
        hv = self.namer.fresh("handler")
        rev: list[ast.stmt] = list(fr)
        rev.extend(self.pop_into([p, hv]))
        chain: list[ast.stmt] = er or [ast.Pass()]
        dispatch: list[ast.stmt] = []
        for hi, hr in enumerate(handler_revs):
            dispatch = [
                ast.If(
                    test=ast.Compare(left=N(hv), ops=[ast.Eq()], comparators=[C(hi)]),
                    body=hr or [ast.Pass()],
                    orelse=dispatch,
                )
            ]
        rev.append(
            ast.If(
                test=ast.Compare(left=N(hv), ops=[ast.Eq()], comparators=[C(-1)]),
                body=chain,
                orelse=dispatch or [ast.Pass()],
            )
        )
        if compound_idx:
            msg = (
                f"an exception interrupted a compound statement inside try (line {s.lineno}); dplus cannot "
                "differentiate through a partially executed loop, if or with: move the try inside it"
            )
            rev.append(
                ast.If(
                    test=ast.BoolOp(
                        op=ast.And(),
                        values=[
                            ast.Compare(left=N(hv), ops=[ast.NotEq()], comparators=[C(-1)]),
                            ast.Compare(
                                left=N(p), ops=[ast.In()], comparators=[C(tuple(compound_idx))]
                            ),
                        ],
                    ),
                    body=[
                        ast.Raise(
                            exc=call(
                                self.helper(_nondiff_error(), "NonDifferentiableError"), C(msg)
                            ),
                            cause=None,
                        )
                    ],
                    orelse=[],
                )
            )
        for k in range(len(s.body) - 1, -1, -1):
            if body_revs[k]:
                rev.append(
                    ast.If(
                        test=ast.Compare(left=N(p), ops=[ast.Gt()], comparators=[C(k)]),
                        body=body_revs[k],
                        orelse=[],
                    )
                )
        return fwd, rev

    def atomic_if(self, s: ast.stmt) -> bool:
        """Whether an exception can interrupt the ``if`` statement ``s`` only where it has had
        no effect yet: each branch is one simple statement (which either completes or changes
        nothing), or builds a builtin exception from constants and raises it. Then, inside a
        try, the reverse pass may skip an interrupted ``s`` as it skips an interrupted assignment."""
        return isinstance(s, ast.If) and all(self.atomic_branch(b) for b in (s.body, s.orelse))

    def atomic_branch(self, stmts: list[ast.stmt]) -> bool:
        stmts = [st for st in stmts if not isinstance(st, ast.Pass)]
        raises = [i for i, st in enumerate(stmts) if isinstance(st, ast.Raise)]
        if raises:
            stmts = stmts[: raises[0] + 1]  # (what follows is never reached: a record's push)
        if len(stmts) <= 1 and all(
            isinstance(st, (ast.Assign, ast.Expr, ast.Delete)) for st in stmts
        ):
            return True
        if not stmts or not isinstance(stmts[-1], ast.Raise):
            return False
        return all(self.builds_builtin_exception(st) for st in stmts[:-1])

    def builds_builtin_exception(self, s: ast.stmt) -> bool:
        """``name = SomeError(constants...)`` with a builtin exception class not shadowed: a value
        with no sensitivity, made without changing anything else."""
        import builtins

        if not (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id not in self.boxed
            and isinstance(s.value, ast.Call)
        ):
            return False
        func = s.value.func
        scope = self.ir.scope
        if (
            not isinstance(func, ast.Name)
            or func.id in self.globals
            or func.id in scope.locals
            or func.id in scope.free
        ):
            return False
        cls = getattr(builtins, func.id, None)
        return (
            isinstance(cls, type)
            and issubclass(cls, BaseException)
            and not s.value.keywords
            and all(isinstance(a, ast.Constant) for a in s.value.args)
        )

    def c_With(self, s: ast.With) -> tuple[list[ast.stmt], list[ast.stmt]]:
        bf, br = self.block(s.body)
        ok = self.namer.fresh("ok")
        mark = self.namer.fresh("mark")
        fwd = [
            assign(ok, C(False)),
            self.mark(mark),
            ast.With(items=s.items, body=bf + [assign(ok, C(True))]),
            ast.If(
                test=ast.UnaryOp(op=ast.Not(), operand=N(ok)), body=[self.truncate(mark)], orelse=[]
            ),
            self.push(N(ok)),
        ]
        msg = (
            f"the context manager of the with statement at line {s.lineno} suppressed an exception; dplus cannot "
            "differentiate through a partially executed with body"
        )
        okr = self.namer.fresh("ok")
        rev = self.pop_into([okr], whole=True) + [
            ast.If(
                test=N(okr),
                body=br or [ast.Pass()],
                orelse=[
                    ast.Raise(
                        exc=call(self.helper(_nondiff_error(), "NonDifferentiableError"), C(msg)),
                        cause=None,
                    )
                ],
            )
        ]
        return fwd, rev

    def c_Match(self, s: ast.Match) -> tuple[list[ast.stmt], list[ast.stmt]]:
        cv = self.namer.fresh("case")
        cases = []
        revs = []
        irrefutable = False
        for ci, case in enumerate(s.cases):
            cf, cr = self.block(case.body)
            cases.append(
                ast.match_case(
                    pattern=case.pattern, guard=case.guard, body=cf + [self.push(C(ci), cv)]
                )
            )
            revs.append(cr)
            if (
                case.guard is None
                and isinstance(case.pattern, ast.MatchAs)
                and case.pattern.pattern is None
            ):
                irrefutable = True
        if not irrefutable:
            cases.append(
                ast.match_case(
                    pattern=ast.MatchAs(pattern=None, name=None),
                    guard=None,
                    body=[self.push(C(-1), cv)],
                )
            )
        dispatch: list[ast.stmt] = []
        for ci, cr in enumerate(revs):
            if cr:
                dispatch = [
                    ast.If(
                        test=ast.Compare(left=N(cv), ops=[ast.Eq()], comparators=[C(ci)]),
                        body=cr,
                        orelse=dispatch,
                    )
                ]
        pop = [] if self.straight else self.pop_into([cv], whole=True)
        return [ast.Match(subject=s.subject, cases=cases)], pop + dispatch

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
# SSA renaming inside a segment


def _deletes_name(s: ast.stmt) -> bool:
    """Whether ``s`` is ``del name``: it starts a segment of its own, since a segment records
    the values it needs after all its statements ran, and the name is gone by then."""
    return isinstance(s, ast.Delete) and isinstance(s.targets[0], ast.Name)


class _SSA:
    """Renames the names a segment assigns again, so every value it records stays available."""

    def __init__(self, builder: FunctionBuilder, seg: list[ast.stmt]) -> None:
        self.b = builder
        self.version: dict[str, str] = {}
        self.origin: dict[str, str] = {}  # ssa name -> user/temp name
        self.inputs: set[str] = set()
        self.defined: dict[str, None] = {}  # in order of definition; a dict for O(1) membership
        self.all_names: set[str] = set()
        self.stmts: list[ast.stmt] = []
        self.local_temps: set[str] = set()
        self.input_reads: dict[str, int] = {}  # reads of names this segment does not define first
        reads: dict[str, int] = {}
        numeric: set[str] = set()  # user variables a fast-path statement defines here
        copies: set[str] = set()  # names a copy of another name defines here
        for s in seg:
            s2 = clone(s)
            s2.dp_kind = getattr(s, "dp_kind", "general")
            if s2.dp_kind in ("unpack", "inline") and not builder.nestable and builder.fast:
                targets = s2.targets[0].elts if s2.dp_kind == "unpack" else [s2.targets[0]]
                numeric.update(
                    t.id for t in targets if isinstance(t, ast.Name) and t.id not in builder.boxed
                )
            elif (
                s2.dp_kind == "copy"
                and not builder.nestable
                and builder.fast
                and s2.targets[0].id not in builder.boxed
            ):
                copies.add(s2.targets[0].id)  # (an inlined function's parameter, bound once)
            for n in self._rename_loads(s2):
                reads[n] = reads.get(n, 0) + 1
            if getattr(s2, "dp_unpack", False):
                for elt in s2.targets[0].elts:
                    name = elt.id
                    new = (
                        builder.namer.fresh(name.strip("_")[:12] + "_")
                        if (name in self.version or name in self.inputs)
                        else name
                    )
                    self.version[name] = new
                    self.origin[new] = name
                    elt.id = new
                    self.defined[new] = None
                    self.all_names.add(new)
                self.stmts.append(s2)
                continue
            if isinstance(s2, ast.Assign) and isinstance(s2.targets[0], ast.Name):
                name = s2.targets[0].id
                if name in builder.boxed:
                    self.stmts.append(s2)
                    continue
                if name in self.version or name in self.inputs:
                    new = builder.namer.fresh(name.strip("_")[:12] + "_")
                else:
                    new = name
                self.version[name] = new
                self.origin[new] = name
                s2.targets[0].id = new
                self.defined[new] = None
                self.all_names.add(new)
            elif isinstance(s2, ast.FunctionDef):
                self.version.pop(s2.name, None)
            self.stmts.append(s2)
        # values read only inside this segment (temps, and user variables read nowhere else,
        # not even by a closure) keep their adjoints in local variables
        for user, new in self.version.items():
            if user.startswith("_ret") or not (
                new in numeric
                or (user in builder.namer.generated and not builder.ir.scope.is_local(user))
                or (new in copies and builder.store_count.get(user) == 1)
            ):
                continue
            if builder.read_count.get(user, 0) == reads.get(new, 0) and user == new:
                self.local_temps.add(new)

    def _rename_loads(self, s: ast.stmt) -> list[str]:
        nodes: list[ast.AST] = []
        if isinstance(s, ast.Assign):
            nodes.append(s.value)
            t = s.targets[0]
            if not isinstance(t, ast.Name):
                nodes.append(t)
        elif isinstance(s, ast.Delete):
            nodes.extend(s.targets)
        elif isinstance(s, ast.FunctionDef):
            nodes.extend(getattr(s, "dp_defaults", []))
            nodes.extend(d for d in getattr(s, "dp_kw_defaults", []) if d is not None)
        seen: list[str] = []
        for root in nodes:
            for n in walk(root):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    if n.id in self.version:
                        n.id = self.version[n.id]
                        seen.append(n.id)
                    elif not n.id.startswith(PFX):
                        self.inputs.add(n.id)
                        self.all_names.add(n.id)
                        self.input_reads[n.id] = self.input_reads.get(n.id, 0) + 1
        return seen

    def leading_unpack_stmts(self) -> list[ast.stmt]:
        """The unpacks a fast segment starts with: run before its type guard, in both variants."""
        out = []
        for s in self.stmts:
            if getattr(s, "dp_kind", "") != "unpack":
                break
            out.append(s)
        return out

    def leading_unpacks(self) -> list[ast.stmt]:
        return [clone(s) for s in self.leading_unpack_stmts()]

    def copy_back(self) -> list[ast.stmt]:
        out = []
        for name, new in self.version.items():
            if new != name:
                out.append(assign(name, N(new)))
        return out

    def user_name(self, ssa_name: str) -> str:
        return self.origin.get(ssa_name, ssa_name)

    def is_final(self, ssa_name: str) -> bool:
        user = self.origin.get(ssa_name)
        return (
            user is not None
            and self.version.get(user) == ssa_name
            and ssa_name not in self.local_temps
        )


class _AdjointAccumulator:
    """Tracks, while writing a segment's reverse code, where each value's adjoint is.

    The adjoints of the values a segment leaves in its names are moved into locals at the
    start, so that contributions to the values those names held before go straight to the
    persistent adjoints.
    """

    def __init__(
        self, builder: FunctionBuilder, ssa: _SSA, out: list[ast.stmt] | None, fast: bool
    ) -> None:
        self.b = builder
        self.ssa = ssa
        self.out = out if out is not None else []
        self.fast = fast
        self.local: dict[str, str] = {}  # ssa name -> local adjoint variable
        # persistent adjoints known to be zero here and not yet added to
        self.fresh_zero: set[str] = {builder.adj(n) for n in builder.zero_on_entry(ssa)}
        self.added: set[str] = set()  # persistent adjoints this segment's reverse has added to
        self.compact = False  # a fallback variant: sensitivities added by calls, not inline
        for name in ssa.defined:
            if ssa.is_final(name):
                a = self.b.adj(ssa.user_name(name))
                tmp = self.b.namer.fresh("a")
                self.out.append(assign(tmp, N(a)))
                self.out.append(assign(a, N(self.b.Z)))
                self.local[name] = tmp
                self.fresh_zero.add(a)

    def take(self, ssa_name: str | None) -> ast.expr | None:
        """The adjoint of a value being defined here (consumed: the definition is reversed)."""
        if ssa_name is None:
            return None
        if ssa_name in self.local:
            return N(self.local.pop(ssa_name))
        if ssa_name in self.ssa.defined:
            return None  # never used: zero
        a = self.b.adj(ssa_name)
        tmp = self.b.namer.fresh("a")
        self.out.append(assign(tmp, N(a)))
        self.out.append(assign(a, N(self.b.Z)))
        return N(tmp)

    def add(self, ssa_name: str, contrib: ast.expr, any_type: bool = False) -> None:
        """Add a contribution to the adjoint of a number (fast path) or of an immutable value
        (``any_type``: of a value the fast path has not guarded as a number)."""
        fast = self.fast and not any_type
        op = (
            (lambda cur: ast.BinOp(left=N(cur), op=ast.Add(), right=contrib))
            if fast
            else (lambda cur: call(self.b.rt("add"), N(cur), contrib))
        )
        if ssa_name in self.ssa.defined:
            cur = self.local.get(ssa_name)
            if cur is None:
                v = self.b.namer.fresh("a")
                self.local[ssa_name] = v
                self.out.append(
                    assign(v, contrib if fast else call(self.b.rt("add"), N(self.b.Z), contrib))
                )
            else:
                self.out.append(assign(cur, op(cur)))
            return
        if ssa_name in self.b.boxed:
            self.out.append(
                ast.Expr(
                    call(
                        self.b.rt("accumulate_cell"),
                        N(ABOX),
                        N(self.b.key(ssa_name)),
                        C(None),
                        contrib,
                    )
                )
            )
            return
        a = self.b.adj(ssa_name)
        if a in self.fresh_zero:
            # the first contribution after the reset: no addition to gen_zero
            self.fresh_zero.discard(a)
            self.added.add(a)
            self.out.append(
                assign(a, contrib if fast else call(self.b.rt("add"), N(self.b.Z), contrib))
            )
            return
        if fast and a not in self.added:
            # the segment's first contribution: the adjoint may still be gen_zero (a loop's
            # variable, reset each iteration), whose + is a Python-level call; after this it
            # is a number
            self.added.add(a)
            is_zero = ast.Compare(left=N(a), ops=[ast.Is()], comparators=[N(self.b.Z)])
            self.out.append(assign(a, ast.IfExp(test=is_zero, body=contrib, orelse=op(a))))
            return
        self.out.append(assign(a, op(a)))

    def add_value(self, ssa_name: str, contrib: ast.expr, value_name: str | None = None) -> None:
        """Add a sensitivity of any type; mutable values hand it to Abox."""
        val = N(value_name or ssa_name)
        acc = self.b.rt("accumulate")
        if ssa_name in self.b.boxed:
            self.out.append(
                ast.Expr(
                    call(
                        self.b.rt("accumulate_cell"), N(ABOX), N(self.b.key(ssa_name)), val, contrib
                    )
                )
            )
            return
        target, current = self._target(ssa_name)
        if self.b.fast and not isinstance(contrib, ast.Name):  # read twice below
            tmp = self.b.namer.fresh("s")
            self.out.append(assign(tmp, contrib))
            contrib = N(tmp)
        general = call(acc, N(current or self.b.Z), val, contrib, N(ABOX))
        if (
            not self.b.fast or self.compact
        ):  # differentiable-again code, general_paths_only(), a fallback
            self.out.append(assign(target, general))
            return
        # first-order code: a float's float sensitivity is added inline, not by a call
        flt = self.b.helper(float, "float")
        test = ast.BoolOp(
            op=ast.And(),
            values=[
                ast.Compare(
                    left=call(self.b.helper(type, "type"), clone(val)),
                    ops=[ast.Is()],
                    comparators=[flt],
                ),
                ast.Compare(
                    left=call(self.b.helper(type, "type"), clone(contrib)),
                    ops=[ast.Is()],
                    comparators=[clone(flt)],
                ),
            ],
        )
        inline = (
            clone(contrib)
            if current is None
            else ast.BinOp(left=N(current), op=ast.Add(), right=clone(contrib))
        )
        # a zero sensitivity changes nothing (a list's, handed to its entry already): no call
        unchanged = ast.Compare(left=clone(contrib), ops=[ast.Is()], comparators=[N(self.b.Z)])
        general = ast.IfExp(test=unchanged, body=N(current or self.b.Z), orelse=general)
        self.out.append(assign(target, ast.IfExp(test=test, body=inline, orelse=general)))

    def update(self, ssa_name: str, new: Callable[[ast.expr], ast.expr]) -> None:
        """``adjoint = new(adjoint)``: a runtime call folds a sensitivity into a value's adjoint."""
        target, current = self._target(ssa_name)
        self.out.append(assign(target, new(N(current or self.b.Z))))

    def _target(self, ssa_name: str) -> tuple[str, str | None]:
        """The variable that holds a value's adjoint, and its current name (None: zero)."""
        if ssa_name in self.ssa.defined:
            cur = self.local.get(ssa_name)
            if cur is None:
                return self.local.setdefault(ssa_name, self.b.namer.fresh("a")), None
            return cur, cur
        target = self.b.adj(ssa_name)
        current = None if target in self.fresh_zero else target
        self.fresh_zero.discard(target)
        return target, current

    def finish(self) -> None:
        self.local.clear()


# ---------------------------------------------------------------------------


_NODE_FIELDS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _assigned_names(st: ast.stmt) -> list[str]:
    """The names a simple statement assigns (an assignment's name targets, a def's name)."""
    if isinstance(st, ast.FunctionDef):
        return [st.name]
    if isinstance(st, ast.Assign):
        t = st.targets[0]
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, (ast.Tuple, ast.List)):
            return [e.id for e in t.elts if isinstance(e, ast.Name)]
    return []


def _node_fields(t: type) -> tuple[bool, tuple[str, ...]]:
    """Whether nodes of type ``t`` have positions, and their fields that may hold nodes."""
    entry = _NODE_FIELDS.get(t)
    if entry is None:
        entry = _NODE_FIELDS[t] = (
            "lineno" in t._attributes,
            tuple(
                f
                for f in t._fields
                if f not in ("ctx", "id", "arg", "attr", "name", "value")
                or (f == "value" and t is not ast.Constant)
            ),
        )
    return entry


def _locate(root: ast.AST, lineno: int) -> None:
    """Give every node without a position the line of the nearest enclosing node that has one."""
    stack = [(root, lineno)]
    pop, push = stack.pop, stack.append
    AST = ast.AST
    while stack:
        node, line = pop()
        positioned, fields = _node_fields(type(node))
        if positioned:
            own = getattr(node, "lineno", None)
            if own is None:
                node.lineno = node.end_lineno = line
                node.col_offset = node.end_col_offset = 0
            else:
                line = own
        for f in fields:
            v = getattr(node, f, None)
            if type(v) is list:
                for c in v:
                    if isinstance(c, AST):
                        push((c, line))
            elif isinstance(v, AST):
                push((v, line))


def _locate_all(stmts: list[ast.stmt], like: ast.AST) -> None:
    """Give statements without a position ``like``'s line; their insides get theirs from
    the single recursive pass over the whole function (``_locate`` in ``build``)."""
    line = getattr(like, "lineno", 1) or 1
    for st in stmts:
        if getattr(st, "lineno", None) is None:
            st.lineno = st.end_lineno = line
            st.col_offset = st.end_col_offset = 0


def _gen_zero() -> Any:
    from .linear import gen_zero

    return gen_zero


def _procresult() -> Any:
    from .result import ProcResult

    return ProcResult


def _nondiff_error() -> Any:
    from .errors import NonDifferentiableError

    return NonDifferentiableError


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
    if plus.dp_fused is None and b.fast and plus.dp_simple and not ir.args.vararg:
        from .fused import vector_fused_gradient

        plus.dp_fused = vector_fused_gradient(
            ir, namer, helpers, globals_, outer_free, b.const_names, specialized
        )
    return plus
