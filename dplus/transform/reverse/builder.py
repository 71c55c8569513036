"""The reverse transform: from the normalised core to the AST of a plus-function.

``FunctionBuilder`` here keeps the walk (the record, blocks, ``if``); the plus-function's
``def`` around it is in :mod:`.entry`; how each construct is reversed is in its mixins, one
module per family (the table is in this package's docstring).

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
from typing import Any

from ..normalize.core import IRFunction, Namer, closure_reads
from ..scopes import names_bound_by
from ..trees import clone, walk
from . import syntax
from .calls import CallRules
from .containers import ContainerRules
from .entry import EntryRules, Specialized
from .exceptions import ExceptionRules
from .fast_loops import FastLoopRules
from .fast_paths import FastPathRules
from .list_loops import ListLoopRules
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
    _assigned_names,
    _gen_zero,
    _is_number_const,
    _locate_all,
    _set_prefix,
    assign,
    call,
    tuple_,
    unpack,
)

__all__ = ["build_plus_function", "Helpers"]

# statements that make a function not straight-line code (its records go on a tape)
_NOT_STRAIGHT = (ast.For, ast.While, ast.Try, ast.With, ast.AsyncFor, ast.AsyncWith) + _TRY_STAR


# ---------------------------------------------------------------------------
# the builder: entry, records, blocks; the rules by construct are its mixins


class FunctionBuilder(
    EntryRules,
    SegmentRules,
    FastPathRules,
    ReplayRules,
    StatementRules,
    ContainerRules,
    CallRules,
    LoopRules,
    FastLoopRules,
    ListLoopRules,
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
        # the values of adjoint_names, kept as they are made: each segment and loop asks which
        # of its names are adjoints (a set rebuilt there grew with the function: quadratic)
        self.adjoint_values: set[str] = set()
        self.persistent: set[str] = set()
        self.key_names: dict[str, str] = {}
        self.outer_free = outer_free
        self.in_try = 0
        self.read_count: dict[str, int] = {}
        self.store_count: dict[str, int] = {}
        self.defined_before: set[str] = set()  # names the statements before, in this block, assign
        # names certainly bound here: the parameters, and what the statements before, in this
        # block and the blocks around it, assign (a guard may read them before the segment)
        self.bound_here: set[str] = set(ir.scope.params)
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
        # names bound to a tuple display holding a variable (tuple_displays, found when a
        # subscript's reverse first asks)
        self._tuple_displays: set[str] | None = None
        # every segment built, in order: its fast variant's parts, or None (c_For reads it)
        self.segment_log: list[FastParts | None] = []
        self.specialized: Specialized | None = None
        # fast segments without their general variants: a build for the fused gradient only
        # (transformer.fused_first), whose plus-function is never compiled
        self.defer_general = False
        self._body_segments: list[list[ast.stmt]] | None = None  # (segments_of_body)
        # a nested function with default values: their sensitivities follow its closure's
        self.defaults_in_closure = False

    def tuple_displays(self) -> set[str]:
        """The names the body binds to a tuple display holding a variable (``k = (x, y)``,
        what the normalizer makes of ``obj[x, y]``): ``ContainerRules.key_is_a_display``."""
        if self._tuple_displays is None:
            self._tuple_displays = {
                node.targets[0].id
                for stmt in self.ir.body
                for node in walk(stmt)
                if isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Tuple)
                and any(isinstance(e, ast.Name) for e in node.value.elts)
            }
        return self._tuple_displays

    def decide_deferral(self) -> None:
        """Keep ``defer_general`` only for a body that may be one fast segment (else the build
        is the full one)."""
        if self.defer_general and not self.one_fast_segment():
            self.defer_general = False

    def segments_of_body(self) -> list[list[ast.stmt]]:
        """``segments`` of a body of assignments, made once: ``one_fast_segment`` asks first,
        then ``block`` (nothing they read changes in between)."""
        if self._body_segments is None:
            self._body_segments = self.segments(list(self.ir.body))
        return self._body_segments

    def nested(self, ir: IRFunction) -> FunctionBuilder:
        """The builder of a function defined in this one (``CallRules.closure_stmt``)."""
        return FunctionBuilder(
            ir,
            self.namer,
            self.h,
            self.globals,
            top_level=False,
            fast=self.fast,
            nestable=self.nestable,
        )

    # ---------------------------------------------------------------- names
    def adj(self, name: str) -> str:
        a = self.adjoint_names.get(name)
        if a is None:
            a = self.namer.fresh("A_" + name.strip("_")[:20] + "_")
            self.adjoint_names[name] = a
            self.adjoint_values.add(a)
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

    # ---------------------------------------------------------------- the record
    def push(self, value: ast.expr, slot: str | None = None) -> ast.stmt:
        """Record ``value``; in straight-line code, in the variable ``slot`` its reverse reads."""
        if self.nestable:  # an immutable chain of records: only tuples, differentiable again
            return assign(syntax.TAPE, tuple_([value, N(syntax.TAPE)]))
        if self.straight:
            assert slot is not None  # (no loop, try or with: every record has its variable)
            return assign(slot, value)
        return ast.Expr(call(syntax.PUSH, value))

    def pop_into(
        self, names: list[str], whole: bool = False, slot: str | None = None
    ) -> list[ast.stmt]:
        """Statements that take the last record into ``names`` (unpacked, or whole into names[0])."""
        if self.straight:
            assert slot is not None  # (no loop, try or with: every record has its variable)
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
    def count_names(self, stmts: list[ast.stmt]) -> bool:
        """In one walk of the function: how many places read each name (``read_count``: a
        closure's free variables and defaults included, closures made in nested blocks too: a
        read missed here would let a segment treat the closure's variable as read only by
        itself) and assign it (``store_count``, nested blocks included). Returns whether the
        function has a loop, ``try`` or ``with`` (whether it is not straight-line code)."""
        reads, stores = self.read_count, self.store_count
        has_blocks = False
        for s in stmts:
            for n in walk(s):
                if isinstance(n, ast.Name):
                    if isinstance(n.ctx, ast.Load):
                        reads[n.id] = reads.get(n.id, 0) + 1
                    else:
                        stores[n.id] = stores.get(n.id, 0) + 1
                    continue
                if isinstance(n, ast.FunctionDef):
                    for name in closure_reads(n):
                        reads[name] = reads.get(name, 0) + 1
                elif isinstance(n, _NOT_STRAIGHT):
                    has_blocks = True
                for name in names_bound_by(n):
                    stores[name] = stores.get(name, 0) + 1
        for name in self.ir.scope.params:
            stores[name] = stores.get(name, 0) + 1
        return has_blocks

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
        outer_bound = self.bound_here
        self.bound_here = outer_bound | set(bound)

        def flush() -> None:
            if run:
                whole = self._body_segments is not None and stmts is self.ir.body
                for seg in self.segments_of_body() if whole else self.segments(run):
                    f, r = self.segment(seg)
                    fwd.extend(f)
                    rev_parts.append(r)
                    for st in seg:
                        self.defined_before.update(_assigned_names(st))
                        self.bound_here.update(_assigned_names(st))
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
        self.bound_here = outer_bound
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
        code): ``own_number_attribute`` (a container rule generated code calls by name) reads it (or says to take the rule), the
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
    defer_general: bool = False,
) -> ast.FunctionDef:
    """``specialized``: what the transform assumes (inlined calls, elements read on entry).
    ``defer_general``: leave out the general variant of a body that is one fast segment
    (noted ``dp_deferred``): only its fused gradient is compiled from that build."""
    _set_prefix(prefix)
    b = FunctionBuilder(
        ir, namer, helpers, globals_, top_level=True, outer_free=outer_free, nestable=nestable
    )
    b.const_names = set(const_names or ())
    b.specialized = specialized
    b.defer_general = defer_general
    plus = b.build()
    plus.dp_deferred = b.defer_general
    # the whole body one fast segment: fused.py may build f__grad for vector parameters
    plus.dp_fusable = bool(plus.dp_fused is None and b.fast and plus.dp_simple)
    return plus
