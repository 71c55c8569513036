"""What the mixins of :class:`~.normalizer.Normalizer` use of one another, declared once.

``Normalizer`` is one class written as mixins, one module per family of forms; a method of
one mixin calls methods of others and reads the state ``Normalizer.__init__`` sets. For the
type checker each mixin derives from :class:`NormalizerState`, the Protocol below (at run
time from ``object``: nothing here runs). Add a method here when another mixin calls it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...errors import UnsupportedSyntaxError
    from ..scopes import Scope
    from .core import Atom, Core, IRFunction, Namer, _LoopCtx


class NormalizerState(Protocol):
    """The state and the methods a mixin of ``Normalizer`` may use of the others."""

    # -- the state (set by Normalizer.__init__)
    scope: Scope
    namer: Namer
    filename: str
    globals: dict[str, Any]
    out: list[ast.stmt]
    loop: _LoopCtx | None
    ret_flag: str | None
    retval: str
    children: list[IRFunction]
    boxed: set[str]
    local_names: set[str]
    walrus_targets: set[str]
    unshared: Any
    own_code: bool
    lazy_names: set[str]

    # -- the normalizer (normalizer.py)
    def unsupported(self, node: ast.AST, what: str, fix: str = "") -> UnsupportedSyntaxError: ...
    def emit(self, stmt: ast.stmt) -> None: ...
    def stmt(self, s: ast.stmt) -> None: ...
    def stmts(self, stmts: list[ast.stmt]) -> None: ...
    def sub(self, stmts: list[ast.stmt]) -> list[ast.stmt]: ...
    def expr(self, e: ast.expr) -> Atom: ...
    def temp(self, value: ast.expr, like: ast.AST) -> ast.Name: ...
    def load_name(self, name: str, like: ast.AST) -> Atom: ...
    def capture(self, fn: Any) -> list[ast.stmt]: ...
    def escape_flag(self) -> str | None: ...
    def assign_display_elementwise(self, s: ast.Assign) -> bool: ...
    def nested_function(
        self,
        node: Core,
        name: str,
        body: list[ast.stmt],
        defaults: list[Any],
        kw_defaults: list[Any],
        is_lambda: bool,
    ) -> None: ...

    # -- the forms
    def assign_to(self, target: Core, value: Core, like: ast.AST) -> None: ...
    def check_store(self, name: str, s: ast.AST) -> None: ...
    def emit_assign_name(self, name: str, value: ast.expr, like: ast.AST) -> None: ...
    def calls_builtin(self, e: ast.expr, table: dict[str, Any]) -> bool: ...
    def exit_loops(self, s: ast.AST) -> None: ...
    def makes_lazy_iterator(self, e: ast.expr) -> bool: ...
    def read_by_one_loop(self, name: str) -> bool: ...
    @staticmethod
    def mark_live(stmt: ast.stmt, kept: bool = False) -> None: ...
    def slice_(self, s: ast.expr) -> ast.expr: ...
