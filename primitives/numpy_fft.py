"""``numpy.fft`` rules (issue #22): ``fft ifft fft2 ifft2 fftn ifftn rfft``.

Each is linear, so each is written as what it computes: the array's axis, cropped or
zero-padded to ``n``, times the matrix of the discrete Fourier transform (a constant),
one axis after another. NumPy computes the result (by its FFT); the composition, in the
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
    for fn, impl in (
        (np.fft.fft, _fft),
        (np.fft.ifft, _ifft),
        (np.fft.rfft, _rfft),
        (np.fft.fftn, _fftn),
        (np.fft.ifftn, _ifftn),
        (np.fft.fft2, _fft2),
        (np.fft.ifft2, _ifft2),
    ):
        defcomposite(fn, impl)
