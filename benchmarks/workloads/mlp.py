"""6. Dense network on lists of lists: 50 inputs -> 100 hidden (ReLU) -> 50 logits,
safe softmax (subtract the max), loss = -log softmax[target].  The gradient is
taken with respect to the weights and biases (``W1``, ``b1``, ``W2``, ``b2``);
the input ``x`` and the class ``target`` are data.
"""

import math
import random

from ._base import Workload, differentiable


@differentiable
def dense(w, b, x):
    out = []
    for row, bias in zip(w, b):
        acc = 0.0
        for wij, xj in zip(row, x):
            acc += wij * xj
        out.append(acc + bias)
    return out


def mlp_loss(w1, b1, w2, b2, x, target):
    hidden = [max(h, 0.0) for h in dense(w1, b1, x)]
    logits = dense(w2, b2, hidden)
    m = max(logits)
    exps = [math.exp(z - m) for z in logits]
    total = sum(exps)
    return -math.log(exps[target] / total)


def mlp_grad(w1, b1, w2, b2, x, target):
    pre = [b + sum(wij * xj for wij, xj in zip(row, x)) for row, b in zip(w1, b1)]
    hidden = [p if p > 0.0 else 0.0 for p in pre]
    logits = [b + sum(wij * hj for wij, hj in zip(row, hidden)) for row, b in zip(w2, b2)]
    m = max(logits)
    exps = [math.exp(z - m) for z in logits]
    total = sum(exps)
    dlogits = [e / total for e in exps]
    dlogits[target] -= 1.0
    gw2 = [[d * hj for hj in hidden] for d in dlogits]
    gb2 = list(dlogits)
    dhidden = [0.0] * len(hidden)
    for d, row in zip(dlogits, w2):
        for j, wij in enumerate(row):
            dhidden[j] += d * wij
    dpre = [dh if p > 0.0 else 0.0 for dh, p in zip(dhidden, pre)]
    gw1 = [[d * xj for xj in x] for d in dpre]
    gb1 = dpre
    return (gw1, gb1, gw2, gb2)


def make_args(n_in, n_hidden=100, n_out=50, seed=6):
    r = random.Random(seed)
    s1, s2 = 1.0 / math.sqrt(n_in), 1.0 / math.sqrt(n_hidden)
    w1 = [[r.gauss(0.0, s1) for _ in range(n_in)] for _ in range(n_hidden)]
    b1 = [r.gauss(0.0, 0.1) for _ in range(n_hidden)]
    w2 = [[r.gauss(0.0, s2) for _ in range(n_hidden)] for _ in range(n_out)]
    b2 = [r.gauss(0.0, 0.1) for _ in range(n_out)]
    x = [r.uniform(-1.0, 1.0) for _ in range(n_in)]
    return (w1, b1, w2, b2, x, 7)


WORKLOAD = Workload(
    name="mlp",
    title="dense net 50-100-50, ReLU, softmax",
    primal=mlp_loss,
    hand_grad=mlp_grad,
    make_args=make_args,
    wrt=(0, 1, 2, 3),
    default_size=50,
    size_label="inputs",
)
