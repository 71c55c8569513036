"""Which augmented assignments ``a op= b`` may be computed out of place.

On a NumPy array, ``a += b`` changes the array in place: every other name, view,
container element or caller that refers to the same array sees the change. Where nothing
else can see it, dplus computes ``a += b`` as a new array bound to ``a`` (with NumPy's
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
  of an arithmetic operator or comparison, ``a.shape``-like attributes, array methods and
  NumPy functions that return new arrays or numbers) happens after the last augmented assignment of ``a``, and not
  in a loop that contains one -- unless that loop's body rebinds ``a`` to a new array
  (a statement of its top level, before the one holding the augmented assignment): then
  every iteration changes an array of its own, never the one an earlier iteration read.

The augmented assignments of other names are *shared*: when the value is an array at run
time they change it in place (``primitives.numpy_inplace``), which gives the same result and
gradient; the out-of-place form only spares the bookkeeping of memory changed in place.
"""

from __future__ import annotations

import ast
import sys

from .scopes import Scope, names_bound_by
from .trees import statements

__all__ = ["unshared_aug_targets"]

# attributes of an array that are not views of it, and methods that return new arrays or scalars
_SAFE_ATTRIBUTES = frozenset({"shape", "ndim", "size", "dtype", "nbytes", "itemsize"})
_SAFE_METHODS = frozenset(
    {
        "sum",
        "mean",
        "prod",
        "max",
        "min",
        "std",
        "var",
        "dot",
        "copy",
        "any",
        "all",
        "argmax",
        "argmin",
        "tolist",
        "item",
        "cumsum",
        "cumprod",
        "round",
        "clip",
        "trace",
    }
)
# NumPy functions that always return a new array (np.array copies unless told not to)
_FRESH_CONSTRUCTORS = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "array",
        "copy",
        "arange",
        "linspace",
        "eye",
        "identity",
    }
)
# NumPy functions whose result is a new array or a number, never a view of (or a reference to)
# an argument: an array read as their argument leaves no reference behind
_FRESH_RESULT_FUNCTIONS = frozenset(
    {
        "sum",
        "mean",
        "prod",
        "max",
        "min",
        "amax",
        "amin",
        "std",
        "var",
        "dot",
        "vdot",
        "inner",
        "outer",
        "matmul",
        "tensordot",
        "kron",
        "trace",
        "cumsum",
        "cumprod",
        "diff",
        "any",
        "all",
        "argmax",
        "argmin",
        "allclose",
        "isclose",
        "isfinite",
        "sort",
        "where",
        "clip",
        "maximum",
        "minimum",
        "concatenate",
        "stack",
        "vstack",
        "hstack",
        "take",
        "repeat",
        "tile",
        "roll",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "sin",
        "cos",
        "tan",
        "arcsin",
        "arccos",
        "arctan",
        "sinh",
        "cosh",
        "tanh",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sqrt",
        "square",
        "abs",
        "absolute",
        "sign",
        "power",
        "add",
        "subtract",
        "multiply",
        "divide",
        "negative",
    }
)
_FRESH_RESULT_BUILTINS = frozenset({"float", "int", "len", "bool"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def unshared_aug_targets(
    scope: Scope, body: list[ast.stmt], boxed: set[str], globals_: dict
) -> set[str]:
    """The names whose augmented assignments in ``body`` (the function of ``scope``, whose
    module globals are ``globals_``) may run out of place: no other reference to their
    array can observe the difference."""
    if not any(isinstance(st, ast.AugAssign) for st in statements(body)):
        return set()  # (no augmented assignment: the analysis below walks the whole function)
    module_level = {
        k: v for k, v in globals_.items() if k not in scope.assigned and k not in scope.free
    }
    visitor = _Visitor(module_level)
    for s in body:
        visitor.visit(s, None, ())
    captured: set[str] = set()
    for child in scope.children:
        captured |= child.free
    excluded = (
        set(scope.params)
        | scope.nonlocals
        | scope.globals_
        | captured
        | boxed
        | visitor.other_bindings
    )
    out = set()
    for name, augs in visitor.augs.items():
        if name in excluded:
            continue
        renewed = {
            loop: first for (loop, bound), first in visitor.renewals.items() if bound == name
        }
        if not any(
            _harmful(read, aug, renewed) for read in visitor.leaks.get(name, ()) for aug in augs
        ):
            out.add(name)
    return out


def _harmful(
    read: tuple[int, tuple], aug: tuple[int, tuple, dict], renewed: dict[int, int]
) -> bool:
    """A read that may keep a reference is harmful if the augmented assignment ``aug`` can
    run after it on the same array. ``renewed``: for a loop (by id), the index of the first
    statement of its body that binds the name to a new array."""
    when, loops = read
    aug_when, aug_loops, aug_at = aug
    if aug_when > when:
        return True
    common = [loop for loop in aug_loops if loop in loops]
    if not common:
        return False
    # the aug runs after the read only in a later iteration of the innermost common loop (or
    # of one around it), which starts its body again: a renewal before the aug's statement
    # gives that iteration an array of its own
    innermost = id(common[-1])
    first = renewed.get(innermost)
    return first is None or aug_at.get(innermost) is None or first >= aug_at[innermost]


class _Visitor:
    """One walk in evaluation order, numbering the nodes: the augmented assignments of each
    name (numbered when they complete), its reads that may keep a reference, and the names
    bound otherwise than by ``name = <arithmetic>``."""

    def __init__(self, globals_: dict) -> None:
        self.globals = globals_  # the module-level names the function reads
        self.clock = 0
        self.augs: dict[str, list[tuple[int, tuple, dict]]] = {}
        # (id(loop), name) -> index of the first top-level statement of the loop's body that
        # binds name to a new array; id(loop) -> the index of the body statement being visited
        self.renewals: dict[tuple[int, str], int] = {}
        self.body_index: dict[int, int | None] = {}
        self.leaks: dict[str, list[tuple[int, tuple]]] = {}
        self.other_bindings: set[str] = set()
        self.method_calls: set[int] = set()  # the ids of ``a`` in calls ``a.sum(...)``

    def visit(self, node: ast.AST, parent: ast.AST | None, loops: tuple) -> None:
        self.clock += 1
        if isinstance(node, ast.Name):
            self.name(node, parent, loops)
            return
        self.other_bindings.update(
            names_bound_by(node)
        )  # def, import, except ... as, match captures
        if isinstance(node, _NESTED):
            return  # what it reads from here is in ``free`` of its scope
        self.bindings(node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _SAFE_METHODS
        ):
            self.method_calls.add(id(node.func.value))
        is_loop = isinstance(node, _LOOPS)
        inner = loops + (node,) if is_loop else loops
        if isinstance(node, _LOOPS):
            self.note_renewals(node)
        for field in node._fields:
            value = getattr(node, field, None)
            children = value if isinstance(value, list) else [value]
            for index, child in enumerate(children):
                if is_loop:
                    self.body_index[id(node)] = index if field == "body" else None
                if isinstance(child, ast.AST) and not isinstance(child, ast.expr_context):
                    self.visit(child, node, inner)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self.clock += 1
            at = {id(loop): self.body_index.get(id(loop)) for loop in loops}
            self.augs.setdefault(node.target.id, []).append((self.clock, loops, at))

    def note_renewals(self, loop: ast.For | ast.AsyncFor | ast.While) -> None:
        """The statements ``a = <new array>`` at the top level of the loop's body."""
        for index, st in enumerate(loop.body):
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and self.makes_new_array(st.value)
            ):
                self.renewals.setdefault((id(loop), st.targets[0].id), index)

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

    def argument_of_fresh_result(self, node: ast.Name, parent: ast.AST | None) -> bool:
        return (
            isinstance(parent, ast.Call)
            and node in parent.args
            and _fresh_result_call(self, parent)
        )

    def name(self, node: ast.Name, parent: ast.AST | None, loops: tuple) -> None:
        if isinstance(node.ctx, ast.Store):
            if not isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.other_bindings.add(node.id)  # for targets, with ... as, :=, unpacking
            return
        if (
            isinstance(node.ctx, ast.Del)
            or id(node) in self.method_calls
            or not _may_keep(node, parent)
            or self.argument_of_fresh_result(node, parent)
        ):
            return
        self.leaks.setdefault(node.id, []).append((self.clock, loops))


def _fresh_result_call(visitor: _Visitor, call: ast.Call) -> bool:
    """``call`` is ``np.<f>(...)`` (``np`` the numpy module) or a builtin whose result never refers
    to its arguments, with no keyword that could write into one (``out=``)."""
    if any(k.arg in ("out", "copy") or k.arg is None for k in call.keywords):
        return False
    func = call.func
    if isinstance(func, ast.Name):
        import builtins

        return func.id in _FRESH_RESULT_BUILTINS and visitor.globals.get(
            func.id, getattr(builtins, func.id)
        ) is getattr(builtins, func.id)
    np = sys.modules.get("numpy")
    return (
        np is not None
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.attr in _FRESH_RESULT_FUNCTIONS
        and visitor.globals.get(func.value.id) is np
    )


def _may_keep(node: ast.Name, parent: ast.AST | None) -> bool:
    """Whether this read of an array may leave a reference to it behind."""
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare)):
        return False
    if isinstance(parent, ast.AugAssign):
        return not (isinstance(parent.target, ast.Name) and parent.target.id == node.id)
    if isinstance(parent, ast.Attribute):
        return parent.attr not in _SAFE_ATTRIBUTES
    return True
