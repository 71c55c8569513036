"""In-place writes on NumPy arrays, adversarially (issue #22; issue #26, causes 1 and 2):
random programs of in-place writes through views, aliases of the same memory, containers
holding the array, a decorated helper and the caller's own argument, each checked like the
hand-written cases of ``test_numpy_in_place`` (plain result, the arguments after the call,
gradient against central differences on fast and general paths, Hessian-vector products).

Python's own semantics is the reference: ``a[1:] += a[:-1]`` reads as NumPy reads
overlapping operands, ``b = a[::-1]; b *= s`` changes ``a``, a fancy write with a repeated
index keeps the last value."""

from __future__ import annotations

import copy
import importlib.util
import itertools
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import NonDifferentiableError, grad
from tests.test_numpy_in_place import check

# the names a write can target: the array itself, views of it made before the writes, a
# second name, a list and a dict holding it, an attribute, an independent array
TARGETS = {
    "a": "a",
    "view": "v",  # v = a[1:4]
    "reversed": "r",  # r = a[::-1]
    "strided": "s2",  # s2 = a[::2]
    "second_name": "b",  # b = a
    "list_element": "held[0]",  # held = [a, c]
    "dict_value": "box['k']",  # box = {'k': a}
    "attribute": "obj.arr",  # obj.arr = a
    "independent": "c",  # c = y * 1.0
}

# writes into the array named T (at least 3 elements); S: a float expression of the inputs
WRITES = [
    "T += S",
    "T *= np.tanh(S) + 1.5",
    "T -= 0.5 * T",
    "T /= 1.5 + S * S",
    "T += T[::-1] * 0.5",  # operands overlapping the target
    "T[1:] += T[:-1]",
    "T[:-1] = T[1:] * S",
    "T[0] = S * T[-1]",
    "T[-1] *= S",
    "T[T > 0.0] *= 1.5",
    "T[T < 0.0] = S",
    "T[[0, 1, 0]] = T[[1, 2, 2]] * S",  # a repeated index: the last write wins
    "np.multiply(T, S, out=T)",
    "np.sin(T, out=T)",
    "np.add(T, np.cos(T), out=T)",
    "np.add.at(T, [0, 0, 2], S)",
    "np.multiply.at(T, [1, 1], 0.5 + S * S)",
    "np.copyto(T, np.cos(T) * S)",
    "np.copyto(T, T * S, where=T > 0.0)",
    "T.fill(S)",
    "T.sort()",
    "T[:] = np.tanh(T)",
    "T[...] = T * T",
    "scaled_in_place(T, S)",
]

SCALARS = ["t", "np.sum(y) * 0.3", "float(y[0])", "np.tanh(t) * float(x[1])"]

HEADER = """\
import numpy as np
import dplus


class Holder:
    pass


@dplus.define_dplus
def scaled_in_place(u, s):
    u *= np.tanh(s)
    return float(np.sum(u))

"""


def program(on_argument: bool, writes: list[tuple[str, str, str]]) -> str:
    lines = [
        "def f(x, y, t):",
        "    a = x" if on_argument else "    a = x * 1.0",
        "    v = a[1:4]",
        "    r = a[::-1]",
        "    s2 = a[::2]",
        "    b = a",
        "    c = y * 1.0",
        "    held = [a, c]",
        "    box = {'k': a}",
        "    obj = Holder()",
        "    obj.arr = a",
    ]
    for target, write, scalar in writes:
        lines.append("    " + write.replace("T", TARGETS[target]).replace("S", f"({scalar})"))
    lines.append(
        "    return float(np.sum(np.tanh(a) * y) + np.sum(c * c) * 0.5 + t * np.sum(v) "
        "+ np.sum(r[:2]) * np.sum(s2))"
    )
    return HEADER + "\n".join(lines) + "\n"


_counter = itertools.count()


def load(source: str, tmp_path) -> object:
    """The function ``f`` of ``source``, from a module file (dplus reads the source)."""
    name = f"_inplace_random_{next(_counter)}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.f


writes_strategy = st.lists(
    st.tuples(st.sampled_from(sorted(TARGETS)), st.sampled_from(WRITES), st.sampled_from(SCALARS)),
    min_size=1,
    max_size=4,
)
inputs = st.integers(0, 2**32 - 1)


def _arguments(seed: int) -> tuple:
    r = np.random.default_rng(seed)
    # away from 0 so that masks and sort stay put under the finite differences' steps
    x = r.uniform(0.2, 1.5, size=6) * r.choice([-1.0, 1.0], size=6)
    x += np.arange(6) * 1e-2  # (no ties for sort)
    return x, r.normal(size=6), float(r.uniform(0.2, 1.2))


@settings(max_examples=30, deadline=None)
@given(on_argument=st.booleans(), writes=writes_strategy, seed=inputs)
def test_random_in_place_programs(tmp_path_factory, on_argument, writes, seed):
    f = load(program(on_argument, writes), tmp_path_factory.mktemp("prog"))
    x, y, t = _arguments(seed)
    with np.errstate(all="ignore"):
        expected = f(x.copy(), y.copy(), t)
    if not np.isfinite(expected) or abs(expected) > 1e6:
        return
    check(f, x, y, t, tol=2e-4)


# ---------------------------------------------------------------------------
# arguments that share memory: the same array passed twice, a view and its base


def twice_mutated(p, q):
    p *= 2.0
    q += np.sin(p)  # q is p: reads the doubled values
    return float(np.sum(p * q))


