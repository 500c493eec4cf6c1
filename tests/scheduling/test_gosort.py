"""Go's ``sort.Slice`` reproduced (scheduling/gosort.py): the order Go leaves equal elements in,
checked against Go's own outputs (data/go_sort_slice.json, made with Go 1.19's sort package)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from allocator.scheduling.gosort import slice_sort, slice_sort_by_key

VECTORS = json.loads((Path(__file__).parent / "data" / "go_sort_slice.json").read_text())


def _by_key(a, b) -> bool:
    return a[0] < b[0]


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_ties_fall_as_go_leaves_them(case):
    items = [(key, i) for i, key in enumerate(case["keys"])]
    slice_sort(items, _by_key)
    assert [i for _, i in items] == case["order"]


def test_thirteen_equal_elements_are_no_longer_in_input_order():
    """The documented surprise (Go 1.19+): up to 12 elements insertion sort keeps ties in
    order, from 13 on pdqsort moves one of them to the front."""
    items = [("x", -1)] + [("test", i) for i in range(12)]
    slice_sort(items, _by_key)
    assert [i for _, i in items] == [5, 0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, -1]
    items = [("x", -1)] + [("test", i) for i in range(13)]
    slice_sort(items, _by_key)
    assert [i for _, i in items] == [5, 7, 1, 2, 3, 4, 0, 12, 9, 8, 6, 10, 11, -1]


@pytest.mark.parametrize("keyed", [False, True], ids=["comparison", "by-key"])
@pytest.mark.parametrize("process", VECTORS["processes"], ids=lambda p: p["name"])
def test_nodeclaims_resorted_before_each_pod_as_karpenter_leaves_them(process, keyed):
    """Karpenter's scheduler sorts the same NodeClaim slice in place before every pod: each
    sort starts from the order the previous one left (by comparison, and by pod count as
    the scheduler sorts)."""
    found = re.fullmatch(r"steps(\d+)-every(\d+)-stride(\d+)", process["name"])
    steps, every, stride = (int(g) for g in found.groups())
    nodeclaims: list[list[int]] = []  # [pod count, creation index]
    snapshots = []
    for t in range(steps):
        if keyed:
            slice_sort_by_key(nodeclaims, [count for count, _ in nodeclaims])
        else:
            slice_sort(nodeclaims, _by_key)
        if t % every == 0 or not nodeclaims:
            nodeclaims.append([1, len(nodeclaims)])
        else:
            index = (t * stride) % len(nodeclaims)
            nodeclaims[0 if index > len(nodeclaims) // 2 else index][0] += 1
        if t % 200 == 199:
            snapshots.append([i for _, i in nodeclaims])
    assert snapshots == process["snapshots"]


@given(st.lists(st.integers(min_value=0, max_value=6), max_size=120))
def test_sorted_and_a_permutation_and_stable_up_to_twelve(keys):
    items = [(key, i) for i, key in enumerate(keys)]
    slice_sort(items, _by_key)
    assert [k for k, _ in items] == sorted(keys)
    assert sorted(i for _, i in items) == list(range(len(keys)))
    if len(keys) <= 12:
        assert items == sorted(items)


@example([0, 1, 2] * 20, [(50, -2)])  # a 0 among the 2s of a sorted slice: passes 2s and 1s
@given(
    st.lists(st.integers(min_value=0, max_value=30), max_size=400),
    st.lists(st.tuples(st.integers(min_value=0, max_value=399), st.integers(-3, 3)), max_size=6),
)
def test_sorting_by_key_leaves_ties_where_sorting_by_comparison_does(keys, bumps):
    """The scheduler's keyed sort (pod counts computed once, runs scanned at C speed) orders
    NodeClaims exactly as ``sort.Slice`` with a comparison does, also on a sorted slice where
    a few keys changed (more pods: what it sorts before every pod; fewer: its other shift).
    """
    for start in (keys, sorted(keys)):
        counts = list(start)
        for index, change in bumps:
            if counts:
                counts[index % len(counts)] += change
        items = [(key, i) for i, key in enumerate(counts)]
        keyed = list(items)
        slice_sort(items, _by_key)
        slice_sort_by_key(keyed, [k for k, _ in keyed])
        assert keyed == items
