"""Big functions (issue #27): long straight-line code, long sums and deeply nested
expressions are transformed correctly, without a RecursionError, and the transformation
visits a number of nodes proportional to the size of the function."""

from __future__ import annotations

import contextlib
import importlib.util
import random
import sys
import threading

import pytest
from path_helpers import check_fd, close, fd_gradient

import dplus
from dplus.transform import trees
from dplus.transform.transformer import general_paths_only

POINTS = [(0.3, 0.7), (-0.45, 0.2), (1.1, -0.6)]


def straight_line_source(n: int, name: str, seed: int = 0) -> str:
    """A random straight-line function of ``n`` assignments over two floats (the issue's generator)."""
    rnd = random.Random(seed)
    lines = ["import math", f"def {name}(x, y):", "    a0 = x", "    a1 = y"]
    for i in range(2, n + 2):
        j, k = rnd.randrange(i), rnd.randrange(i)
        form = rnd.choice(
            [
                "a{j} * a{k} * 0.5",
                "math.sin(a{j}) * a{k}",
                "math.tanh(a{j} + a{k})",
                "a{j} - 0.3 * a{k}",
                "math.cos(a{j}) + a{k} * 0.1",
            ]
        )
        lines.append(f"    a{i} = " + form.format(j=j, k=k))
    lines.append(f"    return a{n + 1}")
    return "\n".join(lines) + "\n"


def long_sum_source(n: int, name: str) -> str:
    terms = [
        f"math.sin(x * {0.001 * (i + 1):.4f}) * y ** 2"
        if i % 3 == 0
        else f"{0.5 + (i % 7) * 0.1} * x * y"
        if i % 3 == 1
        else f"x * {1 + (i % 5) * 0.01}"
        for i in range(n)
    ]
    return f"import math\ndef {name}(x, y):\n    return " + " + ".join(terms) + "\n"


def nested_source(parens: int, chain: int, negations: int, name: str) -> str:
    """An expression nested ``parens`` levels in parentheses (CPython's parser allows 200),
    inside a left-deep chain of ``chain`` operations, under ``negations`` unary minuses:
    a tree about ``2 * parens + chain + negations`` deep."""
    e = "x"
    for i in range(parens):
        e = f"({e} + {0.01 * (i % 10)}) * {'y' if i % 2 else 'x'}" if i % 3 else f"({e} * 0.5 + y)"
    ops = ["+ x * 0.001", "- y * 0.002", "* 0.999", "+ y"]
    e = f"{e} " + " ".join(ops[i % 4] for i in range(chain))
    return f"def {name}(x, y):\n    return {'- ' * negations}({e})\n"


