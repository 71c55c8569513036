"""Normalising: rewrite a function body into a small core language (A-normal form).

After this pass every expression operand is a name or a constant, every statement does at
most one operation, and control flow is only ``if``, ``for``, ``while True``, ``try``,
``with``: ``break``, ``continue`` and early ``return`` become flags, comprehensions become
loops, ``and``/``or``/conditional expressions become ``if`` statements, lambdas become
nested ``def``\\ s. The reverse transform only has to know this core.
"""

from __future__ import annotations

import ast
from typing import Any

from ...errors import UnsupportedSyntaxError
from ..scopes import Scope
from ..sharing import unshared_aug_targets
from ..trees import statements, walk
from .core import (
    Atom,
    Core,
    IRFunction,
    Namer,
    _assign,
    _const,
    _contains_escape,
    _LoopCtx,
    _may_escape,
    _name,
)
from .exceptions import ExceptionForms
from .expressions import ExpressionForms
from .functions import FunctionForms
from .generator_limits import LIMIT
from .generator_returns import RETURNS
from .loops import LoopForms
from .rewrites import (
    _deepcopy,
    _ModuleNamespaceAccess,
    _walk_no_scopes_body,
    _YieldsToList,
    refuse_generator_expressions_read_again,
)
from .statements import StatementForms

__all__ = ["normalize_function", "Normalizer"]


