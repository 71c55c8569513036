"""Rules for ``scipy.special`` (an optional extra: ``pip install dplus[scipy]``).

Registered when the user's program imports ``scipy.special`` (``registry.register_lazy_rules``):
dplus never imports SciPy itself. Each gradient uses functions that have rules, so every
rule here is differentiable again (``gammaln -> digamma -> polygamma(1) -> polygamma(2)``).

Covered: ``gammaln digamma/psi polygamma gamma rgamma gammasgn beta betaln erf erfc erfinv erfcinv wofz
expit logit log_expit ndtr log_ndtr ndtri xlogy xlog1py logsumexp`` (``axis``, ``keepdims``,
``b=``) ``softmax log_softmax`` (``axis``), and the Bessel functions ``j0 j1 y0 y1 i0 i1 i0e
i1e k0 k1 k0e k1e jv/jn yv yn iv ive kv kve``. Arguments are broadcast as the ufuncs broadcast
them; the integer order ``n`` of ``polygamma`` and of the Bessel functions gets no
sensitivity (a float order of a Bessel function is refused: no rule in the order).
"""

from __future__ import annotations

import numpy as np
import scipy.special as sc

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.memory import results_take_entries

from .numpy import Z, defgrad, nondiff
from .numpy_ufuncs import _safe_div


def _polygamma_grad(A, r, n, x):
    return A * sc.polygamma(np.asarray(n) + 1, x)


def _xlogy_x(A, r, x, y):
    return A * np.log(y)


def _xlog1py_x(A, r, x, y):
    return A * np.log1p(y)


def _expand_reduced(v, axis, keepdims, shape):
    """A reduction's result spread back over the reduced axes of an array of ``shape``."""
    if axis is not None and not keepdims:
        v = np.expand_dims(v, axis)
    elif axis is None and not keepdims:
        v = np.reshape(v, (1,) * len(shape))
    return v


def _logsumexp_weights(A, r, a, axis=None, b=None, keepdims=False, return_sign=False):
    if return_sign:
        raise NonDifferentiableError(
            "dplus has no derivative for scipy.special.logsumexp with return_sign=True"
        )
    shape = np.shape(np.asarray(a) if b is None else np.asarray(a) + np.asarray(b))
    weights = np.exp(np.asarray(a) - _expand_reduced(r, axis, keepdims, shape))
    return _expand_reduced(A, axis, keepdims, shape), weights


def _logsumexp_a(A, r, a, axis=None, b=None, keepdims=False, return_sign=False):
    Ae, w = _logsumexp_weights(A, r, a, axis, b, keepdims, return_sign)
    return Ae * w if b is None else Ae * w * b


def _logsumexp_b(A, r, a, axis=None, b=None, keepdims=False, return_sign=False):
    Ae, w = _logsumexp_weights(A, r, a, axis, b, keepdims, return_sign)
    return Ae * w


def _softmax_grad(A, r, x, axis=None):
    return r * (A - np.sum(A * r, axis=axis, keepdims=True))


def _log_softmax_grad(A, r, x, axis=None):
    return A - np.exp(r) * np.sum(A, axis=axis, keepdims=True)


def _beta_a(A, r, a, b):
    return A * r * (sc.digamma(a) - sc.digamma(np.add(a, b)))


def _betaln_a(A, r, a, b):
    return A * (sc.digamma(a) - sc.digamma(np.add(a, b)))


def _order(name):
    """The gradient of a Bessel function in its order: an integer order (an int, an integer
    array) is a label and gets no sensitivity; the derivative in a real order has no closed
    form here, so a float order is refused rather than given a zero."""

    def order_grad(A, r, v, x):
        if np.issubdtype(np.asarray(v).dtype, np.integer):
            return Z
        raise NonDifferentiableError(
            f"dplus has no derivative of scipy.special.{name} in its order, and the order "
            f"{v!r} is a float: give the order as an int (an integer order is a constant)"
        )

    order_grad.__name__ = f"_{name}_order_grad"
    return order_grad


def _wofz_grad(A, r, z):
    """The Faddeeva function is holomorphic: ``w'(z) = 2i/sqrt(pi) - 2 z w(z)``."""
    return A * (2j / np.sqrt(np.pi) - 2.0 * np.asarray(z) * r)


def _sign(x):
    return np.sign(np.asarray(x))