@contextlib.contextmanager
def recursion_limit(limit: int):
    """What a user must do to import a module with a 10,000-term expression at all
    (CPython's own compiler recurses once per term)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def load(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def assert_gradients(f, points=POINTS):
    """Against central finite differences, and the fast paths against the general path."""
    fast = [dplus.grad(f)(*p) for p in points]
    for p in points:
        check_fd(f, *p)
    with general_paths_only():
        general = [dplus.grad(f)(*p) for p in points]
    close(fast, general, tol=1e-12)


def test_straight_line_2000_assignments(tmp_path):
    f = load(tmp_path, "straight2000", straight_line_source(2000, "straight2000"))
    assert_gradients(f)


def test_sum_of_600_terms_no_recursion_error(tmp_path):
    # raised a raw RecursionError inside dplus (the plain function runs)
    f = load(tmp_path, "sum600", long_sum_source(600, "sum600"))
    before = sys.getrecursionlimit()
    assert_gradients(f)
    assert sys.getrecursionlimit() == before


def test_sum_of_10000_terms(tmp_path):
    with recursion_limit(60000):
        f = load(tmp_path, "sum10000", long_sum_source(10000, "sum10000"))
        gx, gy = dplus.grad(f)(0.3, 0.7)
        value = f(0.3, 0.7)
    h = 1e-6
    with recursion_limit(60000):
        fd = (
            (f(0.3 + h, 0.7) - f(0.3 - h, 0.7)) / (2 * h),
            (f(0.3, 0.7 + h) - f(0.3, 0.7 - h)) / (2 * h),
        )
    scale = max(1.0, abs(value))
    assert abs(gx - fd[0]) < 1e-6 * scale and abs(gy - fd[1]) < 1e-6 * scale, ((gx, gy), fd)
    # the exact gradient, term by term
    import math

    ex = ey = 0.0
    for i in range(10000):
        if i % 3 == 0:
            c = float(f"{0.001 * (i + 1):.4f}")
            ex += c * math.cos(0.3 * c) * 0.49
            ey += math.sin(0.3 * c) * 1.4
        elif i % 3 == 1:
            c = 0.5 + (i % 7) * 0.1
            ex += c * 0.7
            ey += c * 0.3
        else:
            ex += 1 + (i % 5) * 0.01
    assert math.isclose(gx, ex, rel_tol=1e-9) and math.isclose(gy, ey, rel_tol=1e-9)


def test_expression_nested_2000_deep(tmp_path):
    source = nested_source(parens=150, chain=1000, negations=1000, name="nested2000")
    f = load(tmp_path, "nested2000", source)
    import ast

    assert trees.nesting_depth(ast.parse(source).body[0]) > 2000
    assert_gradients(f, [(0.3, 0.7), (-0.2, 0.4), (0.5, -0.3)])


def test_second_order_of_a_deep_expression(tmp_path):
    f = load(
        tmp_path,
        "nested_small",
        nested_source(parens=40, chain=150, negations=60, name="nested_small"),
    )
    for p in [(0.3, 0.7), (-0.2, 0.4)]:
        H = dplus.hessian(f)(*p)
        h = 1e-5
        for i in range(2):
            up = list(p)
            down = list(p)
            up[i] += h
            down[i] -= h
            column = [(a - b) / (2 * h) for a, b in zip(dplus.grad(f)(*up), dplus.grad(f)(*down))]
            close([H[0][i], H[1][i]], column, tol=1e-5)


def test_second_order_of_straight_line_code(tmp_path):
    f = load(tmp_path, "straight150", straight_line_source(150, "straight150", seed=3))
    for p in [(0.3, 0.7), (-0.45, 0.2)]:
        H = dplus.hessian(f)(*p)
        h = 1e-5
        for i in range(2):
            up = list(p)
            down = list(p)
            up[i] += h
            down[i] -= h
            column = [(a - b) / (2 * h) for a, b in zip(dplus.grad(f)(*up), dplus.grad(f)(*down))]
            close([H[0][i], H[1][i]], column, tol=1e-5)


def test_deep_transformation_leaves_the_recursion_limit_and_works_from_threads(tmp_path):
    f = load(tmp_path, "sum700", long_sum_source(700, "sum700"))
    before = sys.getrecursionlimit()
    results = []
    worker = threading.Thread(target=lambda: results.append(dplus.grad(f)(0.3, 0.7)))
    worker.start()
    worker.join()
    assert sys.getrecursionlimit() == before
    close(results[0], dplus.grad(f)(0.3, 0.7), tol=1e-12)
    check_fd(f, 0.3, 0.7)


def test_errors_inside_a_deep_transformation_reach_the_caller(tmp_path):
    source = long_sum_source(300, "deep_yield").replace("    return ", "    yield ")
    f = load(tmp_path, "deep_yield", source)
    with pytest.raises(dplus.UnsupportedSyntaxError):
        dplus.grad(f)(0.3, 0.7)


def _walked_nodes(f) -> int:
    """How many nodes ``trees.walk`` yields while ``f`` is transformed (every module of
    dplus that imported it calls the counting one)."""
    counter = [0]
    original = trees.walk

    def counting(node):
        for n in original(node):
            counter[0] += 1
            yield n

    patched = [
        m
        for name, m in sys.modules.items()
        if (name == "dplus" or name.startswith("dplus.")) and getattr(m, "walk", None) is original
    ]
    for m in patched:
        m.walk = counting
    try:
        dplus.grad(f)(0.3, 0.7)
    finally:
        for m in patched:
            m.walk = original
    return counter[0]


def test_transformation_walks_a_number_of_nodes_proportional_to_the_size(tmp_path):
    small = _walked_nodes(load(tmp_path, "walk1000", straight_line_source(1000, "walk1000")))
    large = _walked_nodes(load(tmp_path, "walk4000", straight_line_source(4000, "walk4000")))
    assert small > 1000
    # linear: 4x the lines, about 4x the nodes (a walk of the function per statement was 16x)
    assert large < 4.6 * small, (small, large)


def elif_chain_source(n: int, name: str) -> str:
    lines = ["import math", f"def {name}(x, y):"]
    for i in range(n):
        lines.append(f"    {'if' if i == 0 else 'elif'} x < {-2 + 4 * i / n:.4f}:")
        lines.append(f"        r = math.sin(x * {i % 7 + 1}) * y + {i}")
    lines += ["    else:", "        r = x * y", "    return r"]
    return "\n".join(lines) + "\n"


def test_elif_chain_of_800_branches(tmp_path):
    # an elif is an if nested in the else of the one before: 800 levels deep
    f = load(tmp_path, "elif800", elif_chain_source(800, "elif800"))
    assert_gradients(f, [(0.3013, 0.7), (-1.3013, 0.2), (2.5, -0.4)])


# the shapes of generated code the bigfn benchmark measures (benchmarks/bigfn.py): NumPy
# calls (a segment per line), list and dict writes, what SymPy's lambdify writes for a
# cse'd expression, loops, branches
SHAPES = ["numpy_calls", "container_writes", "generated_cse", "loop_heavy", "branchy"]


@pytest.mark.parametrize("shape", SHAPES)
def test_big_function_of_each_shape(tmp_path, shape):
    from benchmarks import bigfn

    name = f"big_{shape}"
    f = load(tmp_path, name, getattr(bigfn, shape)(300, name, seed=5))
    points = [(0.3, 0.7), (-0.45, 0.2), (0.8, -0.35)]
    if shape == "numpy_calls":  # (a NumPy scalar result: differences of its float)
        fast = [dplus.grad(f)(*p) for p in points]
        with general_paths_only():
            general = [dplus.grad(f)(*p) for p in points]
        close(fast, general, tol=1e-12)
        for p, got in zip(points, fast):
            close(got, fd_gradient(lambda x, y: float(f(x, y)), p), tol=1e-5)
        return
    assert_gradients(f, points)


def _module_functions(tmp_path):
    """Functions whose source check takes the identical-code shortcut or not: module-level
    defs with imports of each kind, a decorated def, a closure, a method, a lambda, nested
    defs and comprehensions, asserts."""
    source = """import math
