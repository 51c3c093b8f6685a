"""tw_test_util.pairwise, the covering set that replaces full cartesian products in the
parametrizations trimmed in session 23 (docs/testing.md "Session 23: CI time"): every pair of
values of any two axes occurs in some row, each row takes one value of every axis, the set is the
same on every call, and it is no larger than a product needs."""
import itertools

import pytest

from tw_test_util import pairwise


@pytest.mark.parametrize("sizes", [(6, 3, 3, 3), (7, 3, 4), (2, 2, 2), (5, 1, 3, 2, 4), (3, 3), (1, 1), (4,)])
def test_every_pair_of_values_is_covered(sizes):
    axes = [[f"a{i}v{v}" for v in range(n)] for i, n in enumerate(sizes)]
    rows = pairwise(*axes)
    assert all(len(r) == len(axes) and all(r[i] in axes[i] for i in range(len(axes))) for r in rows)
    for i, j in itertools.combinations(range(len(axes)), 2):
        assert {(r[i], r[j]) for r in rows} == set(itertools.product(axes[i], axes[j]))
    assert {r[0] for r in rows} == set(axes[0])
    a, b = sorted(sizes, reverse=True)[:2] if len(sizes) > 1 else (sizes[0], 1)
    assert a * b <= len(rows) <= max(a * b + a, 1) and len(rows) <= len(list(itertools.product(*axes)))
    assert rows == pairwise(*axes)


def test_tuple_values_and_unhashable_values_stay_whole():
    rows = pairwise([(3, 13, 37), (1, 1, 1)], ["float32", "int32"], [[0], [1]])
    assert len(rows) == 4 and {r[0] for r in rows} == {(3, 13, 37), (1, 1, 1)}
    assert {tuple(r[2]) for r in rows} == {(0,), (1,)}
