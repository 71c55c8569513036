"""Tests of the fuzzer's NumPy grammar (family ``numpy``) and of the checker's array support."""

from __future__ import annotations

import dataclasses

import numpy as np

import dplus

from .checker import Checker, args_text, build_args, leaves, load, replaced, unload
from .generator import ARRAY_SHAPES, generate

NUMPY = {
    "numpy",
    "arith",
    "math",
    "float32_arrays",
    "array_inplace_local",
    "array_inplace_argument",
}


def test_generated_numpy_programs_are_valid_and_return_floats():
    ran = 0
    seen = set()
    markers = {
        "einsum": "np.einsum(",
        "matmul": " @ ",
        "dot": "np.dot(",
        "rows": " in A",
        "unpack": ", r",
        "where": "np.where(",
        "stack": "np.stack(",
        "concatenate": "np.concatenate(",
        "axis": "axis=",
        "keepdims": "keepdims=True",
        "reshape": ".reshape(",
        "transpose": ".T",
        "fancy": "[[",
        "local_in_place": "* 1.0\n",
        "helper": "def nh",
        "closure": "lambda u",
        "ufunc": "np.tanh(",
    }
    for seed in range(120):
        p = generate(seed, NUMPY)
        assert generate(seed, NUMPY).source == p.source
        compile(p.source, f"<seed {seed}>", "exec")
        seen |= {name for name, m in markers.items() if m in p.source}
        module = load(p.source)
        try:
            args = build_args(module, p.args)
            for a in args:
                if isinstance(a, np.ndarray):
                    assert a.shape in ARRAY_SHAPES.values() and a.dtype in (np.float64, np.float32)
            result = module.f(*args)
            assert type(result) is float
            ran += 1
        finally:
            unload(module)
    assert ran == 120  # every generated NumPy program runs
    assert seen == set(markers), set(markers) - seen


def test_without_the_family_no_arrays():
    for seed in range(30):
        p = generate(seed, {"arith", "math", "loops"})
        assert "np." not in p.source.split("\ndef f(", 1)[1]
        assert not any(isinstance(a, np.ndarray) for a in p.args)


def test_array_leaves_are_perturbed_on_copies():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    paths = list(leaves((0.5, a)))
    assert paths == [(0,), (1, (0, 0)), (1, (0, 1)), (1, (1, 0)), (1, (1, 1))]
    args = replaced((0.5, a), (1, (1, 0)), 9.0)
    assert args[1][1, 0] == 9.0 and a[1, 0] == 3.0
    assert "np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float64)" in args_text((a,))


def simple(source: str, args: tuple):
    return dataclasses.replace(
        generate(0, NUMPY), source="import numpy as np\nimport dplus\n" + source, args=args
    )


def test_checker_accepts_correct_array_programs_at_both_orders():
    p = simple(
        "def f(A, x):\n    return float(np.sum(np.tanh(A) @ np.ones(3)) * x)\n",
        (np.array([[0.1, -0.4, 0.7], [0.2, 0.3, -1.1]]), 0.6),
    )
    out = Checker(order=2).check(p)
    assert out.status == "ok", out
    assert out.partials == 7 and out.second == 7
    f32 = simple(
        "def f(A, x):\n    return float(np.sum(np.sin(A)) * x)\n",
        (np.array([0.1, -0.4, 0.7], dtype=np.float32), 0.6),
    )
    assert Checker().check(f32).status == "ok"


def test_checker_detects_a_changed_array_argument(monkeypatch):
    p = simple("def f(A):\n    return float(np.sum(A * A))\n", (np.array([0.1, -0.4, 0.7]),))
    real = dplus.dplus

    def mutating(f):
        plus = real(f)

        def call(*args):
            result = plus(*args)
            args[0][0] += 1e-13  # tiny: only an exact comparison sees it
            return result

        return call

    monkeypatch.setattr(dplus, "dplus", mutating)
    out = Checker().check(p)
    assert (out.status, out.kind) == ("wrong", "mutation"), out


def test_a_refusal_after_an_array_argument_changed_is_a_failure(monkeypatch):
    p = simple("def f(A):\n    return float(np.sum(A * A))\n", (np.array([0.1, -0.4, 0.7]),))

    def refusing_late(f):
        def call(*args):
            args[0][1] = 5.0
            raise dplus.NonDifferentiableError("refused too late")

        return call

    monkeypatch.setattr(dplus, "dplus", refusing_late)
    out = Checker().check(p)
    assert (out.status, out.kind) == ("wrong", "mutation"), out


def test_in_place_on_an_argument_is_checked_like_the_plain_call():
    # the caller's array changes as in the plain call, and its gradient is that of its value on
    # entry: both checked (first and second order)
    p = simple(
        "def f(A, x):\n    A += 1.0\n    A[0] *= x\n    return float(np.sum(A * A)) * x\n",
        (np.array([0.1, -0.4, 0.7]), 0.5),
    )
    for order in (1, 2):
        out = Checker(order=order).check(p)
        assert out.status == "ok", out


def test_checker_detects_a_wrong_hessian_vector_product(monkeypatch):
    p = simple(
        "def f(A, x):\n    return float(np.sum(np.sin(A))) * x\n", (np.array([0.1, -0.4, 0.7]), 0.6)
    )
    real = dplus.hvp
    monkeypatch.setattr(
        dplus, "hvp", lambda f: lambda args, v: tuple(h * 1.01 for h in real(f)(args, v))
    )
    out = Checker(order=2).check(p)
    assert (out.status, out.kind) == ("wrong", "second_order"), out
