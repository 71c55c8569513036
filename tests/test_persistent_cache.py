"""The persistent cache of generated code (issue #27): a hit in another process gives the same
gradients without transforming; every dependency of the generated code, changed, is a miss;
an unreadable entry is a miss, never an error or wrong code."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from path_helpers import check_fd, close, fd_gradient

import dplus
from dplus.transform import persistent_cache, transformer
from dplus.transform.transformer import general_paths_only

POINTS = [(0.3, 0.7), (-0.45, 0.2), (1.1, -0.6)]

MODEL = textwrap.dedent(
    """
    import math
    import dplus

    @dplus.define_dplus
    def spring(a, b):
        return a * b * 0.5 + math.sin(a)

    @dplus.define_dplus
    def helper(u):
        return u * u + 1.0

    def f(x, y):
        a = spring(x, y)
        b = math.tanh(a + y) * x
        c = helper(b) - 0.3 * a
        return c * y + math.cos(x * b)
    """
)

# one function, one entry
SINGLE = textwrap.dedent(
    """
    import math

    def f(x, y):
        a = math.sin(x) * y
        b = math.tanh(a + y) * x
        c = b * b + 1.0 - 0.3 * a
        return c * y + math.cos(x * b)
    """
)


@pytest.fixture
def cache_dir(tmp_path):
    directory = dplus.enable_cache(tmp_path / "cache")
    try:
        yield directory
    finally:
        dplus.disable_cache()


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    folder = tmp_path / "mods"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


_COUNTER = [0]


def fresh_module(folder: Path, text: str, name: str | None = None):
    """A module written to ``folder`` and imported (a new name each time, unless given)."""
    if name is None:
        _COUNTER[0] += 1
        name = f"cached_model_{os.getpid()}_{_COUNTER[0]}"
    (folder / f"{name}.py").write_text(text)
    importlib.invalidate_caches()
    if name in sys.modules:
        return importlib.reload(sys.modules[name])
    return importlib.import_module(name)


class Counts:
    """Hits and misses of the persistent cache during a block."""

    def __enter__(self):
        self.before = dict(persistent_cache.STATS)
        return self

    def __exit__(self, *exc):
        after = persistent_cache.STATS
        self.hits = after["hits"] - self.before["hits"]
        self.misses = after["misses"] - self.before["misses"]
        self.writes = after["writes"] - self.before["writes"]


def gradient_of(f, point=POINTS[0]):
    with Counts() as counts:
        g = dplus.grad(f)(*point)
    return g, counts


def reloaded(module):
    """The module imported again from its (unchanged) file: new code objects, as in a new process."""
    importlib.invalidate_caches()
    return importlib.reload(module)


def test_a_hit_gives_the_same_gradients_without_transforming(cache_dir, module_dir, monkeypatch):
    m = fresh_module(module_dir, MODEL)
    first, counts = gradient_of(m.f)
    assert counts.misses == counts.writes == 2  # f and helper (spring is inlined)
    m = reloaded(m)
    calls = []
    original = transformer._compile
    monkeypatch.setattr(
        transformer, "_compile", lambda *a, **k: calls.append(a) or original(*a, **k)
    )
    for point in POINTS:
        g, counts = gradient_of(m.f, point)
        close(g, fd_gradient(m.f, point), 1e-6)
        assert counts.misses == 0
    again, counts = gradient_of(m.f)
    assert calls == [] and again == first
    check_fd(m.f, *POINTS[1])


def test_a_hit_keeps_the_inlined_functions_guard(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    m = reloaded(m)
    g, counts = gradient_of(m.f)
    assert counts.hits == 2 and counts.misses == 0
    # the inlined define_dplus function rebound after the code was loaded: the guard fails
    # and the transform made without inlining calls the new one
    m.spring = dplus.define_dplus(lambda a, b: a * b)
    plain = lambda x, y: m.f(x, y)
    close(dplus.grad(m.f)(*POINTS[1]), fd_gradient(plain, POINTS[1]), 1e-6)


def test_editing_the_file_is_a_miss(cache_dir, module_dir):
    name = f"edited_model_{os.getpid()}"
    m = fresh_module(module_dir, MODEL, name)
    before, counts = gradient_of(m.f)
    # (a new size: Python and linecache take a file of the same size and second as unchanged)
    m = fresh_module(module_dir, MODEL.replace("0.3 * a", "0.75 * a"), name)
    after, counts = gradient_of(m.f)
    assert counts.misses >= 1
    assert after != before
    close(after, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_editing_an_inlined_function_is_a_miss(cache_dir, module_dir):
    name = f"edited_helper_{os.getpid()}"
    m = fresh_module(module_dir, MODEL, name)
    gradient_of(m.f)
    m = fresh_module(module_dir, MODEL.replace("a * b * 0.5", "a * b * 0.125"), name)
    g, counts = gradient_of(m.f)
    assert counts.misses >= 1
    close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_a_new_rule_is_a_miss(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    m = reloaded(m)
    # a (deliberately scaled) rule for helper: the generated code calls it, so the key changes
    dplus.rules.defvjp(m.helper, lambda A, r, u: A * 2.0 * u)
    g, counts = gradient_of(m.f)
    assert counts.misses >= 1
    close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_another_dplus_version_is_a_miss(cache_dir, module_dir, monkeypatch):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    monkeypatch.setattr(dplus, "__version__", dplus.__version__ + ".post1")
    g, counts = gradient_of(reloaded(m).f)
    assert counts.misses >= 1


def test_another_policy_is_a_miss(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    with dplus.current_unknown_transform(dplus.transform_from_source):
        g, counts = gradient_of(reloaded(m).f)
    assert counts.misses >= 1
    close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_general_paths_only_is_a_miss(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    fast, _ = gradient_of(m.f)
    with general_paths_only():
        general, counts = gradient_of(reloaded(m).f)
    assert counts.misses >= 1
    close(fast, general)


def test_a_global_rebound_is_a_miss(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    m = reloaded(m)
    m.helper = dplus.define_dplus(lambda u: u * u * u)
    g, counts = gradient_of(m.f)
    assert counts.misses >= 1
    close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),
        lambda data: data[:60] + bytes([data[60] ^ 0x40]) + data[61:],
        lambda data: b"not a cache entry at all" * 10,
    ],
    ids=["empty", "truncated", "last byte", "checksum", "garbage"],
)
def test_a_corrupt_entry_is_a_miss(cache_dir, module_dir, damage):
    m = fresh_module(module_dir, SINGLE)
    good, _ = gradient_of(m.f)
    (entry,) = list(Path(cache_dir).rglob("*.dpc"))
    entry.write_bytes(damage(entry.read_bytes()))
    g, counts = gradient_of(reloaded(m).f)
    assert counts.misses >= 1 and g == good


def test_an_entry_for_another_key_is_a_miss(cache_dir, module_dir):
    a = fresh_module(module_dir, SINGLE)
    b = fresh_module(module_dir, SINGLE.replace("0.3 * a", "0.9 * a"))
    gradient_of(a.f)
    gradient_of(b.f)
    first, second = sorted(Path(cache_dir).rglob("*.dpc"))
    one, other = first.read_bytes(), second.read_bytes()
    first.write_bytes(other)  # valid entries, each filed under the other's key
    second.write_bytes(one)
    for m in (reloaded(a), reloaded(b)):
        g, counts = gradient_of(m.f)
        assert counts.misses == 1
        close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_a_failed_write_is_no_error(cache_dir, module_dir, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(persistent_cache.tempfile, "mkstemp", disk_full)
    m = fresh_module(module_dir, MODEL)
    g, counts = gradient_of(m.f)
    assert counts.writes == 0 and counts.misses == 2
    close(g, fd_gradient(m.f, POINTS[0]), 1e-6)


def test_enable_cache_without_a_directory_names_the_fix(monkeypatch):
    monkeypatch.delenv("DPLUS_CACHE_DIR", raising=False)
    with pytest.raises(ValueError, match="DPLUS_CACHE_DIR"):
        dplus.enable_cache()


def test_second_order_is_unchanged_by_a_hit(cache_dir, module_dir):
    m = fresh_module(module_dir, MODEL)
    gradient_of(m.f)
    m = reloaded(m)
    h = dplus.hessian(m.f)(*POINTS[2])
    gx = lambda x, y: dplus.grad(m.f)(x, y)[0]
    close(h[0], fd_gradient(gx, POINTS[2]), 1e-5)


CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    import dplus
    from dplus.transform import persistent_cache, transformer
    calls = []
    original = transformer._compile
    transformer._compile = lambda *a, **k: calls.append(1) or original(*a, **k)
    import {module} as m
    t0 = time.perf_counter()
    g = dplus.grad(m.f)(0.3, 0.7)
    seconds = time.perf_counter() - t0
    print(json.dumps({{"grad": g, "seconds": seconds, "transformed": len(calls),
                      "stats": persistent_cache.STATS}}))
    """
)


