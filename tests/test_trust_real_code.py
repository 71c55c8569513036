"""Trust on code written elsewhere (issues #18, #26): regression tests of the bugs found by
running HIPS/autograd's test suite with dplus in autograd's place (a shim outside the repo,
tests/fuzz/FINDINGS.md, "Branch realcode"), each checked against central finite differences
on several inputs, at first and second order where the construct allows."""

from __future__ import annotations

import functools
import inspect
import math
import typing

import numpy as np
import pytest
from path_helpers import check_first_order, check_second_order

import dplus

POINTS = [(0.7, 1.3), (-1.1, 0.4), (2.3, -0.6)]
rng = np.random.default_rng(1826)


def _fd_jvp(f, args, tangents, eps=1e-6):
    """(f(x + eps t) - f(x - eps t)) / 2 eps, for numbers and arrays (complex too)."""
    up = f(*[a + eps * t for a, t in zip(args, tangents)])
    down = f(*[a - eps * t for a, t in zip(args, tangents)])
    if isinstance(up, tuple):
        return tuple((u - d) / (2 * eps) for u, d in zip(up, down))
    return (up - down) / (2 * eps)


def _random_like(x):
    if isinstance(x, np.ndarray):
        v = rng.normal(size=x.shape)
        return v + 1j * rng.normal(size=x.shape) if x.dtype.kind == "c" else v
    if isinstance(x, complex):
        return complex(rng.normal(), rng.normal())
    return float(rng.normal())


# ---------------------------------------------------------------------------
# A loop over zip (enumerate, reversed) of tuples that writes into a list was refused at the
# second order ("zip() iterated lazily"), although over tuples, which nothing changes, the
# eager list gives the same items: the refusal now applies only where laziness can show.


@dplus.define_dplus
def _substituted(args, positions, values):
    new = list(args)
    for i, v in zip(positions, values):
        new[i] = v
    return tuple(new)


def zip_of_tuples_writing_a_list(x, y):
    a, _, b = _substituted((1.0, 2.0, 3.0), (0, 2), (x, y))
    return a * a * b + math.sin(a * b)


def enumerate_of_a_tuple_writing_a_list(x, y):
    out = [0.0, 0.0]
    for i, v in enumerate((x * y, y)):
        out[i] = v * v
    return out[0] * out[1] + x


def reversed_tuple_writing_a_list(x, y):
    out = [x, y]
    for v in reversed((x, x * y)):
        out.append(v * out[-1])
    return out[-1] + out[-2] * y


@pytest.mark.parametrize(
    "f",
    [
        zip_of_tuples_writing_a_list,
        enumerate_of_a_tuple_writing_a_list,
        reversed_tuple_writing_a_list,
    ],
)
@pytest.mark.parametrize("point", POINTS)
def test_lazy_builtin_over_tuples_at_second_order(f, point):
    check_first_order(f, *point)
    check_second_order(f, *point)


def test_lazy_zip_over_a_list_written_by_the_loop_at_second_order():
    def f(xs):
        t = 0.0
        for a, b in zip(xs, xs[1:]):
            t = t + a * b
            xs[0] = 2.0 * a
        return t

    def g(x0, x1, x2):  # (behind what zip has read: the items made at once are Python's)
        xs = [x0, x1, x2]
        t = 0.0
        for a, b in zip(xs, xs[1:]):
            t = t + a * b
            xs[0] = 2.0 * a
        return t

    def ahead(x0, x1, x2):  # (ahead: Python's zip reads the new value)
        xs = [x0, x1, x2]
        t = 0.0
        for a, b in zip(xs, xs[1:]):
            t = t + a * b
            xs[1] = 2.0 * a
        return t

    assert dplus.grad(f)([1.0, 2.0, 3.0]) == ([2.0, 1.0 + 3.0, 2.0],)  # first order: x0 x1 + x1 x2
    check_second_order(g, 1.0, 2.0, 3.0)
    check_first_order(ahead, 1.0, 2.0, 3.0)
    with pytest.raises(dplus.NonDifferentiableError, match="zip"):
        dplus.hessian(ahead)(1.0, 2.0, 3.0)


