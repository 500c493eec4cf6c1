"""Scheduler Initialization: slice universe, allocated-device seed, claims from templates."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.model import DeviceID
from allocator.pipeline import build_pipeline
from allocator.scheduling.initialization import allocated_device_seed, slice_universe
from allocator.scheduling.queue import collect_pods
from allocator.scheduling.setup import build_run
from allocator.trace import NULL_TRACE
from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    gpu,
    node,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    snapshot,
    template,
)


def _node_a_with_claims() -> list[dict]:
    return [
        device_class(),
        node("gpu-node-a"),
        resource_slice(
            "gpu-node-a-gpus",
            node="gpu-node-a",
            owner="gpu-node-a",
            devices=[gpu(i) for i in range(4)],
        ),
        claim(
            "held-by-live",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-0")],
            reserved_for=["live"],
        ),
        claim(
            "held-by-terminating",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-1")],
            reserved_for=["terminating"],
        ),
        claim(
            "held-by-nobody",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-2")],
            reserved_for=[],
        ),
        claim(
            "shared",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-3")],
            reserved_for=["terminating", "live"],
        ),
        pod("live", node_name="gpu-node-a", claims={"a": "held-by-live", "b": "shared"}),
        pod(
            "terminating",
            node_name="gpu-node-a",
            deleting=True,
            claims={"a": "held-by-terminating", "b": "shared"},
        ),
    ]


def test_seed_frees_devices_held_only_by_deleting_pods():
    snap = snapshot(_node_a_with_claims())
    pods = collect_pods(snap.pods, set())
    assert pods.deleting == {"default/terminating"}
    seed = allocated_device_seed(snap.resource_claims, pods.deleting, ())
    assert seed == {
        DeviceID(GPU, "gpu-node-a", "gpu-0"),  # live consumer
        DeviceID(GPU, "gpu-node-a", "gpu-2"),  # empty reservedFor keeps its devices
        DeviceID(GPU, "gpu-node-a", "gpu-3"),  # shared with a live pod
    }


def test_freed_device_is_allocated_to_a_pending_pod():
    docs = _node_a_with_claims() + [
        template("one-gpu", [request("gpu")]),
        pod("next", templates={"gpu": "one-gpu"}),
    ]
    entry = pod_result(run(docs), "default/next")
    assert [d["device"] for c in entry["claims"] for d in c["devices"]] == ["gpu-1"]


def test_universe_drops_slices_owned_by_excluded_or_absent_nodes_only():
    docs = [
        node("ready"),
        node("booting", pool="gpu", initialized=False),
        resource_slice("ready-gpus", node="ready", owner="ready", devices=[gpu(0)]),
        resource_slice("booting-gpus", node="booting", owner="booting", devices=[gpu(0)]),
        resource_slice("gone-gpus", node="gone", owner="gone", devices=[gpu(0)]),
        # spec.nodeName says where devices are reachable, not who owns the slice.
        resource_slice("pinned-not-owned", node="booting", devices=[gpu(0)]),
        resource_slice("fabric", pool="fabric", all_nodes=True, devices=[gpu(0)]),
    ]
    snap = snapshot(docs)
    universe = slice_universe(snap.resource_slices, snap.nodes, {"booting"})
    assert sorted(s.name for s in universe) == ["fabric", "pinned-not-owned", "ready-gpus"]


def test_claims_generated_from_templates_are_named_pod_entry_and_statuses_win():
    docs = [
        device_class(),
        node("gpu-node-a"),
        resource_slice(
            "gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0), gpu(1)]
        ),
        template("one-gpu", [request("gpu")]),
        claim("worker-0-gpu-x7k2p", [request("gpu")]),
        pod("worker-0", templates={"gpu": "one-gpu"}, statuses={"gpu": "worker-0-gpu-x7k2p"}),
        pod("worker-1", templates={"gpu": "one-gpu", "spare": "one-gpu"}, statuses={"spare": None}),
    ]
    snap = snapshot(docs)
    run_ = build_run(snap, build_pipeline(ALL_ON), NULL_TRACE, timeout=5.0)
    w0 = run_.pod_claims["default/worker-0"].claims
    w1 = run_.pod_claims["default/worker-1"].claims
    assert [c.key for c in w0] == ["default/worker-0-gpu-x7k2p"]
    assert w0[0].generated_from_template is None  # the controller's claim, from the snapshot
    assert [c.key for c in w1] == ["default/worker-1-gpu"]  # null status entry: no claim
    assert w1[0].generated_from_template == "one-gpu"
    assert list(run_.generated_claims) == ["default/worker-1-gpu"]


def test_missing_claim_or_template_fails_only_that_pod():
    docs = [
        device_class(),
        node("gpu-node-a"),
        resource_slice("gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0)]),
        pod("orphan", claims={"gpu": "does-not-exist"}),
        pod("no-template", templates={"gpu": "missing-template"}),
        pod("plain"),
    ]
    result = run(docs)
    assert (
        pod_result(result, "default/orphan")["error"]
        == 'resourceclaim "default/does-not-exist" not found'
    )
    assert "not found" in pod_result(result, "default/no-template")["error"]
    assert pod_result(result, "default/plain")["scheduled"] is True
