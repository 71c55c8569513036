"""Fast tests of the fuzzer itself: the generator makes valid programs, the checker catches
planted bugs, the shrinker reduces a planted failure."""

from __future__ import annotations

import dataclasses

import pytest

import dplus

from .checker import FLOAT32, FLOAT64, Checker, build_args, kink_within_steps, load, unload
from .generator import FEATURES, generate
from .runner import reproduction
from .shrink import Shrinker

# A rule whose backpropagator is wrong on purpose: d(x*x)/dx is 2x, it says 3x.
BROKEN_RULE = """
def planted_square(x):
    return x * x

@dplus.register_backprop(planted_square)
def _planted_square_backprop(x):
    return lambda A, Abox: ((), 3.0 * x * A)
"""


def planted(seed: int, call: str = "planted_square(x1)"):
    """A generated float-only program whose result also goes through ``call``."""
    # families whose programs dplus gets right, and no early return (so that the last line runs)
    p = generate(seed, {"arith", "math", "branches", "loops", "helpers", "tuples"}, float_only=True)
    lines = p.source.rstrip("\n").split("\n")
    assert lines[-1].startswith("    return ")
    lines[-1] = lines[-1] + f" + {call}"
    head, _, rest = "\n".join(lines).partition("\ndef f(")
    return dataclasses.replace(p, source=head + "\n" + BROKEN_RULE + "\ndef f(" + rest + "\n")


def test_generated_programs_are_valid_deterministic_and_mostly_run():
    ran = 0
    for seed in range(40):
        p = generate(seed)
        assert generate(seed).source == p.source
        compile(p.source, f"<seed {seed}>", "exec")
        module = load(p.source)
        try:
            result = module.f(*build_args(module, p.args))
            assert isinstance(result, (int, float))
            ran += 1
        except Exception:
            pass
        finally:
            unload(module)
    assert ran >= 34


def test_feature_flags_leave_families_out():
    for seed in range(20):
        src = generate(seed, {"arith", "math"}).source
        body = src.split("\ndef f(", 1)[1]
        for construct in (
            "for ",
            "while ",
            "lambda",
            "try:",
            "if ",
            "append",
            "{",
            "def g",
            "nonlocal",
        ):
            assert construct not in body, (seed, construct, src)


def test_every_family_is_generated():
    seen = set()
    markers = {
        "loops": "for ",
        "closures": "nonlocal",
        "lambdas": "lambda",
        "varargs": "**kw",
        "dicts": "'a'",
        "objects": "Pt(",
        "exceptions": "except",
        "recursion": "def rec",
        "iterators": "zip(",
        "comprehensions": " for e",
        "early_return": "return",
        "misc": "assert",
    }
    for seed in range(300):
        src = generate(seed).source
        seen |= {family for family, m in markers.items() if m in src}
    assert seen == set(markers)
    assert set(markers) <= set(FEATURES)


def test_checker_accepts_a_correct_program():
    p = generate(3, float_only=True)
    p = dataclasses.replace(
        p,
        source="import math\nimport dplus\ndef f(x1, x2):\n    return math.sin(x1) * x2 ** 2\n",
        args=(0.3, -1.2),
    )
    out = Checker(order=2).check(p)
    assert out.status == "ok", out
    assert out.partials == 2 and out.second == 4


def test_checker_detects_a_planted_wrong_rule():
    out = Checker().check(planted(5))
    assert (out.status, out.kind) == ("wrong", "gradient"), out
    assert "args[0]" in out.detail


def test_checker_detects_backprop_differing_from_grad(monkeypatch):
    p = dataclasses.replace(
        generate(0), source="import dplus\ndef f(x1):\n    return x1 * x1\n", args=(1.5,)
    )
    real_grad = dplus.grad
    monkeypatch.setattr(
        dplus, "grad", lambda f: lambda *a: tuple(g + 1.0 for g in real_grad(f)(*a))
    )
    out = Checker().check(p)
    assert (out.status, out.kind) == ("wrong", "backprop_vs_grad"), out


def test_checker_detects_a_changed_primal_and_mutation(monkeypatch):
    p = dataclasses.replace(
        generate(0),
        source="import dplus\ndef f(xs):\n    xs.append(1.0)\n    return xs[0] * 2.0\n",
        args=([1.5],),
    )
    assert Checker().check(p).status == "ok"
    real = dplus.dplus

    def mutating_twice(f):
        plus = real(f)

        def call(*args):
            args[0].append(2.0)
            return plus(*args)

        return call

    monkeypatch.setattr(dplus, "dplus", mutating_twice)
    out = Checker().check(p)
    assert (out.status, out.kind) == ("wrong", "mutation"), out


def test_checker_classifies_crashes_refusals_skips_and_timeouts():
    crash = BROKEN_RULE.replace("3.0 * x * A)", "3.0 * x * A, None.missing)")
    src = "import dplus\n" + crash + "\ndef f(x1):\n    return planted_square(x1)\n"
    p = dataclasses.replace(generate(0), source=src, args=(0.5,))
    out = Checker().check(p)
    assert out.status == "crash" and out.kind == "first:AttributeError", out

    refused = "import dplus\ndef f(x1):\n    return dplus.grad(len)([x1])[0]\n"
    p = dataclasses.replace(
        p, source="import dplus\ndef f(x1):\n    async def g():\n        pass\n    return x1\n"
    )
    out = Checker().check(p)
    assert out.status == "refused" and out.kind.startswith("first:UnsupportedSyntaxError"), out

    p = dataclasses.replace(p, source="def f(x1):\n    return [][0]\n")
    assert Checker().check(p).kind == "plain-raised"

    p = dataclasses.replace(p, source="def f(x1):\n    while True:\n        pass\n")
    out = Checker(time_limit=0.3).check(p)
    assert out.status == "timeout", out
    del refused


