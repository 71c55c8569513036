"""A generator function rewritten as an ordinary function that builds a resumable machine.

Differentiated code runs a generator lazily, as Python does: each ``next``/``send``/``throw``/
``close`` is one *resumption*, whose forward pass runs the generator's code from where it
stopped to its next ``yield`` and whose backward pass runs when the consumer's backward pass
reaches it. So the generator function ``g`` becomes a function that binds its parameters and
locals, defines ``resume`` (a nested function that shares them through ``nonlocal``: closure
cells, whose sensitivities the box-sensitivity map keeps), and returns a generator object made
from ``resume``::

    def g(n):                                   def g(n):
        for i in range(n):                          <pc> = 0; i = None; <it> = None; ...
            yield x * i                   ->        def <resume>(<mode>, <value>):
                                                        nonlocal <pc>, n, i, <it>, ...
                                                        ... (the body, resumable) ...
                                                        return (0, None)
                                                    return make_generator(<resume>, ...)

``resume`` returns ``(site, value)``: the number of the ``yield`` that suspended it and the
value yielded, or ``(0, value)`` when the generator returned ``value``. ``<pc>`` is the site
to resume at (0: running). Every statement that contains a ``yield`` is rewritten so that a
resumption skips to the site it left: a run of statements without one runs only when
``<pc> == 0``; an ``if`` keeps the branch it took; a ``while`` is re-entered without testing
its condition; a ``for`` keeps its iterator in a variable and takes items with an operation;
a ``match`` keeps the case it chose; a ``try`` is re-entered (its ``finally`` does not run
while the generator is suspended). At a site, resuming with ``throw`` raises the exception
there and ``close`` returns through the enclosing ``finally`` blocks (or raises
``GeneratorExit`` when a handler could catch it), as Python does.

``yield`` may be a statement or the value of an assignment (``v = yield x``, ``v = yield
from it``), of ``return``, or of ``+=`` to a local; elsewhere in an expression, and inside
an ``except``/``finally`` clause or a ``with`` block, it is refused, naming the place.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..scopes import parameter_names
from .generator_syntax import (
    GeneratorSyntaxError,
    Prepare,
    any_yield,
    bound_names,
    catches_generator_exit,
    declared,
    is_generator_function,
    is_yield_statement,
    yields_in,
)

__all__ = ["is_generator_function", "GeneratorMachine", "GeneratorSyntaxError"]

# the modes a resumption is called with
NEXT, THROW, CLOSE = 0, 1, 2


class GeneratorMachine:
    """Rewrite one generator function (see the module's docstring).

    ``fresh(hint)`` makes a name no user code uses; ``op(name, args)`` makes the call of one
    of the machine's operations (``make_generator``, ``iterate``, ``take``, ``delegate``,
    ``step``, ``close_delegate``)."""

    def __init__(
        self,
        fn: ast.FunctionDef,
        fresh: Callable[[str], str],
        op: Callable[[str, list[ast.expr]], ast.expr],
        qualname: str,
    ) -> None:
        self.fn = fn
        self.fresh = fresh
        self.op = op
        self.qualname = qualname
        self.pc = fresh("pc")
        self.mode = fresh("mode")
        self.value = fresh("value")
        self.machine_names: list[str] = [self.pc]
        self.sites = 0
        self.close_runs: list[int] = []  # sites where close() runs code (inside a try)
        # the try statements around the current statement: (their handlers that apply, finally?)
        self.try_stack: list[tuple[list[ast.ExceptHandler], bool]] = []

    # ---------------------------------------------------------------- small builders
    def N(self, name: str) -> ast.Name:
        return ast.Name(id=name, ctx=ast.Load())

    def S(self, name: str) -> ast.Name:
        return ast.Name(id=name, ctx=ast.Store())

    def assign(self, name: str, value: ast.expr) -> ast.Assign:
        return ast.Assign(targets=[self.S(name)], value=value)

    def pc_is(self, k: int) -> ast.expr:
        return ast.Compare(left=self.N(self.pc), ops=[ast.Eq()], comparators=[ast.Constant(k)])

    def pc_in(self, lo: int, hi: int) -> ast.expr:
        if lo == hi:
            return self.pc_is(lo)
        return ast.Compare(
            left=ast.Constant(lo),
            ops=[ast.LtE(), ast.LtE()],
            comparators=[self.N(self.pc), ast.Constant(hi)],
        )

    def running(self) -> ast.expr:
        return self.pc_is(0)

    def either(self, a: ast.expr, b: ast.expr) -> ast.expr:
        return ast.BoolOp(op=ast.Or(), values=[a, b])

    def machine_name(self, hint: str) -> str:
        name = self.fresh(hint)
        self.machine_names.append(name)
        return name

    # ---------------------------------------------------------------- entry
    def rewrite(self) -> ast.FunctionDef:
        fn = self.fn
        body = list(fn.body)
        doc: list[ast.stmt] = []
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            doc = [body[0]]
            body = body[1:]
        globals_ = declared(body, ast.Global)
        nonlocals = declared(body, ast.Nonlocal)
        prepared: list[ast.stmt] = []
        for st in body:
            r = self.prepare(st)
            prepared.extend(r if isinstance(r, list) else [r])
        body = prepared
        params = parameter_names(fn.args)
        resumable = self.block(body)
        bound = [
            n
            for n in bound_names(body)
            if n not in params and n not in globals_ and n not in nonlocals
        ]
        header: list[ast.stmt] = []
        if globals_:
            header.append(ast.Global(names=globals_))
        shared = [self.pc] + [n for n in self.machine_names[1:]] + params + bound + nonlocals
        header.append(ast.Nonlocal(names=list(dict.fromkeys(shared))))
        resume = ast.FunctionDef(
            name=self.fresh("resume"),
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=self.mode), ast.arg(arg=self.value)],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body=header
            + resumable
            + [
                ast.Return(
                    value=ast.Tuple(elts=[ast.Constant(0), ast.Constant(None)], ctx=ast.Load())
                )
            ],
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        machine = [n for n in dict.fromkeys(self.machine_names) if n not in bound]
        init: list[ast.stmt] = [
            ast.Assign(targets=[self.S(n) for n in machine], value=ast.Constant(None))
        ]
        if bound:
            # the generator's own variables: bound here for ``nonlocal``, unbound until assigned
            init.append(
                ast.If(
                    test=ast.Constant(False),
                    body=[ast.Assign(targets=[self.S(n) for n in bound], value=ast.Constant(None))],
                    orelse=[],
                )
            )
        init.append(self.assign(self.pc, ast.Constant(0)))
        make = self.op(
            "make_generator",
            [
                self.N(resume.name),
                ast.Constant(fn.name),
                ast.Constant(self.qualname),
                ast.Tuple(elts=[ast.Constant(k) for k in self.close_runs], ctx=ast.Load()),
            ],
        )
        new_body = doc + init + [resume, ast.Return(value=make)]
        out = ast.FunctionDef(
            name=fn.name,
            args=fn.args,
            body=new_body,
            decorator_list=fn.decorator_list,
            returns=fn.returns,
            type_comment=None,
        )
        ast.copy_location(out, fn)
        for n in ast.walk(out):
            if not hasattr(n, "lineno") and "lineno" in getattr(n, "_attributes", ()):
                ast.copy_location(n, fn)
        ast.fix_missing_locations(out)
        return out

    # ---------------------------------------------------------------- preparation
    def prepare(self, st: ast.stmt) -> ast.stmt:
        """Drop ``global``/``nonlocal`` (they move to ``resume``); turn ``return (yield v)`` and
        ``a += yield v`` into an assignment of the yield first; refuse yields elsewhere."""
        return Prepare(self.machine_name).visit(st)

    # ---------------------------------------------------------------- blocks
    def sites_in(self, node: ast.AST) -> tuple[int, int] | None:
        r = getattr(node, "dp_sites", None)
        return r

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        chunk: list[ast.stmt] = []

        def flush() -> None:
            if chunk:
                out.append(ast.If(test=self.running(), body=list(chunk), orelse=[]))
                chunk.clear()

        for st in stmts:
            if not yields_in(st):
                if self.try_stack:
                    # (one guard per statement inside a try: an exception a statement raises
                    # must not interrupt a guard whose earlier statements changed something)
                    out.append(
                        ast.copy_location(ast.If(test=self.running(), body=[st], orelse=[]), st)
                    )
                else:
                    chunk.append(st)
                continue
            flush()
            if is_yield_statement(st):
                inner = self.statement(st)  # (a site is a no-op unless running or resumed at it)
                for n in inner:
                    ast.copy_location(n, st)
                out.extend(inner)
                continue
            lo = self.sites + 1
            inner = self.statement(st)
            hi = self.sites
            out.append(
                ast.If(test=self.either(self.running(), self.pc_in(lo, hi)), body=inner, orelse=[])
            )
            for n in inner:
                ast.copy_location(n, st)
        flush()
        return out

    def statement(self, st: ast.stmt) -> list[ast.stmt]:
        method = getattr(self, "s_" + type(st).__name__, None)
        if method is None:
            raise GeneratorSyntaxError(
                st,
                f"a yield inside {type(st).__name__.lower()} statement",
                "move the yield out of it",
            )
        return method(st)

    # ---------------------------------------------------------------- yield sites
    def new_site(self) -> int:
        self.sites += 1
        site = self.sites
        if any(handlers or final for handlers, final in self.try_stack):
            self.close_runs.append(site)
        return site

    def close_by_raise(self) -> bool:
        return any(catches_generator_exit(h) for handlers, _ in self.try_stack for h in handlers)

    def suspend(self, site: int, value: ast.expr) -> ast.If:
        """``if pc == 0: pc = site; return (site, value)``."""
        out = self.fresh("out")  # (evaluated first: it may raise, and the generator goes on)
        return ast.If(
            test=self.running(),
            body=[
                self.assign(out, value),
                self.assign(self.pc, ast.Constant(site)),
                ast.Return(value=ast.Tuple(elts=[ast.Constant(site), self.N(out)], ctx=ast.Load())),
            ],
            orelse=[],
        )

    def resumed(self, site: int) -> list[ast.stmt]:
        """What runs when a resumption starts at ``site`` (and nothing otherwise): ``close``
        returns through the enclosing ``finally`` clauses, or raises ``GeneratorExit`` where
        an ``except`` clause might catch it; ``throw`` raises its exception there. The raise is
        a statement of its own, in no ``if``: a ``try`` around the site catches it."""
        out: list[ast.stmt] = []
        if not self.close_by_raise():
            out.append(
                ast.If(
                    test=ast.BoolOp(
                        op=ast.And(),
                        values=[
                            self.pc_is(site),
                            ast.Compare(
                                left=self.N(self.mode),
                                ops=[ast.Eq()],
                                comparators=[ast.Constant(CLOSE)],
                            ),
                        ],
                    ),
                    body=[
                        self.assign(self.pc, ast.Constant(0)),
                        ast.Return(
                            value=ast.Tuple(
                                elts=[ast.Constant(0), ast.Constant(None)], ctx=ast.Load()
                            )
                        ),
                    ],
                    orelse=[],
                )
            )
        out.append(
            self.assign(
                self.pc,
                self.op(
                    "resumed_at",
                    [self.N(self.pc), ast.Constant(site), self.N(self.mode), self.N(self.value)],
                ),
            )
        )
        return out

    def yield_site(self, y: ast.Yield, targets: list[ast.expr] | None) -> list[ast.stmt]:
        site = self.new_site()
        value = y.value if y.value is not None else ast.Constant(None)
        out: list[ast.stmt] = [self.suspend(site, value)] + self.resumed(site)
        if targets:
            out.append(
                ast.If(
                    test=self.running(),
                    body=[ast.Assign(targets=targets, value=self.N(self.value))],
                    orelse=[],
                )
            )
        return out

    def yield_from_site(self, y: ast.YieldFrom, targets: list[ast.expr] | None) -> list[ast.stmt]:
        site = self.new_site()
        sub, ok, v = self.machine_name("sub"), self.machine_name("ok"), self.machine_name("got")
        pair = ast.Tuple(elts=[self.S(ok), self.S(v)], ctx=ast.Store())
        start = ast.If(
            test=self.running(),
            body=[
                self.assign(sub, self.op("delegate", [y.value])),
                ast.Assign(
                    targets=[pair],
                    value=self.op("step", [self.N(sub), ast.Constant(NEXT), ast.Constant(None)]),
                ),
            ],
            orelse=[],
        )
        close_sub = [ast.Expr(value=self.op("close_delegate", [self.N(sub)]))]
        loop_body: list[ast.stmt] = [
            ast.If(
                test=self.running(),
                body=[
                    ast.If(
                        test=ast.UnaryOp(op=ast.Not(), operand=self.N(ok)),
                        body=[ast.Break()],
                        orelse=[],
                    ),
                    self.assign(self.pc, ast.Constant(site)),
                    ast.Return(
                        value=ast.Tuple(elts=[ast.Constant(site), self.N(v)], ctx=ast.Load())
                    ),
                ],
                orelse=[],
            ),
            self.assign(self.pc, ast.Constant(0)),
        ]
        if not self.close_by_raise():
            loop_body.append(
                ast.If(
                    test=ast.Compare(
                        left=self.N(self.mode), ops=[ast.Eq()], comparators=[ast.Constant(CLOSE)]
                    ),
                    body=close_sub
                    + [
                        ast.Return(
                            value=ast.Tuple(
                                elts=[ast.Constant(0), ast.Constant(None)], ctx=ast.Load()
                            )
                        )
                    ],
                    orelse=[],
                )
            )
        # (next/send/throw go to the delegate; close at a site a handler may catch it: closes it, raises)
        loop_body.append(
            ast.Assign(
                targets=[ast.Tuple(elts=[self.S(ok), self.S(v)], ctx=ast.Store())],
                value=self.op("step", [self.N(sub), self.N(self.mode), self.N(self.value)]),
            )
        )
        out: list[ast.stmt] = [start, ast.While(test=ast.Constant(True), body=loop_body, orelse=[])]
        if targets:
            out.append(ast.Assign(targets=targets, value=self.N(v)))
        return out

    # ---------------------------------------------------------------- statements with sites
    def s_Expr(self, st: ast.Expr) -> list[ast.stmt]:
        v = st.value
        if isinstance(v, ast.Yield):
            return self.yield_site(v, None)
        if isinstance(v, ast.YieldFrom):
            return self.yield_from_site(v, None)
        raise GeneratorSyntaxError(
            st, "a yield inside an expression", "assign it first: `v = yield ...`"
        )

    def s_Assign(self, st: ast.Assign) -> list[ast.stmt]:
        v = st.value
        if isinstance(v, ast.Yield):
            return self.yield_site(v, st.targets)
        if isinstance(v, ast.YieldFrom):
            return self.yield_from_site(v, st.targets)
        raise GeneratorSyntaxError(
            st, "a yield inside an expression", "assign it first: `v = yield ...`"
        )

    def s_If(self, st: ast.If) -> list[ast.stmt]:
        cond = self.machine_name("branch")
        lo = self.sites + 1
        body = self.block(st.body)
        hi = self.sites
        orelse = self.block(st.orelse)
        choose = ast.If(
            test=self.running(),
            body=[self.assign(cond, st.test)],
            orelse=[self.assign(cond, self.pc_in(lo, hi) if hi >= lo else ast.Constant(False))],
        )
        return [choose, ast.If(test=self.N(cond), body=body or [ast.Pass()], orelse=orelse)]

    def s_While(self, st: ast.While) -> list[ast.stmt]:
        lo = self.sites + 1
        body = self.block(st.body)
        hi = self.sites
        again = ast.Compare(left=self.N(self.pc), ops=[ast.NotEq()], comparators=[ast.Constant(0)])
        if not any_yield(st.orelse):
            return [ast.While(test=self.either(again, st.test), body=body, orelse=st.orelse)]
        done = self.machine_name("exhausted")
        loop = ast.While(
            test=self.either(again, st.test),
            body=body,
            orelse=[self.assign(done, ast.Constant(True))],
        )
        elo = self.sites + 1
        orelse = self.block(st.orelse)
        ehi = self.sites
        return [
            ast.If(
                test=self.either(self.running(), self.pc_in(lo, hi)),
                body=[
                    ast.If(
                        test=self.running(),
                        body=[self.assign(done, ast.Constant(False))],
                        orelse=[],
                    ),
                    loop,
                ],
                orelse=[],
            ),
            ast.If(
                test=self.either(
                    ast.BoolOp(op=ast.And(), values=[self.running(), self.N(done)]),
                    self.pc_in(elo, ehi),
                ),
                body=orelse,
                orelse=[],
            ),
        ]

    def s_For(self, st: ast.For) -> list[ast.stmt]:
        it, ok, item, done = (
            self.machine_name("iter"),
            self.machine_name("more"),
            self.machine_name("item"),
            self.machine_name("exhausted"),
        )
        start = ast.If(
            test=self.running(),
            body=[
                self.assign(it, self.op("iterate", [st.iter])),
                self.assign(done, ast.Constant(False)),
            ],
            orelse=[],
        )
        take = ast.If(
            test=self.running(),
            body=[
                ast.Assign(
                    targets=[ast.Tuple(elts=[self.S(ok), self.S(item)], ctx=ast.Store())],
                    value=self.op("take", [self.N(it)]),
                ),
                ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=self.N(ok)),
                    body=[self.assign(done, ast.Constant(True)), ast.Break()],
                    orelse=[],
                ),
                ast.Assign(targets=[st.target], value=self.N(item)),
            ],
            orelse=[],
        )
        lo = self.sites + 1
        body = self.block(st.body)
        hi = self.sites
        loop = ast.While(test=ast.Constant(True), body=[take] + body, orelse=[])
        if not st.orelse:
            return [start, loop]
        elo = self.sites + 1
        orelse = self.block(st.orelse) if any_yield(st.orelse) else st.orelse
        ehi = self.sites
        test: ast.expr = ast.BoolOp(op=ast.And(), values=[self.running(), self.N(done)])
        if ehi >= elo:
            test = self.either(test, self.pc_in(elo, ehi))
            return [
                ast.If(
                    test=self.either(self.running(), self.pc_in(lo, hi)),
                    body=[start, loop],
                    orelse=[],
                ),
                ast.If(test=test, body=orelse, orelse=[]),
            ]
        return [start, loop, ast.If(test=test, body=orelse, orelse=[])]

    def s_Try(self, st: ast.Try) -> list[ast.stmt]:
        for h in st.handlers:
            if any_yield(h.body):
                raise GeneratorSyntaxError(
                    h, "a yield inside an except clause", "move the yield after the try statement"
                )
        if any_yield(st.finalbody):
            raise GeneratorSyntaxError(
                st, "a yield inside a finally clause", "move the yield after the try statement"
            )
        final = bool(st.finalbody)
        self.try_stack.append((st.handlers, final))
        try:
            body = self.block(st.body)
        finally:
            self.try_stack.pop()
        # (the else clause is outside the handlers, inside the finally)
        self.try_stack.append(([], final))
        try:
            orelse = self.block(st.orelse) if any_yield(st.orelse) else st.orelse
        finally:
            self.try_stack.pop()
        finalbody: list[ast.stmt] = st.finalbody
        if finalbody:
            # a suspended generator's try is still open: its finally runs when it ends
            finalbody = [ast.If(test=self.running(), body=list(finalbody), orelse=[])]
        return [
            ast.Try(
                body=body or [ast.Pass()], handlers=st.handlers, orelse=orelse, finalbody=finalbody
            )
        ]

    def s_Match(self, st: ast.Match) -> list[ast.stmt]:
        chosen = self.machine_name("case")
        ranges = []
        bodies = []
        for case in st.cases:
            lo = self.sites + 1
            bodies.append(self.block(case.body))
            ranges.append((lo, self.sites))
        matching = ast.Match(
            subject=st.subject,
            cases=[
                ast.match_case(
                    pattern=c.pattern, guard=c.guard, body=[self.assign(chosen, ast.Constant(i))]
                )
                for i, c in enumerate(st.cases)
            ],
        )
        resumed_case: ast.expr = ast.Constant(-1)
        for i, (lo, hi) in enumerate(ranges):
            if hi >= lo:
                resumed_case = ast.IfExp(
                    test=self.pc_in(lo, hi), body=ast.Constant(i), orelse=resumed_case
                )
        choose = ast.If(
            test=self.running(),
            body=[self.assign(chosen, ast.Constant(-1)), matching],
            orelse=[self.assign(chosen, resumed_case)],
        )
        dispatch: list[ast.stmt] = []
        for i in reversed(range(len(bodies))):
            dispatch = [
                ast.If(
                    test=ast.Compare(
                        left=self.N(chosen), ops=[ast.Eq()], comparators=[ast.Constant(i)]
                    ),
                    body=bodies[i] or [ast.Pass()],
                    orelse=dispatch,
                )
            ]
        return [choose] + dispatch

    def s_With(self, st: ast.With) -> list[ast.stmt]:
        raise GeneratorSyntaxError(
            st, "a yield inside a with block", "move the yield out of the with block"
        )

    def s_Return(self, st: ast.Return) -> list[ast.stmt]:
        raise AssertionError("prepared away")
