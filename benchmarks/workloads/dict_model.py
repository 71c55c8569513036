"""8. A model whose parameters live in a dict, ``{"a": .., "b": .., "c": ..}``:
``pred = a * exp(-b * x) + c``, mean squared error over 500 data points."""

import math
import random

from ._base import Workload


def dict_model_loss(params, data):
    loss = 0.0
    for x, y in data:
        pred = params["a"] * math.exp(-params["b"] * x) + params["c"]
        err = pred - y
        loss += err * err
    return loss / len(data)


def dict_model_grad(params, data):
    a, b, c = params["a"], params["b"], params["c"]
    ga = gb = gc = 0.0
    for x, y in data:
        e = math.exp(-b * x)
        err = a * e + c - y
        ga += 2.0 * err * e
        gb += 2.0 * err * a * e * -x
        gc += 2.0 * err
    n = len(data)
    return ({"a": ga / n, "b": gb / n, "c": gc / n},)


def make_args(n):
    r = random.Random(8)
    data = []
    for _ in range(n):
        x = r.uniform(0.0, 3.0)
        data.append((x, 2.0 * math.exp(-0.7 * x) + 0.3 + r.gauss(0.0, 0.05)))
    return ({"a": 1.5, "b": 0.5, "c": 0.1}, data)


WORKLOAD = Workload(
    name="dict_model",
    title="dict-of-parameters model, 500 points",
    primal=dict_model_loss,
    hand_grad=dict_model_grad,
    make_args=make_args,
    wrt=(0,),
    default_size=500,
    check_size=100,
    size_label="points",
)
