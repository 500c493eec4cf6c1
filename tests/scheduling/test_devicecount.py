"""The device-count pre-check never changes where pods go, only how fast the loop gets there."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.featuregates import ALL_ON
from allocator.pipeline import build_pipeline
from allocator.scheduling.setup import build_run
from allocator.trace import NULL_TRACE, Trace
from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    gpu,
    node,
    pod,
    request,
    resource_slice,
    snapshot,
    template,
)


def _cluster(gpus_per_node: list[int], allocated: list[int], wants: list[int]) -> list[dict]:
    docs = [device_class()]
    for n, (count, used) in enumerate(zip(gpus_per_node, allocated, strict=True)):
        name = f"gpu-node-{n}"
        docs.append(node(name, cpu="64", memory="512Gi"))
        docs.append(
            resource_slice(
                f"{name}-gpus", node=name, owner=name, devices=[gpu(i) for i in range(count)]
            )
        )
        for i in range(min(used, count)):
            docs.append(
                claim(
                    f"{name}-held-{i}",
                    [request("gpu")],
                    allocated=[("gpu", GPU, name, f"gpu-{i}")],
                    reserved_for=[f"{name}-runner"],
                )
            )
    docs.append(
        resource_slice(
            "fabric", pool="fabric", all_nodes=True, devices=[gpu(90, model="NVIDIA A100")]
        )
    )
    for size in sorted(set(wants)):
        docs.append(template(f"gpus-{size}", [request("gpus", count=size)]))
    for i, size in enumerate(wants):
        docs.append(pod(f"job-{i}", cpu="1", templates={"gpus": f"gpus-{size}"}, uid=f"u{i:03d}"))
    return docs


def _placements(docs: list[dict], counter: bool) -> dict[str, tuple]:
    run_ = build_run(snapshot(docs), build_pipeline(ALL_ON), NULL_TRACE, timeout=5.0)
    if not counter:
        run_.scheduler.state.counter = None
    outcomes = run_.scheduler.solve(run_.pods.pending, run_.pod_claims)
    return {
        o.pod.key: (
            o.target.name if o.target else None,
            tuple(d.device for c in o.claim_outcomes for d in c.devices),
            o.scheduled,
        )
        for o in outcomes
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=4),
    wants=st.lists(st.integers(1, 4), min_size=1, max_size=8),
)
def test_precheck_is_sound(nodes, wants):
    docs = _cluster([n for n, _ in nodes], [u for _, u in nodes], wants)
    assert _placements(docs, counter=True) == _placements(docs, counter=False)


def _dfs_nodes(docs: list[dict], counter: bool) -> tuple[int, list]:
    """(Allocate calls, outcomes): each Allocate call leaves a ``target`` trace node; targets
    the pre-check refused leave one with the pre-check's message instead (and the funnel of
    the refusal, under its decisive cause's reason)."""
    trace = Trace()
    run_ = build_run(snapshot(docs), build_pipeline(ALL_ON), trace, timeout=5.0)
    if not counter:
        run_.scheduler.state.counter = None
    outcomes = run_.scheduler.solve(run_.pods.pending, run_.pod_claims)
    calls = sum(
        1
        for n in trace.nodes
        if n["kind"] == "target" and "unallocated devices are reachable" not in (n["message"] or "")
    )
    return calls, outcomes


def test_precheck_skips_the_dfs_on_full_nodes_with_the_dfs_words():
    docs = _cluster([2, 2, 2], [2, 2, 2], [2, 2])
    searched, outcomes = _dfs_nodes(docs, counter=True)
    unchecked, _ = _dfs_nodes(docs, counter=False)
    assert searched < unchecked
    reasons = outcomes[1].reasons
    assert [t for t, _ in reasons] == ["node/gpu-node-0", "node/gpu-node-1", "node/gpu-node-2"]
    for _, reason in reasons:
        assert reason.startswith(
            "allocating dynamic resources, no instance type can satisfy the allocation"
        )
        assert "at most 1 unallocated devices" in reason  # the fabric GPU is reachable


def test_precheck_waits_for_validation_so_allocator_errors_show():
    docs = _cluster([1], [1], [40])
    _, (outcome,) = _dfs_nodes(docs, counter=True)
    assert "exceeding maximum" in outcome.reasons[0][1]
