"""``try``, ``with`` and ``match``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ...runtime.interrupted import refuse_interrupted_writers
from .syntax import C, N, _nondiff_error, assign, call, tuple_

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)


class ExceptionRules(Builder):
    """Methods of :class:`FunctionBuilder`: ``try``, ``with`` and ``match``."""

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
                # (an exception out of a callee that may have written what this code reads:
                # refused, runtime/interrupted.py)
                refuse = call(self.helper(refuse_interrupted_writers, "refuse_interrupted"))
                hbody: list[ast.stmt] = [ast.Expr(value=refuse)]
                hbody += [self.truncate(mark)]
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
            from ...errors import DplusError

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
            or scope.is_local(func.id)
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