def run_child(folder: Path, module: str, cache: Path) -> dict:
    env = dict(os.environ, DPLUS_CACHE_DIR=str(cache))
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(module=module), str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_across_processes(tmp_path, module_dir):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_big_functions import straight_line_source

    (module_dir / "big_model.py").write_text(
        straight_line_source(300, "f") + MODEL.replace("def f(", "def small(")
    )
    cold = run_child(module_dir, "big_model", tmp_path / "cache")
    warm = run_child(module_dir, "big_model", tmp_path / "cache")
    assert cold["stats"]["misses"] == 1 and cold["transformed"] == 1
    assert warm["stats"]["hits"] == 1 and warm["stats"]["misses"] == 0
    assert warm["transformed"] == 0
    assert warm["grad"] == cold["grad"]
    print(f"300 lines: cold {cold['seconds']:.3f} s, warm {warm['seconds']:.3f} s")


def test_derivatives_of_derivatives_are_read_from_the_cache(cache_dir, module_dir):
    m = fresh_module(module_dir, SINGLE)
    with Counts() as first:
        h = dplus.hessian(m.f)(*POINTS[1])
    m = reloaded(m)
    with Counts() as again:
        h2 = dplus.hessian(m.f)(*POINTS[1])
    # (the rules transformed again stay transformed in this process: fewer hits than misses)
    assert first.misses >= 2 and again.misses == 0 and again.hits >= 2
    assert h2 == h
    for i, point in enumerate(POINTS):
        h = dplus.hessian(m.f)(*point)
        for k in range(2):
            gk = lambda x, y, k=k: dplus.grad(m.f)(x, y)[k]
            close(h[k], fd_gradient(gk, point), 1e-5)


def test_third_order_from_the_cache(cache_dir, module_dir):
    m = fresh_module(module_dir, SINGLE)

    def third(f):
        fx = lambda x, y: dplus.grad(f)(x, y)[0]
        fxx = lambda x, y: dplus.grad(fx)(x, y)[0]
        return fxx, dplus.grad(fxx)

    fxx, g = third(m.f)
    before = g(*POINTS[0])
    m = reloaded(m)
    fxx, g = third(m.f)
    with Counts() as again:
        after = g(*POINTS[0])
    assert after == before and again.hits >= 3
    close(after, fd_gradient(fxx, POINTS[0]), 1e-4)
