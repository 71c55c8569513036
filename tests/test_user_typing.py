"""A user's own code that calls the public API type-checks under ``mypy --strict`` (issue #23):
the signatures say what ``grad``, ``value_and_grad``, ``jacobian`` ... return. dplus is
checked as an installed package would be (its own modules' errors are not the user's:
``--follow-imports=silent``, as mypy treats site-packages), from a copy laid out as
installed (``primitives/`` as ``dplus/primitives``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")
ROOT = Path(__file__).resolve().parent.parent

USER_CODE = """
import math
from typing import Any, Callable

import dplus


def f(x: float, y: float) -> float:
    return math.sin(x) * y


gradient: Callable[..., tuple[Any, ...]] = dplus.grad(f)
dx, dy = dplus.grad(f)(1.0, 2.0)
value, g = dplus.value_and_grad(f, argnums=(0, 1))(1.0, 2.0)
first: Any = dplus.grad(f, argnums=0)(1.0, 2.0)
H = dplus.hessian(f)(1.0, 2.0)
J = dplus.jacobian(f)(1.0, 2.0)
r = dplus.dplus(f)(1.0, 2.0)
p = r.primal
back = dplus.D(f)(1.0, 2.0)
sens = back(1.0)
d2 = dplus.grad1(dplus.grad1(math.cos))(0.0)
with dplus.current_unknown_transform(dplus.transform_from_source):
    pass
dplus.check_grad(f, 1.0, 2.0)
text: str = dplus.show(f)


@dplus.define_dplus
def cube(x: float) -> float:
    return x * x * x


c: float = cube(2.0)


def cube_again(x: float) -> float:
    return x**3


@dplus.register_backprop(cube_again)
def _cube_again_backprop(x: float) -> Callable[[float, Any], tuple[Any, ...]]:
    return lambda A, Abox: ((), 3 * x * x * A)


result: dplus.ProcResult = dplus.lift_dplus(cube_again)(2.0)
total: float = dplus.foldl(lambda x, acc: x + acc, 0.0, [1.0, 2.0])
"""

WRONG_CODE = """
import math
import dplus

a: str = dplus.grad1(math.cos)
b: int = dplus.value_and_grad(math.cos)
c: str = dplus.grad(math.cos)


@dplus.define_dplus
def cube(x: float) -> float:
    return x * x * x


d: str = cube(2.0)
e: str = dplus.dplus(cube)(2.0)
"""


def run_mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    stage = tmp_path / "stage"
    shutil.copytree(ROOT / "dplus", stage / "dplus", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "primitives",
        stage / "dplus" / "primitives",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    user = tmp_path / "user_code.py"
    user.write_text(code, encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-incremental",
            str(user),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MYPYPATH": str(stage)},
    )


def test_user_code_type_checks_strictly(tmp_path: Path) -> None:
    out = run_mypy(tmp_path, USER_CODE)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_signatures_are_read(tmp_path: Path) -> None:
    out = run_mypy(tmp_path, WRONG_CODE)
    assert out.returncode == 1
    assert out.stdout.count("Incompatible types in assignment") == 5, out.stdout
    assert (
        'expression has type "Callable[..., tuple[Any, ...]]", variable has type "str"'
        in out.stdout
    )
    assert 'expression has type "float", variable has type "str"' in out.stdout  # define_dplus
    assert 'expression has type "ProcResult", variable has type "str"' in out.stdout
