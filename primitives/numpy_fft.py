"""``numpy.fft`` rules (issue #22): ``fft ifft fft2 ifft2 fftn ifftn rfft rfft2 rfftn irfft
irfft2 irfftn hfft ihfft fftshift ifftshift fftfreq rfftfreq``.

Each is linear, so each is written as what it computes: the array's axis, cropped or
zero-padded to ``n``, times the matrix of the discrete Fourier transform (a constant),
one axis after another. The inverse real transforms (``irfft``, ``hfft``) read a half
spectrum as the Hermitian full one it stands for: the real part of the half spectrum times
a matrix whose middle columns count twice (NumPy ignores the imaginary parts of the first
element, and of the last for an even ``n``: so does the derivative). NumPy computes the result (by its FFT); the composition, in the
backprop only, gives the derivative at every order, complex arguments and sensitivities
included (the convention of docs/language.md: the plain transpose).

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from typing import Any

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from ._numpy_composite import defcomposite


def _scale(n: int, inverse: bool, norm: Any) -> float:
    if norm is None or norm == "backward":
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')


def _dft_matrix(m: int, n: int, inverse: bool, norm: Any, half: bool) -> Any:
    """The ``(m, n)`` (``half``: ``(m, n // 2 + 1)``) matrix taking a length-``m`` axis,
    cropped or zero-padded to ``n``, to its transform."""
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    rows = np.arange(min(m, n))
    cols = np.arange(n // 2 + 1 if half else n)
    sign = 1.0 if inverse else -1.0
    M = np.exp(sign * 2j * np.pi * np.outer(rows, cols) / n) * _scale(n, inverse, norm)
    if m > n:  # the cropped elements do not reach the result
        M = np.concatenate([M, np.zeros((m - n, len(cols)), dtype=complex)])
    return M


def _along(a: Any, n: Any, axis: int, norm: Any, inverse: bool, half: bool = False) -> Any:
    m = np.shape(a)[axis]
    M = _dft_matrix(m, m if n is None else n, inverse, norm, half)
    return np.moveaxis(np.matmul(np.moveaxis(a, axis, -1), M), -1, axis)


def _half_inverse_matrix(m: int, n: int, norm: Any, conjugate: bool) -> Any:
    """The ``(m, n)`` matrix with ``irfft(a, n) == real(a' @ M)``, ``a'`` the length-``m``
    half spectrum ``a`` cropped or zero-padded to ``n // 2 + 1`` (``conjugate``: ``hfft``'s,
    the transform of the conjugate, with the forward scale)."""
    if n < 1:
        raise ValueError(f"Invalid number of data points ({n}) specified.")
    half = n // 2 + 1
    rows = np.arange(min(m, half))
    twice = np.where((rows == 0) | (2 * rows == n), 1.0, 2.0)
    sign = -1.0 if conjugate else 1.0
    M = np.exp(sign * 2j * np.pi * np.outer(rows, np.arange(n)) / n) * twice[:, None]
    M = M * _scale(n, not conjugate, norm)
    if m > half:  # the elements past the half spectrum do not reach the result
        M = np.concatenate([M, np.zeros((m - half, n), dtype=complex)])
    return M


def _half_along(a: Any, n: Any, axis: int, norm: Any, conjugate: bool) -> Any:
    m = np.shape(a)[axis]
    M = _half_inverse_matrix(m, 2 * (m - 1) if n is None else n, norm, conjugate)
    return np.moveaxis(np.real(np.matmul(np.moveaxis(a, axis, -1), M)), -1, axis)


def _irfft(a, n=None, axis=-1, norm=None, out=None):
    return _half_along(a, n, axis, norm, False)


def _hfft(a, n=None, axis=-1, norm=None, out=None):
    return _half_along(a, n, axis, norm, True)


def _ihfft(a, n=None, axis=-1, norm=None, out=None):
    return _along(np.real(a), n, axis, norm, True, half=True)


def _rfftn(a, s=None, axes=None, norm=None, out=None):
    axes, sizes = _axes_and_sizes(a, s, axes, None)
    r = _along(np.real(a), sizes[-1], axes[-1], norm, False, half=True)
    for ax, n in zip(axes[:-1], sizes[:-1]):
        r = _along(r, n, ax, norm, False)
    return r


def _irfftn(a, s=None, axes=None, norm=None, out=None):
    axes, sizes = _axes_and_sizes(a, s, axes, None)
    r = a
    for ax, n in zip(axes[:-1], sizes[:-1]):
        r = _along(r, n, ax, norm, True)
    return _half_along(r, sizes[-1], axes[-1], norm, False)


def _rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _rfftn(a, s, axes, norm)


def _irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _irfftn(a, s, axes, norm)


def _shifts(shape: tuple, axes: Any, inverse: bool) -> tuple:
    """The axes of ``fftshift`` (every axis when ``None``) and how far each is rolled."""
    axes = tuple(range(len(shape))) if axes is None else np.atleast_1d(axes).tolist()
    axes = tuple(int(ax) for ax in axes)
    return tuple(-(shape[ax] // 2) if inverse else shape[ax] // 2 for ax in axes), axes


def _fftshift(x, axes=None):
    shifts, axes = _shifts(np.shape(x), axes, False)
    return np.roll(x, shifts, axes)


def _ifftshift(x, axes=None):
    shifts, axes = _shifts(np.shape(x), axes, True)
    return np.roll(x, shifts, axes)


def _fftfreq(n, d=1.0, device=None):
    return _frequency_numbers(n, False) / (n * d)


def _rfftfreq(n, d=1.0, device=None):
    return _frequency_numbers(n, True) / (n * d)


def _frequency_numbers(n: int, half: bool) -> Any:
    """``0, 1, ..., -2, -1`` as ``fftfreq`` counts (``rfftfreq``: ``0 ... n // 2``)."""
    if half:
        return np.arange(n // 2 + 1, dtype=float)
    return np.concatenate([np.arange((n - 1) // 2 + 1), -np.arange(n // 2, 0, -1)]).astype(float)


def _fft(a, n=None, axis=-1, norm=None, out=None):
    return _along(a, n, axis, norm, False)


def _ifft(a, n=None, axis=-1, norm=None, out=None):
    return _along(a, n, axis, norm, True)


def _rfft(a, n=None, axis=-1, norm=None, out=None):
    return _along(a, n, axis, norm, False, half=True)


def _axes_and_sizes(a: Any, s: Any, axes: Any, default_last: int | None) -> tuple:
    nd = np.ndim(a)
    if axes is None:
        if s is not None:
            axes = tuple(range(nd - len(s), nd))
        elif default_last is not None:
            axes = tuple(range(nd - default_last, nd))
        else:
            axes = tuple(range(nd))
    sizes = (None,) * len(axes) if s is None else tuple(s)
    return tuple(axes), sizes


def _nd(a: Any, s: Any, axes: Any, norm: Any, inverse: bool, default_last: int | None) -> Any:
    axes, sizes = _axes_and_sizes(a, s, axes, default_last)
    r = a
    for ax, n in zip(axes, sizes):
        r = _along(r, n, ax, norm, inverse)
    return r


def _fftn(a, s=None, axes=None, norm=None, out=None):
    return _nd(a, s, axes, norm, False, None)


def _ifftn(a, s=None, axes=None, norm=None, out=None):
    return _nd(a, s, axes, norm, True, None)


def _fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd(a, s, axes, norm, False, 2)


def _ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd(a, s, axes, norm, True, 2)


if np is not None:
    from dplus.rules import defnondiff

    defnondiff(_shifts, note="internal: index arithmetic of a NumPy rule")
    defnondiff(_frequency_numbers, note="internal: a constant of a NumPy rule")
    for fn, impl in (
        (np.fft.irfft, _irfft),
        (np.fft.hfft, _hfft),
        (np.fft.ihfft, _ihfft),
        (np.fft.rfftn, _rfftn),
        (np.fft.irfftn, _irfftn),
        (np.fft.rfft2, _rfft2),
        (np.fft.irfft2, _irfft2),
        (np.fft.fftshift, _fftshift),
        (np.fft.ifftshift, _ifftshift),
        (np.fft.fftfreq, _fftfreq),
        (np.fft.rfftfreq, _rfftfreq),
        (np.fft.fft, _fft),
        (np.fft.ifft, _ifft),
        (np.fft.rfft, _rfft),
        (np.fft.fftn, _fftn),
        (np.fft.ifftn, _ifftn),
        (np.fft.fft2, _fft2),
        (np.fft.ifft2, _ifft2),
    ):
        defcomposite(fn, impl)
