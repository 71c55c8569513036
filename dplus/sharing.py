"""Which augmented assignments ``a op= b`` may be computed out of place.

On a NumPy array, ``a += b`` changes the array in place: every other name, view,
container element or caller that refers to the same array sees the change. dplus treats
arrays as values, so it computes ``a += b`` as a new array bound to ``a`` (with NumPy's
in-place checks: the result keeps ``a``'s shape and dtype). That is exactly what Python
computes when nothing else can see the old array, which this module proves for a local
name ``a`` of one function when

* ``a`` is not a parameter, not global or nonlocal, not read by a nested function, not
  boxed;
* every binding of ``a`` is ``a = <arithmetic>`` (a binary or unary operator, which gives
  a new array), ``a = <something>.copy()``, ``a = np.zeros(...)`` and the other NumPy
  constructors that always make a new array (``np`` being the numpy module when the
  function is transformed), or an augmented assignment of ``a`` (which, computed out of
  place, also gives a new array);
* every read of ``a`` that could keep a reference to the array (anything but an operand
  of an arithmetic operator or comparison, ``a.shape``-like attributes, and array methods
  that return new arrays) happens after the last augmented assignment of ``a``, and not
  in a loop that contains one.

The augmented assignments of other names are *shared*: when the value is an array at run
time they are refused (see ``runtime_ops.refuse_array_in_place``).
"""

from __future__ import annotations

import ast
import sys

from .scopes import Scope, names_bound_by

__all__ = ["unshared_aug_targets"]

# attributes of an array that are not views of it, and methods that return new arrays or scalars
_SAFE_ATTRIBUTES = frozenset({"shape", "ndim", "size", "dtype", "nbytes", "itemsize"})
_SAFE_METHODS = frozenset({
    "sum", "mean", "prod", "max", "min", "std", "var", "dot", "copy", "any", "all", "argmax", "argmin",
    "tolist", "item", "cumsum", "cumprod", "round", "clip", "trace",
})
# NumPy functions that always return a new array (np.array copies unless told not to)
_FRESH_CONSTRUCTORS = frozenset({
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "array", "copy",
    "arange", "linspace", "eye", "identity",
})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def unshared_aug_targets(scope: Scope, body: list[ast.stmt], boxed: set[str], globals_: dict) -> set[str]:
    """The names whose augmented assignments in ``body`` (the function of ``scope``, whose
    module globals are ``globals_``) may run out of place: no other reference to their
    array can observe the difference."""
    module_level = {k: v for k, v in globals_.items() if k not in scope.assigned and k not in scope.free}
    visitor = _Visitor(module_level)
    for s in body:
        visitor.visit(s, None, ())
    captured: set[str] = set()
    for child in scope.children:
        captured |= child.free
    excluded = set(scope.params) | scope.nonlocals | scope.globals_ | captured | boxed | visitor.other_bindings
    out = set()
    for name, augs in visitor.augs.items():
        if name in excluded:
            continue
        if not any(_harmful(read, augs) for read in visitor.leaks.get(name, ())):
            out.add(name)
    return out


def _harmful(read: tuple[int, tuple], augs: list[tuple[int, tuple]]) -> bool:
    """A read that may keep a reference is harmful if an augmented assignment can run after it."""
    when, loops = read
    return any(aug_when > when or set(aug_loops) & set(loops) for aug_when, aug_loops in augs)


class _Visitor:
    """One walk in evaluation order, numbering the nodes: the augmented assignments of each
    name (numbered when they complete), its reads that may keep a reference, and the names
    bound otherwise than by ``name = <arithmetic>``."""

    def __init__(self, globals_: dict) -> None:
        self.globals = globals_  # the module-level names the function reads
        self.clock = 0
        self.augs: dict[str, list[tuple[int, tuple]]] = {}
        self.leaks: dict[str, list[tuple[int, tuple]]] = {}
        self.other_bindings: set[str] = set()
        self.method_calls: set[int] = set()  # the ids of ``a`` in calls ``a.sum(...)``

    def visit(self, node: ast.AST, parent: ast.AST | None, loops: tuple) -> None:
        self.clock += 1
        if isinstance(node, ast.Name):
            self.name(node, parent, loops)
            return
        self.other_bindings.update(names_bound_by(node))  # def, import, except ... as, match captures
        if isinstance(node, _NESTED):
            return  # what it reads from here is in ``free`` of its scope
        self.bindings(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SAFE_METHODS:
            self.method_calls.add(id(node.func.value))
        inner = loops + (node,) if isinstance(node, _LOOPS) else loops
        for field in node._fields:
            value = getattr(node, field, None)
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST) and not isinstance(child, ast.expr_context):
                    self.visit(child, node, inner)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self.clock += 1
            self.augs.setdefault(node.target.id, []).append((self.clock, loops))

    def bindings(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            fresh = len(targets) == 1 and self.makes_new_array(node.value)
            for t in targets:
                if isinstance(t, ast.Name) and fresh:
                    continue
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.other_bindings.add(n.id)

    def makes_new_array(self, value: ast.expr | None) -> bool:
        """``value`` evaluates to an object nothing else refers to (for arrays)."""
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return True
        if not isinstance(value, ast.Call) or any(k.arg == "copy" for k in value.keywords):
            return False
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return True  # a.copy()
        np = sys.modules.get("numpy")
        if np is None:
            return False
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            return func.attr in _FRESH_CONSTRUCTORS and self.globals.get(func.value.id) is np
        if isinstance(func, ast.Name):
            fn = self.globals.get(func.id)
            return any(fn is getattr(np, name, None) for name in _FRESH_CONSTRUCTORS)
        return False

    def name(self, node: ast.Name, parent: ast.AST | None, loops: tuple) -> None:
        if isinstance(node.ctx, ast.Store):
            if not isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.other_bindings.add(node.id)  # for targets, with ... as, :=, unpacking
            return
        if isinstance(node.ctx, ast.Del) or id(node) in self.method_calls or not _may_keep(node, parent):
            return
        self.leaks.setdefault(node.id, []).append((self.clock, loops))


def _may_keep(node: ast.Name, parent: ast.AST | None) -> bool:
    """Whether this read of an array may leave a reference to it behind."""
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare)):
        return False
    if isinstance(parent, ast.AugAssign):
        return not (isinstance(parent.target, ast.Name) and parent.target.id == node.id)
    if isinstance(parent, ast.Attribute):
        return parent.attr not in _SAFE_ATTRIBUTES
    return True
