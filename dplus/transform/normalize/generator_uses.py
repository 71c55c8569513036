"""Where the generators of a function differentiated again are made and read (stop 38).

Differentiated again, a generator runs to completion where it is made. That is Python's order
exactly when nothing the body reads or does can be observed differently between the making and
each read: either the generator is read to its end where it is made (``sum(gen())``,
``list(zip(gen(), xs))``, a comprehension with no call in it read so), or its body is known to
change nothing (:func:`.first_effect`, strict) and nothing the program runs after the making
may change what it reads (:func:`.effects_in`, strict, except the changes of containers the
function made and holds alone). What is neither is refused by name here.
"""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any

from ...errors import UnsupportedSyntaxError
from ..trees import function_def, walk, walk_outside
from .generator_effects import (
    CHANGES_ITS_FIRST_ARGUMENT,
    Effect,
    _flat,
    effects_in,
    first_effect,
)
from .generator_expressions import consumers_in
from .generator_returns import binds_otherwise
from .generator_syntax import is_generator_function

__all__ = ["GeneratorUses", "as_generator_function", "outside_reads", "described", "refused_effect"]


class GeneratorUses:
    """Where the generators of a differentiated function ``node`` are made and read: which
    makings are read to their end where they are (``sum(gen())``, ``list(zip(gen(), xs))``,
    ``[v * v for v in gen()]``: nothing of the program runs between the making and the end of
    the reading, so running the body there is Python's order, effects and all), and, for the
    others, the effects of the program's own code that may run after the making
    (:func:`.effects_in`, strict), which may change what the generator reads."""

    def __init__(
        self,
        node: ast.FunctionDef | ast.Lambda,
        nested: dict[str, list[ast.FunctionDef]],
        globals_: dict[str, Any],
        module: str,
        bound: set[str],
        qualname: str,
        filename: str,
    ) -> None:
        self.node = node
        self.globals_ = globals_
        self.module = module
        self.bound = bound
        self.qualname = qualname
        self.filename = filename
        self.parents: dict[int, ast.AST] = {}
        for n in ast.walk(node):
            for c in ast.iter_child_nodes(n):
                self.parents[id(c)] = n
        self.consumes_whole = consumers_in(node, globals_)
        self.classes: dict[str, ast.ClassDef] = {}
        self.nested: dict[str, list[Any]] = {k: list(v) for k, v in nested.items()}
        for n in walk(node):
            if isinstance(n, ast.ClassDef):
                self.classes[n.name] = n
            elif (
                isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Lambda)
            ):
                self.nested.setdefault(n.targets[0].id, []).append(n.value)
        self._effects: dict[int, list[Effect]] = {}
        self._delegating: set[int] = set()  # (generators whose yield from is being asked about)
        self.modules = {
            name
            for name, value in globals_.items()
            if isinstance(value, types.ModuleType) and name not in bound
        }

    def is_builtin(self, name: str) -> bool:
        return name not in self.bound and self.globals_.get(
            name, getattr(builtins, name, None)
        ) is getattr(builtins, name, None)

    def read_at_once(self, e: ast.expr) -> bool:
        """Whether the iterable ``e`` is read to its end where it is made, with nothing of the
        program running in between."""
        p = self.parents.get(id(e))
        if isinstance(p, ast.Call) and p.args and p.args[0] is e and self.consumes_whole(p):
            # (a key function runs between the items: it could see the body's effects)
            return not any(isinstance(a, ast.Lambda) for a in ast.walk(p))
        if (
            isinstance(p, ast.Call)
            and isinstance(p.func, ast.Name)
            and p.func.id in ("zip", "enumerate")
            and self.is_builtin(p.func.id)
            and e in p.args
            and all(_quiet(a) or a is e for a in p.args)
            and not p.keywords
        ):
            return self.read_at_once(p)
        if isinstance(p, ast.YieldFrom) and p.value is e:
            return self._delegated_at_once(p)
        if isinstance(p, ast.comprehension) and p.iter is e:
            comp = self.parents.get(id(p))
            if not isinstance(comp, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return False
            if comp.generators[0] is not p or not all(
                _quiet_expression(x) for x in _comprehension_parts(comp)
            ):
                return False
            return not isinstance(comp, ast.GeneratorExp) or self.read_at_once(comp)
        return False

    def _delegated_at_once(self, y: ast.YieldFrom) -> bool:
        """``yield from e`` reads ``e`` to its end while the generator function around it
        runs; that is at once when every call of that function is read at once (nothing of
        the program but its own body runs until it ends, in Python's order)."""
        around = self.enclosing(y)
        g = around[0] if around else None
        if not isinstance(g, ast.FunctionDef) or g is self.node or id(g) in self._delegating:
            return False
        if len(self.nested.get(g.name, ())) != 1:
            return False
        self._delegating.add(id(g))
        try:
            return not self._later_uses(g)
        finally:
            self._delegating.discard(id(g))

    def enclosing(self, n: ast.AST) -> list[ast.AST]:
        """The functions around ``n``, innermost first, up to ``node``."""
        out: list[ast.AST] = []
        p = self.parents.get(id(n))
        while p is not None:
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                out.append(p)
            p = self.parents.get(id(p))
        return out

    def effects_of(self, fn: ast.AST) -> list[Effect]:
        if id(fn) not in self._effects:
            self._effects[id(fn)] = (
                effects_in(fn, self.nested, self.globals_, self.module, self.bound, self.classes)
                if isinstance(fn, ast.FunctionDef)
                else []
            )
        return self._effects[id(fn)]

    def _generators_of(self, gen: ast.FunctionDef) -> set[str]:
        """The names bound only to generators ``gen`` makes (``it = gen(3)``): their
        ``send``/``close``/``throw`` is named by its own refusal, later."""
        made: dict[str, bool] = {}
        for n in walk(self.node):
            if not isinstance(n, ast.Assign):
                continue
            value = n.value
            for t in n.targets:
                if isinstance(t, ast.Name):
                    made[t.id] = made.get(t.id, True) and (
                        isinstance(value, ast.Call)
                        and isinstance(value.func, ast.Name)
                        and value.func.id == gen.name
                    )
        return {name for name, only in made.items() if only}

    def first_change_after(
        self,
        making: ast.AST,
        reads: set[str],
        generators: frozenset[str] | set[str] = frozenset(),
        until: int | None = None,
    ) -> tuple[Effect, ast.AST] | None:
        """An effect of the program's code that may run after ``making`` (later in its
        function, in a loop around it, or after the function around it is defined), not on a
        container of that function no one else can reach; with the function it is in. With
        ``until`` (the last line that reads the generator, :meth:`window_of`): only the
        effects of the function around the making up to that line (what runs after it, or
        outside that function's run, runs when no value is made any more)."""
        here: ast.AST = making
        for fn in self.enclosing(making):
            start = _region_start(here, fn, self.parents)
            private = _private_containers(fn, reads, self.modules)
            for effect in self.effects_of(fn):
                line = getattr(effect.node, "lineno", 0)
                if until is not None and line > until:
                    continue
                if line >= start and effect.changes not in private:
                    if effect.changes in generators and _generator_method(effect.node):
                        continue
                    return effect, fn
            if until is not None:
                return None
            here = fn
        return None

    def _later_uses(self, gen: ast.FunctionDef) -> list[ast.Name]:
        """The uses of ``gen``'s name other than makings read to their end at once."""
        later = []
        for n in walk(self.node):
            if isinstance(n, ast.Name) and n.id == gen.name and isinstance(n.ctx, ast.Load):
                call = self.parents.get(id(n))
                if not (isinstance(call, ast.Call) and call.func is n and self.read_at_once(call)):
                    later.append(n)
        return later

    def read_at_once_everywhere(self, gen: ast.FunctionDef) -> bool:
        return not self._later_uses(gen)

    def read_windows(self, gen: ast.FunctionDef, fn: ast.AST) -> list[tuple[int, int]] | None:
        """For each making of ``gen`` not read at once: its line and the last line of the last
        statement that reads it, when it is ``it = gen(...)`` in ``fn`` (outside loops), with
        ``it`` bound nowhere else and read only by ``next(it)``, ``for ... in it`` and
        ``it.close()`` in ``fn``, outside loops: the only times its values are made. None
        where a making is read otherwise (kept elsewhere, given to a function, in a loop)."""
        windows = []
        for n in self._later_uses(gen):
            window = self.window_of(n, fn)
            if window is None:
                return None
            windows.append(window)
        return windows

    def window_of(self, n: ast.Name, fn: ast.AST) -> tuple[int, int] | None:
        """The lines from the making ``n(...)`` in ``fn`` to the end of its last read (see
        :meth:`read_windows`); None if it is not read so."""
        call = self.parents.get(id(n))
        made = self.parents.get(id(call))
        if isinstance(call, ast.Call) and call.func is n:
            zipped = self._zipped_with_makings(call, fn)
            if zipped is not None:
                return zipped
        if not (
            isinstance(call, ast.Call)
            and call.func is n
            and isinstance(made, ast.Assign)
            and len(made.targets) == 1
            and isinstance(made.targets[0], ast.Name)
            and self._outside_loops_of(made, fn)
        ):
            return None
        last = self._last_read_of(made.targets[0], fn)
        if last is None:
            return None
        return made.lineno, max(last, made.end_lineno or made.lineno)

    def _zipped_with_makings(self, call: ast.Call, fn: ast.AST) -> tuple[int, int] | None:
        """The lines of the statement around ``zip(gen(), other())`` read at once (by
        ``sum``, a comprehension...) outside loops of ``fn``, when the other arguments are
        names, constants or makings of generators of the program with quiet arguments and
        bodies known to change nothing: Python interleaves the bodies where dplus runs one
        after the other, which nothing can tell apart; all is read in that statement."""
        z = self.parents.get(id(call))
        if not (
            isinstance(z, ast.Call)
            and isinstance(z.func, ast.Name)
            and z.func.id in ("zip", "enumerate")
            and self.is_builtin(z.func.id)
            and call in z.args
            and not z.keywords
            and self.read_at_once(z)
        ):
            return None
        for a in z.args:
            if a is call or _quiet(a):
                continue
            name = a.func.id if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) else ""
            defs = self.nested.get(name, ())
            if not (
                isinstance(a, ast.Call)
                and len(defs) == 1
                and isinstance(defs[0], ast.FunctionDef)
                and is_generator_function(defs[0])
                and all(_quiet(v) for v in [*a.args, *(k.value for k in a.keywords)])
                and first_effect(
                    defs[0], self.nested, self.globals_, self.module, self.bound, True, self.classes
                )
                is None
            ):
                return None
        st: ast.AST | None = z
        while st is not None and not isinstance(st, ast.stmt):
            st = self.parents.get(id(st))
        if st is None or not self._outside_loops_of(st, fn):
            return None
        return st.lineno, getattr(st, "end_lineno", None) or st.lineno

    def _outside_loops_of(self, n: ast.AST, fn: ast.AST) -> bool:
        """Whether ``n`` is in ``fn``'s own body and runs at most once per call of it (in no
        loop or comprehension of ``fn``; the iterable of a ``for`` runs once)."""
        child, p = n, self.parents.get(id(n))
        while p is not None and p is not fn:
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return False
            if isinstance(
                p, (ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
            ):
                return False
            if isinstance(p, (ast.For, ast.AsyncFor)) and child is not p.iter:
                return False
            child, p = p, self.parents.get(id(p))
        return p is fn

    def _last_read_of(self, target: ast.Name, fn: ast.AST) -> int | None:
        """The last line of the last statement reading ``target.id`` (see ``read_windows``)."""
        name, last = target.id, 0
        for m in walk(self.node):
            if binds_otherwise(m, name):
                return None
            if not isinstance(m, ast.Name) or m.id != name or m is target:
                continue
            p = self.parents.get(id(m))
            q = self.parents.get(id(p))
            read = isinstance(m.ctx, ast.Load) and (
                (isinstance(p, ast.For) and p.iter is m)
                or (
                    isinstance(p, ast.Call)
                    and isinstance(p.func, ast.Name)
                    and p.func.id == "next"
                    and self.is_builtin("next")
                    and p.args[:1] == [m]
                    and not p.keywords
                )
                or (
                    isinstance(p, ast.Attribute)
                    and p.attr == "close"
                    and isinstance(q, ast.Call)
                    and q.func is p
                    and isinstance(self.parents.get(id(q)), ast.Expr)
                )
            )
            if not read or not self._outside_loops_of(m, fn):
                return None
            st: ast.AST | None = m
            while st is not None and not isinstance(st, ast.stmt):
                st = self.parents.get(id(st))
            last = max(last, getattr(st, "end_lineno", None) or 0)
        return last

    def reads_through_calls(self, gen: ast.AST) -> list[ast.Name]:
        """The names ``gen`` reads from outside, and those the functions of the
        differentiated function it calls (by name, at any depth) read from outside."""
        out: list[ast.Name] = []
        todo, seen = [gen], {id(gen)}
        while todo:
            for n in outside_reads(todo.pop()):
                out.append(n)
                for d in self.nested.get(n.id, ()):
                    if id(d) not in seen:
                        seen.add(id(d))
                        todo.append(d)
        return out

    def refuse_read_later(self, gen: ast.FunctionDef) -> None:
        """``gen`` made and not read to its end at once somewhere: refused when its body may
        have an effect (strict) or the program's code may change, after a making, what it
        reads."""
        later = self._later_uses(gen)
        if not later:
            return
        effect = first_effect(
            gen, self.nested, self.globals_, self.module, self.bound, True, self.classes
        )
        if effect is not None:
            raise refused_effect(gen, effect, self.qualname, self.filename)
        reads = {n.id for n in self.reads_through_calls(gen)}
        for n in later:
            call = self.parents.get(id(n))
            given = set()
            if isinstance(call, ast.Call) and call.func is n:
                given = {
                    a.id
                    for a in ast.walk(call)
                    if isinstance(a, ast.Name) and isinstance(a.ctx, ast.Load)
                }
            around = self.enclosing(n)
            window = self.window_of(n, around[0]) if around else None
            found = self.first_change_after(
                n, reads | given, self._generators_of(gen), None if window is None else window[1]
            )
            if found is not None:
                raise self._refused_change(described(gen), gen, n, *found)

    def refuse_expression_read_later(self, e: ast.GeneratorExp) -> None:
        """The same for a generator expression not read to its end where it is made."""
        as_function = as_generator_function(e)
        effect = first_effect(
            as_function, self.nested, self.globals_, self.module, self.bound, True, self.classes
        )
        if effect is not None:
            where, what = effect
            line = getattr(where, "lineno", None) or e.lineno
            err = UnsupportedSyntaxError(
                f"the generator expression ({self.filename}, line {line}) {what}: at a higher "
                "order of differentiation (hessian, grad of grad) dplus makes its values at "
                "once where it is made, where Python's makes each as it is read (and none that "
                "is never read). Make the change outside the generator expression, or make it "
                "a list"
            )
            err.filename = self.filename
            err.lineno = line
            raise err
        reads = {n.id for n in outside_reads(e)}
        found = self.first_change_after(e, reads)
        if found is not None:
            raise self._refused_change("the generator expression", e, e, *found)

    def _refused_change(
        self, what: str, gen: ast.AST, making: ast.AST, effect: Effect, fn: ast.AST
    ) -> UnsupportedSyntaxError:
        line = getattr(effect.node, "lineno", None)
        made = getattr(making, "lineno", "?")
        where = getattr(fn, "name", "<lambda>")
        err = UnsupportedSyntaxError(
            f"{what} in {self.qualname!r} ({self.filename}, line {made}) is read after it is "
            f"made, and {where!r} {effect.what} (line {line}) after that line, which may change "
            "what the generator reads: at a higher order of differentiation (hessian, grad of "
            "grad) dplus runs a generator to completion where it is made, where Python's reads "
            "as it runs. Take the generator's values as a list where it is made (list(...)), "
            "or make it after the change"
        )
        err.filename = self.filename
        err.lineno = line
        return err


def _generator_method(n: ast.AST) -> bool:
    return (
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("send", "close", "throw")
    )


def _quiet(e: ast.expr) -> bool:
    if isinstance(e, (ast.Tuple, ast.List)):
        return all(map(_quiet, e.elts))
    return isinstance(e, (ast.Name, ast.Constant))


def _comprehension_parts(comp: ast.AST) -> list[ast.expr]:
    parts: list[ast.expr] = []
    if isinstance(comp, ast.DictComp):
        parts += [comp.key, comp.value]
    else:
        parts.append(comp.elt)  # type: ignore[attr-defined]
    for i, g in enumerate(comp.generators):  # type: ignore[attr-defined]
        parts += g.ifs
        if i:
            parts.append(g.iter)
    return parts


def _quiet_expression(e: ast.expr) -> bool:
    """No call, ``yield`` or ``:=`` in ``e``: its evaluation runs none of the program's code
    (between the items of a generator read by a comprehension)."""
    return not any(
        isinstance(n, (ast.Call, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Await, ast.Lambda))
        for n in ast.walk(e)
    )


def _region_start(n: ast.AST, fn: ast.AST, parents: dict[int, ast.AST]) -> int:
    """The first line of ``fn`` that may run after ``n`` has: ``n``'s own, or the first of a
    loop of ``fn`` around it."""
    start = getattr(n, "lineno", 0)
    p = parents.get(id(n))
    while p is not None and p is not fn:
        if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
            start = min(start, p.lineno)
        p = parents.get(id(p))
    return start


# where a local container may be read without another name or object coming to hold it
_KEEPS_NOTHING = frozenset(
    {"len", "sum", "min", "max", "sorted", "list", "tuple", "set", "frozenset", "any", "all",
     "float", "abs", "bool", "str", "repr", "isinstance"}
)  # fmt: skip


def _private_containers(fn: ast.AST, reads: set[str], modules: set[str]) -> set[str]:
    """The locals of ``fn`` bound only to containers it makes there that nothing else can
    reach: not in ``reads`` (what the generator reads or is given), never read by a nested
    function, and read only where the container itself stays in ``fn`` (``xs[i]``,
    ``xs.append(v)``, ``len(xs)``, ``for v in xs``)."""
    if not isinstance(fn, ast.FunctionDef):
        return set()
    own = [n for st in fn.body for n in walk_outside(st, _OWN_SCOPES)]
    bindings: dict[str, list[ast.AST]] = {}
    for n in own:
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
            targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)]
            for t in _flat_names([t for t in targets if t is not None]):
                bindings.setdefault(t, []).append(n)
        elif isinstance(n, ast.NamedExpr):
            bindings.setdefault(n.target.id, []).append(n)
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    nested_reads = {
        x.id
        for st in fn.body
        for n in walk(st)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
        for x in ast.walk(n)
        if isinstance(x, ast.Name)
    }
    candidates = {
        name
        for name, where in bindings.items()
        if name not in params
        and name not in reads
        and name not in nested_reads
        and all(_binds_a_fresh_container(b) for b in where)
    }
    parents: dict[int, ast.AST] = {}
    for n in own:
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    for n in own:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in candidates:
            if not _stays(n, parents.get(id(n)), parents, modules):
                candidates.discard(n.id)
    return candidates


