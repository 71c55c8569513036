"""Gradient functions pickled with cloudpickle work in a process where the user's source file
does not exist (issue #24): the source and the rules travel with the functions."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

cloudpickle = pytest.importorskip("cloudpickle")

MODEL = textwrap.dedent(
    """
    import json, math, sys
    import cloudpickle
    import numpy as np
    import dplus
    from dplus.rules import defvjp

    @dplus.define_dplus
    def helper(x, y):
        return math.sin(x) * y

    def smooth_abs(x):
        return math.sqrt(x * x + 1e-3)

    defvjp(smooth_abs, lambda g, ans, x: g * x / ans)

    @dplus.define_dplus
    def f(x, y):
        t = 0.0
        for k in range(3):
            t = t + helper(x * k, y) + smooth_abs(x - y) * x
        scale = lambda v: v * y          # a lambda inside: transformed with f
        return scale(t)

    def array_loss(w):
        return np.sum(np.tanh(w * np.arange(3.0)) ** 2)

    step = dplus.checkpoint(lambda s, k: (s[0] + 0.1 * s[1], s[1] - 0.1 * k * s[0]))

    @dplus.define_dplus
    def sim(k):
        s = (1.0, 0.0)
        for _ in range(20):
            s = step(s, k)
        return s[0]

    made = {
        "grad": dplus.grad(f),
        "grad1": dplus.grad1(lambda x: f(x, 0.7)),
        "value_and_grad": dplus.value_and_grad(f, argnums=(0, 1)),
        "jacobian": dplus.jacobian(f),
        "hessian": dplus.hessian(f),
        "array": dplus.grad1(array_loss),
        "checkpoint": dplus.grad1(sim),
    }
    args = {"grad": (0.3, 0.7), "grad1": (0.3,), "value_and_grad": (0.3, 0.7), "jacobian": (0.3, 0.7),
            "hessian": (0.3, 0.7), "array": ([0.2, -0.4, 0.9],), "checkpoint": (1.3,)}
    if sys.argv[2] == "warm":  # transformed in this process before pickling, or not
        expected = {k: repr(made[k](*[np.array(a) if isinstance(a, list) else a for a in args[k]]))
                    for k in made}
    else:
        expected = None
    with open(sys.argv[1], "wb") as fh:
        cloudpickle.dump((made, args), fh)
    if expected is not None:
        print(json.dumps(expected))
    """
)

LOADER = textwrap.dedent(
    """
    import json, sys
    import cloudpickle
    import numpy as np
    made, args = cloudpickle.load(open(sys.argv[1], "rb"))
    out = {}
    for k, g in made.items():
        try:
            out[k] = repr(g(*[np.array(a) if isinstance(a, list) else a for a in args[k]]))
        except Exception as e:
            out[k] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))
    """
)


def _run(path, *argv, cwd):
    r = subprocess.run(
        [sys.executable, str(path), *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "warm", [True, False], ids=["transformed-before-pickling", "pickled-untouched"]
)
def test_gradients_work_where_the_source_file_is_gone(tmp_path, warm):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    model = home / "model.py"
    model.write_text(MODEL)
    pickled = tmp_path / "made.pkl"
    # the reference values, computed where the source exists
    reference = _run(model, pickled, "warm", cwd=home)
    if not warm:
        _run_quiet(model, pickled, cwd=home)
    model.unlink()
    loader = elsewhere / "loader.py"
    loader.write_text(LOADER)
    got = _run(loader, pickled, cwd=elsewhere)
    assert got == reference


def _run_quiet(path, pickled, cwd):
    r = subprocess.run(
        [sys.executable, str(path), str(pickled), "cold"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr


def test_a_rule_that_cannot_be_pickled_does_not_make_its_function_unpicklable(tmp_path):
    script = tmp_path / "rule.py"
    script.write_text(
        textwrap.dedent(
            """
        import threading, cloudpickle, dplus
        lock = threading.Lock()
        def f(x):
            return x * 2.0
        def f_plus(x):
            with lock:
                return dplus.ProcResult(f(x), lambda A, Abox: ((), 2.0 * A))
        dplus.register_primitive(f, f_plus)
        cloudpickle.dumps(f)     # plain pickling of the user's function still works
        g = cloudpickle.loads(cloudpickle.dumps(f))
        assert g(3.0) == 6.0
        print("ok")
        """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_functions_of_importable_modules_carry_nothing():
    import math

    import dplus
    from dplus.runtime.portable import travels_by_value

    assert not travels_by_value(dplus.grad)
    assert not travels_by_value(math.sin)
    assert not hasattr(dplus.foldl, "__dplus_origin__")
