"""Indexing a trace into rows: subtree counts must match a brute-force count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_web.runs.trace_store import index_rows


def _trace(parents: list[int | None], statuses: list[str]) -> list[dict]:
    return [
        {
            "id": i,
            "parent": p,
            "kind": "device",
            "label": f"gpu.nvidia.com/ip-10-0-0-{i}/gpu-{i % 8}",
            "status": s,
            "reason": "selector" if s == "failed" else "allocated",
            "message": None,
            "driver": "gpu.nvidia.com",
        }
        for i, (p, s) in enumerate(zip(parents, statuses, strict=True))
    ]


@st.composite
def traces(draw):
    n = draw(st.integers(1, 60))
    parents: list[int | None] = [None]
    for i in range(1, n):
        parents.append(draw(st.one_of(st.none(), st.integers(0, i - 1))))
    statuses = draw(st.lists(st.sampled_from(["ok", "failed", "pruned"]), min_size=n, max_size=n))
    return _trace(parents, statuses)


def _brute(nodes: list[dict], root: int) -> tuple[int, int]:
    total = failed = 0
    frontier = [n["id"] for n in nodes if n["parent"] == root]
    while frontier:
        i = frontier.pop()
        total += 1
        failed += nodes[i]["status"] == "failed"
        frontier.extend(n["id"] for n in nodes if n["parent"] == i)
    return total, failed


@given(traces())
@settings(max_examples=60, deadline=None)
def test_descendant_counts_match_brute_force(nodes):
    rows = {r["node_id"]: r for r in index_rows(nodes)}
    assert set(rows) == {n["id"] for n in nodes}
    for node in nodes:
        row = rows[node["id"]]
        assert (row["descendants"], row["failed_descendants"]) == _brute(nodes, node["id"])
        assert row["child_count"] == sum(1 for n in nodes if n["parent"] == node["id"])
        expected_depth = 0
        p = node["parent"]
        while p is not None:
            expected_depth += 1
            p = nodes[p]["parent"]
        assert row["depth"] == expected_depth


def test_extra_fields_are_kept_and_base_fields_split():
    nodes = _trace([None, 0], ["failed", "failed"])
    nodes[1]["pool"] = "ip-10-0-0-1"
    rows = list(index_rows(nodes))
    assert rows[1]["extra"] == {"driver": "gpu.nvidia.com", "pool": "ip-10-0-0-1"}
    assert rows[0]["failed_descendants"] == 1
    assert rows[1]["reason"] == "selector"


def test_children_listed_before_their_parent_still_index():
    nodes = [
        {"id": 0, "parent": 2, "kind": "device", "label": "gpu-0", "status": "ok"},
        {"id": 1, "parent": 2, "kind": "device", "label": "gpu-1", "status": "failed"},
        {"id": 2, "parent": None, "kind": "pod", "label": "ml-training/train-0", "status": "ok"},
    ]
    rows = {r["node_id"]: r for r in index_rows(nodes)}
    assert rows[2]["descendants"] == 2
    assert rows[2]["failed_descendants"] == 1
    assert rows[0]["depth"] == 1
