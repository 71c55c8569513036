"""dplus.parallel.map on Ray: a local Ray session started by the test, two actors (worker
processes) of dplus.parallel.RayWorkers. The gradient equals the in-process one and finite
differences; records stay on the actors and are dropped with the backprop. Skipped without
Ray (an optional extra, not in the test extra: see docs/scaling.md)."""

from __future__ import annotations

import gc
import math
import time

import numpy as np
import pytest

import dplus
from dplus import define_dplus, grad

ray = pytest.importorskip("ray")

from path_helpers import close, fd_gradient, fd_hessian  # noqa: E402


@pytest.fixture(scope="module")
def workers():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=80 * 1024 * 1024,
    )
    w = dplus.parallel.RayWorkers(2)
    yield w
    w.close()
    ray.shutdown()


DATA = [(0.1 * i, math.sin(0.3 * i)) for i in range(37)]


def make_loss(client, chunks=None):
    @define_dplus
    def loss(w, b):
        def example(xy):
            x, y = xy
            return (math.tanh(w * x + b) - y) ** 2

        return sum(dplus.parallel.map(example, DATA, client=client, chunks=chunks))

    return loss


@define_dplus
def loss_plain(w, b):
    t = 0.0
    for x, y in DATA:
        t += (math.tanh(w * x + b) - y) ** 2
    return t


@pytest.mark.parametrize("chunks", [None, 1, 3, 100])
def test_gradient_on_ray_equals_in_process(workers, chunks):
    loss = make_loss(workers, chunks)
    for w, b in [(0.5, 0.1), (-1.2, 0.7)]:
        assert loss(w, b) == pytest.approx(loss_plain(w, b), rel=1e-12)
        g = grad(loss)(w, b)
        close(g, grad(make_loss(None))(w, b), tol=1e-12)
        close(g, grad(loss_plain)(w, b), tol=1e-12)
        close(g, fd_gradient(loss, (w, b)), tol=1e-5)


def test_sensitivities_of_the_items(workers):
    @define_dplus
    def weighted(p, q):
        xs = [(p * i, q) for i in range(6)]
        return sum(dplus.parallel.map(lambda t: math.sin(t[0]) * t[1], xs, client=workers))

    @define_dplus
    def weighted_plain(p, q):
        return sum(math.sin(p * i) * q for i in range(6))

    for args in [(0.3, 1.5), (1.1, -0.4)]:
        close(grad(weighted)(*args), grad(weighted_plain)(*args), tol=1e-12)


def test_arrays(workers):
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(5, 3)) for _ in range(4)]

    def loss(W):
        return sum(
            dplus.parallel.map(lambda X: np.sum(np.tanh(X @ W) ** 2), batches, client=workers)
        )

    def plain(W):
        return sum(np.sum(np.tanh(X @ W) ** 2) for X in batches)

    W = rng.normal(size=(3, 2))
    g = dplus.grad1(loss)(W)
    assert np.allclose(g, dplus.grad1(plain)(W), rtol=1e-12)
    eps = 1e-6
    for i, j in [(0, 0), (1, 0), (2, 1)]:
        E = np.zeros_like(W)
        E[i, j] = eps
        assert g[i, j] == pytest.approx((plain(W + E) - plain(W - E)) / (2 * eps), rel=1e-6)


def test_plain_call_and_empty(workers):
    assert dplus.parallel.map(lambda x: x * 2, [1, 2, 3], client=workers) == [2, 4, 6]
    assert dplus.parallel.map(lambda x: x * 2, [], client=workers) == []
    assert grad(lambda w: sum(dplus.parallel.map(lambda x: x * w, [], client=workers)) + w)(
        2.0
    ) == (1.0,)


def test_a_captured_list_is_refused_on_the_worker(workers):
    def loss(w):
        params = [w, 2.0 * w]
        return sum(dplus.parallel.map(lambda x: x * params[0], [1.0, 2.0], client=workers))

    with pytest.raises(dplus.DplusError, match="cannot travel back"):
        dplus.grad1(loss)(0.5)


def kept(workers):
    n = workers.count()
    return sum(workers.at(range(n), dplus.parallel.kept_records, [()] * n))


def wait_until(workers, count):
    gc.collect()
    for _ in range(200):  # (an actor runs its tasks in the order one caller sent them: at once)
        if kept(workers) == count:
            break
        time.sleep(0.05)
    return kept(workers)


def test_records_are_dropped_with_the_backprop(workers):
    loss = make_loss(workers, 4)
    gc.collect()
    before = kept(workers)  # (records of backprops that earlier tests' exceptions may still hold)
    r = dplus.lift_dplus(loss)(0.5, 0.1)  # the forward pass only: 4 chunks' records wait
    assert kept(workers) == before + 4
    del r
    assert wait_until(workers, before) == before
    grad(loss)(0.5, 0.1)
    assert wait_until(workers, before) == before


def test_backprop_runs_again_for_a_jacobian(workers):
    def two(w):
        ys = dplus.parallel.map(lambda x: math.sin(w * x), [0.5, 1.5, 2.5], client=workers)
        return (ys[0] + ys[1], ys[2] * w)

    J = dplus.jacobian(two)(0.8)
    assert J[0][0] == pytest.approx(0.5 * math.cos(0.4) + 1.5 * math.cos(1.2), rel=1e-12)
    assert J[1][0] == pytest.approx(math.sin(2.0) + 0.8 * 2.5 * math.cos(2.0), rel=1e-12)


def test_second_order_runs_in_process_with_the_workers_captured(workers):
    loss = make_loss(workers, 3)
    for w, b in [(0.5, 0.1), (-1.2, 0.7)]:
        h = dplus.hessian(loss)(w, b)
        close(h, dplus.hessian(loss_plain)(w, b), tol=1e-10)
        close(h, fd_hessian(loss_plain, (w, b)), tol=1e-5)


def test_bad_arguments(workers):
    with pytest.raises(dplus.ArgumentError, match="positive integer"):
        dplus.parallel.RayWorkers(0)
