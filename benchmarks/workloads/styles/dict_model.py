"""A model whose parameters live in a dict, ``a * exp(-b x) + c``, mean squared error over
500 points, in four styles.  Gradient with respect to the dict."""

import math

from .. import dict_model as _dict_model
from .._base import differentiable
from ._make import style_workloads


def dict_genexpr(params, data):
    a, b, c = params["a"], params["b"], params["c"]
    return sum((a * math.exp(-b * x) + c - y) ** 2 for x, y in data) / len(data)


def dict_index(params, data):
    total = 0.0
    for i in range(len(data)):
        err = params["a"] * math.exp(-params["b"] * data[i][0]) + params["c"] - data[i][1]
        total += err**2
    return total / len(data)


class ExpModel:
    def __init__(self, params):
        self.a = params["a"]
        self.b = params["b"]
        self.c = params["c"]

    @differentiable
    def predict(self, x):
        return self.a * math.exp(-self.b * x) + self.c


def dict_object(params, data):
    model = ExpModel(params)
    loss = 0.0
    for x, y in data:
        err = model.predict(x) - y
        loss += err * err
    return loss / len(data)


WORKLOADS = style_workloads(
    _dict_model.WORKLOAD,
    "dict_model",
    {
        "loop": _dict_model.dict_model_loss,
        "genexpr": dict_genexpr,
        "index": dict_index,
        "object": dict_object,
    },
)