def register_scipy_special_rules() -> None:
    defgrad(sc.gammaln, lambda A, r, x: A * sc.digamma(x))
    defgrad(sc.digamma, lambda A, r, x: A * sc.polygamma(1, x))  # sc.psi is sc.digamma
    defgrad(sc.polygamma, None, _polygamma_grad)
    defgrad(sc.gamma, lambda A, r, x: A * r * sc.digamma(x))
    defgrad(sc.beta, _beta_a, lambda A, r, a, b: _beta_a(A, r, b, a))
    defgrad(sc.betaln, _betaln_a, lambda A, r, a, b: _betaln_a(A, r, b, a))
    defgrad(sc.erf, lambda A, r, x: A * (2.0 / np.sqrt(np.pi)) * np.exp(-np.square(x)))
    defgrad(sc.erfc, lambda A, r, x: A * (-2.0 / np.sqrt(np.pi)) * np.exp(-np.square(x)))
    defgrad(sc.wofz, _wofz_grad)
    defgrad(sc.erfinv, lambda A, r, x: A * (np.sqrt(np.pi) / 2.0) * np.exp(np.square(r)))
    defgrad(sc.erfcinv, lambda A, r, x: A * (-np.sqrt(np.pi) / 2.0) * np.exp(np.square(r)))
    defgrad(sc.expit, lambda A, r, x: A * r * (1.0 - r))
    defgrad(sc.logit, lambda A, r, x: A / (np.asarray(x) * (1.0 - np.asarray(x))))
    defgrad(sc.log_expit, lambda A, r, x: A * sc.expit(-np.asarray(x)))
    defgrad(sc.xlogy, _xlogy_x, lambda A, r, x, y: A * _safe_div(x, y))
    defgrad(sc.xlog1py, _xlog1py_x, lambda A, r, x, y: A * _safe_div(x, np.add(1.0, y)))
    defgrad(sc.logsumexp, _logsumexp_a, None, _logsumexp_b, kw={"a": 0, "b": 2})
    defgrad(sc.softmax, _softmax_grad)
    defgrad(sc.log_softmax, _log_softmax_grad)
    # Bessel functions: recurrences in functions that have rules (differentiable again)
    defgrad(sc.j0, lambda A, r, x: -A * sc.j1(x))
    defgrad(sc.j1, lambda A, r, x: A * (sc.j0(x) - sc.jv(2, x)) / 2.0)
    defgrad(sc.y0, lambda A, r, x: -A * sc.y1(x))
    defgrad(sc.y1, lambda A, r, x: A * (sc.y0(x) - sc.yv(2, x)) / 2.0)
    defgrad(sc.i0, lambda A, r, x: A * sc.i1(x))
    defgrad(sc.i1, lambda A, r, x: A * (sc.i0(x) + sc.iv(2, x)) / 2.0)
    defgrad(sc.i0e, lambda A, r, x: A * (sc.i1e(x) - _sign(x) * r))
    defgrad(sc.i1e, lambda A, r, x: A * ((sc.i0e(x) + sc.ive(2, x)) / 2.0 - _sign(x) * r))
    defgrad(sc.k0, lambda A, r, x: -A * sc.k1(x))
    defgrad(sc.k1, lambda A, r, x: -A * (sc.k0(x) + sc.kv(2, x)) / 2.0)
    defgrad(sc.k0e, lambda A, r, x: A * (r - sc.k1e(x)))
    defgrad(sc.k1e, lambda A, r, x: A * (r - (sc.k0e(x) + sc.kve(2, x)) / 2.0))
    defgrad(sc.jv, _order("jv"), lambda A, r, v, x: A * (sc.jv(v - 1, x) - sc.jv(v + 1, x)) / 2.0)
    defgrad(sc.yv, _order("yv"), lambda A, r, v, x: A * (sc.yv(v - 1, x) - sc.yv(v + 1, x)) / 2.0)
    defgrad(sc.yn, _order("yn"), lambda A, r, n, x: A * (sc.yn(n - 1, x) - sc.yn(n + 1, x)) / 2.0)
    defgrad(sc.iv, _order("iv"), lambda A, r, v, x: A * (sc.iv(v - 1, x) + sc.iv(v + 1, x)) / 2.0)
    defgrad(
        sc.ive,
        _order("ive"),
        lambda A, r, v, x: A * ((sc.ive(v - 1, x) + sc.ive(v + 1, x)) / 2.0 - _sign(x) * r),
    )
    defgrad(sc.kv, _order("kv"), lambda A, r, v, x: -A * (sc.kv(v - 1, x) + sc.kv(v + 1, x)) / 2.0)
    defgrad(
        sc.kve,
        _order("kve"),
        lambda A, r, v, x: A * (r - (sc.kve(v - 1, x) + sc.kve(v + 1, x)) / 2.0),
    )
    defgrad(sc.rgamma, lambda A, r, x: -A * r * sc.digamma(x))
    nondiff(sc.gammasgn)
    defgrad(sc.ndtr, lambda A, r, x: A * np.exp(-np.square(x) / 2.0) / np.sqrt(2.0 * np.pi))
    defgrad(
        sc.log_ndtr,
        lambda A, r, x: A * np.exp(-np.square(x) / 2.0 - r) / np.sqrt(2.0 * np.pi),
    )
    defgrad(sc.ndtri, lambda A, r, x: A * np.sqrt(2.0 * np.pi) * np.exp(np.square(r) / 2.0))
    for name, obj in list(globals().items()):
        if name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == __name__:
            mark_derived(obj, "rule helper")


register_scipy_special_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