import numpy as np
from math import sin as sine
import os.path

def deco(f):
    return f

def plain(x, y):
    a = math.sin(x) * np.cos(y) + sine(x) + len(os.path.sep)
    return a * a

@deco
def decorated(x):
    return math.exp(x) * 2

def with_nested(x, y):
    b = [x * i for i in range(3)]
    assert x == x
    return sum(b) + (lambda t: t * y)(2.0)

def make_closure(z):
    def closure(x):
        return math.tanh(x) * z
    return closure

class Model:
    def value(self, x):
        return np.sum(np.sin(x)) + math.log(2.0)

square = lambda x: x * x
"""
    path = tmp_path / "checked_module.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("checked_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    funcs = [module.plain, module.decorated, module.with_nested, module.make_closure(3.0)]
    return path, module, funcs + [module.Model.value, module.square]


def test_source_check_shortcut_agrees_with_the_shape_comparison(tmp_path, monkeypatch):
    # the check that a function's source is the code that runs: identical code (the fast
    # path) must give what comparing the shapes of the code (the general path) gives
    import linecache

    from dplus.transform import source

    _, _, funcs = _module_functions(tmp_path)
    big = load(tmp_path, "checked_big", straight_line_source(300, "checked_big"))
    shortcut_taken = []
    identical = source._identical

    def spy(compiled, code):
        shortcut_taken.append((code.co_name, identical(compiled, code)))
        return shortcut_taken[-1][1]

    monkeypatch.setattr(source, "_identical", spy)
    for f in funcs + [big]:
        node = source.function_source(f).node
        code = f.__code__
        imported = source._facts_of_file(linecache.getlines(code.co_filename)).imported
        fast = source._compiles_to(node, code, imported)
        monkeypatch.setattr(source, "_identical", lambda compiled, code: False)
        general = source._compiles_to(node, code, imported)
        monkeypatch.setattr(source, "_identical", spy)
        assert fast is True and general is True, f
    taken = dict(shortcut_taken)
    assert taken["plain"] and taken["checked_big"], taken  # the module's imports are matched


def test_source_check_refuses_an_edited_file_on_both_paths(tmp_path, monkeypatch):
    import linecache

    from dplus.transform import source

    path, module, _ = _module_functions(tmp_path)
    old_code = module.plain.__code__
    path.write_text(path.read_text().replace("return a * a", "return a * a * 3"))
    linecache.checkcache(str(path))
    lines = linecache.getlines(str(path))
    node = source._def_in_file(lines, old_code)
    imported = source._facts_of_file(lines).imported
    assert node is not None
    assert source._compiles_to(node, old_code, imported) is False
    monkeypatch.setattr(source, "_identical", lambda compiled, code: False)
    assert source._compiles_to(node, old_code, imported) is False
    with pytest.raises(dplus.SourceUnavailableError, match="changed since it was imported"):
        dplus.grad(module.plain)(0.3, 0.7)


_LAMBDA_MODULE = """\
import math