def _flat_names(targets: list[ast.expr]) -> list[str]:
    """The names a binding's targets bind (``a, (b, *c) = ...``), not ``xs[i]`` or ``o.a``."""
    return [t.id for t in _flat(targets) if isinstance(t, ast.Name)]


_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _binds_a_fresh_container(b: ast.AST) -> bool:
    if isinstance(b, ast.AugAssign):
        return True
    if not isinstance(b, ast.Assign) or len(b.targets) != 1:
        return False
    if not isinstance(b.targets[0], ast.Name):
        return False
    v = b.value
    if isinstance(v, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    return (
        isinstance(v, ast.Call)
        and isinstance(v.func, ast.Name)
        and v.func.id in ("list", "dict", "set")
    )


def _stays(n: ast.Name, p: ast.AST | None, parents: dict[int, ast.AST], modules: set[str]) -> bool:
    """Whether this read of a container keeps it from anyone else's hands."""
    if isinstance(p, (ast.Attribute, ast.Subscript)) and p.value is n:
        return True
    if isinstance(p, (ast.For, ast.comprehension)) and p.iter is n:
        return True
    if isinstance(p, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Return)):
        return not isinstance(p, ast.BoolOp)  # (``a or xs`` is xs itself)
    if isinstance(p, ast.AugAssign) and p.target is n:
        return True
    if (
        isinstance(p, ast.Call)
        and isinstance(p.func, ast.Name)
        and p.func.id in _KEEPS_NOTHING
        and n in p.args
    ):
        return True
    if (
        isinstance(p, ast.Call)
        and isinstance(p.func, ast.Attribute)
        and p.func.attr in CHANGES_ITS_FIRST_ARGUMENT
        and isinstance(p.func.value, ast.Name)
        and p.func.value.id in modules
        and p.args
        and p.args[0] is n
    ):
        return True  # (``heapq.heappush(xs, v)``: changed, not kept)
    if (
        isinstance(p, ast.Call)
        and isinstance(p.func, ast.Name)
        and p.func.id in ("zip", "enumerate")
        and isinstance(parents.get(id(p)), (ast.For, ast.comprehension))
        and parents[id(p)].iter is p  # type: ignore[attr-defined]
    ):
        return True
    return False


