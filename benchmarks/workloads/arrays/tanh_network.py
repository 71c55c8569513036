"""A tanh network on a batch of 64: 50 inputs -> 100 hidden (tanh) -> 10 classes,
log-softmax, mean negative log-likelihood of one-hot labels; gradient w.r.t. the weights
and biases."""

import numpy as np

NAME = "tanh_network"
TITLE = "tanh net 64x50 -> 100 -> 10, log-softmax"
WRT = (0, 1, 2, 3)
IN_PLACE = False


def primal(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(Y * logp) / X.shape[0]


def hand_grad(W1, b1, W2, b2, X, Y):
    n = X.shape[0]
    a = X @ W1 + b1
    h = np.tanh(a)
    z = h @ W2 + b2
    z = z - np.max(z, axis=1, keepdims=True)
    p = np.exp(z) / np.sum(np.exp(z), axis=1, keepdims=True)
    dz = (p * np.sum(Y, axis=1, keepdims=True) - Y) / n
    dW2 = h.T @ dz
    db2 = dz.sum(axis=0)
    da = (dz @ W2.T) * (1.0 - h * h)
    return (X.T @ da, da.sum(axis=0), dW2, db2)


def make_args(batch=64, n_in=50, n_hidden=100, n_out=10, seed=21):
    r = np.random.default_rng(seed)
    W1 = r.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_hidden))
    b1 = r.normal(0.0, 0.1, n_hidden)
    W2 = r.normal(0.0, 1.0 / np.sqrt(n_hidden), (n_hidden, n_out))
    b2 = r.normal(0.0, 0.1, n_out)
    X = r.normal(0.0, 1.0, (batch, n_in))
    Y = np.eye(n_out)[r.integers(0, n_out, batch)]
    return (W1, b1, W2, b2, X, Y)
