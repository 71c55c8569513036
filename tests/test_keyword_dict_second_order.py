"""Second order through a ``**kw`` parameter (T4 in tests/fuzz/FINDINGS.md).

The ``**`` dict a call binds is made by the calling convention; the sensitivities of its
entries live in the box map under that dict. At the next order its rule handed back only
the per-parameter sensitivities, so the entries' part was lost: Hessians through values
passed by keyword into ``**kw`` came out halved or zero, without an error.
"""

import pytest

import dplus
from tests.path_helpers import fd_hessian


def scaled_sum(first, **kw):
    return first * sum(kw.values())


def product_of(**kw):
    return kw["a"] * kw["extra"] + kw.get("c", 1.0)


def with_default(x, scale=2.0, **kw):
    return scale * x * kw["w"] ** 2


def through_values(x1, x2):
    return scaled_sum(x1, extra=x1 * x2)


def two_keywords(x1, x2):
    return scaled_sum(x1, extra=x1 * x2, other=x2 * x2)


def only_keywords(x1, x2):
    return product_of(a=x1, extra=x1 * x2, c=x2)


def mixed(x1, x2):
    return with_default(x1 * x2, w=x1 + x2) + with_default(x1, scale=x2, w=x2)


def nested(x1, x2):
    def inner(u, **opts):
        return u * opts["k"] * opts["k"]

    return inner(x1, k=x2 * x1) + inner(x2, k=x1)


@pytest.mark.parametrize("f", [through_values, two_keywords, only_keywords, mixed, nested])
@pytest.mark.parametrize("point", [(0.7, 1.3), (-1.1, 0.4), (2.0, -0.6)])
def test_hessian_matches_finite_differences(f, point):
    with dplus.current_unknown_transform(dplus.transform_from_source):
        hessian = dplus.hessian(f)(*point)
        expected = fd_hessian(f, list(point))
    for row, expected_row in zip(hessian, expected):
        assert row == pytest.approx(expected_row, rel=1e-5, abs=1e-6)
