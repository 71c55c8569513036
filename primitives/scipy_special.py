"""Rules for ``scipy.special`` (an optional extra: ``pip install dplus[scipy]``).

Registered when the user's program imports ``scipy.special`` (``registry.register_lazy_rules``):
dplus never imports SciPy itself. Each gradient uses functions that have rules, so every
rule here is differentiable again (``gammaln -> digamma -> polygamma(1) -> polygamma(2)``).

Covered: ``gammaln digamma/psi polygamma gamma beta betaln erf erfc erfinv erfcinv expit
logit log_expit xlogy xlog1py logsumexp`` (``axis``, ``keepdims``, ``b=``) ``softmax
log_softmax`` (``axis``). Arguments are broadcast as the ufuncs broadcast them; the
integer order ``n`` of ``polygamma`` gets no sensitivity.
"""

from __future__ import annotations

import numpy as np
import scipy.special as sc

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.memory import results_take_entries

from .numpy import defgrad
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


def register_scipy_special_rules() -> None:
    defgrad(sc.gammaln, lambda A, r, x: A * sc.digamma(x))
    defgrad(sc.digamma, lambda A, r, x: A * sc.polygamma(1, x))  # sc.psi is sc.digamma
    defgrad(sc.polygamma, None, _polygamma_grad)
    defgrad(sc.gamma, lambda A, r, x: A * r * sc.digamma(x))
    defgrad(sc.beta, _beta_a, lambda A, r, a, b: _beta_a(A, r, b, a))
    defgrad(sc.betaln, _betaln_a, lambda A, r, a, b: _betaln_a(A, r, b, a))
    defgrad(sc.erf, lambda A, r, x: A * (2.0 / np.sqrt(np.pi)) * np.exp(-np.square(x)))
    defgrad(sc.erfc, lambda A, r, x: A * (-2.0 / np.sqrt(np.pi)) * np.exp(-np.square(x)))
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
    for name, obj in list(globals().items()):
        if name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == __name__:
            mark_derived(obj, "rule helper")


register_scipy_special_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
