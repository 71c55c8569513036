"""Subclasses of ``ndarray`` that change what NumPy does (stop 39, realcode9, issues #18 and
#26), found on astropy's ``Quantity`` (astropy.modeling's ``BlackBody`` and ``NFW``). The
reproductions are written anew here.

- The default policy keeps the bytes of every array it gives to code it runs as it is, to
  see whether that code changed them; it read them with the array's own ``tobytes``, which a
  subclass may refuse (``Quantity.tobytes`` raises ``NotImplementedError``): a raw crash of
  any call given such an array. It reads them with ``ndarray.tobytes`` now.
- ``m /= unit`` on a subclass defining ``__itruediv__`` in Python: Python calls that method;
  dplus took the array for a plain number, skipped it and called the right operand's
  ``__rtruediv__`` instead, which (as astropy's ``Unit.__rtruediv__`` does) made the array
  again and divided it in place again: a raw ``RecursionError``. A number or array subclass's
  operator method written in Python is now called as Python calls it (here it is then
  refused by name: writing into a subclass of ``ndarray`` is not supported, docs/numpy.md).
"""

from __future__ import annotations

import numpy as np
import pytest

import dplus
from dplus.transform.transformer import general_paths_only


class Sealed(np.ndarray):
    def tobytes(self, order="C"):
        raise NotImplementedError("cannot write Sealed to bytes")


def count_of(a):  # undecorated: run as it is under the default policy
    return len(a)


def with_sealed(x):
    s = np.arange(3.0).view(Sealed)
    return x * x * count_of(s)


class Per:
    __array_ufunc__ = None  # (NumPy defers to __rtruediv__, as for astropy's units)

    def __init__(self, k):
        self.k = k

    def __rtruediv__(self, m):  # (astropy's Unit: m / unit makes the subclass, divides in place)
        result = m.view(Tagged)
        result /= self
        return result


class Tagged(np.ndarray):
    def __itruediv__(self, other):
        if isinstance(other, Per):
            return np.asarray(self) * (3.0 / other.k)
        return NotImplemented


def divided_by_unit(x):
    t = (x * 1.0) / Per(2.0)
    return np.sum(t * x)


@pytest.mark.parametrize("x", [1.5, -0.25])
def test_an_array_subclass_refusing_tobytes_given_to_unknown_code(x):
    assert with_sealed(x) == 3 * x * x
    (g,) = dplus.grad(with_sealed)(x)
    with general_paths_only():
        (g_general,) = dplus.grad(with_sealed)(x)
    assert g == g_general == pytest.approx(6 * x)
    assert dplus.grad(lambda x: dplus.grad(with_sealed)(x)[0])(x)[0] == pytest.approx(6.0)


def test_an_operator_method_of_an_array_subclass_is_the_one_python_calls():
    x = np.array([1.0, 2.0])
    assert divided_by_unit(x) == 7.5
    with pytest.raises(dplus.DplusError):
        dplus.grad(divided_by_unit)(x)
    assert divided_by_unit(x) == 7.5
