"""A dense network on lists of lists, 50 inputs -> 100 (ReLU) -> 50 (ReLU) -> 10 logits,
loss ``-log softmax[target]`` (the max subtracted first), in three styles.  Gradient with
respect to the weights and biases; the input ``x`` and the class ``target`` are data."""

import math
import random

from .._base import Workload, differentiable
from ._make import style_workloads

# -- explicit loops and a helper --------------------------------------------------------


@differentiable
def dense_layer(w, b, x):
    out = []
    for row, bias in zip(w, b):
        acc = bias
        for wij, xj in zip(row, x):
            acc = acc + wij * xj
        out.append(acc)
    return out


@differentiable
def relu_all(v):
    out = []
    for z in v:
        out.append(max(z, 0.0))
    return out


def net_loops(w1, b1, w2, b2, w3, b3, x, target):
    h1 = relu_all(dense_layer(w1, b1, x))
    h2 = relu_all(dense_layer(w2, b2, h1))
    logits = dense_layer(w3, b3, h2)
    m = logits[0]
    for z in logits:
        m = max(m, z)
    total = 0.0
    for z in logits:
        total = total + math.exp(z - m)
    return -(logits[target] - m - math.log(total))


# -- comprehensions and generator expressions --------------------------------------------


def net_comprehensions(w1, b1, w2, b2, w3, b3, x, target):
    h1 = [max(sum(w * xj for w, xj in zip(row, x)) + bi, 0.0) for row, bi in zip(w1, b1)]
    h2 = [max(sum(w * hj for w, hj in zip(row, h1)) + bi, 0.0) for row, bi in zip(w2, b2)]
    logits = [sum(w * hj for w, hj in zip(row, h2)) + bi for row, bi in zip(w3, b3)]
    m = max(logits)
    total = sum(math.exp(z - m) for z in logits)
    return -(logits[target] - m - math.log(total))


# -- index loops into preallocated lists -----------------------------------------------


def net_index(w1, b1, w2, b2, w3, b3, x, target):
    layers = [(w1, b1, True), (w2, b2, True), (w3, b3, False)]
    h = x
    for w, b, relu in layers:
        out = [0.0] * len(b)
        for i in range(len(b)):
            out[i] = b[i]
            for j in range(len(h)):
                out[i] += w[i][j] * h[j]
            if relu and out[i] < 0.0:
                out[i] = 0.0
        h = out
    m = h[0]
    for i in range(1, len(h)):
        if h[i] > m:
            m = h[i]
    total = 0.0
    for i in range(len(h)):
        total += math.exp(h[i] - m)
    return -(h[target] - m - math.log(total))


# -- the hand-written gradient ---------------------------------------------------------


def _affine(w, b, x):
    return [bi + sum(wij * xj for wij, xj in zip(row, x)) for row, bi in zip(w, b)]


def net_grad(w1, b1, w2, b2, w3, b3, x, target):
    p1 = _affine(w1, b1, x)
    h1 = [p if p > 0.0 else 0.0 for p in p1]
    p2 = _affine(w2, b2, h1)
    h2 = [p if p > 0.0 else 0.0 for p in p2]
    logits = _affine(w3, b3, h2)
    m = max(logits)
    exps = [math.exp(z - m) for z in logits]
    total = sum(exps)
    d3 = [e / total for e in exps]
    d3[target] -= 1.0
    gw3, gb3, back2 = _affine_back(w3, h2, d3)
    d2 = [g if p > 0.0 else 0.0 for g, p in zip(back2, p2)]
    gw2, gb2, back1 = _affine_back(w2, h1, d2)
    d1 = [g if p > 0.0 else 0.0 for g, p in zip(back1, p1)]
    gw1, gb1, _ = _affine_back(w1, x, d1)
    return (gw1, gb1, gw2, gb2, gw3, gb3)


def _affine_back(w, inputs, d):
    """Gradients of ``w``, of the bias and of the inputs from the outputs' gradient ``d``."""
    back = [0.0] * len(inputs)
    for di, row in zip(d, w):
        for j, wij in enumerate(row):
            back[j] += di * wij
    return [[di * xj for xj in inputs] for di in d], list(d), back


def make_args(n_in, n1=100, n2=50, n_out=10, seed=21):
    r = random.Random(seed)

    def layer(n_from, n_to):
        s = 1.0 / math.sqrt(n_from)
        w = [[r.gauss(0.0, s) for _ in range(n_from)] for _ in range(n_to)]
        return w, [r.gauss(0.0, 0.1) for _ in range(n_to)]

    w1, b1 = layer(n_in, n1)
    w2, b2 = layer(n1, n2)
    w3, b3 = layer(n2, n_out)
    x = [r.uniform(-1.0, 1.0) for _ in range(n_in)]
    return (w1, b1, w2, b2, w3, b3, x, 3)


BASE = Workload(
    name="dense",
    title="dense net 50-100-50-10",
    primal=net_loops,
    hand_grad=net_grad,
    make_args=make_args,
    wrt=(0, 1, 2, 3, 4, 5),
    default_size=50,
    check_size=50,
    size_label="inputs",
)

WORKLOADS = style_workloads(
    BASE,
    "dense",
    {"loops": net_loops, "comprehensions": net_comprehensions, "index": net_index},
    test_size=8,
)
