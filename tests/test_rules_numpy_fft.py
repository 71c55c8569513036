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