def test_shrinker_reduces_a_planted_failure():
    p = planted(11)
    checker = Checker()
    out = checker.check(p)
    assert (out.status, out.kind) == ("wrong", "gradient"), out
    small = Shrinker(checker, budget=60).shrink(p, out)
    assert checker.check(small).signature == out.signature
    body = small.source.split("\ndef f(", 1)[1]
    assert len(body.splitlines()) <= 3, small.source
    assert "planted_square" in body
    text = reproduction(small, out)
    assert "def f(" in text and "finite differences" in text


@pytest.mark.parametrize("order", [1, 2])
def test_a_short_run_counts_outcomes(order, tmp_path):
    from .runner import run

    summary = run(
        range(7, 12), {"arith", "math", "branches"}, order, out_dir=str(tmp_path), shrink=False
    )
    assert summary.programs == 5
    assert sum(summary.by_status.values()) == 5
    assert summary.partials > 0
    if order == 2:
        assert summary.second > 0
    assert "programs" in summary.table()


def simple_program(source: str, args: tuple):
    return dataclasses.replace(generate(0), source=source, args=args)


def test_checker_detects_fast_paths_differing_from_the_general_path(monkeypatch):
    from contextlib import contextmanager

    from . import checker as checker_module

    p = simple_program("import math\ndef f(x1, x2):\n    return math.sin(x1) * x2\n", (0.4, 1.3))
    real_grad = dplus.grad

    @contextmanager
    def general_paths_with_a_bug():
        monkeypatch.setattr(
            dplus, "grad", lambda f: lambda *a: tuple(2.0 * g for g in real_grad(f)(*a))
        )
        try:
            yield
        finally:
            monkeypatch.setattr(dplus, "grad", real_grad)

    monkeypatch.setattr(checker_module, "general_paths_only", general_paths_with_a_bug)
    out = Checker().check(p)
    assert (out.status, out.kind) == ("wrong", "fast_vs_general"), out


def test_checker_detects_a_wrong_hessian(monkeypatch):
    p = simple_program("import math\ndef f(x1, x2):\n    return math.sin(x1) * x2\n", (0.4, 1.3))
    real = dplus.hessian
    monkeypatch.setattr(
        dplus, "hessian", lambda f: lambda *a: ((real(f)(*a)[0][0] + 0.01, 0.0), real(f)(*a)[1])
    )
    out = Checker(order=2).check(p)
    assert (out.status, out.kind) == ("wrong", "second_order"), out
    assert Checker(order=1).check(p).status == "ok"


def test_the_third_order_check_counts_entries_and_detects_a_wrong_one(monkeypatch):
    from . import checker as checker_module

    p = simple_program(
        "import math\ndef f(x1, x2):\n    return math.sin(x1) * x2 * x2\n", (0.4, 1.3)
    )
    out = Checker(order=3, time_limit=120.0).check(p)
    assert out.status == "ok" and out.third > 0, out

    def entry_with_a_bug(f, i, j):
        def wrong(*a):
            # an entry whose derivative along args[0] is off by 0.2 x1
            return dplus.hessian(f)(*a)[i][j] + 0.1 * a[0] * a[0]

        return wrong

    monkeypatch.setattr(checker_module, "hessian_entry", entry_with_a_bug)
    out = Checker(order=3, time_limit=120.0).check(p)
    assert (out.status, out.kind) == ("wrong", "third_order"), out


def _one_sided(f, x, steps):
    """Per step: what the checker's central difference records for the kink test."""
    out = []
    for step in steps:
        h = step * max(1.0, abs(x))
        out.append((h, f(x + h) - f(x), h, f(x) - f(x - h)))
    return out


@pytest.mark.parametrize("precision", [FLOAT64, FLOAT32], ids=["float64", "float32"])
def test_a_kink_within_both_steps_is_seen_and_smooth_functions_are_not(precision):
    import math

    import numpy as np

    rng = np.random.default_rng(7)
    smallest = min(precision.steps)
    for x in rng.uniform(-3.0, 3.0, 50):
        tolerance = precision.agree * max(1.0, abs(x))
        # a kink closer than a third of the smaller step: both central differences agree on
        # the mean of the two slopes, the forward-minus-backward differences do not shrink
        for fraction in (0.0, 0.01, 0.1, 0.3):
            kink = x + fraction * smallest * max(1.0, abs(x)) * rng.choice([-1.0, 1.0])
            for jump in (0.5, 3.0, -20.0):
                relu = lambda t, k=kink, j=jump: j * max(t - k, 0.0) + math.sin(t)
                assert kink_within_steps(_one_sided(relu, x, precision.steps), tolerance), (
                    x,
                    fraction,
                    jump,
                )
        for smooth in (math.sin, math.exp, lambda t: t**3 - 2 * t, lambda t: 1 / (1 + t * t)):
            assert not kink_within_steps(_one_sided(smooth, x, precision.steps), tolerance), x