def held_twice(p):
    xs = [p, p]  # one array, two elements of a list
    xs[0] *= 2.0
    xs[1] += np.sin(xs[0])
    return float(np.sum(xs[0] * xs[1]))


def list_of_the_same_array_twice(xs):
    xs[0] *= 2.0
    xs[1] += np.sin(xs[0])
    return float(np.sum(xs[0] * xs[1]))


def view_and_base(p, q):
    q[0] = np.sum(p) * 0.5  # q is p[1:]: writes into p
    p *= 1.5
    return float(np.sum(np.tanh(p)) + np.sum(q * q))


def _fd_of_shared(f, make_args, x, eps=1e-6):
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        g[k] = (f(*make_args(hi)) - f(*make_args(lo))) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "f,make_args,combine",
    [
        (twice_mutated, lambda x: (x, x), lambda g: g[0] + g[1]),
        (view_and_base, lambda x: (x, x[1:]), lambda g: g[0] + np.concatenate([[0.0], g[1]])),
        (list_of_the_same_array_twice, lambda x: ([x, x],), lambda g: g[0][0] + g[0][1]),
        (held_twice, lambda x: (x,), lambda g: g[0]),
    ],
)
def test_arguments_sharing_memory(f, make_args, combine):
    """The caller's memory changes as in the plain call, and the gradients by argument add up
    (each where it shows the memory) to the derivative with respect to the memory."""
    for seed in range(4):
        x = np.random.default_rng(seed).normal(size=5)
        plain = x.copy()
        expected = f(*make_args(plain))
        mine = x.copy()
        r = dplus.dplus(f)(*make_args(mine))
        assert np.allclose(r.primal, expected, rtol=1e-12)
        assert np.array_equal(mine, plain)
        gs = r.backprop(1.0)
        assert np.array_equal(mine, plain)  # (the reverse pass leaves the program's values)
        fd = _fd_of_shared(f, make_args, x)
        assert np.allclose(combine(gs), fd, rtol=1e-5, atol=1e-5), (combine(gs), fd)
        again = x.copy()
        assert np.allclose(combine(grad(f)(*make_args(again))), fd, rtol=1e-5, atol=1e-5)
        assert np.array_equal(again, plain)


def test_arguments_sharing_memory_at_second_order_are_refused():
    x = np.array([0.5, -0.7, 1.2])
    v = np.array([1.0, 0.3, -0.5])
    with pytest.raises(NonDifferentiableError, match="share memory.*pass copies"):
        dplus.hvp(twice_mutated)((x, x), (v, v))
    # (one argument: nothing is shared at the boundary, and the Hessian is right)
    fd = (grad(held_twice)(x + 1e-5 * v)[0] - grad(held_twice)(x - 1e-5 * v)[0]) / 2e-5
    assert np.allclose(dplus.hvp(held_twice)((x.copy(),), (v,))[0], fd, rtol=1e-4, atol=1e-4)


def test_random_program_source_is_python():
    """(the generator's templates all parse and run plainly)"""
    for target, write in itertools.product(TARGETS, WRITES):
        f = load_plain(program(False, [(target, write, "t")]))
        x, y, t = _arguments(1)
        with np.errstate(all="ignore"):
            f(copy.deepcopy(x), y, t)


def load_plain(source: str):
    namespace: dict = {}
    exec(compile(source, "<random-in-place>", "exec"), namespace)
    return namespace["f"]


# ---------------------------------------------------------------------------
# the out-of-place fast path of unshared locals (transform.sharing) equals the in-place path

AUGMENTED = ["a += S", "a *= np.tanh(S) + 1.5", "a -= 0.5 * a", "a /= 1.5 + S * S", "a **= 2"]


def unshared_program(writes: list[tuple[str, str]], shared: bool) -> str:
    lines = ["def f(x, y, t):", "    a = x * 1.0"]
    if shared:
        lines.append("    seen = [a]  # (a second reference: the writes run in place)")
    for write, scalar in writes:
        lines.append("    " + write.replace("S", f"({scalar})"))
    lines.append("    return float(np.sum(np.tanh(a) * y))")
    return HEADER + "\n".join(lines) + "\n"


@settings(max_examples=15, deadline=None)
@given(
    writes=st.lists(
        st.tuples(st.sampled_from(AUGMENTED), st.sampled_from(SCALARS)), min_size=1, max_size=4
    ),
    seed=inputs,
)
def test_unshared_fast_path_equals_the_in_place_path(tmp_path_factory, writes, seed):
    folder = tmp_path_factory.mktemp("prog")
    fast = load(unshared_program(writes, False), folder)
    in_place = load(unshared_program(writes, True), folder)
    x, y, t = _arguments(seed)
    with np.errstate(all="ignore"):
        expected = fast(x.copy(), y.copy(), t)
    if not np.isfinite(expected) or abs(expected) > 1e6:
        return
    r_fast = dplus.dplus(fast)(x.copy(), y.copy(), t)
    r_slow = dplus.dplus(in_place)(x.copy(), y.copy(), t)
    assert r_fast.primal == r_slow.primal == expected
    for g_fast, g_slow in zip(r_fast.backprop(1.0), r_slow.backprop(1.0)):
        assert np.allclose(g_fast, g_slow, rtol=1e-12, atol=1e-12)
    check(in_place, x, y, t, tol=2e-4)
