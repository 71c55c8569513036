"""Random, valid, terminating Python programs over dplus's supported language (SPEC section 7).

A program is a module: module-level helpers (``@dplus.define_dplus`` functions, recursive ones
among them, and a small class) and one function ``f`` whose arguments are described by
``Program.args``. ``f`` returns a float.

The generator is built around two pluggable tables:

- ``KINDS``: the value model. A ``Kind`` knows how to make an argument value of its type, an
  expression of its type, and a float expression that reads a variable of its type. A NumPy
  grammar adds a kind (``"array"``) here.
- ``STATEMENTS`` and ``FLOAT_EXPRESSIONS``: productions, each tagged with the feature family it
  belongs to (``FEATURES``); a run can include or exclude families.

Invariants that keep programs valid: a list variable always has at least one element (every
shrinking operation is guarded by ``len(xs) > 1``); a dict variable always has the keys ``'a'``
and ``'b'``; loops are bounded (``range`` of a small constant, a ``while`` with a counter
incremented first, iteration over a container not grown inside the loop body); values are
kept bounded by ``tanh``/``sin`` and small constants.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# One flag per construct family.  A run takes a subset.
FEATURES = (
    "arith",  # + - * / ** and constants
    "math",  # math.sin, tanh, exp, log, sqrt, hypot, abs, min, max
    "branches",  # if/elif/else, conditional expressions, and/or/not, chained comparisons, match
    "loops",  # for over range/list, while, break/continue/else on loops
    "early_return",  # return from inside branches and loops
    "closures",  # nested def reading outer variables, nonlocal
    "lambdas",  # every lambda (map/filter/reduce's too), default values
    "varargs",  # *args / **kwargs, calls with * and **
    "lists",  # lists and every mutating method
    "tuples",  # tuples, unpacking, starred unpacking
    "dicts",  # dicts and their methods, merges
    "objects",  # instances of a module-level class, attributes, define_dplus methods
    "comprehensions",  # list/dict comprehensions, generator expressions
    "iterators",  # zip, enumerate, sorted, reversed, functools.reduce, map
    "exceptions",  # raise / try / except / finally
    "recursion",  # recursive @define_dplus module-level helpers
    "helpers",  # non-recursive @define_dplus module-level helpers
    "misc",  # walrus, assert, with, del, pass, f-strings
    "numpy",  # float64 arrays of shapes (3,), (2,), (2, 3), (3, 3): ufuncs, broadcasting, reductions,
    # @ / dot / einsum, reshapes, slicing and fancy indexing, rows, stack/concatenate, where
    # the Python of issue #28:
    "sets",  # set displays, add/update, set operators, frozenset, sets of integer constants
    "globals",  # global TOTAL; TOTAL = ...; read back in the same call
    "heapq_bisect",  # heapq push/pop/pushpop/heapify/nsmallest/merge, bisect/insort on float lists
    "nested_decorators",  # @functools.cache / lru_cache / a user decorator on a nested def
    "generators",  # nested generator functions (yield, yield from) consumed by sum/max/sorted/list/for
    "container_subclasses",  # list/Counter subclasses overriding methods, calling the builtin
    "lazy_generators",  # generators taken lazily: next, send, partly consumed, endless, islice,
    # yield from with a return value, state changed between yields, close
    "local_classes",  # class statements inside f: class attributes, methods, __add__/__mul__,
    # inheritance with super(), properties
)

# Single constructs inside the families, each with a flag of its own, so that a run can leave
# out just the construct of an open bug (tests/fuzz/test_fuzz_budget.py, OPEN_BUGS).
# A construct is generated when its flag and its family are both on.
CONSTRUCTS = {
    "keyword_calls": "arith",  # f(x, w=y), dict(a=x), d.update(c=x)
    "lambda_default_from_variable": "lambdas",  # lambda u, w=x: ...
    "dict_merge": "dicts",  # d | {...}, d |= {...}, {**d, ...}
    "return_in_loop_with_else": "early_return",  # for ...: return ... / else: ...
    "loop_variable_after_loop": "loops",  # for i in range(k): ... / v = i
    "closure_in_branch": "closures",  # if ...: x = ...; def g(): ... x ...
    "closure_reads_display": "closures",  # xs = [a, b]; def g(): ... xs ...
    "list_shrinking": "lists",  # xs.pop(), del xs[0], xs.remove, xs.clear(), xs[:] = xs[1:]
    "extend_with_itself": "lists",  # xs.extend(xs)
    "write_list_iterated_by_builtin": "iterators",  # for a, b in zip(xs, ys): xs[0] = ...
    "lazy_iteration_observed": "iterators",  # for a in map(lambda u: u * x, xs): x = ...
    "lazy_escapes": "comprehensions",  # a generator expression or zip/map given to a helper
    # that reads it twice or in part, kept and read after a variable changed, next/any of one
    "closure_after_early_return": "closures",  # if ...: return ... / g = lambda u: x
    "del_variable": "misc",  # t = xs[0]; del t
    "cached_nested_def": "closures",  # @functools.lru_cache on a nested def
    "generator_function": "misc",  # def gen(): yield ... (SPEC 7: supported)
    "class_statement": "misc",  # class Local: ... inside f (SPEC 7: supported)
    "global_write": "misc",  # global COUNTER; COUNTER += 1 (SPEC 7: supported)
    "return_in_try_with_else": "exceptions",  # try: return ... / except ...: ... / else: ...
    "with_statement": "misc",  # with contextlib.nullcontext(): ...
    "float32_arrays": "numpy",  # some array arguments are float32
    "array_inplace_local": "numpy",  # a = X * 1.0; then in place: a += Y, a[i] = v, out=, np.add.at, ...
    "array_inplace_argument": "numpy",  # in place on an argument, a view, rows, a helper's parameter
}
ALL = FEATURES + tuple(CONSTRUCTS)


@dataclass
class Var:
    name: str
    kind: str
    writable: bool = True
    display: bool = False  # bound to a list/tuple/dict display


@dataclass
class Program:
    """A generated module: its source, the name of the function, and its arguments (an
    object argument is described as ``("Pt", a, b)``: the checker builds it with the
    module's own class)."""

    source: str
    args: tuple
    features: frozenset
    entry: str = "f"
    seed: int = 0


class Kind:
    """The value model of one type. Subclasses are registered in ``KINDS``."""

    name = ""
    feature = ""
    prefix = "v"
    as_argument = True

    def argument(self, rng: random.Random):
        raise NotImplementedError

    def expression(self, g: Generator, depth: int) -> str:
        """A fresh value of this kind (never an alias of a variable)."""
        raise NotImplementedError

    def read_float(self, g: Generator, name: str) -> str:
        """A float expression that depends on the variable ``name`` of this kind."""
        raise NotImplementedError


def small_float(rng: random.Random) -> float:
    return round(rng.uniform(-1.6, 1.6), 6)


class FloatKind(Kind):
    name, feature, prefix = "float", "arith", "x"

    def argument(self, rng):
        return small_float(rng)

    def expression(self, g, depth):
        return g.float_expr(depth)

    def read_float(self, g, name):
        return name


class ListKind(Kind):
    name, feature, prefix = "flist", "lists", "xs"

    def argument(self, rng):
        return [small_float(rng) for _ in range(rng.randint(1, 4))]

    def expression(self, g, depth):
        r = g.rng
        other = g.pick_var("flist")
        choices = [
            lambda: "[" + ", ".join(g.float_expr(depth - 1) for _ in range(r.randint(1, 3))) + "]"
        ]
        if other:
            choices += [
                lambda: f"list({other})",
                lambda: f"{other}[:]",
                lambda: f"{other}.copy()",
                lambda: f"{other} + [{g.float_expr(depth - 1)}]",
            ]
            if g.has("comprehensions"):
                v = g.fresh("e")
                choices.append(
                    lambda: (
                        f"[{g.with_locals({v: 'float'}, lambda: g.float_expr(depth - 1))} for {v} in {other}]"
                    )
                )
            if g.has("iterators"):
                choices += [lambda: f"sorted({other})", lambda: f"list(reversed({other}))"]
                other2 = g.pick_var("flist")
                if other2 and g.has("comprehensions"):
                    a, b = g.fresh("a"), g.fresh("b")
                    choices.append(lambda: f"[{a} * {b} for {a}, {b} in zip({other}, {other2})]")
        return r.choice(choices)()

    def read_float(self, g, name):
        r = g.rng
        choices = [
            f"{name}[0]",
            f"{name}[-1]",
            f"sum({name})",
            f"{name}[len({name}) // 2]",
            f"sum({name}[1:], 0.25)",
            f"{name}[::-1][0]",
        ]
        if g.has("iterators") and g.has("lambdas"):
            u = g.fresh("u")
            choices.append(f"sum(filter(lambda {u}: {u} > 0.0, {name}), 0.5)")
        if g.has("math"):
            choices += [f"math.fsum({name})", f"math.prod({name}[:2])"]
        if g.has("math"):
            choices += [f"max({name})", f"min({name})"]
        if g.has("comprehensions"):
            v = g.fresh("e")
            choices.append(f"sum({v} * {v} for {v} in {name})")
        return r.choice(choices)


class TupleKind(Kind):
    name, feature, prefix = "ftuple", "tuples", "t"

    def argument(self, rng):
        return tuple(small_float(rng) for _ in range(rng.randint(1, 3)))

    def expression(self, g, depth):
        r = g.rng
        other = g.pick_var("flist")
        choices = [
            lambda: (
                "(" + "".join(g.float_expr(depth - 1) + ", " for _ in range(r.randint(1, 3))) + ")"
            )
        ]
        if other:
            choices.append(lambda: f"tuple({other})")
        return r.choice(choices)()

    def read_float(self, g, name):
        return g.rng.choice(
            [
                f"{name}[0]",
                f"{name}[-1]",
                f"sum({name})",
                f"sum({name}[1:], 0.5)",
                f"{name}[-1:][0]",
            ]
        )


class DictKind(Kind):
    name, feature, prefix = "fdict", "dicts", "d"

    def argument(self, rng):
        d = {"a": small_float(rng), "b": small_float(rng)}
        if rng.random() < 0.3:
            d["c"] = small_float(rng)
        return d

    def expression(self, g, depth):
        r = g.rng
        other = g.pick_var("fdict")
        choices = [lambda: f"{{'a': {g.float_expr(depth - 1)}, 'b': {g.float_expr(depth - 1)}}}"]
        if g.has("keyword_calls"):
            choices.append(
                lambda: f"dict(a={g.float_expr(depth - 1)}, b={g.float_expr(depth - 1)})"
            )
        if other:
            choices += [lambda: f"dict({other})", lambda: f"{other}.copy()"]
            if g.has("dict_merge"):
                choices += [
                    lambda: f"{{**{other}, 'a': {g.float_expr(depth - 1)}}}",
                    lambda: f"{other} | {{'b': {g.float_expr(depth - 1)}}}",
                ]
            if g.has("comprehensions"):
                k, v = g.fresh("k"), g.fresh("v")
                choices.append(
                    lambda: (
                        f"{{{k}: {g.with_locals({v: 'float'}, lambda: g.float_expr(depth - 1))} for {k}, {v} in {other}.items()}}"
                    )
                )
        return r.choice(choices)()

    def read_float(self, g, name):
        return g.rng.choice(
            [
                f"{name}['a']",
                f"{name}['b']",
                f"sum({name}.values())",
                f"{name}.get('c', {name}['a'])",
            ]
        )


class ObjectKind(Kind):
    name, feature, prefix = "obj", "objects", "p"

    def argument(self, rng):
        raise NotImplementedError("objects are built by the module, see Generator.argument_text")

    def expression(self, g, depth):
        return f"Pt({g.float_expr(depth - 1)}, {g.float_expr(depth - 1)})"

    def read_float(self, g, name):
        return g.rng.choice([f"{name}.a", f"{name}.b", f"{name}.norm2()", f"{name}.a * {name}.b"])


class IntKind(Kind):
    name, feature, prefix = "int", "arith", "n"

    def argument(self, rng):
        return rng.randint(0, 3)

    def expression(self, g, depth):
        return str(g.rng.randint(0, 3))

    def read_float(self, g, name):
        return f"0.25 * {name}"


KINDS: dict[str, Kind] = {
    k.name: k for k in (FloatKind(), ListKind(), TupleKind(), DictKind(), ObjectKind(), IntKind())
}

# Values a Pt argument is built from: the checker rebuilds arguments from this description.
PT_CLASS = """
class Pt:
    def __init__(self, a, b):
        self.a = a
        self.b = b

    @dplus.define_dplus
    def norm2(self):
        return self.a * self.a + self.b * self.b

    def __repr__(self):
        return f"Pt({self.a!r}, {self.b!r})"
"""

# Subclasses of builtin containers whose methods override the builtin's and reach it through
# super() or the base class (the container_subclasses family).
SUBCLASSES = """
class ScaledList(list):
    @dplus.define_dplus
    def append(self, v):
        super().append(v * 1.5)


class ShiftedList(list):
    @dplus.define_dplus
    def append(self, v):
        list.append(self, v + 0.5)

    @dplus.define_dplus
    def extend(self, vs):
        for v in vs:
            self.append(v)


class Tally(collections.Counter):
    @dplus.define_dplus
    def add(self, key, v):
        self.update({key: v * 2.0})
"""

CONSTANTS = ("0.5", "1.5", "-0.75", "2.0", "0.25", "3", "1", "-1.25", "SCALE")


class Generator:
    """One program per call of ``program``; all randomness from ``rng``."""

    def __init__(
        self, seed: int, features=ALL, *, float_only: bool | None = None, max_statements: int = 7
    ):
        self.seed = seed
        self.rng = random.Random(seed)
        self.features = frozenset(features)
        self.float_only = float_only
        self.max_statements = max_statements
        self.counter = 0
        self.helpers: list[str] = []  # module-level helper sources
        self.uses_subclasses = False  # SUBCLASSES is emitted
        self.helper_names: list[tuple[str, int]] = []  # (name, number of float parameters)
        self.scopes: list[dict[str, Var]] = [{}]
        self.lines: list[str] = []
        self.indent = 1
        self.loop_depth = 0
        self.func_depth = 0  # nested def depth inside f
        self.uses_pt = False
        self.no_grow = False  # inside a loop over a container: no container may grow
        self.no_write = False  # inside a loop over a builtin's view of a container (write_list_iterated_by_builtin off)
        self.in_loop_with_else = False
        self.in_try_with_else = False
        self.in_branch = False
        self.declared_total = False  # ``global TOTAL`` emitted in f (once: later lines use it)
        self.returned_before = False  # a return inside a block came earlier in this function
        self.array_params: set[str] = set()  # array arguments of f
        self.array_helpers: list[str] = []  # module-level helpers taking an array and a float

    # ----- scope -----------------------------------------------------------------------
    def has(self, feature: str) -> bool:
        family = CONSTRUCTS.get(feature)
        return feature in self.features and (family is None or family in self.features)

    def closure_scope(self) -> None:
        """The scope a nested function or lambda body sees: outer names read-only, and without
        displays when closure_reads_display is off."""
        for v in list(self.scope.values()):
            if v.display and not self.has("closure_reads_display"):
                del self.scope[v.name]
            else:
                self.scope[v.name] = Var(v.name, v.kind, writable=False, display=v.display)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @property
    def scope(self) -> dict[str, Var]:
        return self.scopes[-1]

    def vars_of(self, kind: str, writable: bool = False) -> list[str]:
        return [
            v.name for v in self.scope.values() if v.kind == kind and (v.writable or not writable)
        ]

    def pick_var(self, kind: str, writable: bool = False) -> str | None:
        names = self.vars_of(kind, writable)
        return self.rng.choice(names) if names else None

    def bind(self, name: str, kind: str, display: bool = False) -> None:
        self.scope[name] = Var(name, kind, display=display)

    def with_locals(self, names: dict[str, str], make: Callable[[], str]) -> str:
        saved = dict(self.scope)
        for n, k in names.items():
            self.scope[n] = Var(n, k, writable=False)
        try:
            return make()
        finally:
            self.scope.clear()
            self.scope.update(saved)

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def block(self, body: Callable[[], None], keep_bindings: bool = False) -> None:
        """An indented block; names first bound inside are forgotten after it."""
        saved = dict(self.scope)
        self.indent += 1
        start = len(self.lines)
        body()
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1
        if not keep_bindings:
            self.scope.clear()
            self.scope.update(saved)

    # ----- expressions -------------------------------------------------------------------
    def float_expr(self, depth: int = 2) -> str:
        productions = [(w, fn) for feat, w, fn in FLOAT_EXPRESSIONS if feat in self.features]
        if depth <= 0:
            productions = [(w, fn) for w, fn in productions if getattr(fn, "leaf", False)]
        total = sum(w for w, _ in productions)
        x = self.rng.uniform(0, total)
        for w, fn in productions:
            x -= w
            if x <= 0:
                out = fn(self, depth)
                if out is not None:
                    return out
                break
        return self.float_leaf()

    def float_leaf(self) -> str:
        floats = self.vars_of("float")
        if floats and self.rng.random() < 0.8:
            return self.rng.choice(floats)
        return self.rng.choice(CONSTANTS)

    def any_float_read(self) -> str:
        """A float expression reading some variable of any kind in scope."""
        candidates = [v for v in self.scope.values() if v.kind in KINDS]
        if not candidates:
            return self.float_leaf()
        v = self.rng.choice(candidates)
        return KINDS[v.kind].read_float(self, v.name)

    def condition(self, depth: int = 1) -> str:
        r = self.rng
        a = self.float_expr(depth)
        c = r.choice(("0.0", "0.5", "-0.5", "1.0"))
        forms = [f"{a} > {c}", f"{a} < {c}", f"{a} >= {self.float_leaf()}"]
        if self.has("branches"):
            forms += [
                f"{c} < {a} < 2.0",
                f"not {a} > {c}",
                f"{a} > {c} and {self.float_expr(0)} < 1.0",
                f"{a} < {c} or {self.float_expr(0)} > 0.8",
            ]
        ints = self.vars_of("int")
        if ints:
            forms.append(f"{r.choice(ints)} % 2 == 0")
        lists = self.vars_of("flist")
        if lists:
            forms.append(f"len({r.choice(lists)}) > 2")
        dicts = self.vars_of("fdict")
        if dicts:
            forms.append(f"'c' in {r.choice(dicts)}")
        return r.choice(forms)

    # ----- statements --------------------------------------------------------------------
    def statements(self, n: int) -> None:
        for _ in range(n):
            self.statement()

    def statement(self) -> None:
        depth_penalty = self.indent - 1
        productions = [
            (w / (1 + 2 * depth_penalty) if compound else w, fn)
            for feat, w, compound, fn in STATEMENTS
            if feat in self.features
        ]
        total = sum(w for w, _ in productions)
        x = self.rng.uniform(0, total)
        for w, fn in productions:
            x -= w
            if x <= 0:
                if fn(self) is not False:
                    return
                break
        self.assign_float()

    def assign_float(self) -> None:
        targets = self.vars_of("float", writable=True)
        r = self.rng
        if targets and r.random() < 0.4:
            t = r.choice(targets)
            op = r.choice(("=", "+=", "-=", "*="))
            e = self.float_expr(2)
            if op == "*=" or (self.loop_depth and r.random() < 0.6):
                e = f"math.tanh({e})"
            self.emit(f"{t} {op} {e}")
            return
        name = self.fresh("v")
        self.emit(f"{name} = {self.float_expr(2)}")
        self.bind(name, "float")

    # ----- module ------------------------------------------------------------------------
    def argument_kinds(self) -> list[str]:
        r = self.rng
        n_float = r.randint(1, 3)
        kinds = ["float"] * n_float
        if self.float_only:
            return kinds
        extra = [
            k.name
            for k in KINDS.values()
            if k.name not in ("float", "int") and k.feature in self.features and k.as_argument
        ]
        for k in extra:
            if r.random() < 0.45:
                kinds.append(k)
        if r.random() < 0.2:
            kinds.append("int")
        r.shuffle(kinds)
        return kinds

    def argument_value(self, kind: str):
        if kind == "obj":
            return ("Pt", small_float(self.rng), small_float(self.rng))
        if kind in ARRAY_SHAPES:
            value = KINDS[kind].argument(self.rng)
            if self.has("float32_arrays") and self.rng.random() < 0.3:
                value = value.astype(np.float32)
            return value
        return KINDS[kind].argument(self.rng)

    def program(self) -> Program:
        kinds = self.argument_kinds()
        params = []
        for k in kinds:
            name = self.fresh(KINDS[k].prefix)
            params.append(name)
            self.bind(name, k)
            if k == "obj":
                self.uses_pt = True
            if k in ARRAY_SHAPES:
                self.array_params.add(name)
        values = tuple(self.argument_value(k) for k in kinds)
        self.statements(self.rng.randint(2, self.max_statements))
        result = self.final_expr()
        # NumPy scalars (unpacked elements, np.float64 arithmetic) must leave f as a float
        self.emit(f"return float({result})" if "numpy" in self.features else f"return {result}")
        body = self.lines
        head = [
            "import math",
            "import functools",
            "import contextlib",
            "import itertools",
            "import heapq",
            "import collections",
            "import bisect",
            "import numpy as np",
            "import dplus",
            "",
            "SCALE = 0.75",
            "COUNTER = 0",
            "TOTAL = 0.0",
            "",
        ]
        if self.uses_pt or any(v.kind == "obj" for v in self.scope.values()):
            head.append(PT_CLASS)
        if self.uses_subclasses:
            head.append(SUBCLASSES)
        src = "\n".join(head + self.helpers + [f"def f({', '.join(params)}):"] + body) + "\n"
        return Program(source=src, args=values, features=self.features, seed=self.seed)

    def final_expr(self) -> str:
        parts = []
        for v in list(self.scope.values()):
            if v.kind in KINDS and self.rng.random() < 0.7:
                parts.append(KINDS[v.kind].read_float(self, v.name))
        if not parts:
            parts.append(self.float_expr(1))
        return " + ".join(parts)


def generate(seed: int, features=ALL, *, float_only: bool | None = None) -> Program:
    """The program of ``seed`` (the same seed and features give the same program)."""
    return Generator(seed, features, float_only=float_only).program()


# ----- float expression productions --------------------------------------------------------
def leaf(fn):
    fn.leaf = True
    return fn


@leaf
def fx_leaf(g, depth):
    return g.float_leaf()


@leaf
def fx_read(g, depth):
    return g.any_float_read()


def fx_binop(g, depth):
    a, b = g.float_expr(depth - 1), g.float_expr(depth - 1)
    op = g.rng.choice(("+", "-", "*", "*", "/", "**"))
    if op == "/":
        return f"({a}) / (1.0 + ({b}) ** 2)"
    if op == "**":
        return f"({a}) ** {g.rng.choice(('2', '3', '2.0'))}"
    return f"({a} {op} {b})"


def fx_math(g, depth):
    a = g.float_expr(depth - 1)
    r = g.rng
    forms = [
        f"math.sin({a})",
        f"math.cos({a})",
        f"math.tanh({a})",
        f"math.exp(math.tanh({a}))",
        f"math.sqrt(1.0 + ({a}) ** 2)",
        f"math.log(1.0 + ({a}) * ({a}))",
        f"math.atan({a})",
        f"abs({a})",
        f"max({a}, {g.float_expr(depth - 1)})",
        f"min({a}, {g.float_expr(depth - 1)})",
        f"math.hypot({a}, {g.float_expr(depth - 1)})",
        f"math.pow({a}, 2)",
        f"math.fabs({a})",
        f"math.atan2({a}, 1.5 + math.cos({g.float_expr(depth - 1)}))",
        f"math.log1p(({a}) ** 2)",
        f"math.expm1(math.sin({a}))",
        f"math.erf({a})",
        f"math.asinh({a})",
        f"math.degrees({a}) * 0.01",
        f"math.copysign({a}, 1.0)",
        f"math.fsum([{a}, {g.float_expr(depth - 1)}])",
        f"math.prod([{a}, {g.float_expr(depth - 1)}])",
    ]
    return r.choice(forms)


def fx_ifexp(g, depth):
    return f"({g.float_expr(depth - 1)} if {g.condition(0)} else {g.float_expr(depth - 1)})"


def fx_helper(g, depth):
    name, arity = g.helper(recursive=False)
    return f"{name}({', '.join(g.float_expr(depth - 1) for _ in range(arity))})"


def fx_recursion(g, depth):
    name, arity = g.helper(recursive=True)
    return f"{name}({g.float_expr(depth - 1)}, {g.rng.randint(0, 3)})"


def in_closure(g, names: dict[str, str], make):
    """``make()`` in the scope of a lambda body with parameters ``names``."""
    saved = dict(g.scope)
    g.closure_scope()
    try:
        return g.with_locals(names, make)
    finally:
        g.scope.clear()
        g.scope.update(saved)


def fx_lambda_call(g, depth):
    if not closure_allowed(g):
        return None
    u = g.fresh("u")
    body = in_closure(g, {u: "float"}, lambda: g.float_expr(depth - 1))
    return f"(lambda {u}: {body})({g.float_expr(depth - 1)})"


def fx_callable(g, depth):
    fns = g.vars_of("fn1")
    if not fns:
        return None
    return f"{g.rng.choice(fns)}({g.float_expr(depth - 1)})"


def fx_genexpr(g, depth):
    lists = g.vars_of("flist") + g.vars_of("ftuple")
    if not lists:
        return None
    e = g.fresh("e")
    body = g.with_locals({e: "float"}, lambda: g.float_expr(depth - 1))
    xs = g.rng.choice(lists)
    if g.rng.random() < 0.4:
        return f"sum({body} for {e} in {xs} if {e} > {g.rng.choice(('0.0', '-0.5'))})"
    return f"sum([{body} for {e} in {xs}])"


def fx_reduce(g, depth):
    lists = g.vars_of("flist") + g.vars_of("ftuple")
    if not lists or not closure_allowed(g) or not g.has("lambdas"):
        return None
    a, b = g.fresh("a"), g.fresh("b")
    body = in_closure(g, {a: "float", b: "float"}, lambda: g.float_expr(depth - 1))
    return f"functools.reduce(lambda {a}, {b}: {body}, {g.rng.choice(lists)}, {g.float_expr(0)})"


FLOAT_EXPRESSIONS: list[tuple[str, float, Callable]] = [
    ("arith", 4.0, fx_leaf),
    ("arith", 3.0, fx_read),
    ("arith", 4.0, fx_binop),
    ("math", 2.5, fx_math),
    ("branches", 0.6, fx_ifexp),
    ("helpers", 0.5, fx_helper),
    ("recursion", 0.3, fx_recursion),
    ("lambdas", 0.4, fx_lambda_call),
    ("closures", 0.8, fx_callable),
    ("lambdas", 0.8, fx_callable),
    ("comprehensions", 0.6, fx_genexpr),
    ("iterators", 0.4, fx_reduce),
]


# ----- helpers at module level -------------------------------------------------------------
def _helper(self: Generator, recursive: bool) -> tuple[str, int]:
    existing = [h for h in self.helper_names if h[0].startswith("rec" if recursive else "h")]
    if existing and self.rng.random() < 0.5:
        return self.rng.choice(existing)
    sub = Generator(
        self.rng.randint(0, 2**31),
        self.features - {"closures", "lambdas", "varargs", "early_return"}
        if not recursive
        else {"arith", "math"},
        float_only=True,
        max_statements=2,
    )
    sub.helper_names = list(self.helper_names)  # may call earlier helpers, never later ones
    sub.counter = self.counter + 1000
    if recursive and self.rng.random() < 0.3:
        even, odd = self.fresh("rec_even"), self.fresh("rec_odd")
        src = [
            "@dplus.define_dplus",
            f"def {even}(a, n):",
            f"    return a if n <= 0 else {odd}(math.sin(a) * 1.5, n - 1) + a",
            "",
            "@dplus.define_dplus",
            f"def {odd}(a, n):",
            f"    return a * a if n <= 0 else {even}(a * 0.5, n - 1) * math.cos(a)",
            "",
        ]
        name, arity = even, 1
    elif recursive:
        name = self.fresh("rec")
        sub.bind("a", "float")
        sub.indent = 2
        step = sub.float_expr(2)
        sub.lines = []
        src = [
            "@dplus.define_dplus",
            f"def {name}(a, n):",
            "    if n <= 0:",
            f"        return {self.rng.choice(('a', 'math.sin(a)', 'a * a'))}",
            f"    return {name}(math.tanh({step}), n - 1) {self.rng.choice(('+', '*'))} {self.rng.choice(('a', '0.5', 'math.cos(a)'))}",
            "",
        ]
        arity = 1
    else:
        name = self.fresh("h")
        arity = self.rng.randint(1, 2)
        params = ["a", "b"][:arity]
        for p in params:
            sub.bind(p, "float")
        sub.statements(self.rng.randint(0, 2))
        ret = sub.float_expr(2)
        src = (
            ["@dplus.define_dplus", f"def {name}({', '.join(params)}):"]
            + sub.lines
            + [f"    return {ret}", ""]
        )
        self.helpers.extend(h for h in sub.helpers if h not in self.helpers)
        self.helper_names.extend(h for h in sub.helper_names if h not in self.helper_names)
    self.counter = sub.counter + 1
    self.uses_pt = self.uses_pt or sub.uses_pt
    self.helpers.append("\n".join(src))
    self.helper_names.append((name, arity))
    return name, arity


Generator.helper = _helper


# ----- statement productions ---------------------------------------------------------------
def st_assign(g):
    g.assign_float()


def st_if(g):
    saved, g.in_branch = g.in_branch, True
    g.emit(f"if {g.condition()}:")
    g.block(lambda: g.statements(g.rng.randint(1, 2)))
    if g.rng.random() < 0.3:
        g.emit(f"elif {g.condition()}:")
        g.block(lambda: g.statements(1))
    if g.rng.random() < 0.6:
        g.emit("else:")
        g.block(lambda: g.statements(g.rng.randint(1, 2)))
    g.in_branch = saved


def st_match(g):
    ints = g.vars_of("int")
    subject = g.rng.choice(ints) if ints else "round(abs(" + g.float_expr(1) + "))"
    g.emit(f"match {subject}:")
    saved, g.in_branch = g.in_branch, True
    g.indent += 1
    for case in ("0", "1 | 2", "_"):
        g.emit(f"case {case}:")
        g.block(lambda: g.statements(1))
    g.indent -= 1
    g.in_branch = saved


def loop_body(g, loop_var: str | None = None, kind: str = "int"):
    def body():
        if loop_var:
            g.bind(loop_var, kind)
            g.scope[loop_var].writable = False
        g.loop_depth += 1
        n = g.rng.randint(1, 3)
        for i in range(n):
            r = g.rng.random()
            if r < 0.15:
                g.emit(f"if {g.condition(0)}:")
                g.block(lambda: g.emit(g.rng.choice(("break", "continue"))))
            else:
                g.statement()
        g.loop_depth -= 1

    g.block(body)


def st_for_range(g):
    i = g.fresh("i")
    k = g.rng.randint(1, 4)
    state = begin_loop(g)
    g.emit(f"for {i} in range({k}):")
    loop_body(g, i, "int")
    loop_else(g, *state)
    if g.rng.random() < 0.3 and g.has("loop_variable_after_loop"):
        # the loop variable read after the loop (the loop ran at least once)
        v = g.fresh("v")
        g.emit(f"{v} = 0.5 * {i}")
        g.bind(v, "float")


def loop_else(g, has_else: bool, saved_flag: bool):
    g.in_loop_with_else = saved_flag
    if has_else:
        g.emit("else:")
        g.block(lambda: g.statements(1))


def begin_loop(g) -> tuple[bool, bool]:
    """Decide now whether the loop gets an ``else`` (returns in its body depend on it)."""
    has_else = g.rng.random() < 0.25
    saved = g.in_loop_with_else
    g.in_loop_with_else = saved or has_else
    return has_else, saved


def st_for_list(g):
    seqs = g.vars_of("flist") + g.vars_of("ftuple")
    if not seqs:
        return False
    xs = g.rng.choice(seqs)
    e = g.fresh("e")
    state = begin_loop(g)
    g.emit(f"for {e} in {xs}:")
    saved, g.no_grow = g.no_grow, True
    loop_body(g, e, "float")
    g.no_grow = saved
    loop_else(g, *state)


def st_for_iter(g):
    lists = g.vars_of("flist")
    if not lists:
        return False
    r = g.rng
    xs = r.choice(lists)
    ys = r.choice(lists + g.vars_of("ftuple"))
    form = r.choice(
        ("zip", "enumerate", "reversed", "sorted", "items", "map")
        if g.has("lambdas")
        else ("zip", "enumerate", "reversed", "sorted", "items")
    )
    if form == "items" and not g.vars_of("fdict"):
        return False
    state = begin_loop(g)
    saved, g.no_grow = g.no_grow, True
    saved_write = g.no_write
    g.no_write = g.no_write or (form != "sorted" and not g.has("write_list_iterated_by_builtin"))
    if form == "zip":
        a, b = g.fresh("a"), g.fresh("b")
        g.emit(f"for {a}, {b} in zip({xs}, {ys}):")
        loop_body_multi(g, {a: "float", b: "float"})
    elif form == "enumerate":
        i, a = g.fresh("i"), g.fresh("a")
        g.emit(f"for {i}, {a} in enumerate({xs}):")
        loop_body_multi(g, {i: "int", a: "float"})
    elif form == "items":
        ds = g.vars_of("fdict")
        k, v = g.fresh("k"), g.fresh("v")
        d = r.choice(ds)
        g.emit(f"for {k}, {v} in {d}.items():")
        loop_body_multi(g, {v: "float"})
    elif form == "map":
        a = g.fresh("a")
        u = g.fresh("u")
        lazy = g.has("lazy_iteration_observed") and closure_allowed(g)
        factor = g.float_leaf() if lazy else g.rng.choice(CONSTANTS)
        g.emit(f"for {a} in map(lambda {u}: {u} * {factor}, {xs}):")
        loop_body(g, a, "float")
    else:
        a = g.fresh("a")
        g.emit(f"for {a} in {form}({xs}):")
        loop_body(g, a, "float")
    g.no_grow = saved
    g.no_write = saved_write
    loop_else(g, *state)


def loop_body_multi(g, names: dict[str, str]):
    def body():
        for n, k in names.items():
            g.bind(n, k)
            g.scope[n].writable = False
        g.loop_depth += 1
        for _ in range(g.rng.randint(1, 3)):
            if g.rng.random() < 0.15:
                g.emit(f"if {g.condition(0)}:")
                g.block(lambda: g.emit(g.rng.choice(("break", "continue"))))
            else:
                g.statement()
        g.loop_depth -= 1

    g.block(body)


def st_while(g):
    k = g.fresh("k")
    state = begin_loop(g)
    g.emit(f"{k} = 0")
    g.emit(f"while {k} < {g.rng.randint(1, 4)}:")

    def body():
        g.emit(f"{k} += 1")
        g.loop_depth += 1
        for _ in range(g.rng.randint(1, 2)):
            if g.rng.random() < 0.2:
                g.emit(f"if {g.condition(0)}:")
                g.block(lambda: g.emit(g.rng.choice(("break", "continue"))))
            else:
                g.statement()
        g.loop_depth -= 1

    g.block(body)
    loop_else(g, *state)


def return_allowed(g) -> bool:
    if g.in_loop_with_else and not g.has("return_in_loop_with_else"):
        return False
    if g.in_try_with_else and not g.has("return_in_try_with_else"):
        return False
    return True


def st_early_return(g):
    if g.indent <= 1 or not return_allowed(g):
        return False
    g.returned_before = True
    g.emit(f"return {g.float_expr(2)}")


def st_return_if(g):
    if not return_allowed(g):
        return False
    g.returned_before = True
    g.emit(f"if {g.condition()}:")
    g.block(lambda: g.emit(f"return {g.any_float_read()} + {g.float_expr(1)}"))


def closure_allowed(g) -> bool:
    if g.returned_before and not g.has("closure_after_early_return"):
        return False
    return True


def st_closure(g):
    if g.in_branch and not g.has("closure_in_branch") or not closure_allowed(g):
        return False
    name = g.fresh("g")
    u = g.fresh("u")
    outer = g.vars_of("float", writable=True)
    nonlocal_var = g.rng.choice(outer) if outer and g.rng.random() < 0.5 and g.indent >= 1 else None
    if g.rng.random() < 0.15 and g.has("cached_nested_def"):
        g.emit("@functools.lru_cache(maxsize=None)")
    g.emit(f"def {name}({u}):")

    def body():
        saved = dict(g.scope)
        saved_flags = (
            g.in_loop_with_else,
            g.in_try_with_else,
            g.in_branch,
            g.no_write,
            g.returned_before,
        )
        g.in_loop_with_else = g.in_try_with_else = g.in_branch = g.no_write = g.returned_before = (
            False
        )
        g.closure_scope()
        if nonlocal_var:
            g.emit(f"nonlocal {nonlocal_var}")
            g.scope[nonlocal_var] = Var(nonlocal_var, "float", writable=True)
        g.bind(u, "float")
        g.func_depth += 1
        for _ in range(g.rng.randint(0, 2)):
            g.statement()
        if nonlocal_var:
            g.emit(f"{nonlocal_var} = {g.float_expr(1)}")
        g.emit(f"return {g.float_expr(2)}")
        g.func_depth -= 1
        g.in_loop_with_else, g.in_try_with_else, g.in_branch, g.no_write, g.returned_before = (
            saved_flags
        )
        g.scope.clear()
        g.scope.update(saved)

    g.indent += 1
    body()
    g.indent -= 1
    g.bind(name, "fn1")
    if g.rng.random() < 0.7:
        v = g.fresh("v")
        g.emit(f"{v} = {name}({g.float_expr(1)})")
        g.bind(v, "float")


def st_lambda(g):
    if not closure_allowed(g):
        return False
    name = g.fresh("g")
    u, w = g.fresh("u"), g.fresh("w")
    from_variable = g.rng.random() < 0.5 and g.has("lambda_default_from_variable")
    default = g.float_expr(1) if from_variable else g.rng.choice(CONSTANTS)
    body = in_closure(g, {u: "float", w: "float"}, lambda: g.float_expr(2))
    g.emit(f"{name} = lambda {u}, {w}={default}: {body}")
    g.bind(name, "fn1")
    v = g.fresh("v")
    if g.rng.random() < 0.5 and g.has("keyword_calls"):
        g.emit(f"{v} = {name}({g.float_expr(1)}, {w}={g.float_expr(1)})")
    else:
        g.emit(f"{v} = {name}({g.float_expr(1)})")
    g.bind(v, "float")


def st_varargs(g):
    name = g.fresh("va")
    r = g.rng
    extra = r.choice(("sum(kw.values())", "0.5 * len(kw)", "kw.get('a', 0.25)"))
    g.emit(f"def {name}(first, *rest, scale=1.0, **kw):")
    g.emit(f"    return first * scale + sum(rest) + {extra}")
    v = g.fresh("v")
    lists = g.vars_of("flist")
    dicts = g.vars_of("fdict")
    forms = [
        lambda: f"{name}({g.float_expr(1)})",
        lambda: f"{name}({g.float_expr(1)}, {g.float_expr(1)}, {g.float_expr(1)})",
    ]
    if g.has("keyword_calls"):
        forms.append(
            lambda: (
                f"{name}({g.float_expr(1)}, {g.float_expr(1)}, {g.float_expr(1)}, scale={g.float_expr(1)}, extra={g.float_expr(1)})"
            )
        )
    if lists:
        forms.append(lambda: f"{name}(*{r.choice(lists)})")
        if g.has("keyword_calls"):
            forms.append(lambda: f"{name}(*{r.choice(lists)}, scale={g.float_expr(1)})")
    if dicts and g.has("keyword_calls"):
        forms.append(lambda: f"{name}({g.float_expr(1)}, **{r.choice(dicts)})")
    g.emit(f"{v} = {r.choice(forms)()}")
    g.bind(v, "float")


def st_new_container(g, kind: str):
    name = g.fresh(KINDS[kind].prefix)
    value = KINDS[kind].expression(g, 2)
    g.emit(f"{name} = {value}")
    g.bind(name, kind, display=value[:1] in "[({")


def st_list_alias(g):
    xs = g.pick_var("flist")
    if not xs:
        return False
    name = g.fresh("xs")
    g.emit(f"{name} = {xs}")
    g.bind(name, "flist")


def st_list_mutate(g):
    xs = g.pick_var("flist")
    if not xs:
        st_new_container(g, "flist")
        return
    r = g.rng
    if g.no_write:
        return False
    grows_forbidden = g.no_grow or g.func_depth > 0
    rebinds = g.scope[xs].writable
    e = lambda: g.float_expr(1)
    safe = [
        lambda: f"{xs}[{r.choice(('0', '-1', f'len({xs}) // 2'))}] = {e()}",
        lambda: f"{xs}[0] += {e()}",
        lambda: f"{xs}[-1] *= math.tanh({e()})",
        lambda: f"{xs}.reverse()",
        lambda: f"{xs}.sort()",
        lambda: f"{xs}[:1] = [{e()}]",
    ]
    growing = [
        lambda: f"{xs}.append({e()})",
        lambda: f"{xs}.extend([{e()}, {e()}])",
        lambda: f"{xs}.insert({r.randint(-1, 2)}, {e()})",
        lambda: f"{xs}.extend({g.pick_var('flist')})",
        lambda: f"{xs}[1:1] = [{e()}, {e()}]",
    ]
    if rebinds:
        growing.append(lambda: f"{xs} += [{e()}]")
    if g.has("extend_with_itself"):
        growing.append(lambda: f"{xs}.extend({xs})")
    # (F6 needs the list read whole before: by a loop, a comprehension, sum, a closure, ...;
    # too many ways to track, so with the flag off no list shrinks)
    may_shrink = g.has("list_shrinking")
    shrinking = [
        lambda: f"{xs}.pop()",
        lambda: f"{xs}.pop(0)",
        lambda: f"del {xs}[0]",
        lambda: f"{xs}.remove({xs}[-1])",
        lambda: f"{xs}[:] = {xs}[1:]",
    ]
    if grows_forbidden:
        choice = r.choice(safe)
        g.emit(choice())
        return
    kind = r.random()
    if kind < 0.4:
        g.emit(r.choice(growing)())
    elif kind < 0.7 and may_shrink:
        g.emit(f"if len({xs}) > 1:")
        g.block(lambda: g.emit(r.choice(shrinking)()))
    elif kind < 0.8 and may_shrink:
        g.emit(f"{xs}.clear()")
        g.emit(f"{xs}.append({e()})")
    else:
        g.emit(r.choice(safe)())
    if r.random() < 0.2 and may_shrink:
        v = g.fresh("v")
        g.emit(f"{v} = {xs}.pop() if len({xs}) > 1 else {xs}[0]")
        g.bind(v, "float")


def st_list_index(g):
    xs = g.pick_var("flist")
    if not xs:
        return False
    v = g.fresh("v")
    ints = g.vars_of("int")
    idx = f"{g.rng.choice(ints)} % len({xs})" if ints else f"{g.rng.randint(0, 3)} % len({xs})"
    g.emit(f"{v} = {xs}[{idx}] * {g.float_expr(1)}")
    g.bind(v, "float")


def st_tuple(g):
    r = g.rng
    if r.random() < 0.5:
        a, b = g.fresh("v"), g.fresh("v")
        g.emit(f"{a}, {b} = {g.float_expr(1)}, {g.float_expr(1)}")
        g.bind(a, "float")
        g.bind(b, "float")
        return
    seqs = g.vars_of("flist") + g.vars_of("ftuple")
    if not seqs:
        st_new_container(g, "ftuple")
        return
    xs = r.choice(seqs)
    h, tl, v = g.fresh("v"), g.fresh("rest"), g.fresh("v")
    if r.random() < 0.5:
        g.emit(f"{h}, *{tl} = {xs}")
    else:
        g.emit(f"*{tl}, {h} = {xs}")
    g.emit(f"{v} = {h} + sum({tl})")
    g.bind(h, "float")
    g.bind(v, "float")


def st_dict(g):
    d = g.pick_var("fdict")
    if not d:
        st_new_container(g, "fdict")
        return
    r = g.rng
    e = lambda: g.float_expr(1)
    if g.no_write:
        return False
    if g.no_grow or g.func_depth > 0:
        g.emit(f"{d}['a'] = {e()}")
        return
    forms = [
        lambda: f"{d}['a'] = {e()}",
        lambda: f"{d}['b'] += {e()}",
        lambda: f"{d}['a'] *= math.tanh({e()})",
        lambda: f"{d}.update({{'b': {e()}}})",
        lambda: f"{d}.setdefault('c', {e()})",
        lambda: f"{d}.pop('c', None)",
        lambda: f"{d}['c'] = {d}.get('c', 0.5) * {e()}",
    ]
    if g.scope[d].writable and g.has("dict_merge"):
        forms.append(lambda: f"{d} |= {{'c': {e()}}}")
    if g.has("keyword_calls"):
        forms.append(lambda: f"{d}.update(c={e()})")
    g.emit(r.choice(forms)())
    if r.random() < 0.3:
        v = g.fresh("v")
        g.emit(f"{v} = {d}.pop('c', {e()})")
        g.bind(v, "float")


def st_object(g):
    p = g.pick_var("obj")
    r = g.rng
    if not p or r.random() < 0.3:
        g.uses_pt = True
        st_new_container(g, "obj")
        return
    forms = [
        lambda: f"{p}.a = {g.float_expr(1)}",
        lambda: f"{p}.b = {p}.a * {g.float_expr(1)}",
        lambda: f"{p}.a += {g.float_expr(1)}",
        lambda: f"setattr({p}, 'b', {g.float_expr(1)})",
    ]
    g.emit(r.choice(forms)())


def st_comprehension(g):
    kind = g.rng.choice(("flist", "fdict"))
    if kind == "fdict" and not (g.has("dicts") and g.has("dict_merge")):
        kind = "flist"
    lists = g.vars_of("flist") + g.vars_of("ftuple")
    if kind == "flist":
        if not lists:
            return False
        e = g.fresh("e")
        body = g.with_locals({e: "float"}, lambda: g.float_expr(2))
        name = g.fresh("xs")
        source = g.rng.choice(lists)
        g.emit(f"{name} = [{body} for {e} in {source}]")
        g.bind(name, "flist")
    else:
        if not lists:
            return False
        i, e = g.fresh("i"), g.fresh("e")
        body = g.with_locals({e: "float"}, lambda: g.float_expr(1))
        name = g.fresh("d")
        g.emit(
            f"{name} = {{'a': 0.5, 'b': 0.25, **{{str({i}): {body} for {i}, {e} in enumerate({g.rng.choice(lists)})}}}}"
        )
        g.bind(name, "fdict")


def st_try(g):
    r = g.rng
    form = r.random()
    if form < 0.4:
        has_else = r.random() < 0.3
        g.emit("try:")

        def body():
            g.statement()
            g.emit(f"if {g.condition(1)}:")
            g.block(lambda: g.emit("raise ValueError('fuzz')"))
            g.statement()

        saved = g.in_try_with_else
        g.in_try_with_else = saved or has_else
        g.block(body)
        g.in_try_with_else = saved
        g.emit("except ValueError:")
        g.block(lambda: g.statements(1))
        if has_else:
            g.emit("else:")
            g.block(lambda: g.statements(1))
        if r.random() < 0.3:
            g.emit("finally:")
            g.block(lambda: g.statements(1))
    elif form < 0.7:
        lists = g.vars_of("flist")
        v = g.fresh("v")
        g.emit(f"{v} = {g.float_leaf()}")
        g.bind(v, "float")
        g.emit("try:")
        if lists:
            g.block(
                lambda: g.emit(f"{v} = {r.choice(lists)}[{r.randint(0, 4)}] * {g.float_expr(1)}")
            )
            g.emit("except IndexError:")
        else:
            g.block(
                lambda: g.emit(
                    f"{v} = {g.float_expr(1)} / ({g.rng.choice(('0.0', '1.0'))} * {g.float_expr(0)})"
                )
            )
            g.emit("except ZeroDivisionError:")
        g.block(lambda: g.emit(f"{v} = {g.float_expr(1)}"))
    else:
        g.emit("try:")
        g.block(lambda: g.statements(r.randint(1, 2)))
        g.emit("finally:")
        g.block(lambda: g.statements(1))


def st_walrus(g):
    v = g.fresh("w")
    g.emit(f"if ({v} := {g.float_expr(1)}) > {g.rng.choice(('0.0', '0.5'))}:")
    g.block(lambda: g.statements(1))
    g.bind(v, "float")


def st_misc(g):
    r = g.rng
    form = r.randint(0, 5)
    if form == 0:
        g.emit(f"assert {g.float_expr(1)} == {g.float_expr(0)} or True")
    elif form == 1 and g.has("with_statement"):
        g.emit("with contextlib.nullcontext():")
        g.block(lambda: g.statements(1))
    elif form == 2 and g.has("del_variable"):
        v = g.fresh("tmp")
        g.emit(f"{v} = {g.float_expr(1)}")
        g.emit(f"del {v}")
    elif form == 4 and r.random() < 0.5 and g.has("generator_function") and closure_allowed(g):
        gen, u, v = g.fresh("gen"), g.fresh("u"), g.fresh("v")
        g.emit(f"def {gen}({u}):")
        g.emit(f"    yield {u}")
        g.emit(f"    yield {u} * 0.5")
        g.emit(f"{v} = sum({gen}({g.float_expr(1)}))")
        g.bind(v, "float")
    elif form == 4 and r.random() < 0.5 and g.has("class_statement"):
        cls, v = g.fresh("Local"), g.fresh("v")
        g.emit(f"class {cls}:")
        g.emit(f"    k = {r.choice(CONSTANTS)}")
        g.emit(f"{v} = {cls}.k * {g.float_expr(1)}")
        g.bind(v, "float")
    elif form == 4 and g.has("global_write") and g.func_depth == 0:
        g.emit("global COUNTER")
        g.emit("COUNTER += 1")
    elif form == 3:
        v = g.fresh("s")
        g.emit(f'{v} = f"{{{g.float_expr(1)}:.3f}}"')
    else:
        st_walrus(g)


# ----- issue #28: sets, globals, heapq/bisect, decorators and generators inside f ------------


def st_sets(g):
    r = g.rng
    s, v = g.fresh("s"), g.fresh("v")
    form = r.randint(0, 3)
    if form == 0:
        g.emit(f"{s} = {{{g.float_expr(1)}, {g.float_expr(1)}, {g.float_expr(0)}}}")
        g.emit(f"{s}.add({g.float_expr(1)})")
        g.emit(f"{v} = sum({s}) + max({s}) * min({s})")
    elif form == 1:
        g.emit(f"{s} = set()")
        g.emit(f"for {g.fresh('k')} in range(3):")
        item = g.fresh("e")
        g.emit(f"    {item} = {g.float_expr(1)}")
        g.emit(f"    {s}.update([{item}, {item} * 0.5])")
        g.emit(f"{v} = sorted({s})[0] + sum(sorted({s})[-2:])")
    elif form == 2:
        a = g.float_expr(1)
        g.emit(f"{s} = {{{a}, {g.float_expr(0)}}} | {{{g.float_expr(1)}}}")
        g.emit(f"{v} = sum({s} - {{{a}}}) + max(frozenset([{g.float_expr(1)}, {g.float_expr(0)}]))")
    else:
        k = g.fresh("k")
        g.emit(f"{v} = sum({k} * {g.float_expr(1)} for {k} in {{1, 2, 3}})")
    g.bind(v, "float")


def st_globals(g):
    if g.func_depth != 0 or g.in_loop_with_else or g.in_try_with_else:
        return False
    v = g.fresh("v")
    if not g.declared_total:
        g.emit("global TOTAL")
        g.declared_total = True
    g.emit(f"TOTAL = {g.float_expr(1)}")
    g.emit(f"{v} = TOTAL * {g.float_expr(1)} + TOTAL")
    g.bind(v, "float")


def st_heapq_bisect(g):
    r = g.rng
    h, v = g.fresh("h"), g.fresh("v")
    form = r.randint(0, 2)
    if form == 0:
        g.emit(f"{h} = []")
        for _ in range(3):
            g.emit(f"heapq.heappush({h}, {g.float_expr(1)})")
        g.emit(
            f"{v} = heapq.heappop({h}) * {g.float_expr(0)} + heapq.heappushpop({h}, {g.float_expr(1)}) + {h}[0]"
        )
    elif form == 1:
        g.emit(
            f"{h} = [{g.float_expr(1)}, {g.float_expr(1)}, {g.float_expr(0)}, {g.float_expr(1)}]"
        )
        g.emit(f"heapq.heapify({h})")
        g.emit(
            f"{v} = sum(heapq.nsmallest(2, {h})) + max(heapq.merge(sorted({h}), [{g.float_expr(0)}]))"
        )
    else:
        g.emit(f"{h} = sorted([{g.float_expr(1)}, {g.float_expr(1)}, {g.float_expr(0)}])")
        g.emit(f"bisect.insort({h}, {g.float_expr(1)})")
        g.emit(f"{v} = {h}[bisect.bisect_left({h}, 0.25) % len({h})] * {h}[-1]")
    g.bind(v, "float")


def st_container_subclass(g):
    r = g.rng
    c, v = g.fresh("c"), g.fresh("v")
    g.uses_subclasses = True
    form = r.randint(0, 2)
    if form == 0:
        g.emit(f"{c} = ScaledList()")
        g.emit(f"{c}.append({g.float_expr(1)})")
        g.emit(f"{c}.append({g.float_expr(1)})")
        g.emit(f"{c}.append({g.float_expr(1)})")
        g.emit(f"{v} = {c}[0] * {c}[-1] + sum({c})")
    elif form == 1:
        g.emit(f"{c} = ShiftedList()")
        g.emit(f"{c}.extend([{g.float_expr(1)}, {g.float_expr(0)}])")
        g.emit(f"{c}.append({g.float_expr(1)})")
        g.emit(f"{c}[1] = {c}[0] * {g.float_expr(1)}")
        g.emit(f"{v} = {c}[1] * {c}[2] - {c}.pop()")
    else:
        g.emit(f"{c} = Tally({{'a': {g.float_expr(1)}}})")
        g.emit(f"{c}.add('a', {g.float_expr(1)})")
        g.emit(f"{c}.add('b', {g.float_expr(1)})")
        g.emit(f"{c}.update({{'b': {g.float_expr(1)}}})")
        g.emit(f"{v} = {c}['a'] * {c}['b'] + {c}['missing']")
    g.bind(v, "float")


def st_nested_decorator(g):
    if not closure_allowed(g):
        return False
    r = g.rng
    fn, k, v = g.fresh("c"), g.fresh("k"), g.fresh("v")
    g.emit(
        r.choice(
            (
                "@functools.cache",
                "@functools.lru_cache(maxsize=None)",
                "@functools.lru_cache(maxsize=1)",
            )
        )
    )
    g.emit(f"def {fn}({k}):")
    g.emit(f"    return {g.float_expr(1)} * {k}")
    g.emit(f"{v} = {fn}(2) + {fn}(2) * {fn}(3) + {fn}(2)")
    g.bind(v, "float")


def st_generators(g):
    if not closure_allowed(g):
        return False
    r = g.rng
    gen, n, i, v = g.fresh("gen"), g.fresh("n"), g.fresh("i"), g.fresh("v")
    g.emit(f"def {gen}({n}):")
    g.emit(f"    for {i} in range({n}):")
    g.emit(f"        yield {g.float_expr(1)} * {i}")
    g.emit(f"    yield from [{g.float_expr(1)}, {g.float_expr(0)}]")
    consumer = r.choice(
        (
            f"sum({gen}(3))",
            f"max({gen}(2))",
            f"sorted({gen}(3))[-1]",
            f"list({gen}(2))[1]",
            f"sum(a * b for a, b in zip({gen}(2), {gen}(3)))",
        )
    )
    g.emit(f"{v} = {consumer}")
    g.bind(v, "float")


def st_lazy_generator(g):
    if not closure_allowed(g):
        return False
    r = g.rng
    gen, n, i, v, w, it, acc = (
        g.fresh("gen"),
        g.fresh("n"),
        g.fresh("i"),
        g.fresh("v"),
        g.fresh("w"),
        g.fresh("it"),
        g.fresh("acc"),
    )
    form = r.randint(0, 4)
    g.emit(f"def {gen}({n}):")
    g.emit(f"    {v} = {g.float_expr(1)}")
    if form == 0:  # endless, taken by next
        g.emit("    while True:")
        g.emit(f"        yield {v}")
        g.emit(f"        {v} = {v} * 0.5 + {g.float_expr(1)}")
        g.emit(f"{it} = {gen}(0)")
        g.emit(f"{acc} = next({it}) + next({it}) * next({it})")
    elif form == 1:  # partly consumed by next and a loop that breaks
        g.emit(f"    for {i} in range({n}):")
        g.emit(f"        yield {v} * {i} + {g.float_expr(1)}")
        g.emit(f"        {v} = math.tanh({v}) + {g.float_expr(0)}")
        g.emit(f"{it} = {gen}(6)")
        g.emit(f"{acc} = next({it})")
        g.emit(f"for {w} in {it}:")
        g.emit(f"    {acc} = {acc} + {w} * {g.float_expr(0)}")
        g.emit(f"    if {acc} > 2.0:")
        g.emit("        break")
    elif form == 2:  # send
        g.emit(f"    for {i} in range({n}):")
        g.emit(f"        {w} = yield {v}")
        g.emit(f"        {v} = {v} * 0.5 + {w} * {g.float_expr(0)}")
        g.emit(f"{it} = {gen}(4)")
        g.emit(f"{acc} = next({it}) + {it}.send({g.float_expr(1)}) * {it}.send({g.float_expr(1)})")
    elif form == 3:  # yield from with a return value
        inner = g.fresh("inner")
        g.emit(f"    yield {v}")
        g.emit(f"    return {v} * {g.float_expr(1)}")
        g.emit(f"def {inner}():")
        g.emit(f"    {w} = yield from {gen}(0)")
        g.emit(f"    yield {w} + {g.float_expr(1)}")
        g.emit(f"    yield from ({g.float_expr(0)} * {i} for {i} in range(2))")
        g.emit(f"{acc} = sum({inner}())")
    else:  # islice, zip with a shorter list, close
        g.emit(f"    for {i} in range({n}):")
        g.emit(f"        yield {v} + {i}")
        g.emit(f"        {v} = {v} * {g.float_expr(0)}")
        g.emit(f"{it} = {gen}(5)")
        g.emit(
            f"{acc} = sum(itertools.islice({gen}(9), 3)) + sum(a * b for a, b in zip({gen}(9), "
            f"[1.0, 2.0])) + next({it})"
        )
        g.emit(f"{it}.close()")
    g.bind(acc, "float")


def st_lazy_escape(g):
    """A generator expression or a lazy builtin's iterator whose laziness shows: read twice or
    in part by a helper, by next/any, or after a variable it reads changed (G1)."""
    if not closure_allowed(g) or not g.has("lazy_escapes"):
        return False
    lists = g.vars_of("flist") + g.vars_of("ftuple")
    if not lists:
        return False
    r = g.rng
    source = r.choice(lists)
    helper, it, acc, v, a, b, k = (
        g.fresh("twice"),
        g.fresh("it"),
        g.fresh("acc"),
        g.fresh("v"),
        g.fresh("a"),
        g.fresh("b"),
        g.fresh("k"),
    )
    body = g.with_locals({v: "float"}, lambda: g.float_expr(1))
    form = r.randint(0, 5)
    if form == 0:  # given to a helper that reads it twice (or once, then in part)
        g.emit(f"def {helper}({it}):")
        if r.random() < 0.5:
            g.emit(f"    return sum({it}) + {g.float_expr(0)} * sum({it})")
        else:
            g.emit(f"    {a} = next({it}, 0.0)")
            g.emit(f"    return {a} + sum({it})")
        lazy = r.choice(
            [
                f"({body} for {v} in {source})",
                f"map(lambda {v}: {body}, {source})",
                f"(p * q for p, q in zip({source}, {source}[::-1]))",
            ]
        )
        g.emit(f"{acc} = {helper}({lazy})")
    elif form == 1:  # kept; a variable it reads changes before it is read
        g.emit(f"{a} = {g.float_expr(1)}")
        g.emit(f"{it} = ({v} * {a} for {v} in {source})")
        g.emit(f"{a} = {g.float_expr(1)}")
        g.emit(f"{acc} = sum({it}) + sum({it})")
    elif form == 2:  # next, then the rest
        g.emit(f"{it} = ({body} for {v} in {source})")
        g.emit(f"{acc} = next({it}, 1.0) * {g.float_expr(0)} + sum({it})")
    elif form == 3:  # any/all stop early
        fn = r.choice(("any", "all"))
        test = f"{fn}({body} > 0.0 for {v} in {source})"
        g.emit(f"{acc} = {g.float_expr(1)} if {test} else {g.float_expr(1)}")
    elif form == 4:  # zip/enumerate of tuples kept and read twice
        if r.random() < 0.5:
            g.emit(f"{it} = zip(tuple({source}), (1.0, 2.0, 3.0))")
        else:
            g.emit(f"{it} = enumerate(tuple({source}))")
        g.emit(f"{acc} = sum({a} * {b} for {a}, {b} in {it}) + sum({a} for {a}, {b} in {it})")
    else:  # zipped with an endless generator expression
        endless = (
            f"(({g.float_expr(1)}) if {k} % 2 else {g.float_expr(0)} for {k} in itertools.count())"
        )
        g.emit(f"{acc} = sum({a} * {b} for {a}, {b} in zip({source}, {endless}))")
    g.bind(acc, "float")


def st_local_class(g):
    if not closure_allowed(g):
        return False
    r = g.rng
    cls, sub, v, o, u = g.fresh("K"), g.fresh("D"), g.fresh("v"), g.fresh("o"), g.fresh("u")
    g.emit(f"class {cls}:")
    g.emit(f"    k = {g.float_expr(1)}")
    g.emit("    def __init__(self, a):")
    g.emit("        self.a = a")
    g.emit(f"    def f(self, {u}):")
    g.emit(f"        return self.a * {u} + self.k * {g.float_expr(0)}")
    g.emit(f"    def __add__(self, {o}):")
    g.emit(f"        return {cls}(self.a + {o}.a)")
    g.emit(f"    def __mul__(self, {o}):")
    g.emit(f"        return {cls}(self.a * {o}.a)")
    g.emit("    @property")
    g.emit("    def twice(self):")
    g.emit("        return 2.0 * self.a")
    g.emit(f"class {sub}({cls}):")
    g.emit(f"    def f(self, {u}):")
    g.emit(f"        return super().f({u}) * {g.float_expr(0)}")
    form = r.randint(0, 2)
    if form == 0:
        g.emit(
            f"{v} = ({cls}({g.float_expr(1)}) + {cls}({g.float_expr(1)}) * {sub}({g.float_expr(0)}))"
            f".f({g.float_expr(1)})"
        )
    elif form == 1:
        g.emit(f"{v} = {sub}({g.float_expr(1)}).f({g.float_expr(0)}) + {cls}.k * {sub}(1.5).twice")
    else:
        g.emit(f"{v} = sum({cls}(t).f(t) for t in ({g.float_expr(0)}, {g.float_expr(1)}))")
    g.bind(v, "float")


# (feature, weight, compound, production).  Compound productions get rarer with nesting depth.
STATEMENTS: list[tuple[str, float, bool, Callable]] = [
    ("arith", 4.0, False, st_assign),
    ("branches", 1.5, True, st_if),
    ("branches", 0.3, True, st_match),
    ("loops", 1.2, True, st_for_range),
    ("loops", 0.8, True, st_for_list),
    ("loops", 0.5, True, st_while),
    ("iterators", 0.8, True, st_for_iter),
    ("early_return", 0.5, False, st_early_return),
    ("early_return", 0.5, True, st_return_if),
    ("closures", 0.8, True, st_closure),
    ("lambdas", 0.6, False, st_lambda),
    ("varargs", 0.4, False, st_varargs),
    ("lists", 1.5, False, st_list_mutate),
    ("lists", 0.6, False, lambda g: st_new_container(g, "flist")),
    ("lists", 0.3, False, st_list_alias),
    ("lists", 0.5, False, st_list_index),
    ("tuples", 0.6, False, st_tuple),
    ("dicts", 0.9, False, st_dict),
    ("objects", 0.6, False, st_object),
    ("comprehensions", 0.6, False, st_comprehension),
    ("exceptions", 0.6, True, st_try),
    ("misc", 0.5, False, st_misc),
    ("sets", 0.6, False, st_sets),
    ("globals", 0.4, False, st_globals),
    ("heapq_bisect", 0.6, False, st_heapq_bisect),
    ("nested_decorators", 0.5, False, st_nested_decorator),
    ("generators", 0.5, False, st_generators),
    ("container_subclasses", 0.4, False, st_container_subclass),
    ("lazy_generators", 0.5, False, st_lazy_generator),
    ("local_classes", 0.5, False, st_local_class),
    ("comprehensions", 0.4, False, st_lazy_escape),
]


# ----- NumPy (family "numpy") ----------------------------------------------------------------
# One kind per shape, so that every production knows the shapes it combines: a 2-element
# vector arises only from other arrays (a row sum, a matrix-vector product), never as an argument.
ARRAY_SHAPES = {"arr3": (3,), "arr2": (2,), "arr2x3": (2, 3), "arr3x3": (3, 3)}
UFUNCS = (
    "np.sin({})",
    "np.exp(np.tanh({}))",
    "np.tanh({})",
    "np.log(1.0 + {0} * {0})",
    "np.sqrt(1.0 + {0} * {0})",
)


class ArrayKind(Kind):
    feature, prefix = "numpy", "A"

    def __init__(self, name: str):
        self.name = name
        self.shape = ARRAY_SHAPES[name]
        self.as_argument = name != "arr2"

    def argument(self, rng):
        return np.array([small_float(rng) for _ in range(int(np.prod(self.shape)))]).reshape(
            self.shape
        )

    def expression(self, g, depth):
        return array_expr(g, self.name, depth)

    def read_float(self, g, name):
        r = g.rng
        forms = [
            f"float(np.sum({name}))",
            f"float(np.mean({name}))",
            f"float(np.max({name}))",
            f"float({name}.sum())",
            f"float(np.sum({name}[{name} > 0.0]))",
        ]
        if len(self.shape) == 1:
            forms += [
                f"float({name}[0])",
                f"float({name}[-1])",
                f"float({name} @ {name})",
                f"float(np.dot({name}, {name}))",
                f"float(np.sum({name}[[0, -1]]))",
            ]
        else:
            forms += [
                f"float({name}[1, 2])",
                f"float({name}[-1, 0])",
                f"float(np.sum({name}, axis=0)[1])",
                f"float(np.sum({name}, axis=0, keepdims=True)[0, 0])",
                f"float(np.mean({name}, axis=-1)[0])",
                f"float(np.max({name}, axis=1)[-1])",
                f"float(np.sum({name}[:, 1:]))",
                f"float(np.sum({name}.T[0]))",
            ]
        return r.choice(forms)


for _name in ARRAY_SHAPES:
    KINDS[_name] = ArrayKind(_name)


def array_helper(g) -> str:
    """A module-level ``@define_dplus`` helper taking an array and a float, returning an array
    of the same shape."""
    if g.array_helpers and g.rng.random() < 0.5:
        return g.rng.choice(g.array_helpers)
    name = g.fresh("nh")
    body = g.rng.choice(UFUNCS).format("A")
    g.helpers.append(
        "\n".join(
            [
                "@dplus.define_dplus",
                f"def {name}(A, s):",
                f"    return {body} * s + A {g.rng.choice(('+', '-', '*'))} 0.5",
                "",
            ]
        )
    )
    g.array_helpers.append(name)
    return name


def array_expr(g, kind: str, depth: int) -> str:
    """A fresh array of ``kind``'s shape (never an alias of a variable)."""
    r = g.rng
    shape = ARRAY_SHAPES[kind]
    fe = lambda: g.float_expr(max(depth - 1, 0))
    pick = g.pick_var
    same, other_same = pick(kind), pick(kind)
    v3, v3b, v3c, v2 = pick("arr3"), pick("arr3"), pick("arr3"), pick("arr2")
    m23, m33 = pick("arr2x3"), pick("arr3x3")
    if len(shape) == 1:
        forms = [
            lambda: "np.array([" + ", ".join(fe() for _ in range(shape[0])) + "])",
            lambda: f"np.linspace(0.1, 0.9, {shape[0]}) * {fe()}",
        ]
    else:
        forms = [
            lambda: (
                "np.array(["
                + ", ".join(
                    "[" + ", ".join(fe() for _ in range(shape[1])) + "]" for _ in range(shape[0])
                )
                + "])"
            ),
            lambda: f"np.ones({shape}) * {fe()}",
            lambda: f"np.arange({shape[0] * shape[1]}.0).reshape{shape} * {fe()}",
        ]
    if same:
        forms += [
            lambda: r.choice(UFUNCS).format(same),
            lambda: f"{same} * {fe()}",
            lambda: f"{same} + {fe()}",
            lambda: f"{fe()} - {same}",
            lambda: f"{same} / (1.0 + {same} * {same})",
            lambda: f"{same} ** 2",
            lambda: f"{same} + {other_same}",
            lambda: f"{same} * {other_same}",
            lambda: (
                f"np.where({same} > {r.choice(('0.0', '0.5', '-0.5'))}, {same}, {other_same} * 0.5)"
            ),
            lambda: f"{array_helper(g)}({same}, {fe()})",
        ]
        if len(shape) == 2 and v3:
            forms += [
                lambda: f"{same} * {v3}",
                lambda: f"{same} - {v3}[None, :]",
                lambda: f"{v3} + {same}",
            ]
        if len(shape) == 1:
            forms += [
                lambda: f"{same}[::-1]",
                lambda: f"{same}[np.array([1, 0] + [{shape[0] - 1}] * {shape[0] - 2})]",
            ]
    if kind == "arr3":
        if m33 and v3:
            forms += [
                lambda: f"{m33} @ {v3}",
                lambda: f"np.dot({m33}, {v3})",
                lambda: f"{v3} @ {m33}",
                lambda: f"np.einsum('ij,j->i', {m33}, {v3})",
            ]
        if m23:
            forms += [
                lambda: f"{m23}[0]",
                lambda: f"{m23}[-1]",
                lambda: f"np.sum({m23}, axis=0)",
                lambda: f"np.mean({m23}, axis=0)",
                lambda: f"np.max({m23}, axis=0)",
                lambda: f"{m23}.reshape(-1)[:3]",
                lambda: f"np.reshape({m23}, (6,))[::2]",
            ]
        if m33:
            forms += [
                lambda: f"{m33}[:, 1]",
                lambda: f"{m33}.T[0]",
                lambda: f"np.sum({m33}, axis=1, keepdims=True)[:, 0]",
            ]
        if v3:
            forms += [lambda: f"{v3}[[2, 0, 1]]"]
        if v2:
            forms += [lambda: f"np.concatenate([{v2}, np.array([{fe()}])])"]
    elif kind == "arr2":
        if m23 and v3:
            forms += [
                lambda: f"{m23} @ {v3}",
                lambda: f"np.einsum('ij,j->i', {m23}, {v3})",
                lambda: f"np.dot({m23}, {v3})",
            ]
        if m23:
            forms += [
                lambda: f"np.sum({m23}, axis=1)",
                lambda: f"np.mean({m23}, axis=-1)",
                lambda: f"np.max({m23}, axis=1, keepdims=True)[:, 0]",
                lambda: f"{m23}[:, 0]",
            ]
        if v3:
            forms += [lambda: f"{v3}[:2]", lambda: f"{v3}[[0, 2]]"]
    elif kind == "arr2x3":
        if m33:
            forms += [lambda: f"{m33}[:2]", lambda: f"{m33}[[0, 2]]", lambda: f"{m33}[1:, ::-1]"]
        if v3 and v3b:
            forms += [
                lambda: f"np.stack([{v3}, {v3b}])",
                lambda: f"np.concatenate([{v3}, {v3b}]).reshape(2, 3)",
            ]
        if m23 and m33:
            forms += [lambda: f"{m23} @ {m33}"]
        if m23:
            forms += [
                lambda: f"{m23}.reshape(3, 2).T",
                lambda: f"np.transpose({m23}.T)",
                lambda: f"np.concatenate([{m23}[:1], {m23}[1:]], axis=0)",
            ]
    elif kind == "arr3x3":
        if m33:
            forms += [lambda: f"{m33}.T", lambda: f"{m33} @ {m33}", lambda: f"np.transpose({m33})"]
        if v3 and v3b and v3c:
            forms += [lambda: f"np.stack([{v3}, {v3b}, {v3c}])"]
        if m23 and v3:
            forms += [lambda: f"np.concatenate([{m23}, {v3}[None, :]])"]
        if m23:
            forms += [
                lambda: f"{m23}.T @ {m23}",
                lambda: f"np.concatenate([{m23}, {m23}[:1]], axis=0)",
            ]
    return r.choice(forms)()


def array_vars(g, shapes=None, writable: bool = False) -> list[str]:
    return [n for k in (shapes or ARRAY_SHAPES) for n in g.vars_of(k, writable)]


def fx_array(g, depth):
    arrays = array_vars(g)
    if not arrays:
        return None
    name = g.rng.choice(arrays)
    return KINDS[g.scope[name].kind].read_float(g, name)


def st_new_array(g):
    kind = g.rng.choice(tuple(ARRAY_SHAPES))
    name = g.fresh(KINDS[kind].prefix)
    g.emit(f"{name} = {array_expr(g, kind, 2)}")
    g.bind(name, kind)


def st_array_inplace_local(g):
    """``a = X * 1.0`` then a write in place into ``a`` or a view of it (issue #22): augmented
    assignment, item, slice, mask and fancy assignment, ``out=``, ``np.add.at``, methods that
    change the array, a time loop of a stencil, an array held in a list or a dict."""
    if not g.has("array_inplace_local"):
        return False
    arrays = array_vars(g)
    if not arrays:
        return False
    x = g.rng.choice(arrays)
    kind = g.scope[x].kind
    a = g.fresh("a")
    g.emit(f"{a} = {x} * 1.0")
    other = g.pick_var(kind)
    g.rng.choice(_in_place_forms(g, a, kind, other))()
    g.bind(a, kind)


def _in_place_forms(g, a: str, kind: str, other: str | None) -> list:
    """Writes in place into the array ``a`` of ``kind`` (``other``: another array of its shape)."""
    r = g.rng
    shape = ARRAY_SHAPES[kind]
    fe = lambda: g.float_expr(1)
    emit = g.emit
    item = "[0]" if len(shape) == 1 else "[1, 0]"
    last = "[-1]" if len(shape) == 1 else "[0, -1]"
    forms = [
        lambda: emit(f"{a} += {fe()}"),
        lambda: emit(f"{a} *= math.tanh({fe()})"),
        lambda: emit(f"{a} -= {fe()}"),
        lambda: emit(f"{a}{item} = {fe()}"),
        lambda: emit(f"{a}{last} *= math.tanh({fe()})"),
        lambda: emit(f"{a}[{a} > 0.0] *= {r.choice(('0.5', '-1.0', '1.5'))}"),
        lambda: emit(f"{a}[{a} < 0.0] = {fe()}"),
        lambda: emit(f"np.multiply({a}, {r.choice(('0.5', '1.5'))}, out={a})"),
        lambda: emit(f"np.tanh({a}, out={a})"),
        lambda: emit(f"{a}.fill({fe()})"),
        lambda: emit(f"{a}.sort()"),
    ]
    if len(shape) == 1:
        n = shape[0]
        forms += [
            lambda: emit(f"{a}[1:] = {a}[:-1] * {r.choice(('0.5', '2.0'))}"),
            lambda: emit(f"{a}[[0, {n - 1}, 0]] = {a}[[1, 0, {n - 1}]] * {fe()}"),
            lambda: emit(f"np.add.at({a}, [0, 0, {n - 1}], {fe()})"),
            lambda: emit(f"{a}[::-1] += {a}[:] * 0.5"),
            lambda: _stencil(g, a),
        ]
        if n >= 3:
            v = g.fresh("view")
            forms += [
                lambda: (emit(f"{v} = {a}[1:]"), emit(f"{v} *= math.tanh({fe()})")),
                lambda: emit(f"np.multiply.at({a}, [0, {n - 1}, 0], np.tanh({a}[:3]))"),
            ]
    else:
        v = g.fresh("view")
        forms += [
            lambda: emit(f"{a}[:, 1] *= math.tanh({fe()})"),
            lambda: emit(f"{a}[0] = {a}[-1] * {fe()}"),
            lambda: emit(f"{a}.T[0] += {fe()}"),
            lambda: emit(f"np.add.at({a}, ([0, 0], [1, 1]), {fe()})"),
            lambda: (emit(f"{v} = {a}[-1]"), emit(f"{v} -= {fe()}")),
            lambda: _rows_in_place(g, a),
        ]
    if other:
        forms += [
            lambda: emit(f"{a} += {other}"),
            lambda: emit(f"{a} *= np.tanh({other})"),
            lambda: emit(f"np.add({a}, np.sin({other}), out={a})"),
            lambda: emit(f"np.copyto({a}, {other} * 0.5)"),
            lambda: emit(f"np.copyto({a}, np.tanh({other}), where={other} > 0.0)"),
            lambda: _held_by_a_container(g, a),
        ]
    return forms


def _stencil(g, a: str) -> None:
    """A time loop of a finite-difference stencil written in place."""
    t = g.fresh("t")
    g.emit(f"for {t} in range({g.rng.choice((1, 2, 3))}):")
    g.emit(f"    {a}[1:-1] = {a}[1:-1] + 0.1 * ({a}[2:] - 2.0 * {a}[1:-1] + {a}[:-2])")


def _rows_in_place(g, a: str) -> None:
    row = g.fresh("row")
    g.emit(f"for {row} in {a}:")
    g.emit(f"    {row} *= {g.rng.choice(('0.5', '1.5', '-1.0'))}")


def _held_by_a_container(g, a: str) -> None:
    """The array changed through a list or a dict that holds it."""
    c = g.fresh("held")
    if g.rng.random() < 0.5:
        g.emit(f"{c} = [{a}, {a} * 2.0]")
        g.emit(f"{c}[0] *= math.tanh({g.float_expr(1)})")
    else:
        g.emit(f"{c} = {{'k': {a}}}")
        g.emit(f"{c}['k'] += {g.float_expr(1)}")


def st_array_inplace_argument(g):
    """In place on an argument or a view of one: the caller's array changes as in the plain
    call, and its gradient is the sensitivity of its value on entry."""
    if not g.has("array_inplace_argument"):
        return False
    params = [n for n in array_vars(g) if n in g.array_params]
    if not params:
        return False
    x = g.rng.choice(params)
    r = g.rng
    kind = g.scope[x].kind
    shape = ARRAY_SHAPES[kind]
    choice = r.random()
    if choice < 0.25:
        g.emit(f"{x} {r.choice(('+=', '*=', '-='))} {r.choice(('1.0', '0.5', '2.0'))}")
        return
    if choice < 0.45:
        view = g.fresh("view")
        g.emit(f"{view} = {r.choice((f'{x}[:1]', f'{x}.T', f'{x}[::-1]', f'{x}.reshape(-1)'))}")
        g.emit(f"{view} += 1.0")
        return
    if choice < 0.6:
        g.emit(f"{x}{'[0]' if len(shape) == 1 else '[0, 1]'} = {g.float_expr(1)}")
        return
    if choice < 0.75:
        v = g.fresh("v")
        target = r.choice((x, f"{x}[1:]" if len(shape) == 1 else f"{x}[0]"))
        g.emit(f"{v} = {array_helper_in_place(g)}({target}, {g.float_expr(1)})")
        g.bind(v, "float")
        return
    if choice < 0.85 and len(shape) == 2:
        _rows_in_place(g, x)
        return
    g.rng.choice(_in_place_forms(g, x, kind, g.pick_var(kind)))()


def array_helper_in_place(g) -> str:
    """A module-level ``@define_dplus`` helper that changes its array parameter in place."""
    name = g.fresh("nhi")
    op = g.rng.choice(("*=", "+=", "-="))
    g.helpers.append(
        "\n".join(
            [
                "@dplus.define_dplus",
                f"def {name}(u, s):",
                f"    u {op} math.tanh(s)",
                "    return float(np.sum(u * u))",
                "",
            ]
        )
    )
    return name


def st_for_rows(g):
    matrices = array_vars(g, ("arr2x3", "arr3x3"))
    if not matrices:
        return False
    m = g.rng.choice(matrices)
    row = g.fresh("row")
    state = begin_loop(g)
    g.emit(f"for {row} in {m}:")
    loop_body(g, row, "arr3")
    loop_else(g, *state)


def st_unpack_rows(g):
    r = g.rng
    arrays = array_vars(g)
    if not arrays:
        return False
    x = r.choice(arrays)
    shape = ARRAY_SHAPES[g.scope[x].kind]
    if len(shape) == 2:
        a, b = g.fresh("r"), g.fresh("r")
        g.emit(f"{a}, {b} = {x}[:2]")
        g.bind(a, "arr3")
        g.bind(b, "arr3")
    else:
        names = [g.fresh("e") for _ in range(shape[0])]
        g.emit(f"{', '.join(names)} = {x}")
        for n in names:
            g.bind(n, "float")


def st_array_closure(g):
    """A nested function or lambda reading an array of the enclosing function."""
    if g.in_branch and not g.has("closure_in_branch") or not closure_allowed(g):
        return False
    arrays = array_vars(g)
    if not arrays:
        return False
    x = g.rng.choice(arrays)
    name, u = g.fresh("g"), g.fresh("u")
    body = in_closure(
        g,
        {u: "float"},
        lambda: f"{u} * {KINDS[g.scope[x].kind].read_float(g, x)} + {g.float_expr(1)}",
    )
    if g.rng.random() < 0.5:
        g.emit(f"def {name}({u}):")
        g.emit(f"    return {body}")
    else:
        g.emit(f"{name} = lambda {u}: {body}")
    v = g.fresh("v")
    g.emit(f"{v} = {name}({g.float_expr(1)})")
    g.bind(v, "float")


FLOAT_EXPRESSIONS.append(("numpy", 3.0, fx_array))
STATEMENTS.extend(
    [
        ("numpy", 2.0, False, st_new_array),
        ("numpy", 0.7, False, st_array_inplace_local),
        ("numpy", 0.3, False, st_array_inplace_argument),
        ("numpy", 0.6, True, st_for_rows),
        ("numpy", 0.5, False, st_unpack_rows),
        ("numpy", 0.4, False, st_array_closure),
    ]
)