def as_generator_function(e: ast.GeneratorExp) -> ast.FunctionDef:
    """The generator function Python's definition of ``e`` names, for :func:`first_effect`
    (its first iterable, evaluated where ``e`` is, left out)."""
    body: list[ast.stmt] = [ast.Expr(value=ast.Yield(value=e.elt))]
    for i, gen in reversed(list(enumerate(e.generators))):
        for cond in reversed(gen.ifs):
            body = [ast.If(test=cond, body=body, orelse=[])]
        iterable = ast.Tuple(elts=[], ctx=ast.Load()) if i == 0 else gen.iter
        body = [ast.For(target=gen.target, iter=iterable, body=body, orelse=[])]
    fn = function_def("_genexpr", [], body)
    return ast.fix_missing_locations(ast.copy_location(fn, e))


def _own_names(gen: ast.AST) -> set[str]:
    own: set[str] = set()
    for n in ast.walk(gen):
        if isinstance(n, ast.arg):
            own.add(n.arg)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            own.add(n.id)
    return own


def outside_reads(gen: ast.AST) -> list[ast.Name]:
    """The reads of names ``gen`` does not bind itself (its parameters, targets, locals)."""
    own = _own_names(gen)
    return [
        n
        for n in ast.walk(gen)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
    ]


def described(gen: ast.FunctionDef | ast.GeneratorExp) -> str:
    if isinstance(gen, ast.GeneratorExp):
        return "the generator expression"
    return f"the generator function {gen.name!r}"


def refused_effect(
    gen: ast.FunctionDef, effect: tuple[ast.AST, str], qualname: str, filename: str
) -> UnsupportedSyntaxError:
    node, what = effect
    line = getattr(node, "lineno", None) or getattr(gen, "lineno", None)
    err = UnsupportedSyntaxError(
        f"the generator function {gen.name!r} in {qualname!r} ({filename}, line {line if line else '?'}) "
        f"{what}: at a higher order of differentiation (hessian, grad of grad) dplus runs a generator "
        "to completion where it is made, so this would happen before the code that runs between "
        "the generator's making and its reading, and all of it even when the reading stops early; "
        "Python's generator does it as it is read. Make the change outside the generator, or "
        "take the generator's values as a list where it is made"
    )
    err.filename = filename
    err.lineno = line
    return err