class Normalizer(StatementForms, LoopForms, ExceptionForms, FunctionForms, ExpressionForms):
    def __init__(
        self, scope: Scope, namer: Namer, filename: str, globals_: dict, boxed_here: set[str]
    ) -> None:
        self.scope = scope
        self.namer = namer
        self.qualname = ""  # the user's qualified name of the function (``normalize_function``)
        self.filename = filename
        self.globals = globals_
        self.out: list[ast.stmt] = []
        self.loop: _LoopCtx | None = None
        self.ret_flag: str | None = None
        self.retval = namer.fresh("ret")
        self.children: list[IRFunction] = []
        self.boxed = boxed_here  # names read through explicit copies (cells)
        self.local_names = scope.locals | set(scope.params)
        # names an assignment expression rebinds: read into a temp, so that a read before
        # the rebinding, in the same expression, keeps the value it had (``f(x, (x := 2))``)
        self.walrus_targets = {
            n.target.id for n in walk(scope.node) if isinstance(n, ast.NamedExpr)
        }
        body = scope.node.body if isinstance(scope.node.body, list) else []
        self.unshared = unshared_aug_targets(
            scope, body, boxed_here, globals_
        )  # ``a op= b`` may rebind ``a``
        # dplus's own rule code (differentiated at higher orders) never depends on laziness:
        # its loops stay over lists, whose next-order rules exist
        self.own_code = str(globals_.get("__name__", "")).startswith("dplus.")
        # names bound to a lazy builtin's iterator (``it = map(f, xs)``): Python's live one
        self.lazy_names = (
            set()
            if self.own_code
            else {
                st.targets[0].id
                for st in statements(body, nested=False)
                if isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and self.makes_lazy_iterator(st.value)
            }
        )

    # ------------------------------------------------------------------ errors
    def unsupported(self, node: ast.AST, what: str, fix: str = "") -> UnsupportedSyntaxError:
        line = getattr(node, "lineno", "?")
        msg = f"{what} cannot be differentiated by dplus ({self.filename}, line {line})"
        if fix:
            msg += f": {fix}"
        err = UnsupportedSyntaxError(msg)
        err.filename = self.filename
        err.lineno = line if isinstance(line, int) else None
        return err

    # ------------------------------------------------------------------ helpers
    def emit(self, stmt: ast.stmt) -> None:
        self.out.append(stmt)

    def temp(self, value: ast.expr, like: ast.AST) -> ast.Name:
        t = self.namer.fresh()
        self.emit(_assign(t, value, like))
        return _name(t)

    def sub(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        saved = self.out
        self.out = []
        try:
            self.stmts(stmts)
            return self.out
        finally:
            self.out = saved

    def capture(self, fn: Any) -> list[ast.stmt]:
        saved = self.out
        self.out = []
        try:
            fn()
            return self.out
        finally:
            self.out = saved

    # ------------------------------------------------------------------ statements
    def function_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        _, has_ret = _contains_escape(body, True)
        # no flag when the last statement is the one return (nested functions' included)
        early = has_ret and not (isinstance(body[-1], ast.Return) and _count_returns(body) == 1)
        self.emit(ast.copy_location(_assign(self.retval, _const(None), body[0]), body[0]))
        if early:
            self.ret_flag = self.namer.fresh("returned")
            self.emit(_assign(self.ret_flag, _const(False), body[0]))
        self.stmts(body)
        return self.out

    def stmts(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s)
            if i + 1 < len(stmts) and _may_escape(s):
                flag = self.escape_flag()
                if flag is not None:
                    rest = self.sub(stmts[i + 1 :])
                    if rest:
                        test = self.temp(ast.UnaryOp(op=ast.Not(), operand=_name(flag)), s)
                        self.emit(
                            ast.copy_location(ast.If(test=test, body=rest, orelse=[]), stmts[i + 1])
                        )
                return

    def escape_flag(self) -> str | None:
        if self.loop is not None and self.loop.esc is not None:
            return self.loop.esc
        return self.ret_flag

    def stmt(self, s: ast.stmt) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise self.unsupported(s, f"the statement {type(s).__name__}")
        method(s)

    def assign_display_elementwise(self, s: ast.Assign) -> bool:
        """``obj.x, obj.y = a + b, c`` (targets other than distinct plain names, a display of
        as many values): each value is evaluated into a temporary, in order, then assigned to
        its target, in order, as Python does, with no tuple made and unpacked. (Distinct
        plain names keep the native unpack, which scalar replacement takes apart.)"""
        if len(s.targets) != 1:
            return False
        target, value = s.targets[0], s.value
        if not (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)
        ):
            return False
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if len(names) == len(target.elts) and len(set(names)) == len(names):
            return False
        parts = []
        for e in value.elts:
            atom = self.expr(e)
            # (a name may be rebound by an earlier target: its value is taken now)
            parts.append(self.temp(atom, e) if isinstance(atom, ast.Name) else atom)
        for t, part in zip(target.elts, parts):
            self.assign_to(t, part, s)
        return True

    def s_Import(self, s: ast.Import | ast.ImportFrom) -> None:
        self.emit(s)

    s_ImportFrom = s_Import

    # MatchValue / MatchSingleton / MatchStar alone bind nothing differentiable

    def nested_function(
        self,
        node: Core,
        name: str,
        body: list[ast.stmt],
        defaults: list,
        kw_defaults: list,
        is_lambda: bool,
    ) -> None:
        child_scope = next((c for c in self.scope.children if c.node is node), None)
        if child_scope is None or getattr(node, "dp_reanalyse", False):
            # the node was rewritten (a closure inside a comprehension): analyse it afresh
            from ..scopes import _analyse, resolve_free

            child_scope = _analyse(node)
            resolve_free(
                child_scope,
                self.local_names | self.scope.free | set(self.boxed) | self.namer.generated,
                set(),
            )
        ir = normalize_function(
            child_scope,
            self.namer,
            self.filename,
            self.globals,
            name,
            is_lambda,
            self.boxed_visible(child_scope),
            f"{self.qualname}.<locals>.{'<lambda>' if is_lambda else name}",
        )
        self.children.append(ir)
        fdef: Core = ast.FunctionDef(
            name=name,
            args=node.args,
            body=[ast.Pass()],
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        fdef = ast.copy_location(fdef, node)
        fdef.dp_ir = ir
        fdef.dp_defaults = defaults
        fdef.dp_kw_defaults = kw_defaults
        self.emit(fdef)

    def boxed_visible(self, child: Scope) -> set[str]:
        """Boxed variables the child sees: this scope's boxed locals it uses, and ours from outside."""
        return {n for n in child.free if n in self.boxed}

    # ------------------------------------------------------------------ expressions
    def load_name(self, name: str, like: ast.AST) -> Atom:
        if name in self.boxed or name in self.walrus_targets:
            return self.temp(_name(name), like)
        return _name(name)

    def expr(self, e: ast.expr) -> Atom:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise self.unsupported(e, f"the expression {type(e).__name__}")
        return method(e)

    def e_Yield(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "yield (a generator)", "return a list instead")

    e_YieldFrom = e_Yield

    def e_Await(self, e: ast.AST) -> Atom:
        raise self.unsupported(e, "await (async code)")


def _count_returns(body: list[ast.stmt]) -> int:
    """The ``return`` statements in ``body``, nested functions' included."""
    return sum(isinstance(st, ast.Return) for st in statements(body))


def normalize_function(
    scope: Scope,
    namer: Namer,
    filename: str,
    globals_: dict,
    name: str,
    is_lambda: bool,
    boxed_from_outside: set[str],
    qualname: str = "",
) -> IRFunction:
    node = scope.node
    body: list[ast.stmt] = (
        node.body
        if isinstance(node.body, list)
        else [ast.copy_location(ast.Return(value=node.body), node.body)]
    )
    if is_lambda and not isinstance(node.body, list):
        pass
    if isinstance(node, ast.FunctionDef) and any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk_no_scopes_body(body)
    ):
        body = _YieldsToList(
            namer.fresh("yielded"),
            name,
            filename,
            namer.fresh("raised"),
            node.lineno,
            getattr(node, RETURNS, None),
            getattr(node, LIMIT, None),
        ).function_body(body)
    refuse_generator_expressions_read_again(body, name, filename)
    boxed = set(scope.boxed) | boxed_from_outside
    if scope.globals_:
        body = [_ModuleNamespaceAccess(scope.globals_).visit(_deepcopy(st)) for st in body]
    n = Normalizer(scope, namer, filename, globals_, boxed)
    n.qualname = qualname
    stmts = n.function_body(body)
    ir = IRFunction(
        name,
        node.args,
        stmts,
        scope,
        n.retval,
        filename,
        node.lineno,
        n.children,
        is_lambda,
        n.boxed,
        n.ret_flag,
        set(boxed_from_outside),
        qualname,
    )
    return ir