# ---------------------------------------------------------------------------
# jvp and jacobian of complex numbers: the imaginary part of J·t was dropped (a complex
# result's tangent computed from the unit sensitivity only, then written into a float
# array), and jacobian cast every block to float, dropping the imaginary part of the
# gradient of a complex argument. Silently wrong numbers.


def real_to_complex(x):
    return x * (1.0 + 2.0j) + np.exp(1j * x)


def complex_holomorphic(z):
    return np.sin(z) * z


@dplus.define_dplus
def complex_to_real(z):
    return np.abs(z) ** 2 + np.real(z * z)


def real_pair_to_complex(x, y):
    return np.exp((x + 1j * y) * x)


@pytest.mark.parametrize(
    "f, args",
    [
        (real_to_complex, (0.4,)),
        (real_to_complex, (np.array([0.4, -1.2, 2.0]),)),
        (complex_holomorphic, (0.3 + 0.8j,)),
        (complex_holomorphic, (np.array([0.3 + 0.8j, -1.0 + 0.1j]),)),
        (complex_to_real, (np.array([0.3 + 0.8j, -1.0 + 0.1j]),)),
        (real_pair_to_complex, (0.5, -0.7)),
        (real_pair_to_complex, (np.array([0.5, 1.5]), np.array([-0.7, 0.2]))),
    ],
)
def test_jvp_of_complex_functions_against_finite_differences(f, args):
    for _ in range(3):
        tangents = tuple(_random_like(a) for a in args)
        y, jt = dplus.jvp(f)(args, tangents)
        np.testing.assert_array_equal(y, f(*args))
        np.testing.assert_allclose(jt, _fd_jvp(f, args, tangents), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("x", [0.4, -1.3, np.array([0.4, -1.2, 2.0])])
def test_jacobian_of_a_complex_result_of_a_real_argument(x):
    (J,) = dplus.jacobian(real_to_complex)(x)
    expected = (1.0 + 2.0j) + 1j * np.exp(1j * x)  # d/dx, elementwise
    np.testing.assert_allclose(J, np.diag(expected) if np.ndim(x) else expected, rtol=1e-12)


@pytest.mark.parametrize("z", [0.3 + 0.8j, np.array([0.3 + 0.8j, -1.0 + 0.1j])])
def test_jacobian_of_a_holomorphic_function_is_its_complex_derivative(z):
    (J,) = dplus.jacobian(complex_holomorphic)(z)
    expected = np.cos(z) * z + np.sin(z)
    np.testing.assert_allclose(J, np.diag(expected) if np.ndim(z) else expected, rtol=1e-12)


def test_jacobian_of_a_real_result_of_complex_arguments_keeps_the_imaginary_part():
    z = np.array([0.3 + 0.8j, -1.0 + 0.1j])
    (J,) = dplus.jacobian(complex_to_real)(z)
    (g,) = dplus.grad(lambda z: np.sum(complex_to_real(z)))(z)
    assert J.dtype.kind == "c"
    np.testing.assert_allclose(np.sum(J, axis=0), g, rtol=1e-12)
    for _ in range(3):  # each row against finite differences along a random direction
        v = _random_like(z)
        np.testing.assert_allclose(
            np.real(J @ v), _fd_jvp(complex_to_real, (z,), (v,)), rtol=1e-6, atol=1e-8
        )


def test_jacobian_of_a_non_holomorphic_complex_result_is_refused():
    with pytest.raises(dplus.NonDifferentiableError, match="holomorphic"):
        dplus.jacobian(lambda z: np.conj(z) * z)(0.3 + 0.8j)


# ---------------------------------------------------------------------------
# jvp inside differentiated code: its transform ran dplus's own helpers as unknown functions
# ("dplus reached its own dplus.derived._shaped_by_leaves"); it is now differentiated like
# jacobian, so the second derivative through a JVP (forward-over-reverse checks) works.


@dplus.define_dplus
def _jvp_of_sin_product(x, v):
    return dplus.jvp(lambda a: np.sin(a) * a[::-1])((x,), (v,))[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_through_jvp_against_finite_differences(seed):
    r = np.random.default_rng(seed)
    x, v, u = r.normal(size=3), r.normal(size=3), r.normal(size=3)

    def L(x, v):
        return np.sum(u * _jvp_of_sin_product(x, v))

    gx, gv = dplus.grad(L)(x, v)
    for _ in range(2):
        dx, dv = r.normal(size=3), r.normal(size=3)
        fd = _fd_jvp(L, (x, v), (dx, dv))
        np.testing.assert_allclose(np.sum(gx * dx) + np.sum(gv * dv), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("x", [0.3, -1.2, 2.0])
def test_jvp_of_a_scalar_function_inside_grad(x):
    def d(x):
        return dplus.jvp(lambda a: a * a * math.sin(a))((x,), (1.0,))[1]

    expected = 2 * math.sin(x) + 4 * x * math.cos(x) - x * x * math.sin(x)
    assert math.isclose(dplus.grad1(d)(x), expected, rel_tol=1e-12, abs_tol=1e-12)


# ---------------------------------------------------------------------------
# A function decorated with functools.wraps (scipy.linalg's batching wrapper): its transform
# bound the call's arguments with inspect.signature, which follows __wrapped__ to the wrapped
# function's parameters: `def wrapper(*args, **kwargs)` got args=x and kwargs=y, a raw
# TypeError ("argument after ** must be a mapping") or values in the wrong parameters.


def _batching(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        args = list(args)
        arrays, other_args = args[:1], args[1:]
        return f(*arrays, *other_args, **kwargs)

    return wrapper


@dplus.define_dplus
@_batching
@dplus.define_dplus
def scaled_product(a, b, scale=1.0):
    return a * b * scale + a


def _declared(f):
    def g(*args, **kwargs):
        return f(*args, **kwargs) * 2.0

    g.__signature__ = inspect.signature(f)  # (as some libraries declare)
    return g


@dplus.define_dplus
@_declared
@dplus.define_dplus
def declared_signature(u, v):
    return u * math.exp(v)


def uses_wrapped(x, y):
    return scaled_product(x, y, scale=2.0) + scaled_product(y * y, x) + declared_signature(x, y)


@pytest.mark.parametrize("point", POINTS)
def test_functools_wraps_wrapper_binds_its_own_parameters(point):
    check_first_order(uses_wrapped, *point)
    check_second_order(uses_wrapped, *point)


def test_functools_wraps_wrapper_of_arrays():
    x, y = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))

    def f(a):
        return np.sum(scaled_product(a, y, scale=0.5) ** 2)

    (g,) = dplus.grad(f)(x)
    for _ in range(3):
        v = rng.normal(size=(2, 2))
        assert np.isclose(np.sum(g * v), _fd_jvp(f, (x,), (v,)), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------
# value_and_grad and JAX's grad(f, argnums=...) inside a function differentiated twice: the
# makers of the JAX forms had no rule, so the second order ran them as unknown functions
# (their plus-function argument handed over as a primal-only callable): a raw AttributeError
# ('float' object has no attribute 'primal'); and api._grad_inside called the JAX forms'
# transform as a plain function, which returned the function made where a ProcResult was
# expected ('function' object has no attribute 'primal').


def _inner(y, x):
    return x * y * math.sin(y * x)


def value_and_grad_inside(x, y):
    value, g = dplus.value_and_grad(_inner, argnums=0)(y, x)
    return x * g + value * y


def jax_grad_inside(x, y):
    return x * dplus.grad(_inner, argnums=0)(y, x) + y


def jax_grad_of_both_inside(x, y):
    gy, gx = dplus.grad(_inner, argnums=(0, 1))(y * x, x)
    return gy * gx


@pytest.mark.parametrize("f", [value_and_grad_inside, jax_grad_inside, jax_grad_of_both_inside])
@pytest.mark.parametrize("point", POINTS)
def test_jax_forms_inside_code_differentiated_twice(f, point):
    check_first_order(f, *point)
    check_second_order(f, *point)


def test_jax_grad_of_a_function_defined_inside_refuses_at_second_order_as_grad_does():
    def rackpropagator_style(x):
        return x * dplus.grad(lambda y: x * y * y)(2.0)[0]

    def jax_style(x):
        return x * dplus.grad(lambda y: x * y * y, argnums=0)(2.0)

    for f in (rackpropagator_style, jax_style):
        assert dplus.grad1(f)(1.5) == 8.0 * 1.5  # first order: d/dx (4 x^2)
        with pytest.raises(dplus.NonDifferentiableError, match="defined inside"):
            dplus.hessian(f)(1.5)


# ---------------------------------------------------------------------------
# Unpacking a tuple subclass (NumPy's SVDResult, EighResult, SlogdetResult, a NamedTuple) at
# the second order was refused ("unpack a tuple"): its sensitivity is a plain tuple of the
# parts, as a tuple's is, so the rule of a tuple applies.


def svd_unpacked(a):
    u, s, vt = np.linalg.svd(a)
    return np.sum(s**3) + np.sum(u[:, 0] * vt[0]) ** 2


def eigh_unpacked(a):
    w, v = np.linalg.eigh(a + a.T)
    return np.sum(w**3) + np.sum(v[:, 0] ** 4)


def slogdet_unpacked(a):
    sign, logdet = np.linalg.slogdet(a)
    return logdet * sign + logdet**2


@pytest.mark.parametrize("f", [svd_unpacked, eigh_unpacked, slogdet_unpacked])
@pytest.mark.parametrize("seed", [0, 1])
def test_unpacking_numpy_named_results_at_second_order(f, seed):
    from array_checks import check_grads

    a = np.eye(3) * 2.0 + 0.4 * np.random.default_rng(seed).normal(size=(3, 3))
    check_grads(f, a, order=2)


class _Pair(typing.NamedTuple):
    x: float
    y: float


def named_tuple_unpacked(x, y):
    a, b = _Pair(x * y, x + math.sin(y))
    return a * b + a


@pytest.mark.parametrize("point", POINTS)
def test_unpacking_a_named_tuple_at_second_order(point):
    check_first_order(named_tuple_unpacked, *point)
    check_second_order(named_tuple_unpacked, *point)


# ---------------------------------------------------------------------------
# A loop over enumerate/zip/reversed of a list made in the loop's header (`sorted(d)`, a
# display, `list(...)`) was iterated lazily whenever the body called anything that might
# write a list (np.sum), and so refused at the second order; no name reaches such a list, so
# the body cannot change what the iterator reads: it is iterated as a list made at once.


def enumerate_sorted_keys(d):
    a = 0.0
    b = 0.0
    for i, k in enumerate(sorted(d)):
        a = a + np.sum(np.sin(d[k])) * (i + 1.0)
        b = b + np.sum(np.cos(d[k]))
    return a + b


def enumerate_sorted_values(x, y):
    out = []
    for i, v in enumerate(sorted([x, y, x * y])):
        out.append(v * (i + 1.0) + math.sin(v))
    return sum(out)


def zip_of_displays(x, y):
    out = []
    for u, v in zip([x, y], list((y, x * x))):
        out.append(u * v)
    return out[0] + out[1] * x


@pytest.mark.parametrize("f", [enumerate_sorted_values, zip_of_displays])
@pytest.mark.parametrize("point", POINTS)
def test_lazy_builtin_over_a_list_made_in_the_header_at_second_order(f, point):
    check_first_order(f, *point)
    check_second_order(f, *point)


def test_enumerate_sorted_dict_keys_at_second_order():
    d = {"b": np.array([0.3, -0.4]), "a": np.array([1.1])}

    def second(d):
        (g,) = dplus.grad(enumerate_sorted_keys)(d)
        return np.sum(np.sin(g["a"])) + np.sum(g["b"] ** 2)

    (h,) = dplus.grad(second)(d)
    for key in d:
        for idx in np.ndindex(d[key].shape):
            up = {k: v.copy() for k, v in d.items()}
            down = {k: v.copy() for k, v in d.items()}
            up[key][idx] += 1e-6
            down[key][idx] -= 1e-6
            fd = (second(up) - second(down)) / 2e-6
            assert abs(h[key][idx] - fd) < 1e-6 * max(1.0, abs(fd))


# ---------------------------------------------------------------------------
# A result that is a NumPy array of shape () (np.tensordot, np.einsum, np.array(x)) was
# refused by grad and value_and_grad ("needs a number"), as JAX and autograd accept it; and
# the attributes of NumPy scalars (np.float64(...).real, np.complex128(...).imag) had no rule.


def tensordot_loss(x, y):
    return np.tensordot(np.sin(x) * np.einsum("ij,ij", x, x), y, 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_dimensional_array_result_is_a_number_for_grad(seed):
    from array_checks import check_grads

    r = np.random.default_rng(seed)
    x, y = r.normal(size=(2, 3)), r.normal(size=(2, 3))
    assert type(tensordot_loss(x, y)) is np.ndarray and np.shape(tensordot_loss(x, y)) == ()
    check_grads(tensordot_loss, x, y, order=2)
    g_rack = dplus.grad(tensordot_loss)(x, y)
    value, g_jax = dplus.value_and_grad(tensordot_loss, argnums=(0, 1))(x, y)
    assert value == tensordot_loss(x, y)
    for a, b in zip(g_rack, g_jax):
        np.testing.assert_array_equal(a, b)
    hx = dplus.grad(lambda x: np.sum(dplus.grad(tensordot_loss, argnums=0)(x, y) ** 2))(x)[0]
    v = r.normal(size=x.shape)

    def gsq(x):
        return np.sum(dplus.grad(tensordot_loss, argnums=0)(x, y) ** 2)

    fd = (gsq(x + 1e-6 * v) - gsq(x - 1e-6 * v)) / 2e-6
    assert np.isclose(np.sum(hx * v), fd, rtol=1e-6, atol=1e-8)


def test_float32_zero_dimensional_result_keeps_the_dtype():
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    (g,) = dplus.grad(lambda a: np.einsum("i,i", a, a))(x)
    assert g.dtype == np.float32 and np.allclose(g, 2 * x)


def test_a_singleton_array_that_is_not_zero_dimensional_is_still_refused():
    with pytest.raises(dplus.SensitivityError, match=r"shape \(1, 1\)"):
        dplus.grad(lambda a: np.sum(a, keepdims=True))(np.ones((2, 2)))


def numpy_scalar_attributes(z):
    w = np.sum(z * z)  # a NumPy complex scalar
    s = np.sum(np.abs(z))  # a NumPy float scalar
    return w.real * w.imag + s.real * s + s.imag + w.real**2 * s.shape.count(1)


@pytest.mark.parametrize("seed", [0, 1])
def test_attributes_of_numpy_scalars(seed):
    from array_checks import check_grads

    r = np.random.default_rng(seed)
    z = r.normal(size=3) + 1j * r.normal(size=3)
    check_grads(numpy_scalar_attributes, z, order=2)
    check_grads(lambda x: np.sum(np.sin(x)).real * np.float64(2.0).real, r.normal(size=3))


# ---------------------------------------------------------------------------
# Indexing a NumPy scalar as the 0-d array it stands for (scipy.stats.multivariate_normal
# does `log_det_cov[..., np.newaxis]`) had no rule: every element of the result is the
# scalar, so its sensitivity is their sum.


def numpy_scalar_indexed(x):
    s = np.sum(x * x)  # a NumPy float scalar
    return np.sin(s[..., np.newaxis]) * x + s[()] + np.sum(s[None, None] * x)


@pytest.mark.parametrize("seed", [0, 1])
def test_indexing_a_numpy_scalar(seed):
    from array_checks import check_grads

    check_grads(numpy_scalar_indexed, np.random.default_rng(seed).normal(size=3), order=2)


# ---------------------------------------------------------------------------
# Rule code repeats the symbolic zero (`items = [Z] * n`, then one sensitivity per item): at
# the second order the copies' sensitivities have the shapes of the items (np.array_split's
# unequal parts), and the transpose of the repetition summed them (a raw ValueError). The
# symbolic zero is a constant: its copies get no sensitivity.


def split_unequal(x):
    parts = np.array_split(x, 3)
    return [np.sin(parts[i]) * (i + 1.5) for i in range(3)] + np.split(x, [1, 3])


def split_columns(a):
    left, middle, right = np.array_split(a, 3, axis=1)
    return np.sum(left**2) * middle + np.tanh(right).sum()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_split_into_unequal_parts_at_second_order(seed):
    from array_checks import check_grads

    r = np.random.default_rng(seed)
    check_grads(split_unequal, r.normal(size=5 + seed), order=2, rng=r)
    check_grads(split_columns, r.normal(size=(2, 7 + seed)), order=2, rng=r)


def test_repeating_the_symbolic_zero_sends_its_copies_no_sensitivity():
    import operator

    from dplus.runtime.boxes import BoxSensitivities
    from dplus.runtime.linear import gen_zero

    a, b = np.ones(3), np.ones(2)
    for seq in ((gen_zero, 1.0), [gen_zero, 1.0]):
        r = dplus.lift_dplus(operator.mul)(seq, 2)
        assert list(r.primal) == [gen_zero, 1.0, gen_zero, 1.0]
        sens = (a, 2.0, b, 3.0) if isinstance(seq, tuple) else [a, 2.0, b, 3.0]
        _, s_seq, _ = r.backprop(sens, BoxSensitivities())
        assert s_seq[0] is gen_zero and s_seq[1] == 5.0


# ---------------------------------------------------------------------------
# np.atleast_1d/2d/3d of several arrays (autograd's test suite calls them so) had the rule of
# one array: the tuple of sensitivities was reshaped as the first argument (a raw ValueError)
# and the others got none. Each array is now reshaped as NumPy views it.


def atleast_of_several(a, b, c):
    p, q, s = np.atleast_1d(a, b, c)
    u, v = np.atleast_2d(a * b, c)
    w, z = np.atleast_3d(b, c)
    return (
        np.sum(p * q[0]) * np.sin(s).sum()
        + np.sum(u @ v.T)
        + np.sum(w**2) * np.sum(np.atleast_3d(z) ** 3)
        + np.atleast_2d(a)[0, 0] * np.sum(np.atleast_1d(c))
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_atleast_nd_of_several_arrays(seed):
    from array_checks import check_grads

    r = np.random.default_rng(seed)
    a, b, c = np.array(r.normal()), r.normal(size=3), r.normal(size=(2, 3))
    check_grads(atleast_of_several, a, b, c, order=2, rng=r)
    (ga,) = dplus.grad(lambda x: np.atleast_2d(x, 2.0 * x)[1][0, 0])(float(r.normal()))
    assert ga == 2.0


# ---------------------------------------------------------------------------
# The gradient of an array of shape () came back as a NumPy scalar whenever two contributions
# were added (NumPy's sum of two such arrays is a scalar): a gradient has its argument's type.


def several_uses_of_a_zero_dimensional_array(a, b):
    return a * a * b + np.sin(a) + np.where(a > 0, a, 2.0 * a) * np.sum(b)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_gradient_of_a_zero_dimensional_array_is_one(seed):
    from array_checks import check_grads

    r = np.random.default_rng(seed)
    a, b = np.array(r.normal()), r.normal(size=3)
    check_grads(several_uses_of_a_zero_dimensional_array, a, b, order=2, rng=r)
    g32 = dplus.grad(lambda x: x * x + x)(np.array(1.5, dtype=np.float32))[0]
    assert type(g32) is np.ndarray and g32.dtype == np.float32 and g32 == 4.0


# ---------------------------------------------------------------------------
# A Python complex number broadcast against an array (z * w, np.broadcast_to(z, ...),
# np.max(z * w)) got the array sensitivity unsummed: a gradient of the array's shape. The
# complex fast path of fitting a sensitivity to its argument skipped the sum the general path
# does (a float and np.complex128 were right). Found at the second order of autograd's test_max.


def _wirtinger_fd(f, z, h=1e-6):
    """dplus's (autograd's) convention for a real function of a complex number: df/dx - i df/dy."""
    fx = (f(z + h) - f(z - h)) / (2 * h)
    fy = (f(z + 1j * h) - f(z - 1j * h)) / (2 * h)
    return fx - 1j * fy


def complex_broadcast_losses(w):
    return [
        lambda z: np.sum(np.abs(np.broadcast_to(z, w.shape) * w) ** 2),
        lambda z: np.sum(np.abs(z * w + z) ** 2),
        lambda z: np.sum(np.abs(np.add(z, w)) ** 2) + np.abs(np.max(z * w)) ** 2,
        lambda z: np.real(np.prod(z * w[0])) + np.imag(np.sum(np.exp(z * w))),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_complex_number_broadcast_against_an_array(seed):
    r = np.random.default_rng(seed)
    w = r.normal(size=(2, 3))
    z = complex(r.normal(), r.normal())
    for f in complex_broadcast_losses(w):
        (g,) = dplus.grad(f)(z)
        assert np.shape(g) == () and np.iscomplexobj(g)
        assert np.isclose(g, _wirtinger_fd(f, z), rtol=1e-6, atol=1e-6)
        assert g == dplus.grad(f)(np.complex128(z))[0]  # as a NumPy complex scalar
        # second order: the gradient's real part, differentiated again
        u = complex(r.normal(), r.normal())

        def gradient_along_u(z, f=f, u=u):
            return np.real(np.conj(u) * dplus.grad(f)(z)[0])

        (h,) = dplus.grad(gradient_along_u)(z)
        assert np.shape(h) == ()
        assert np.isclose(h, _wirtinger_fd(gradient_along_u, z, 1e-5), rtol=1e-5, atol=1e-5)
    # the vector-Jacobian product of max at a complex cotangent, differentiated in the cotangent
    x = w + 1j * r.normal(size=w.shape)
    cot = r.normal(size=w.shape) + 1j * r.normal(size=w.shape)

    def vjp_max(x, v):
        return dplus.dplus(lambda x: np.max(x))(x).backprop(v)[0]

    out = dplus.dplus(vjp_max)(x, z).backprop(cot)
    assert np.shape(out[1]) == ()
    assert np.isclose(out[1], np.sum(np.conj(np.conj(cot) * (x == np.max(x)))))


# ---------------------------------------------------------------------------
# A JVP differentiated again in its tangent: a real tangent got a complex sensitivity where
# the function's backprop is complex (the transpose of the pairing of sensitivities kept the
# imaginary part; a real number's sensitivity is the real part). autograd's test_add and
# test_op_* in forward mode at the second order.


def mixed_function(t):
    a, z = t
    return a * z + np.sin(a) * z**2, np.cos(a) * a


def _jvp_loss(c):
    def loss(a, z, ta, tz):
        out = dplus.jvp(mixed_function)(((a, z),), ((ta, tz),))[1]
        return np.real(np.conj(c[0]) * out[0]) + c[1] * out[1]

    return loss


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_jvp_differentiated_in_a_real_tangent(seed):
    r = np.random.default_rng(seed)
    a, ta = float(r.normal()), float(r.normal())
    z, tz = complex(r.normal(), r.normal()), complex(r.normal(), r.normal())
    loss = _jvp_loss((complex(r.normal(), r.normal()), float(r.normal())))
    grads = dplus.grad(loss, argnums=(0, 1, 2, 3))(a, z, ta, tz)
    args = [a, z, ta, tz]
    for i, g in enumerate(grads):

        def along(x, i=i):
            return loss(*args[:i], x, *args[i + 1 :])

        if isinstance(args[i], float):
            assert np.isreal(g) and not np.iscomplexobj(g), (i, g)
            fd = (along(args[i] + 1e-6) - along(args[i] - 1e-6)) / 2e-6
        else:
            fd = _wirtinger_fd(along, args[i])
        assert np.isclose(g, fd, rtol=1e-5, atol=1e-6), (i, g, fd)
    # second order: the tangent's gradient differentiated again in the point
    u = float(r.normal())

    def tangent_gradient(a):
        return u * dplus.grad(loss, argnums=2)(a, z, ta, tz)

    (h,) = dplus.grad(tangent_gradient)(a)
    fd = (tangent_gradient(a + 1e-5) - tangent_gradient(a - 1e-5)) / 2e-5
    assert not np.iscomplexobj(h) and np.isclose(h, fd, rtol=1e-5, atol=1e-5)
