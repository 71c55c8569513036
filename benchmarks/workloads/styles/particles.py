"""4 particles, 1000 explicit Euler steps in a force field with friction (the math of
``benchmarks/workloads/particles.py``), in six styles.  Gradient with respect to the
initial velocities."""

import math
from dataclasses import dataclass

from .. import particles as _particles
from .._base import differentiable
from ._make import style_workloads

DT = 0.01
FRICTION = 0.1
TARGET = (1.0, -0.5)


@differentiable
def force(x, y):
    return -x + 0.3 * math.sin(2.0 * y), -y + 0.3 * math.cos(2.0 * x)


@differentiable
def loss_of(points):
    loss = 0.0
    for x, y in points:
        loss += (x - TARGET[0]) ** 2 + (y - TARGET[1]) ** 2
    return loss


# -- a list of ((px, py), (vx, vy)) tuples rebuilt every step ---------------------------


def particles_tuples(pos, vel, steps):
    state = [(tuple(p), tuple(v)) for p, v in zip(pos, vel)]
    for _ in range(steps):
        new_state = []
        for (px, py), (vx, vy) in state:
            fx, fy = force(px, py)
            new_state.append(
                (
                    (px + DT * vx, py + DT * vy),
                    (vx + DT * (fx - FRICTION * vx), vy + DT * (fy - FRICTION * vy)),
                )
            )
        state = new_state
    return loss_of([p for p, _ in state])


# -- lists of [x, y] lists updated in place ---------------------------------------------


def particles_nested(pos, vel, steps):
    pos = [list(p) for p in pos]
    vel = [list(v) for v in vel]
    for _ in range(steps):
        for i in range(len(pos)):
            fx, fy = force(pos[i][0], pos[i][1])
            pos[i][0] += DT * vel[i][0]
            pos[i][1] += DT * vel[i][1]
            vel[i][0] += DT * (fx - FRICTION * vel[i][0])
            vel[i][1] += DT * (fy - FRICTION * vel[i][1])
    return loss_of(pos)


# -- objects: a plain class, a dataclass, a class with __slots__ ------------------------


class Particle:
    def __init__(self, px, py, vx, vy):
        self.px = px
        self.py = py
        self.vx = vx
        self.vy = vy

    @differentiable
    def step(self):
        fx, fy = force(self.px, self.py)
        self.px += DT * self.vx
        self.py += DT * self.vy
        self.vx += DT * (fx - FRICTION * self.vx)
        self.vy += DT * (fy - FRICTION * self.vy)


@dataclass
class ParticleData:
    px: float
    py: float
    vx: float
    vy: float

    @differentiable
    def step(self):
        fx, fy = force(self.px, self.py)
        self.px, self.py = self.px + DT * self.vx, self.py + DT * self.vy
        self.vx = self.vx + DT * (fx - FRICTION * self.vx)
        self.vy = self.vy + DT * (fy - FRICTION * self.vy)


class ParticleSlots:
    __slots__ = ("px", "py", "vx", "vy")

    def __init__(self, px, py, vx, vy):
        self.px, self.py, self.vx, self.vy = px, py, vx, vy

    @differentiable
    def step(self):
        fx, fy = force(self.px, self.py)
        self.px += DT * self.vx
        self.py += DT * self.vy
        self.vx += DT * (fx - FRICTION * self.vx)
        self.vy += DT * (fy - FRICTION * self.vy)


def particles_class(pos, vel, steps):
    ps = [Particle(p[0], p[1], v[0], v[1]) for p, v in zip(pos, vel)]
    for _ in range(steps):
        for p in ps:
            p.step()
    return loss_of([(p.px, p.py) for p in ps])


def particles_dataclass(pos, vel, steps):
    ps = [ParticleData(p[0], p[1], v[0], v[1]) for p, v in zip(pos, vel)]
    for _ in range(steps):
        for p in ps:
            p.step()
    return loss_of([(p.px, p.py) for p in ps])


def particles_slots(pos, vel, steps):
    ps = [ParticleSlots(p[0], p[1], v[0], v[1]) for p, v in zip(pos, vel)]
    for _ in range(steps):
        for p in ps:
            p.step()
    return loss_of([(p.px, p.py) for p in ps])


WORKLOADS = style_workloads(
    _particles.WORKLOAD,
    "particles",
    {
        "lists": _particles.simulate,
        "tuples": particles_tuples,
        "nested": particles_nested,
        "class": particles_class,
        "dataclass": particles_dataclass,
        "slots": particles_slots,
    },
    test_size=20,
)
