"""Constraint Propagation: DRA requirements merged into a NodeClaim, then the FULL instance type
filter re-run and intersected with the allocator's instance types; dropped types released."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.pipeline import build_pipeline
from allocator.scheduling.setup import build_run
from allocator.simulation import SimulationOptions
from allocator.trace import NULL_TRACE
from tests.scheduling.k8s import (
    ZONE,
    device_class,
    families,
    instance_type,
    node,
    node_claim_result,
    node_pool,
    offering,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    snapshot,
    template,
    zone_selector,
)

FAMILIES = families("g6", "g6e")


def _zone_pinned_accelerator(labels: dict | None = None) -> list[dict]:
    """A network-attached accelerator pool reachable only from us-west-2a (selector-scoped)."""
    return [
        device_class("accel.example.com"),
        resource_slice(
            "fabric-accel",
            driver="accel.example.com",
            pool="fabric-a",
            node_selector=zone_selector("us-west-2a"),
            devices=[{"name": "accel-0", "attributes": {"model": {"string": "inferentia"}}}],
        ),
        template("accel", [request("accel", cls="accel.example.com")]),
        node_pool("gpu", requirements=FAMILIES, labels=labels),
    ]


def test_dra_topology_tightens_new_nodeclaim_and_refilters_offerings():
    docs = _zone_pinned_accelerator() + [
        # Offers us-west-2a only as an unavailable offering: the requirement check passes but
        # no offering is left once the zone is pinned: the full filter must drop it.
        instance_type(
            "g6e.xlarge",
            family="g6e",
            cpu="4",
            memory="32Gi",
            offerings=[offering("us-west-2a", 0.9, available=False), offering("us-west-2b", 1.8)],
        ),
        instance_type(
            "g6.xlarge",
            family="g6",
            cpu="4",
            memory="16Gi",
            offerings=[offering("us-west-2a", 0.8), offering("us-west-2b", 0.8)],
        ),
        pod("infer-0", templates={"accel": "accel"}),
    ]
    result = run(docs)
    entry = pod_result(result, "default/infer-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    claim = entry["claims"][0]
    assert [(d["pool"], d["device"], d["source"]) for d in claim["devices"]] == [
        ("fabric-a", "accel-0", "in-cluster")
    ]
    assert claim["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": ZONE, "operator": "In", "values": ["us-west-2a"]}
    ]
    nc = node_claim_result(result, "gpu-1")
    assert nc["instanceTypes"] == ["g6.xlarge"]
    assert {"key": ZONE, "operator": "In", "values": ["us-west-2a"]} in nc["requirements"]
    assert nc["annotations"] == {"karpenter.sh/requested-dra-drivers": "accel.example.com"}
    # Requirements are sorted by key; the hostname placeholder is not reported.
    keys = [r["key"] for r in nc["requirements"]]
    assert keys == sorted(keys) and "kubernetes.io/hostname" not in keys


def test_nodeclaim_requirements_hold_nodepool_pod_and_dra_sources():
    docs = _zone_pinned_accelerator(labels={"team": "search"}) + [
        instance_type("g6.xlarge", family="g6", cpu="4", memory="16Gi"),
        pod(
            "infer-0",
            templates={"accel": "accel"},
            node_selector={"kubernetes.io/arch": "amd64"},
        ),
    ]
    nc = node_claim_result(run(docs), "gpu-1")
    by_key = {r["key"]: r for r in nc["requirements"]}
    assert by_key["team"]["values"] == ["search"]  # NodePool template label
    assert by_key["karpenter.sh/nodepool"]["values"] == ["gpu"]
    assert by_key["kubernetes.io/arch"]["values"] == ["amd64"]  # the pod's node selector
    assert by_key[ZONE]["values"] == ["us-west-2a"]  # the allocated device's topology


def test_incompatible_dra_topology_fails_the_nodeclaim_with_karpenter_words():
    docs = _zone_pinned_accelerator() + [
        instance_type(
            "g6.xlarge",
            family="g6",
            cpu="4",
            memory="16Gi",
            offerings=[offering("us-west-2b", 0.8)],
        ),
        pod("infer-0", templates={"accel": "accel"}),
    ]
    entry = pod_result(run(docs), "default/infer-0")
    assert entry["scheduled"] is False
    assert entry["error"].endswith(entry["reasons"][-1]["reason"])
    assert entry["error"].count('incompatible with nodepool "gpu"') == 1
    assert "allocating dynamic resources" in entry["error"]


def test_existing_nodes_must_be_compatible_with_dra_topology():
    docs = _zone_pinned_accelerator() + [
        instance_type("g6.xlarge", family="g6", cpu="4", memory="16Gi"),
        node("a-edge-b", zone="us-west-2b", instance_type="g6.xlarge", cpu="4", memory="16Gi"),
        node("edge-a", zone="us-west-2a", instance_type="g6.xlarge", cpu="4", memory="16Gi"),
        pod("infer-0", templates={"accel": "accel"}),
    ]
    result = run(docs, trace=True)
    entry = pod_result(result, "default/infer-0")
    assert entry["target"] == {"kind": "Node", "name": "edge-a", "new": False}
    # a-edge-b (zone b) was tried first, by name, and refused by the accelerator's topology.
    snap = snapshot(docs)
    from allocator.simulation import simulate

    trace = simulate(snap, SimulationOptions(trace=True)).trace
    targets = [(n["label"], n["status"]) for n in trace["nodes"] if n["kind"] == "target"]
    assert targets == [("node/a-edge-b", "failed"), ("node/edge-a", "ok")]


def test_instance_types_dropped_by_a_later_pod_are_released():
    docs = [
        device_class(),
        template("one-l4", [request("gpu")]),
        node_pool("gpu", requirements=FAMILIES),
        instance_type(
            "g6.xlarge",
            family="g6",
            cpu="4",
            memory="16Gi",
            gpus=1,
            model="NVIDIA L4",
            offerings=[offering("us-west-2a", 0.8)],
        ),
        instance_type(
            "g6.12xlarge",
            family="g6",
            cpu="48",
            memory="192Gi",
            gpus=4,
            model="NVIDIA L4",
            offerings=[offering("us-west-2a", 4.6)],
        ),
        pod("small", cpu="1", templates={"gpu": "one-l4"}),
        pod("large", cpu="500m", node_selector={"node.kubernetes.io/instance-type": "g6.12xlarge"}),
    ]
    snap = snapshot(docs)
    run_ = build_run(snap, build_pipeline(ALL_ON), NULL_TRACE, timeout=5.0)
    run_.scheduler.solve(run_.pods.pending, run_.pod_claims)
    (nc,) = run_.scheduler.node_claims
    assert nc.instance_types == ["g6.12xlarge"]
    assert [p.name for p in nc.pods] == ["small", "large"]
    held = run_.allocator.tracker.templates["gpu-1"]
    assert "g6.xlarge" not in held or not held["g6.xlarge"]
    assert held["g6.12xlarge"]
    # And the result lists the template device only for the instance type that remains.
    result = run(docs)
    its = [
        d["instanceType"]
        for c in pod_result(result, "default/small")["claims"]
        for d in c["devices"]
    ]
    assert its == ["g6.12xlarge"]
