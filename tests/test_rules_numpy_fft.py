"""``numpy.fft`` rules (primitives/numpy_fft.py): first and second order against finite
differences (``check_grads``: random result sensitivities and directions), real and complex
arguments, cropping and padding (``n``, ``s``), every ``norm``, the axes."""

from __future__ import annotations

import numpy as np
import pytest
from array_checks import check_grads

import dplus

SEEDS = [0, 1, 2]


def real(rng, *shape):
    return rng.normal(size=shape)


def cplx(rng, *shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


ONE_AXIS = [
    ("fft", lambda a: np.fft.fft(a)),
    ("fft_n_pad", lambda a: np.fft.fft(a, n=6)),
    ("fft_n_crop", lambda a: np.fft.fft(a, n=3, norm="ortho")),
    ("fft_axis0", lambda a: np.fft.fft(a, axis=0, norm="forward")),
    ("ifft", lambda a: np.fft.ifft(a)),
    ("ifft_n", lambda a: np.fft.ifft(a, 7, -1, "ortho")),
    ("rfft", lambda a: np.fft.rfft(a)),
    ("rfft_n_odd", lambda a: np.fft.rfft(a, n=5, norm="forward")),
    ("rfft_axis0", lambda a: np.fft.rfft(a, axis=0)),
]

MANY_AXES = [
    ("fft2", lambda a: np.fft.fft2(a)),
    ("ifft2", lambda a: np.fft.ifft2(a, norm="ortho")),
    ("fft2_s", lambda a: np.fft.fft2(a, s=(2, 5))),
    ("fftn", lambda a: np.fft.fftn(a)),
    ("ifftn_axes", lambda a: np.fft.ifftn(a, axes=(0,))),
    ("fftn_s", lambda a: np.fft.fftn(a, s=(4, 3), axes=(0, 1), norm="forward")),
]


@pytest.mark.parametrize("name,f", ONE_AXIS + MANY_AXES, ids=[n for n, _ in ONE_AXIS + MANY_AXES])
@pytest.mark.parametrize("seed", SEEDS)
def test_fft_of_a_real_array(name, f, seed):
    rng = np.random.default_rng(seed)
    check_grads(f, real(rng, 3, 4), rng=rng)


COMPLEX_OK = [(n, f) for n, f in ONE_AXIS + MANY_AXES if not n.startswith("rfft")]


@pytest.mark.parametrize("name,f", COMPLEX_OK, ids=[n for n, _ in COMPLEX_OK])
@pytest.mark.parametrize("seed", SEEDS)
def test_fft_of_a_complex_array(name, f, seed):
    rng = np.random.default_rng(seed)
    check_grads(f, cplx(rng, 3, 4), rng=rng)


def power_spectrum_loss(x, w):
    z = np.fft.rfft(x * w)
    back = np.fft.ifft(np.fft.fft(x) * w[0])
    return np.sum(np.abs(z) ** 2 * np.arange(1.0, 1.0 + z.shape[-1])) + np.sum(np.real(back) ** 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_fft_inside_a_program(seed):
    rng = np.random.default_rng(seed)
    check_grads(power_spectrum_loss, real(rng, 6), real(rng, 6), rng=rng)


def test_fft_result_unchanged_and_bad_norm_is_numpys_error():
    x = np.random.default_rng(3).normal(size=8)
    assert np.array_equal(dplus.dplus(np.fft.fft)(x).primal, np.fft.fft(x))
    with pytest.raises(ValueError):
        dplus.grad(lambda a: np.sum(np.abs(np.fft.fft(a, norm="bad"))))(x)


# the inverse real transforms read a complex half spectrum (the imaginary parts NumPy
# ignores get no sensitivity: finite differences along them see no change)
OF_A_HALF_SPECTRUM = [
    ("irfft", lambda a: np.fft.irfft(a)),
    ("irfft_n_odd", lambda a: np.fft.irfft(a, n=5)),
    ("irfft_n_pad", lambda a: np.fft.irfft(a, n=9, norm="ortho")),
    ("irfft_n_crop", lambda a: np.fft.irfft(a, n=3, norm="forward")),
    ("irfft_axis0", lambda a: np.fft.irfft(a, axis=0)),
    ("hfft", lambda a: np.fft.hfft(a)),
    ("hfft_n_odd", lambda a: np.fft.hfft(a, 7, norm="ortho")),
    ("hfft_forward", lambda a: np.fft.hfft(a, 4, axis=0, norm="forward")),
    ("irfft2", lambda a: np.fft.irfft2(a)),
    ("irfftn_s", lambda a: np.fft.irfftn(a, s=(2, 5), axes=(0, 1), norm="ortho")),
    ("irfftn_axes", lambda a: np.fft.irfftn(a, axes=(1, 0))),
    ("fftshift", lambda a: np.fft.fftshift(a)),
    ("ifftshift_axis", lambda a: np.fft.ifftshift(a, axes=1)),
    ("fftshift_axes", lambda a: np.fft.fftshift(a, axes=(0, -1))),
]

OF_A_REAL_ARRAY = [
    ("ihfft", lambda a: np.fft.ihfft(a)),
    ("ihfft_n", lambda a: np.fft.ihfft(a, n=5, axis=0, norm="ortho")),
    ("rfft2", lambda a: np.fft.rfft2(a)),
    ("rfftn", lambda a: np.fft.rfftn(a, norm="forward")),
    ("rfftn_s", lambda a: np.fft.rfftn(a, s=(5, 3), axes=(0, 1))),
    ("rfftn_axes", lambda a: np.fft.rfftn(a, axes=(1, 0))),
    (
        "round_trip",
        lambda a: np.fft.irfftn(np.fft.rfftn(a) * np.arange(1.0, 4.0), s=(3, 4), axes=(0, 1)),
    ),
    ("ifftshift", lambda a: np.fft.ifftshift(a)),
]


@pytest.mark.parametrize("name,f", OF_A_HALF_SPECTRUM, ids=[n for n, _ in OF_A_HALF_SPECTRUM])
@pytest.mark.parametrize("seed", SEEDS)
def test_inverse_real_transforms_of_a_complex_half_spectrum(name, f, seed):
    rng = np.random.default_rng(seed)
    check_grads(f, cplx(rng, 3, 4), rng=rng)
    check_grads(f, real(rng, 3, 4), rng=rng, order=1)


@pytest.mark.parametrize("name,f", OF_A_REAL_ARRAY, ids=[n for n, _ in OF_A_REAL_ARRAY])
@pytest.mark.parametrize("seed", SEEDS)
def test_real_transforms_of_a_real_array(name, f, seed):
    rng = np.random.default_rng(seed)
    check_grads(f, real(rng, 3, 4), rng=rng)


def test_frequencies_are_differentiable_in_the_spacing():
    check_grads(lambda d: np.fft.fftfreq(5, d) + np.fft.fftfreq(5, 2 * d) ** 2, 0.3)
    check_grads(lambda d: np.fft.rfftfreq(7, d=d), 0.7)
    np.testing.assert_array_equal(
        dplus.dplus(np.fft.fftfreq)(6, 0.1).primal, np.fft.fftfreq(6, 0.1)
    )


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_real_transforms_keep_the_dtype_of_their_argument(dtype):
    x = np.random.default_rng(5).normal(size=(3, 4)).astype(dtype)
    for f in (np.fft.irfft, np.fft.hfft, np.fft.fftshift, np.fft.irfft2):
        (g,) = dplus.grad(lambda a, f=f: np.sum(np.sin(f(a))))(x)
        assert g.dtype == dtype
    if dtype is np.float32:
        for f in (np.fft.ihfft, np.fft.rfftn):
            (g,) = dplus.grad(lambda a, f=f: np.sum(np.abs(f(a)) ** 2))(x)
            assert g.dtype == dtype