square = lambda x: x * x
pair = (lambda x: math.sin(x) * 2.0, lambda x, y: math.tanh(x) * y)
outer = lambda x: (lambda y: y * x)(x) + x
spread = lambda x, y: (
    math.cos(x) * y
    + x * 0.5
)

def holder():
    return lambda x: math.exp(x) - x
"""


def _lambdas_of(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_lambdas_are_found_in_the_parse_of_their_file_as_in_their_block(tmp_path):
    # a lambda's source comes from the lambdas of its first line in the parse of the whole
    # file (kept with the file's other facts); the parse of its own block (inspect's
    # tokenizer) must find the same node, and the gradient must be right
    import ast
    import inspect
    import linecache

    from dplus.transform import source

    _, module = _lambdas_of(tmp_path, "lambda_module", _LAMBDA_MODULE)
    inner = module.outer.__code__.co_consts
    cases = [
        (module.square, (0.7,)),
        (module.pair[0], (0.4,)),
        (module.pair[1], (0.3, -1.2)),
        (module.outer, (1.3,)),
        (module.spread, (0.2, 0.9)),
        (module.holder(), (-0.6,)),
    ]
    assert any(getattr(c, "co_name", "") == "<lambda>" for c in inner)  # (a lambda in a lambda)
    for fn, args in cases:
        code = fn.__code__
        found = source.function_source(fn).node
        block_lines, start = inspect.getsourcelines(fn)
        facts = source._facts_of_file(linecache.getlines(code.co_filename))
        assert found in facts.lambdas[code.co_firstlineno]
        # the block's own parse, positions shifted to the file's (the general path)
        module_tree, indent = source._parse_block(block_lines)
        source._shift(module_tree, start - 1, indent)
        from_block = [n for n in trees.walk(module_tree) if isinstance(n, ast.Lambda)]
        twin = [
            n
            for n in from_block
            if (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
            == (found.lineno, found.col_offset, found.end_lineno, found.end_col_offset)
        ]
        assert len(twin) == 1 and ast.dump(twin[0], include_attributes=True) == ast.dump(
            found, include_attributes=True
        ), fn
        for shift in (0.0, 0.35, -1.1):
            check_fd(fn, *(a + shift for a in args))


def test_a_lambda_edited_in_place_is_read_again(tmp_path):
    # an edit that keeps the file's line count: the file is parsed again (its lines are a new
    # list in linecache), not taken for the text of the code imported before
    import linecache

    path, module = _lambdas_of(tmp_path, "edited_lambda", "square = lambda x: x * x\n")
    assert dplus.grad(module.square)(0.5) == (1.0,)
    path.write_text("square = lambda x: x * x * x\n")
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location("edited_lambda", path)
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)
    assert dplus.grad(again.square)(0.5) == (0.75,)
    assert dplus.grad(module.square)(0.5) == (1.0,)  # (transformed before the edit)
