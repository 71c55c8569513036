"""A refusal raised in the reverse pass of a statement names that statement's line (R6-3 in
tests/fuzz/FINDINGS.md): the reverse code of a segment of several statements took the line of
the segment's first statement, so a refusal in the reverse of ``return rosen(x)`` named the
line of the method's ``self.nfev += 1`` before it. Checked with the fast paths, with the
general path only, and at the second order, in a module written for the test: a method
whose first statement is ``self.nfev += 1``, a blank line between statements, a statement
over several lines (its call's line), a nested function with a decorator before it."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap

import numpy as np
import pytest

import dplus
from dplus.transform.transformer import general_paths_only

HELPER = """
def unknown(x):  # no rule, not decorated: the default policy refuses its result's sensitivity
    return x * x
"""

MODULE = """
import dplus
from refusal_lines_helper import unknown


@dplus.define_dplus
def logged(fn):  # a decorator of the user's
    return fn


class Problem:
    def __init__(self):
        self.nfev = 0

    def fun(self, x):
        self.nfev += 1
        return unknown(x)  # refused here


def blank_line_between(x):
    y = x * 2.0

    return unknown(y)  # refused here


def several_lines(x, k):
    y = x * 2.0
    w = y * y + k
    z = (y +
         unknown(  # refused here
             y) * w)
    return z


def after_a_decorated_function(x):
    y = x * 2.0

    @logged
    def g(u):
        return u

    return unknown(y) + g(y)  # refused here


def static_nested_function(x):
    @staticmethod
    def g(u):
        return u * x

    return g(x)
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    where = tmp_path_factory.mktemp("refusal_lines")
    (where / "refusal_lines_helper.py").write_text(textwrap.dedent(HELPER))
    (where / "refusal_lines_module.py").write_text(textwrap.dedent(MODULE))
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("refusal_lines_module")
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("refusal_lines_module", None)
        sys.modules.pop("refusal_lines_helper", None)


def marked_line(name: str) -> int:
    lines = textwrap.dedent(MODULE).splitlines()
    start = next(i for i, line in enumerate(lines) if f"def {name}(" in line)
    return 1 + next(i for i in range(start, len(lines)) if "# refused here" in lines[i])


def functions(module):
    return {
        "fun": (module.Problem().fun, (1.5,)),
        "blank_line_between": (module.blank_line_between, (1.5,)),
        "several_lines": (module.several_lines, (1.5, 2.0)),
        "after_a_decorated_function": (module.after_a_decorated_function, (1.5,)),
    }


def named_place(run) -> tuple[str, int]:
    with pytest.raises(dplus.UnknownTransformError) as info:
        run()
    found = re.findall(r"\(at (\S+), line (\d+), in (\w+)\)", str(info.value))
    assert len(found) == 1, str(info.value)
    path, line, _ = found[0]
    return path, int(line)


@pytest.mark.parametrize(
    "name", ["fun", "blank_line_between", "several_lines", "after_a_decorated_function"]
)
@pytest.mark.parametrize("way", ["fast", "general", "second_order", "float64_argument"])
def test_a_refusal_names_the_line_of_its_statement(module, name, way):
    f, args = functions(module)[name]
    if way == "fast":
        path, line = named_place(lambda: dplus.grad(f)(*args))
    elif way == "general":
        with general_paths_only():
            path, line = named_place(lambda: dplus.grad(f)(*args))
    elif way == "second_order":
        path, line = named_place(lambda: dplus.hessian(f)(*args))
    else:  # (a float64 argument: the fast segments' guards fail, their general variants run)
        path, line = named_place(lambda: dplus.grad(f)(np.float64(args[0]), *args[1:]))
    assert path == module.__file__
    assert line == marked_line(name)


def test_a_refused_nested_function_is_named_as_the_user_wrote_it(module):
    # (the refusal named the generated ``_dp_factory.<locals>.static_nested_function__plus.
    # <locals>.g__plus_1``)
    with pytest.raises(dplus.NonDifferentiableError) as info:
        dplus.grad(module.static_nested_function)(1.5)
    msg = str(info.value)
    assert "refusal_lines_module.static_nested_function.<locals>.g (" in msg
    assert "__plus" not in msg and "factory" not in msg
