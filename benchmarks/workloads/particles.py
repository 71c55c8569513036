"""7. Particles: 4 particles in a smooth force field with friction, ``steps``
steps of explicit Euler (1000 by default), written with lists that are updated
in place.  Objective: squared distance of the final positions to a target
point; gradient with respect to the initial velocities.
"""

import math
import random

from ._base import Workload, differentiable

DT = 0.01
FRICTION = 0.1
TARGET = (1.0, -0.5)


@differentiable
def force(x, y):
    fx = -x + 0.3 * math.sin(2.0 * y)
    fy = -y + 0.3 * math.cos(2.0 * x)
    return fx, fy


def simulate(pos, vel, steps):
    pos = [list(p) for p in pos]
    vel = [list(v) for v in vel]
    for _ in range(steps):
        for i in range(len(pos)):
            x, y = pos[i]
            vx, vy = vel[i]
            fx, fy = force(x, y)
            pos[i] = [x + DT * vx, y + DT * vy]
            vel[i] = [vx + DT * (fx - FRICTION * vx), vy + DT * (fy - FRICTION * vy)]
    loss = 0.0
    for x, y in pos:
        loss += (x - TARGET[0]) ** 2 + (y - TARGET[1]) ** 2
    return loss


def simulate_grad(pos, vel, steps):
    """Adjoint of the Euler scheme, particle by particle (they do not interact)."""
    keep = 1.0 - DT * FRICTION
    gvel = []
    for (x, y), (vx, vy) in zip(pos, vel):
        traj = []
        for _ in range(steps):
            traj.append((x, y))
            fx = -x + 0.3 * math.sin(2.0 * y)
            fy = -y + 0.3 * math.cos(2.0 * x)
            x, y, vx, vy = (
                x + DT * vx,
                y + DT * vy,
                vx + DT * (fx - FRICTION * vx),
                vy + DT * (fy - FRICTION * vy),
            )
        gx, gy = 2.0 * (x - TARGET[0]), 2.0 * (y - TARGET[1])
        gvx = gvy = 0.0
        for x, y in reversed(traj):
            # fx = -x + 0.3 sin(2y), fy = -y + 0.3 cos(2x)
            dfx_dy = 0.6 * math.cos(2.0 * y)
            dfy_dx = -0.6 * math.sin(2.0 * x)
            gx, gy, gvx, gvy = (
                gx + DT * (-gvx + gvy * dfy_dx),
                gy + DT * (gvx * dfx_dy - gvy),
                DT * gx + keep * gvx,
                DT * gy + keep * gvy,
            )
        gvel.append([gvx, gvy])
    return (gvel,)


def make_args(steps):
    r = random.Random(7)
    pos = [[r.uniform(-1, 1), r.uniform(-1, 1)] for _ in range(4)]
    vel = [[r.uniform(-0.5, 0.5), r.uniform(-0.5, 0.5)] for _ in range(4)]
    return (pos, vel, steps)


WORKLOAD = Workload(
    name="particles",
    title="particles, 4 x 1000 Euler steps",
    primal=simulate,
    hand_grad=simulate_grad,
    make_args=make_args,
    wrt=(1,),
    default_size=1000,
    check_size=1000,
    size_label="steps",
)
