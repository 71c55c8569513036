"""More NumPy rules (issue #22): the rules autograd has and dplus lacked, bugs found by
running autograd's test suite, and the dtypes of gradients.

Every rule is checked by ``array_checks.check_grads``: against central finite differences
along random directions, at first and second order, on several shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from array_checks import check_grads

import dplus

rng = np.random.default_rng(2212)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")


def arr(*shape):
    return rng.normal(size=shape)


# ---------------------------------------------------------------------------
# bugs found by autograd's test suite


@pytest.mark.parametrize(
    "ashape,bshape",
    [
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
        ((2, 3, 4), (5, 4, 2)),
        ((3, 4), (4,)),
        ((2, 2, 3, 4), (4,)),
    ],
)
def test_dot_of_nd_arrays_and_vectors(ashape, bshape):
    # np.dot of a 3-D array and a vector raised AxisError in its reverse pass
    check_grads(np.dot, arr(*ashape), arr(*bshape))


def test_column_stack_of_one_vector():
    # np.column_stack(x) of a 1-D x reads each element as a 1x1 block: its reverse raised IndexError
    check_grads(np.column_stack, arr(3))
    check_grads(lambda x, y: np.column_stack((x, y)), arr(3), arr(3, 2))
    check_grads(lambda x, y: np.column_stack([x, y]), arr(4), arr(4), order=1)


def test_column_stack_of_a_list_second_order():
    check_grads(lambda x, y: np.column_stack([x, y]), arr(4), arr(4))


@dplus.define_dplus
def _many_keywords(x, f=1.0, fn=1.0, obj=1.0, name=1.0, T=1.0, P=1.0, self=1.0, func=1.0, d=1.0):
    return x * f * fn * obj * name * T * P * self * func * d


def test_keyword_arguments_named_like_dplus_helpers_parameters():
    # `call(f, *args, **kwargs)` and the other call helpers took a keyword `f=` as their own
    # parameter: "TypeError: call() got multiple values for argument 'f'"
    def g(x):
        return _many_keywords(
            x, f=2.0, fn=x, obj=1.5, name=x, T=1.0, P=x, self=2.0, func=1.0, d=1.0
        )

    assert dplus.grad(g)(3.0) == (24 * 3.0**3,)  # 6 x^4
    assert dplus.grad(dplus.grad1(g))(3.0) == (72 * 3.0**2,)

    def through_partial(x):
        import functools

        return functools.partial(_many_keywords, func=x)(x, f=x)

    assert dplus.grad(through_partial)(3.0) == (27.0,)

    class C:
        @dplus.define_dplus
        def m(self, x, obj=1.0, name=2.0):
            return x * obj * name

    assert dplus.grad(lambda x: C().m(x, obj=x, name=x))(3.0) == (27.0,)

    def update(x):
        d = {}
        d.update(d=x)
        return d["d"] * x

    assert dplus.grad(update)(3.0) == (6.0,) and dplus.grad(dplus.grad1(update))(3.0) == (2.0,)


# ---------------------------------------------------------------------------
# dtypes: a gradient has its argument's dtype; integer and bool arrays are constants


def _dtype_programs():
    w = arr(3)
    return [
        lambda x: np.sum(np.sin(x) * x),
        lambda x: np.sum(x[1:] * 2.0) + x[0],
        lambda x: np.dot(x, w.astype(x.dtype)) + np.max(x),
        lambda x: np.sum(np.outer(x, x)),
        lambda x: np.mean(x * np.float64(1.5)),
        lambda x: np.sum(np.abs(x) ** 2),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.complex64])
def test_gradients_keep_the_dtype_of_their_argument(dtype):
    x64 = np.array([0.5, -1.25, 2.0]) + (0.5j if np.dtype(dtype).kind == "c" else 0)
    x = x64.astype(dtype)
    for f in _dtype_programs():
        (g,) = dplus.grad(f)(x)
        assert g.dtype == dtype and g.shape == x.shape
        (want,) = dplus.grad(f)(
            x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
        )
        tol = 1e-2 if dtype is np.float16 else 1e-5
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol)
    (g,) = dplus.grad(lambda s: s * s)(np.float32(3.0))
    assert type(g) is np.float32 and g == 6.0


def test_float32_second_order_keeps_the_dtype():
    x = np.array([0.5, -1.25, 2.0], dtype=np.float32)
    (H,) = dplus.jacobian(dplus.grad1(lambda x: np.sum(np.sin(x) * x)))(x)
    assert H.shape == (3, 3)
    np.testing.assert_allclose(np.diag(H), 2 * np.cos(x) - x * np.sin(x), rtol=1e-5)


@pytest.mark.parametrize(
    "x", [np.array([1, 2, 3]), np.array([True, False, True]), np.arange(3, dtype=np.uint8)]
)
def test_integer_and_bool_arrays_get_no_sensitivity(x):
    # like JAX's grad(..., allow_int=True): an integer array is a constant; its gradient is
    # zeros of its own dtype (not a float gradient, which a float argument would get)
    g, gy = dplus.grad(lambda x, y: np.sum(x * y) + np.sum(np.sin(x)) + x[0] * y[0])(x, np.ones(3))
    assert g.dtype == x.dtype and not g.any()
    np.testing.assert_allclose(gy, x.astype(float) + np.eye(3)[0] * x[0])


def test_complex_arguments_follow_one_convention():
    # for a real L of complex z = x + iy, the gradient is dL/dx - i dL/dy (autograd's convention)
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    (g,) = dplus.grad(lambda z: np.sum(np.abs(z) ** 2))(z)
    np.testing.assert_allclose(g, 2 * np.conj(z))
    (g,) = dplus.grad(lambda z: np.sum(np.real(z * z)))(z)  # Re(z^2) = x^2 - y^2
    np.testing.assert_allclose(g, 2 * z.real - 1j * (-2 * z.imag))
    (g,) = dplus.grad(lambda z: np.sum(np.abs(z)))(z)
    np.testing.assert_allclose(g, np.conj(z) / np.abs(z))
    for f in (
        lambda z: np.sum(np.abs(np.sin(z)) ** 2),
        lambda z: np.real(np.sum(np.exp(z) * np.conj(z))),
    ):
        check_grads(f, z)


# ---------------------------------------------------------------------------
# the NumPy API autograd covers, and issue #22's list: every call of the table at first
# and second order (tests/numpy_api_table.py; run it as a script to list the gaps)

from numpy_api_table import ENTRIES  # noqa: E402

# (second order through lists, and np.sort along an axis, were engine limits when these rules
# were written: issue #20's change made them work; they are checked with the others)
_BY_NAME = {name: (fn, make) for name, fn, make in ENTRIES}
_COVERED = [name for name, _, _ in ENTRIES]  # (the table has no gap left)


@pytest.mark.parametrize("name", _COVERED)
def test_numpy_api_first_order(name):
    fn, make = _BY_NAME[name]
    check_grads(fn, *make(), order=1)


@pytest.mark.parametrize("name", _COVERED)
def test_numpy_api_second_order(name):
    fn, make = _BY_NAME[name]
    check_grads(fn, *make(), order=2)


@pytest.mark.parametrize(
    "f",
    [
        # the padding is whatever memory held (so the composition's differs from NumPy's)
        lambda x: np.pad(x, 2, mode="empty"),
        lambda x: np.pad(x, 1, mode=lambda v, w, i, k: None),  # a function of the user's
        lambda x: np.pad(x, 1, mode="mean", stat_length=1, end_values=2.0),  # not NumPy's
    ],
)
def test_pad_modes_without_a_derivative_name_the_fix(f):
    x = np.array([1.0, 2.0, 3.0])
    pad = dplus.define_dplus(f)
    with pytest.raises(
        (dplus.NonDifferentiableError, ValueError),
        match="mode 'constant'|unsupported|does not apply to this call",
    ):
        dplus.grad(lambda x: np.sum(pad(x)))(x)


def test_r_of_a_key_held_in_a_variable_raises_instead_of_dropping_it():
    # np.r_[k], the key a variable: the subscript's reverse has no place for the key's
    # sensitivity, so it must raise, never give the items a zero gradient
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(dplus.NonDifferentiableError, match=r"np.r_\[x, y\]"):
        dplus.grad(lambda x: np.sum(np.r_[x] * x))(x)
    with (
        pytest.warns(PendingDeprecationWarning),
        pytest.raises(dplus.NonDifferentiableError, match="np.concatenate"),
    ):
        dplus.grad(lambda x: np.sum(np.r_["r", x, x]))(x)

    # a key written as a tuple display, bound to a name first, works (the normalizer's way)
    def held(x):
        k = (x, 2.0 * x)
        return np.sum(np.r_[k] * np.arange(6.0))

    (g,) = dplus.grad(held)(x)
    np.testing.assert_allclose(g, np.arange(3.0) + 2 * np.arange(3.0, 6.0))


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.pad(x, 2, mode="mean"),
        lambda x: np.pad(x, (1, 2), mode="linear_ramp", end_values=(-1, 4)),
        lambda x: np.pad(x, 3, mode="reflect", reflect_type="odd"),
        lambda x: np.pad(x, 1, mode="maximum"),
        lambda x: np.r_[x, x],
    ],
)
def test_integer_arrays_through_the_new_rules_get_no_sensitivity(f):
    n = np.array([3, 1, 4, 1, 5])
    pad = dplus.define_dplus(f)
    gn, gy = dplus.grad(lambda n, y: np.sum(pad(n) * y) + y)(n, 2.0)
    assert gn.dtype == n.dtype and not gn.any()
    assert gy == pytest.approx(float(np.sum(f(n))) + 1.0)


def test_r_and_c_give_integer_items_no_sensitivity_and_keep_float32():
    x32 = np.array([1.0, 2.0], dtype=np.float32)
    n = np.array([3, 4])
    gx, gn = dplus.grad(lambda x, n: np.sum(np.r_[x, n, 1.5] * np.arange(5.0)))(x32, n)
    assert gx.dtype == np.float32 and gn.dtype == n.dtype and not gn.any()
    np.testing.assert_allclose(gx, [0.0, 1.0])
    check_grads(lambda x, s: np.c_[x, s * x, x[::-1]], rng.normal(size=4), 0.5)
    check_grads(lambda x, y: np.r_["0,2", x, y], rng.normal(size=3), rng.normal(size=3))


@pytest.mark.parametrize(
    "m",
    [np.eye(3), np.diag([1.0, 2.0, 2.0]), np.array([[1.0, 1.0], [0.0, 1.0]])],
)
def test_eig_at_a_repeated_eigenvalue_refuses(m):
    with pytest.raises(dplus.NonDifferentiableError, match="repeated eigenvalue"):
        dplus.grad(lambda m: np.sum(np.real(np.linalg.eigvals(m))))(m)
    with pytest.raises(dplus.NonDifferentiableError, match="repeated eigenvalue"):
        dplus.grad(lambda m: np.sum(np.real(np.linalg.eig(m)[1])))(m)


def test_qr_of_a_wide_matrix_or_complete_mode_is_refused_with_the_fix():
    wide = np.arange(6.0).reshape(2, 3) + np.eye(2, 3)
    with pytest.raises(dplus.NonDifferentiableError, match="transpose"):
        dplus.grad(lambda m: np.sum(np.linalg.qr(m)[0]))(wide)
    tall = np.arange(12.0).reshape(4, 3) + np.eye(4, 3)
    with pytest.raises(dplus.NonDifferentiableError, match="mode='reduced'"):
        dplus.grad(lambda m: np.sum(np.linalg.qr(m, mode="complete")[0]))(tall)


@pytest.mark.parametrize(
    "name",
    [
        "gradient/coords",
        "pad/reflect",
        "convolve",
        "correlate/longer-same",
        "percentile/array-q",
        "interp/all",
        "cumprod",
        "average/weights",
        "kron",
        "select/tuples",
        "lstsq/residuals",
        "cholesky",
        "nanstd",
        "pad/reflect-odd-2d",
        "pad/linear_ramp-2d",
        "pad/mean-stat_length",
        "pad/median",
        "r_/scalars",
        "c_/2d",
        "eig/values-complex",
        "eig/vectors",
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_low_precision_arrays_through_the_new_rules(name, dtype):
    fn, make = _BY_NAME[name]
    args64 = make()
    if dtype is np.float16 and (name in ("lstsq/residuals", "cholesky") or name.startswith("eig")):
        pytest.skip("NumPy's linalg has no float16")
    args = tuple(
        x.astype(dtype) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else x for x in args64
    )
    f = dplus.define_dplus(fn) if fn.__module__ == "numpy_api_table" else fn

    def loss(*a):
        out = f(*a)
        return np.sum(np.real(out)) if not isinstance(out, tuple) else np.sum(np.real(out[0]))

    got = dplus.grad(loss)(*args)
    want = dplus.grad(loss)(
        *tuple(
            x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else x
            for x in args
        )
    )
    tol = 5e-2 if dtype is np.float16 else 1e-3
    for g, w, x in zip(got, want, args):
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            assert g.dtype == dtype
            np.testing.assert_allclose(
                g.astype(float), w, rtol=tol, atol=tol * max(1.0, np.max(np.abs(w)))
            )


def _twice(x):
    return 2.0 * x


def _thrice(x):
    return 3.0 * x


def test_a_composition_that_computes_something_else_refuses():
    from dplus.primitives._numpy_composite import defcomposite

    defcomposite(_twice, _thrice)  # a wrong composition: its derivative must never be used
    with pytest.raises(dplus.NonDifferentiableError, match="does not apply to this call"):
        dplus.grad(lambda x: np.sum(_twice(x)))(np.array([1.0, 2.0]))


def _c(*shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


COMPLEX_CASES = {
    "kron": (np.kron, lambda: (_c(2, 2), _c(3))),
    "cross": (np.cross, lambda: (_c(4, 3), _c(4, 3))),
    "pad/reflect": (lambda x: np.pad(x, 2, mode="reflect"), lambda: (_c(4),)),
    "pad/constant": (lambda x: np.pad(x, 1), lambda: (_c(2, 3),)),
    "gradient": (np.gradient, lambda: (_c(5),)),
    "convolve": (np.convolve, lambda: (_c(5), _c(3))),
    "correlate": (lambda a, v: np.correlate(a, v, "full"), lambda: (_c(5), _c(3))),
    "select": (lambda x, y: np.select((np.real(x) > 0,), (x,), default=y), lambda: (_c(4), _c(4))),
    "cumprod": (np.cumprod, lambda: (_c(4),)),
    "vdot": (np.vdot, lambda: (_c(3), _c(3))),
    "average": (lambda x: np.average(x, axis=0), lambda: (_c(3, 2),)),
    "angle": (np.angle, lambda: (_c(4),)),
    "nan_to_num": (np.nan_to_num, lambda: (_c(3),)),
    "real_if_close": (np.real_if_close, lambda: (_c(3),)),
    "cov": (np.cov, lambda: (_c(2, 4),)),
    "polyval": (np.polyval, lambda: (_c(3), _c(4))),
}


@pytest.mark.parametrize("name", list(COMPLEX_CASES))
def test_complex_arrays_through_the_new_rules(name):
    fn, make = COMPLEX_CASES[name]
    check_grads(fn, *make())
