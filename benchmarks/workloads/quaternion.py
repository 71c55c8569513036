"""5. Rotate a 3-vector by a quaternion, the Hamilton product written out.

``r = q * (0, v) * conj(q)``; the result is reduced to a scalar with fixed
weights, ``r_x + 2 r_y + 3 r_z``.  The quaternion is not normalised (the
rotation then also scales by |q|^2), so every component of ``q`` matters.
"""

from ._base import Workload, differentiable


@differentiable
def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return [
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ]


def rotate(q, v):
    qc = [q[0], -q[1], -q[2], -q[3]]
    r = qmul(qmul(q, [0.0, v[0], v[1], v[2]]), qc)
    return r[1] + 2.0 * r[2] + 3.0 * r[3]


def qmul_adjoint(a, b, g):
    """Gradients of ``sum(g * qmul(a, b))`` with respect to ``a`` and ``b``."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    g0, g1, g2, g3 = g
    ga = [
        g0 * bw + g1 * bx + g2 * by + g3 * bz,
        -g0 * bx + g1 * bw - g2 * bz + g3 * by,
        -g0 * by + g1 * bz + g2 * bw - g3 * bx,
        -g0 * bz - g1 * by + g2 * bx + g3 * bw,
    ]
    gb = [
        g0 * aw + g1 * ax + g2 * ay + g3 * az,
        -g0 * ax + g1 * aw + g2 * az - g3 * ay,
        -g0 * ay - g1 * az + g2 * aw + g3 * ax,
        -g0 * az + g1 * ay - g2 * ax + g3 * aw,
    ]
    return ga, gb


def rotate_grad(q, v):
    qc = [q[0], -q[1], -q[2], -q[3]]
    p = [0.0, v[0], v[1], v[2]]
    t = qmul(q, p)
    gt, gqc = qmul_adjoint(t, qc, [0.0, 1.0, 2.0, 3.0])
    gq, gp = qmul_adjoint(q, p, gt)
    gq = [gq[0] + gqc[0], gq[1] - gqc[1], gq[2] - gqc[2], gq[3] - gqc[3]]
    return (gq, gp[1:])


WORKLOAD = Workload(
    name="quaternion",
    title="rotate 3-vector by quaternion",
    primal=rotate,
    hand_grad=rotate_grad,
    make_args=lambda n: ([0.9, -0.3, 0.2, 0.4], [1.5, -0.7, 0.25]),
    wrt=(0, 1),
    default_size=1,
    size_label="-",
)
