"""dplus.parallel.map on real worker processes, once per backend: a Dask LocalCluster of two
worker processes, and a local Ray session of two CPUs with two actors of
dplus.parallel.RayWorkers. The gradient equals the in-process one and finite differences;
records stay on the workers and are dropped with the backprop. A backend whose package is
not installed is skipped (Ray is an optional extra, not in the test extra: see
docs/scaling.md)."""

from __future__ import annotations

import gc
import math
import time

import numpy as np
import pytest
from path_helpers import close, fd_gradient, fd_hessian

import dplus
from dplus import define_dplus, grad


@pytest.fixture(scope="module", params=["dask", "ray"])
def client(request):
    # (module scope: pytest runs every test of one backend before it starts the other, so
    # at most one cluster runs at a time)
    if request.param == "dask":
        distributed = pytest.importorskip("distributed")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        c = distributed.Client(cluster)
        yield c
        c.close()
        cluster.close()
    else:
        ray = pytest.importorskip("ray")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=80 * 1024 * 1024,
        )
        workers = dplus.parallel.RayWorkers(2)
        yield workers
        workers.close()
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
def test_gradient_on_the_workers_equals_in_process(client, chunks):
    loss = make_loss(client, chunks)
    for w, b in [(0.5, 0.1), (-1.2, 0.7)]:
        assert loss(w, b) == pytest.approx(loss_plain(w, b), rel=1e-12)
        g = grad(loss)(w, b)
        close(g, grad(make_loss(None))(w, b), tol=1e-12)
        close(g, grad(loss_plain)(w, b), tol=1e-12)
        close(g, fd_gradient(loss, (w, b)), tol=1e-5)


def test_sensitivities_of_the_items(client):
    @define_dplus
    def weighted(p, q):
        xs = [(p * i, q) for i in range(6)]
        return sum(dplus.parallel.map(lambda t: math.sin(t[0]) * t[1], xs, client=client))

    @define_dplus
    def weighted_plain(p, q):
        return sum(math.sin(p * i) * q for i in range(6))

    for args in [(0.3, 1.5), (1.1, -0.4)]:
        close(grad(weighted)(*args), grad(weighted_plain)(*args), tol=1e-12)


def test_arrays(client):
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(5, 3)) for _ in range(4)]

    def loss(W):
        return sum(
            dplus.parallel.map(lambda X: np.sum(np.tanh(X @ W) ** 2), batches, client=client)
        )

    def plain(W):
        return sum(np.sum(np.tanh(X @ W) ** 2) for X in batches)

    W = rng.normal(size=(3, 2))
    g = dplus.grad1(loss)(W)
    assert g.shape == W.shape
    assert np.allclose(g, dplus.grad1(plain)(W), rtol=1e-12)
    eps = 1e-6
    for i, j in [(0, 0), (1, 0), (2, 1)]:
        E = np.zeros_like(W)
        E[i, j] = eps
        assert g[i, j] == pytest.approx((plain(W + E) - plain(W - E)) / (2 * eps), rel=1e-6)


def test_plain_call_and_empty(client):
    assert dplus.parallel.map(lambda x: x * 2, [1, 2, 3], client=client) == [2, 4, 6]
    assert dplus.parallel.map(lambda x: x * 2, [], client=client) == []
    assert grad(lambda w: sum(dplus.parallel.map(lambda x: x * w, [], client=client)) + w)(2.0) == (
        1.0,
    )


def test_plain_call_in_process():
    assert dplus.parallel.map(lambda x: x + 1, range(4)) == [1, 2, 3, 4]


def test_a_captured_list_is_refused_on_the_worker(client):
    def loss(w):
        params = [w, 2.0 * w]
        return sum(dplus.parallel.map(lambda x: x * params[0], [1.0, 2.0], client=client))

    with pytest.raises(dplus.DplusError, match="cannot travel back"):
        dplus.grad1(loss)(0.5)


def test_bad_arguments():
    with pytest.raises(dplus.ArgumentError):
        dplus.parallel.map(3, [1.0])
    with pytest.raises(dplus.ArgumentError):
        dplus.parallel.map(lambda x: x, [1.0], client=object())
    with pytest.raises(dplus.ArgumentError):
        dplus.parallel.map(lambda x: x, [1.0], chunks=0)


def test_bad_worker_count(client):
    # (RayWorkers checks its count only inside a Ray session, which the Ray client opened)
    if not isinstance(client, dplus.parallel.RayWorkers):
        pytest.skip("RayWorkers' own argument: the Ray backend's case")
    with pytest.raises(dplus.ArgumentError, match="positive integer"):
        dplus.parallel.RayWorkers(0)


def kept(client):
    if isinstance(client, dplus.parallel.RayWorkers):
        n = client.count()
        return sum(client.at(range(n), dplus.parallel.kept_records, [()] * n))
    return sum(client.run(dplus.parallel.kept_records).values())


def wait_until(client, count):
    gc.collect()
    for _ in range(200):
        if kept(client) == count:
            break
        time.sleep(0.05)
    return kept(client)


def test_records_are_dropped_with_the_backprop(client):
    loss = make_loss(client, 4)
    gc.collect()
    time.sleep(0.5)
    before = kept(client)  # (records of backprops that earlier tests' exceptions may still hold)
    r = dplus.lift_dplus(loss)(0.5, 0.1)  # the forward pass only: 4 chunks' records wait
    assert kept(client) == before + 4
    del r
    assert wait_until(client, before) == before
    grad(loss)(0.5, 0.1)
    assert wait_until(client, before) == before


def test_backprop_runs_again_for_a_jacobian(client):
    def two(w):
        ys = dplus.parallel.map(lambda x: math.sin(w * x), [0.5, 1.5, 2.5], client=client)
        return (ys[0] + ys[1], ys[2] * w)

    J = dplus.jacobian(two)(0.8)
    assert J[0][0] == pytest.approx(0.5 * math.cos(0.4) + 1.5 * math.cos(1.2), rel=1e-12)
    assert J[1][0] == pytest.approx(math.sin(2.0) + 0.8 * 2.5 * math.cos(2.0), rel=1e-12)


def test_second_order_runs_in_process():
    # at the second order the map is recorded in this process
    loss = make_loss(None)
    for args in [(0.5, 0.1), (-1.2, 0.7)]:
        close(dplus.hessian(loss)(*args), dplus.hessian(loss_plain)(*args), tol=1e-10)
        close(dplus.hessian(loss)(*args), fd_hessian(loss_plain, args), tol=1e-5)


def test_second_order_with_the_client_captured(client):
    # the loss closes over the client (and passes it by keyword): at the second order the
    # map runs in process, and no sensitivity, not even a zero, is handed into the client
    loss = make_loss(client, 3)
    for w, b in [(0.5, 0.1), (-1.2, 0.7)]:
        h = dplus.hessian(loss)(w, b)
        close(h, dplus.hessian(loss_plain)(w, b), tol=1e-10)
        close(h, fd_hessian(loss_plain, (w, b)), tol=1e-5)
        close(dplus.grad1(lambda v, b=b: grad(loss)(v, b)[0])(w), h[0][0], tol=1e-10)
