"""grad of a one-segment float function from its fused gradient alone (transformer.fused_first).

The plus-function, with the general variant of the segment, is built only when a call
first needs it. What is compiled first must be exactly the fused gradient the full build
makes (the code objects are compared), the gradients must agree with the general path and
with finite differences on inputs that take each way (floats, ints, a failing guard,
inside differentiated code), two threads must not build twice, and the gradient function
must pickle and nest as the eagerly made one does.
"""

from __future__ import annotations

import math
import pickle
import threading

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import close, fd_gradient, fd_hessian

import dplus
from benchmarks import bigfn
from dplus.transform import transformer
from dplus.transform.transformer import Compiled, FusedOnly, general_paths_only

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


def formula(x, y):
    a = x * y + math.sin(x)
    b = a * a - math.exp(y * 0.5)
    return b / (1.0 + x * x) + math.tanh(a - y)


def powers(x, y):
    a = x**2 * y**3
    return a + math.sqrt(x * x + 1.0) * y


SCALE = 2.0


def reads_a_global(x, y):
    return SCALE * x * y + math.cos(x)


def with_a_default(x, y=2.0):
    return x * y + math.sin(x)


def not_one_segment(x, y):
    if x > 0:
        return x * y
    return x - y


FUSED_FUNCTIONS = [formula, powers, reads_a_global]


def _fresh_copy(f):
    """A function with ``f``'s code but a code object of its own (nothing cached for it)."""
    import types

    code = f.__code__.replace(co_name=f.__code__.co_name)  # (a new code object, equal)
    code = code.replace(co_consts=code.co_consts + (object(),))
    g = types.FunctionType(code, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__qualname__ = f.__qualname__
    return g


def _families(tmp_path):
    out = []
    for label, make in bigfn.FAMILIES:
        n = 40 if "long" in label else 120
        name = "f_" + label.split(" ")[0].replace("-", "_").replace("/", "_")
        out.append(bigfn.load(tmp_path, name, make(n, name)))
    return out


def test_the_fused_gradient_built_alone_is_the_full_builds(tmp_path):
    built_alone = 0
    for f in FUSED_FUNCTIONS + [not_one_segment, with_a_default] + _families(tmp_path):
        alone = transformer._compile(f, fused_only=True)
        full = transformer._compile(f)
        if isinstance(alone, FusedOnly):
            built_alone += 1
            assert full.fused is not None
            assert alone.code == full.fused, f.__name__  # (bytecode, constants, names, lines)
            assert set(alone.helper_cells) <= set(full.helper_cells)
        else:  # not one fast segment: the build was the full one
            assert isinstance(alone, Compiled)
            assert alone.code == full.code and alone.fused == full.fused, f.__name__
    assert built_alone >= 4  # the three above and the straight-line family


def test_no_plus_function_is_built_until_a_call_needs_it():
    f = _fresh_copy(formula)
    g = dplus.grad(f)
    assert transformer._COMPILED.get(f.__code__) is None
    assert isinstance(transformer._FUSED_FIRST.get(f.__code__), FusedOnly)
    g(0.3, 0.7)
    assert transformer._COMPILED.get(f.__code__) is None
    g(1, 0.7)  # an int: the general way, built now
    assert transformer._COMPILED.get(f.__code__) is not None


@pytest.mark.parametrize(
    "shape, expected",
    [
        (not_one_segment, (0.7, 0.3)),
        (with_a_default, (0.7 + math.cos(0.3), 0.3)),  # (no fused gradient: a default)
    ],
)
def test_functions_of_other_shapes_are_built_once_in_full(shape, expected):
    f = _fresh_copy(shape)
    calls = []
    real = transformer._compile

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    transformer._compile = counted
    try:
        close(dplus.grad(f)(0.3, 0.7), expected)
    finally:
        transformer._compile = real
    assert len(calls) == 1 and transformer._COMPILED.get(f.__code__) is not None


@SETTINGS
@given(x=floats, y=floats, as_int=st.sampled_from([None, 0, 1]))
def test_gradients_agree_with_the_general_path_and_differences(x, y, as_int):
    for f in FUSED_FUNCTIONS:
        if f is powers and x < 0:
            x = -x
        args = [x, y]
        if as_int is not None:
            args[as_int] = int(round(args[as_int])) or 1
        fast = dplus.grad(_fresh_copy(f))(*args)
        with general_paths_only():
            general = dplus.grad(f)(*args)
        close(fast, general)
        fd = fd_gradient(f, [float(a) for a in args])
        close(fast, fd, tol=1e-5)


def test_a_failing_guard_takes_the_general_way():
    global SCALE
    f = _fresh_copy(reads_a_global)
    g = dplus.grad(f)
    close(g(0.3, 0.7), (2.0 * 0.7 - math.sin(0.3), 2.0 * 0.3))
    SCALE = 3  # (an int: still a number)
    try:
        close(g(0.3, 0.7), (3 * 0.7 - math.sin(0.3), 3 * 0.3))
        SCALE = 1 + 2j  # no number the guard takes: the general way
        with general_paths_only():
            general = dplus.grad(reads_a_global)(0.3, 0.7)
        assert g(0.3, 0.7) == general
        assert transformer._COMPILED.get(f.__code__) is not None
    finally:
        SCALE = 2.0


def test_two_threads_build_once():
    f = _fresh_copy(formula)
    builds = []
    real = transformer._compile
    barrier = threading.Barrier(2)

    def counted(*args, **kwargs):
        builds.append(kwargs)
        return real(*args, **kwargs)

    results = []

    def worker():
        barrier.wait()
        results.append(dplus.grad(f)(0.3, 0.7))

    transformer._compile = counted
    try:
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        transformer._compile = real
    assert len(builds) == 1 and results[0] == results[1] == dplus.grad(formula)(0.3, 0.7)


def test_nested_derivatives_of_a_gradient_made_from_its_fused_part():
    f = _fresh_copy(formula)
    g = dplus.grad(f)
    g(0.3, 0.7)  # (its plus-function not built)

    def first(x, y):
        return g(x, y)[0]

    second = dplus.grad(first)(0.3, 0.7)
    close(second, fd_hessian(formula, (0.3, 0.7))[0], tol=1e-5)
    with general_paths_only():
        g_general = dplus.grad(formula)
        close(second, dplus.grad(lambda x, y: g_general(x, y)[0])(0.3, 0.7))
    one = _fresh_copy(one_argument)
    for x in (0.3, -1.1, 2):
        second = dplus.grad(dplus.grad1(one))(x)
        with general_paths_only():
            close(second, dplus.grad(dplus.grad1(one_argument))(x))
        close(second, fd_gradient(dplus.grad1(one_argument), [float(x)]), tol=1e-5)
    third = dplus.grad(dplus.grad1(dplus.grad1(one)))(0.4)
    with general_paths_only():
        close(third, dplus.grad(dplus.grad1(dplus.grad1(one_argument)))(0.4))


def one_argument(x):
    return x * x * math.sin(x) + math.exp(-x * 0.5)


def test_the_gradient_pickles():
    f = formula
    g = dplus.grad(f)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        try:
            copy = pickle.loads(dumps(g))
        except (pickle.PicklingError, TypeError, AttributeError):
            assert dumps is pickle.dumps  # (a closure pickles with cloudpickle)
            continue
        assert copy(0.3, 0.7) == g(0.3, 0.7)
        assert copy(1, 0.7) == g(1, 0.7)
