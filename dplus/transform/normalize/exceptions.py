"""``try``, ``with`` and ``match``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..trees import walk
from .core import Atom, _assign, _const, _internal, _may_escape, _name

if TYPE_CHECKING:
    from .normalizer_type import NormalizerState
else:
    NormalizerState = object  # (the mixins' shared interface, for the type checker only)


class ExceptionForms(NormalizerState):
    """Methods of :class:`Normalizer`: ``try``, ``with`` and ``match``."""

    def s_Try(self, s: ast.Try) -> None:
        body = self.sub(s.body)
        handlers = []
        for h in s.handlers:
            typ = self.expr(h.type) if h.type is not None else None
            hb = self.sub(h.body)
            handlers.append(
                ast.copy_location(
                    ast.ExceptHandler(type=typ, name=h.name, body=hb or [ast.Pass()]), h
                )
            )
        orelse = self.sub(s.orelse)
        flag = self.escape_flag() if _may_escape(ast.Module(body=s.body, type_ignores=[])) else None
        if orelse and flag is not None:
            # a return (or break, continue) in the body leaves the try without running its
            # else clause: the normalised body only sets the flag and goes on
            test = _name(self.namer.fresh())
            orelse = [
                _assign(test.id, ast.UnaryOp(op=ast.Not(), operand=_name(flag)), s.orelse[0]),
                ast.copy_location(ast.If(test=test, body=orelse, orelse=[]), s.orelse[0]),
            ]
        final = self.sub(s.finalbody)
        if not handlers and not final:
            # ``try: ... finally: pass``: the body alone does the same (an exception leaves it as it
            # would leave the try), and a try with neither handlers nor a finally does not compile
            for st in body:
                self.emit(st)
            return
        self.emit(
            ast.copy_location(
                ast.Try(
                    body=body or [ast.Pass()], handlers=handlers, orelse=orelse, finalbody=final
                ),
                s,
            )
        )

    def s_TryStar(self, s: ast.AST) -> None:
        raise self.unsupported(s, "try/except* (exception groups)", "use try/except")

    def s_With(self, s: ast.With) -> None:
        """``with`` as PEP 343 spells it out: ``__enter__`` and ``__exit__`` are calls like
        any other (differentiated, a rule, or the policy's), so the value bound by ``as``
        carries the sensitivity of what ``__enter__`` computed it from, and what either
        method changes is seen. Several items nest, the first outermost."""
        body = s.body
        for item in reversed(s.items):
            body = self.with_spelled_out(item, body, s)
        for st in body:
            self.stmt(st)

    def with_spelled_out(
        self, item: ast.withitem, body: list[ast.stmt], s: ast.With
    ) -> list[ast.stmt]:
        mgr, exit_, hit, exc = (self.namer.fresh(h) for h in ("manager", "exit", "raised", "exc"))
        # (the methods are read from the manager, not its type: they differ only for an
        # instance attribute named __enter__ or __exit__)
        spelled = ast.parse(
            f"{mgr} = None\n"
            f"{exit_} = {mgr}.__exit__\n"
            f"{mgr}.__enter__()\n"
            f"{hit} = False\n"
            "try:\n"
            "    pass\n"
            f"except BaseException as {exc}:\n"
            f"    {hit} = True\n"
            f"    if not {exit_}({exc}.__class__, {exc}, {exc}.__traceback__):\n"
            "        raise\n"
            "finally:\n"
            f"    if not {hit}:\n"
            f"        {exit_}(None, None, None)\n"
        ).body
        for node in walk(ast.Module(body=spelled, type_ignores=[])):
            if isinstance(node, (ast.stmt, ast.expr, ast.excepthandler)):
                ast.copy_location(node, s)
        manager_assign = spelled[0]
        assert isinstance(manager_assign, ast.Assign)
        manager_assign.value = item.context_expr
        enter = spelled[2]
        assert isinstance(enter, ast.Expr)
        if item.optional_vars is not None:
            spelled[2] = ast.copy_location(
                ast.Assign(targets=[item.optional_vars], value=enter.value), s
            )
        guarded = spelled[4]
        assert isinstance(guarded, ast.Try)
        guarded.body = body or [ast.Pass()]
        return spelled

    def s_Match(self, s: ast.Match) -> None:
        subject = self.expr(s.subject)
        cases = []
        for case in s.cases:
            body = self.sub(case.body)
            guard = case.guard  # a condition: evaluated natively, it carries no sensitivity
            prologue = self.capture(
                lambda case=case: self.capture_bindings(case.pattern, subject, s)
            )
            cases.append(
                ast.match_case(
                    pattern=case.pattern, guard=guard, body=prologue + (body or [ast.Pass()])
                )
            )
        node = ast.copy_location(ast.Match(subject=subject, cases=cases), s)
        self.emit(node)

    def capture_bindings(self, pattern: ast.pattern, subject: Atom, like: ast.AST) -> None:
        """Re-derive a pattern's captures from the subject by differentiable projections."""
        if isinstance(pattern, ast.MatchAs):
            if pattern.pattern is not None:
                self.capture_bindings(pattern.pattern, subject, like)
            if pattern.name:
                self.emit(_assign(pattern.name, subject, like))
        elif isinstance(pattern, ast.MatchSequence):
            self.sequence_captures(pattern, subject, like)
        elif isinstance(pattern, ast.MatchMapping):
            for key, p in zip(pattern.keys, pattern.patterns):
                part = self.temp(ast.Subscript(value=subject, slice=key, ctx=ast.Load()), like)
                self.capture_bindings(p, part, like)
            if pattern.rest:
                raise self.unsupported(like, "a **rest capture in a mapping pattern")
        elif isinstance(pattern, ast.MatchClass):
            self.class_captures(pattern, subject, like)
        elif isinstance(pattern, ast.MatchOr):
            if any(
                isinstance(n, (ast.MatchAs, ast.MatchStar)) and getattr(n, "name", None)
                for n in walk(pattern)
            ):
                raise self.unsupported(
                    like,
                    "captures inside an or-pattern",
                    "split the alternatives into separate cases",
                )

    def sequence_captures(self, pattern: ast.MatchSequence, subject: Atom, like: ast.AST) -> None:
        """``[a, *rest, b]``: the subject unpacked, each part captured by its pattern."""
        star = [i for i, p in enumerate(pattern.patterns) if isinstance(p, ast.MatchStar)]
        n = len(pattern.patterns)
        if star:
            k = star[0]
            call = _internal("unpack_star", [subject, _const(k), _const(n - k - 1)])
        else:
            call = _internal("unpack", [subject, _const(n)])
        u = self.temp(call, like)
        for i, p in enumerate(pattern.patterns):
            part = self.temp(ast.Subscript(value=u, slice=_const(i), ctx=ast.Load()), like)
            if isinstance(p, ast.MatchStar):
                if p.name:
                    self.emit(_assign(p.name, part, like))
            else:
                self.capture_bindings(p, part, like)

    def class_captures(self, pattern: ast.MatchClass, subject: Atom, like: ast.AST) -> None:
        """``C(a, b, x=c)``: positional patterns through ``__match_args__``, keyword ones by
        attribute."""
        if pattern.patterns:
            names = self.temp(
                _internal("match_args", [subject, _const(len(pattern.patterns))]), like
            )
            for i, p in enumerate(pattern.patterns):
                attr = self.temp(ast.Subscript(value=names, slice=_const(i), ctx=ast.Load()), like)
                part = self.temp(
                    ast.Call(func=_name("getattr"), args=[subject, attr], keywords=[]), like
                )
                self.capture_bindings(p, part, like)
        for name, p in zip(pattern.kwd_attrs, pattern.kwd_patterns):
            part = self.temp(ast.Attribute(value=subject, attr=name, ctx=ast.Load()), like)
            self.capture_bindings(p, part, like)
