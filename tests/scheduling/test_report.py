"""The NodeClaim report (allocator/scheduling/report.py) on whole snapshots: the demo, the
device-taints and binding-conditions examples moved onto new NodeClaims, and a zonal fabric
where DRA tightens the zone so that an instance type loses its only offering."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.scheduling.initialization import node_pool_instance_types
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_paths
from tests.scheduling.k8s import (
    GPU,
    NIC,
    ZONE,
    claim,
    device_class,
    instance_type,
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

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())


def _validate(result: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(result)


def _example(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _held(result: dict, nc: dict) -> list[dict]:
    """The devices a NodeClaim holds: its pods' (the entry does not list them again)."""
    pods = {p["pod"]: p for p in result["pods"]}
    return [
        {"pod": pod, "claim": c["claim"], **d}
        for pod in nc["pods"]
        for c in pods[pod]["claims"]
        for d in c["devices"]
    ]


def _it(name: str, cpu: str, offerings: list[dict], templates: list[dict] | None = None) -> dict:
    doc = instance_type(name, cpu=cpu, memory="768Gi", offerings=offerings)
    if templates:
        doc["spec"]["dynamicResources"] = {"resourceSliceTemplates": templates}
    return doc


@pytest.fixture(scope="module")
def demo():
    snap = load_paths([str(EXAMPLES / "demo-snapshot.yaml")])
    return snap, simulate(snap, SimulationOptions()).result


def test_demo_pruned_instance_types_with_the_stage_and_message(demo):
    snap, result = demo
    _validate(result)
    nc = node_claim_result(result, "gpu-general-1")
    assert nc["instanceTypes"] == ["g5.12xlarge", "g5.48xlarge"]
    pruned = {p["name"]: p for p in nc["instanceTypesPruned"]}
    # The A10G selector of whisper's claim: the L4 / L40S / A100 types have no matching GPU.
    for name in ("g6.12xlarge", "g6e.12xlarge", "p4d.24xlarge"):
        assert pruned[name]["reason"] == "devices"
        # ... and the message ends with the decisive cause: the selector.
        assert pruned[name]["message"].startswith(
            "claim inference/whisper-a10g-0-gpu request gpu: 0 of 1 devices available ("
        )
        assert " rejected by selector: " in pruned[name]["message"]
    # The second whisper pod pushed the requests past the smallest g5.
    assert pruned["g5.xlarge"]["reason"] == "resources"
    assert pruned["g5.xlarge"]["message"].startswith(
        'not enough resources, requests {"cpu":"6100m"'
    )
    # Every type the NodePool could launch is either kept or pruned, exactly once.
    launchable = {i.name for i in node_pool_instance_types(snap)["gpu-general"]}
    assert len(nc["instanceTypesPruned"]) == len(pruned)
    assert set(pruned) | set(nc["instanceTypes"]) == launchable
    assert not set(pruned) & set(nc["instanceTypes"])


def test_demo_requirements_templates_devices_and_gating(demo):
    _, result = demo
    nc = node_claim_result(result, "gpu-h100-1")
    assert nc["instanceTypesPruned"] == []  # p5.48xlarge is the NodePool's only type
    # Template devices add no topology: after DRA only the instance types are written in.
    instance_type = {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["p5.48xlarge"],
    }
    assert instance_type in nc["requirements"]
    assert [r for r in nc["requirements"] if r != instance_type] == nc["requirementsBeforeDRA"]
    assert {"key": "workload", "operator": "In", "values": ["training"]} in nc[
        "requirementsBeforeDRA"
    ]
    assert nc["templateSlices"] == [
        {
            "instanceType": "p5.48xlarge",
            "slices": [
                {
                    "driver": "gpu.nvidia.com",
                    "pool": "p5.48xlarge-gpus",
                    "devices": [f"gpu-{i}" for i in range(8)],
                },
                {
                    "driver": "nic.example.com",
                    "pool": "p5.48xlarge-nics",
                    "devices": [f"nic-{i}" for i in range(8)],
                },
            ],
        }
    ]
    assert "devices" not in nc  # its pods' claims list them
    held = _held(result, nc)
    assert len(held) == 16
    assert held[1] == {
        "pod": "ml-training/llama-train-0",
        "claim": "ml-training/llama-train-0-pair0",
        "request": "nic",
        "driver": "nic.example.com",
        "pool": "p5.48xlarge-nics",
        "device": "nic-0",
        "source": "template",
        "instanceType": "p5.48xlarge",
    }
    assert nc["initializationGating"] == {
        "nodeClaim": "gpu-h100-1",
        "node": None,
        "status": "Unknown",
        "reason": "DRADriverPoolsNotPublished",
        "missingDrivers": ["gpu.nvidia.com", "nic.example.com"],
    }
    general = node_claim_result(result, "gpu-general-1")
    # Template devices once per kept instance type, as the pods' entries list them.
    assert [(d["device"], d["instanceType"]) for d in _held(result, general)] == [
        ("gpu-0", "g5.12xlarge"),
        ("gpu-0", "g5.48xlarge"),
        ("gpu-1", "g5.12xlarge"),
        ("gpu-1", "g5.48xlarge"),
    ]
    assert [t["instanceType"] for t in general["templateSlices"]] == ["g5.12xlarge", "g5.48xlarge"]
    assert general["deviceTaints"] == {"excluded": [], "tolerated": []}
    assert general["bindingConditions"] == []


def _taints_on_a_new_node_claim() -> list[dict]:
    """features-taints.yaml with worker-1's GPUs moved into a p5.48xlarge template: the
    DeviceTaintRules and the driver-published taint now apply to a NodeClaim's devices."""
    docs = _example("features-taints.yaml")
    gpus = next(d for d in docs if d["kind"] == "ResourceSlice")["spec"]["devices"]
    kept = [
        d
        for d in docs
        if d["kind"] not in ("Node", "ResourceSlice")
        and not (d["kind"] == "Pod" and d["spec"].get("nodeName"))
        and not (d["kind"] == "ResourceClaim" and d["metadata"]["name"] == "inference-gpu")
    ]
    templates = [{"driver": "dra.example.com", "pool": {"name": "p5-gpus"}, "devices": gpus}]
    return kept + [
        node_pool("gpu-training"),
        _it("p5.48xlarge", "192", [offering("us-west-2a", 98.32)], templates),
    ]


def test_device_taints_on_a_new_node_claim():
    result = run(_taints_on_a_new_node_claim())
    _validate(result)
    nc = node_claim_result(result, "gpu-training-1")
    assert nc["pods"] == ["ml-training/train-0", "ml-training/train-1"]
    held = {(d["pod"], d["device"]) for d in _held(result, nc)}
    assert held == {("ml-training/train-0", "gpu-2"), ("ml-training/train-1", "gpu-0")}
    # train-0 tolerates only dra.example.com/unhealthy: the H100 under maintenance (rule
    # h100-maintenance) and the A100 with ECC errors (driver taint) are excluded for it.
    assert nc["deviceTaints"]["excluded"] == [
        {
            "driver": "dra.example.com",
            "pool": "p5-gpus",
            "device": "gpu-0",
            "instanceType": "p5.48xlarge",
            "taint": "example.com/maintenance",
            "effect": "NoSchedule",
            "claims": ["ml-training/train-0-gpu"],
        },
        {
            "driver": "dra.example.com",
            "pool": "p5-gpus",
            "device": "gpu-1",
            "instanceType": "p5.48xlarge",
            "taint": "dra.example.com/ecc-errors=high",
            "effect": "NoSchedule",
            "claims": ["ml-training/train-0-gpu"],
        },
    ]
    tolerated = {
        (t["pod"], t["device"], t["taint"], t["effect"], json.dumps(t["toleration"]))
        for t in nc["deviceTaints"]["tolerated"]
    }
    # Each names the claim whose request tolerated it.
    assert {(t["pod"], t["claim"], t["request"]) for t in nc["deviceTaints"]["tolerated"]} == {
        ("ml-training/train-0", "ml-training/train-0-gpu", "gpu"),
        ("ml-training/train-1", "ml-training/train-1-gpu", "gpu"),
    }
    # The rule "dry-run" (effect None) is informational and never listed as tolerated.
    assert tolerated == {
        (
            "ml-training/train-0",
            "gpu-2",
            "dra.example.com/unhealthy=Broken",
            "NoExecute",
            json.dumps({"operator": "Exists", "key": "dra.example.com/unhealthy"}),
        ),
        (
            "ml-training/train-1",
            "gpu-0",
            "dra.example.com/unhealthy=Broken",
            "NoExecute",
            json.dumps({"operator": "Exists"}),
        ),
        (
            "ml-training/train-1",
            "gpu-0",
            "example.com/maintenance",
            "NoSchedule",
            json.dumps({"operator": "Exists"}),
        ),
    }
    assert nc["bindingConditions"] == []


def test_device_taints_without_rules_list_the_templates_own_taints_only():
    # No DeviceTaintRule: only the driver-published taint (the A100's ECC errors) excludes a
    # device; an instance type offering untainted GPUs of the same driver lists none.
    docs = [d for d in _taints_on_a_new_node_claim() if d["kind"] != "DeviceTaintRule"]
    untainted = [{"name": f"gpu-{i}", "attributes": {}} for i in range(3)]
    docs.append(
        _it(
            "p4d.24xlarge",
            "96",
            [offering("us-west-2a", 32.77)],
            [{"driver": "dra.example.com", "pool": {"name": "p4d-gpus"}, "devices": untainted}],
        )
    )
    result = run(docs)
    nc = node_claim_result(result, "gpu-training-1")
    assert "p4d.24xlarge" in nc["instanceTypes"]
    excluded = nc["deviceTaints"]["excluded"]
    assert [(x["instanceType"], x["device"], x["taint"]) for x in excluded] == [
        ("p5.48xlarge", "gpu-1", "dra.example.com/ecc-errors=high")
    ]


def test_device_taints_off_excludes_nothing():
    result = run(_taints_on_a_new_node_claim(), gates=_gates(DRADeviceTaints=False))
    nc = node_claim_result(result, "gpu-training-1")
    assert nc["deviceTaints"] == {"excluded": [], "tolerated": []}


def _gates(**values):
    from allocator.featuregates import FeatureGates

    return FeatureGates.from_mapping(values)


def test_binding_conditions_on_a_new_node_claim():
    """features-binding-conditions.yaml without node-3: a NodePool whose nodes carry
    accelerator-type=high-performance reaches the fabric GPU, which binds to the node."""
    docs = [
        d
        for d in _example("features-binding-conditions.yaml")
        if d["kind"] != "Node" and d["metadata"]["name"] != "gpu-slice-local"
    ]
    docs += [
        node_pool("fabric", labels={"accelerator-type": "high-performance"}),
        _it("m7i.4xlarge", "16", [offering("us-west-2b", 0.806)]),
        _it("m7i.large", "2", [offering("us-west-2b", 0.1008)]),
    ]
    result = run(docs, binding_timeout_seconds=900)
    _validate(result)
    nc = node_claim_result(result, "fabric-1")
    assert nc["pods"] == ["default/fabric-job"]
    assert nc["bindingConditions"] == [
        {
            "pod": "default/fabric-job",
            "claim": "default/fabric-gpu-old",
            "request": "gpu",
            "driver": "dra.example.com",
            "pool": "gpu-pool",
            "device": "gpu-1",
            "conditions": ["dra.example.com/is-prepared"],
            "failureConditions": ["dra.example.com/preparing-failed"],
            "bindsToNode": True,
            "timeoutSeconds": 900,
        }
    ]
    # bindsToNode: the reallocated claim is pinned to the NodeClaim the pod goes to.
    claim_entry = pod_result(result, "default/fabric-job")["claims"][0]
    assert claim_entry["state"] == "reallocated"
    assert claim_entry["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "fabric-1"
    ]
    held = _held(result, nc)
    assert held[0]["source"] == "in-cluster" and held[0]["instanceType"] is None
    assert nc["templateSlices"] == []  # m7i.4xlarge launches with no device templates
    assert nc["instanceTypesPruned"] == [
        {
            "name": "m7i.large",
            "reason": "resources",
            "message": 'not enough resources, requests {"cpu":"4"}, capacity {"cpu":"2"}',
        }
    ]


def _zonal_fabric() -> list[dict]:
    """An EFA fabric published as a network-attached pool reachable only in us-west-2a; the
    NodePool may launch in us-west-2a and us-west-2b, and caps CPU at 100."""
    fabric = resource_slice(
        "efa-fabric-2a",
        driver=NIC,
        pool="efa-fabric-2a",
        devices=[{"name": f"efa-{i}", "attributes": {"type": {"string": "efa"}}} for i in range(4)],
        node_selector=zone_selector("us-west-2a"),
    )
    both = [offering("us-west-2a", 2.419), offering("us-west-2b", 2.419)]
    graviton = _it("c7g.16xlarge", "64", [offering("us-west-2a", 2.32)])
    graviton["spec"]["requirements"][0]["values"] = ["arm64"]
    return [
        device_class(NIC),
        fabric,
        node_pool(
            "hpc",
            requirements=[{"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]}],
            limits={"cpu": "100"},
        ),
        _it("c7i.12xlarge", "48", both),
        # No capacity left in us-west-2a for this type: its only available offering is 2b.
        _it(
            "c7i.16xlarge",
            "64",
            [offering("us-west-2a", 2.856, available=False), offering("us-west-2b", 2.856)],
        ),
        _it("c7i.48xlarge", "192", both),
        graviton,
        claim("mpi-efa", [request("nic", NIC)], namespace="hpc"),
        pod(
            "mpi-rank-0",
            namespace="hpc",
            cpu="8",
            claims={"nic": "mpi-efa"},
            node_selector={"kubernetes.io/arch": "amd64"},
        ),
    ]


def test_offering_pruned_after_dra_tightened_the_zone():
    result = run(_zonal_fabric())
    _validate(result)
    nc = node_claim_result(result, "hpc-1")
    assert nc["instanceTypes"] == ["c7i.12xlarge"]
    pruned = {p["name"]: (p["reason"], p["message"]) for p in nc["instanceTypesPruned"]}
    assert set(pruned) == {"c7i.16xlarge", "c7i.48xlarge", "c7g.16xlarge"}
    # The limit (100 CPU) leaves out the 192-CPU type before anything else.
    assert pruned["c7i.48xlarge"] == (
        "limits",
        'launching it would exceed the limits of nodepool "hpc": capacity {"cpu":"192"}, '
        'remaining {"cpu":"100"}',
    )
    # The pod's arch selector rules out Graviton.
    assert pruned["c7g.16xlarge"] == (
        "requirements",
        "incompatible requirements, key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in "
        "kubernetes.io/arch In [amd64]",
    )
    # The fabric is reachable only in us-west-2a: the device search succeeds on c7i.16xlarge
    # (its zones are 2a and 2b), DRA tightens the zone, and its one available offering (2b)
    # no longer fits.
    assert pruned["c7i.16xlarge"] == (
        "offerings",
        f"no available offering compatible with {ZONE} In [us-west-2a]; "
        "offerings: us-west-2a/on-demand "
        "(unavailable), us-west-2b/on-demand (incompatible)",
    )
    zone_before = next(r for r in nc["requirementsBeforeDRA"] if r["key"] == ZONE)
    zone_after = next(r for r in nc["requirements"] if r["key"] == ZONE)
    assert zone_before["values"] == ["us-west-2a", "us-west-2b"]
    assert zone_after["values"] == ["us-west-2a"]
    assert _held(result, nc) == [
        {
            "pod": "hpc/mpi-rank-0",
            "claim": "hpc/mpi-efa",
            "request": "nic",
            "driver": NIC,
            "pool": "efa-fabric-2a",
            "device": "efa-0",
            "source": "in-cluster",
            "instanceType": None,
        }
    ]
    assert nc["templateSlices"] == []  # c7i.12xlarge launches with no device templates


def test_pruning_is_recorded_only_for_applied_placements():
    """A probe that fails on a NodeClaim leaves its instance types untouched."""
    docs = _zonal_fabric()
    docs.append(pod("mpi-rank-1", namespace="hpc", cpu="90", created="2026-12-01T10:01:00Z"))
    result = run(docs)
    nc = node_claim_result(result, "hpc-1")
    assert nc["pods"] == ["hpc/mpi-rank-0"]
    assert {p["name"] for p in nc["instanceTypesPruned"]} == {
        "c7i.16xlarge",
        "c7i.48xlarge",
        "c7g.16xlarge",
    }
    assert not pod_result(result, "hpc/mpi-rank-1")["scheduled"]


def test_snapshot_loader_round_trip_keeps_the_report_deterministic():
    docs = _zonal_fabric()
    a = simulate(snapshot(docs), SimulationOptions()).result["nodeClaims"]
    b = simulate(snapshot(docs), SimulationOptions()).result["nodeClaims"]
    assert a == b


ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]


@st.composite
def fleets(draw):
    """A GPU NodePool over a few instance types (sizes, GPUs, zones, availability, limits)
    and pods of different sizes, some pinned to a zone, some using a zonal EFA fabric."""
    limits = draw(st.sampled_from([None, {"cpu": "200"}, {"cpu": "400"}]))
    docs = [
        device_class(GPU),
        device_class(NIC),
        node_pool("gpu", limits=limits),
        template("one-gpu", [request("gpu")]),
        template("two-gpus", [request("gpus", count=2)]),
        template("efa", [request("nic", NIC)]),
    ]
    if draw(st.booleans()):
        docs.append(
            resource_slice(
                "efa-fabric",
                driver=NIC,
                pool="efa-fabric",
                devices=[{"name": f"efa-{i}", "attributes": {}} for i in range(3)],
                node_selector=zone_selector(draw(st.sampled_from(ZONES))),
            )
        )
    for i in range(draw(st.integers(2, 6))):
        cpu = draw(st.sampled_from([8, 16, 48, 96, 192]))
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
        offers = [
            offering(z, round(cpu * 0.05 + i * 0.01, 3), available=draw(st.booleans()) or j == 0)
            for j, z in enumerate(zones)
        ]
        docs.append(
            instance_type(
                f"g{i}.{cpu}x",
                cpu=str(cpu),
                gpus=draw(st.integers(0, 4)),
                family=f"g{i}",
                offerings=offers,
            )
        )
    for p in range(draw(st.integers(1, 6))):
        templates = draw(
            st.sampled_from([{}, {"gpu": "one-gpu"}, {"gpu": "two-gpus"}, {"nic": "efa"}])
        )
        zone = draw(st.sampled_from([None, *ZONES]))
        docs.append(
            pod(
                f"w-{p}",
                cpu=str(draw(st.sampled_from([1, 6, 12, 40]))),
                templates=templates,
                node_selector={ZONE: zone} if zone else None,
                created=f"2026-12-01T10:00:{p:02d}Z",
            )
        )
    return docs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=fleets())
def test_report_invariants_on_random_clusters(docs):
    """Every type a NodePool could launch is kept or pruned (once, with a known stage); the
    devices its pods hold from templates come from the instance types it kept; DRA only
    tightens requirements."""
    snap = snapshot(docs)
    result = simulate(snap, SimulationOptions()).result
    _validate(result)
    launchable = {
        pool: {i.name for i in infos} for pool, infos in node_pool_instance_types(snap).items()
    }
    templated = {n for n, it in snap.instance_types.items() if it.resource_slice_templates}
    for nc in result["nodeClaims"]:
        pruned = [p["name"] for p in nc["instanceTypesPruned"]]
        assert len(pruned) == len(set(pruned))
        assert not set(pruned) & set(nc["instanceTypes"])
        assert set(pruned) | set(nc["instanceTypes"]) == launchable[nc["nodePool"]]
        assert "devices" not in nc  # its pods' claims list them
        for d in _held(result, nc):
            if d["source"] == "template":
                assert d["instanceType"] in nc["instanceTypes"]
        assert [t["instanceType"] for t in nc["templateSlices"]] == [
            name for name in nc["instanceTypes"] if name in templated
        ]
        before = {r["key"]: r for r in nc["requirementsBeforeDRA"]}
        for r in nc["requirements"]:
            b = before.get(r["key"])
            if b is not None and b["operator"] == "In" and r["operator"] == "In":
                assert set(r["values"]) <= set(b["values"])
        gated = "karpenter.sh/requested-dra-drivers" in nc["annotations"]
        assert (nc["initializationGating"] is not None) == gated


def test_claim_level_taints_on_an_existing_node():
    """features-taints.yaml as published: worker-1 takes both pods; each claim says which of
    the node's GPUs a taint kept from it and which taints its request tolerated."""
    result = simulate(
        load_paths([str(EXAMPLES / "features-taints.yaml")]), SimulationOptions()
    ).result
    _validate(result)
    assert result["nodeClaims"] == []
    train0 = pod_result(result, "ml-training/train-0")["claims"][0]
    assert train0["deviceTaints"] == {
        "excluded": [
            {
                "driver": "dra.example.com",
                "pool": "worker-1",
                "device": "gpu-0",
                "instanceType": None,
                "taint": "example.com/maintenance",
                "effect": "NoSchedule",
            },
            {
                "driver": "dra.example.com",
                "pool": "worker-1",
                "device": "gpu-1",
                "instanceType": None,
                "taint": "dra.example.com/ecc-errors=high",
                "effect": "NoSchedule",
            },
        ],
        "tolerated": [
            {
                "request": "gpu",
                "driver": "dra.example.com",
                "pool": "worker-1",
                "device": "gpu-2",
                "taint": "dra.example.com/unhealthy=Broken",
                "effect": "NoExecute",
                "toleration": {"operator": "Exists", "key": "dra.example.com/unhealthy"},
            }
        ],
    }
    train1 = pod_result(result, "ml-training/train-1")["claims"][0]
    assert train1["deviceTaints"]["excluded"] == []  # tolerates everything
    assert {(t["device"], t["taint"]) for t in train1["deviceTaints"]["tolerated"]} == {
        ("gpu-1", "dra.example.com/ecc-errors=high"),
        ("gpu-1", "dra.example.com/unhealthy=Broken"),
    }
    # With the gate off no device has taints: nothing to report.
    off = simulate(
        load_paths([str(EXAMPLES / "features-taints.yaml")]),
        SimulationOptions(gates=_gates(DRADeviceTaints=False)),
    ).result
    assert all("deviceTaints" not in c for p in off["pods"] for c in p["claims"])


def test_binding_conditions_example_on_its_existing_node():
    result = simulate(
        load_paths([str(EXAMPLES / "features-binding-conditions.yaml")]), SimulationOptions()
    ).result
    _validate(result)
    claim_entry = pod_result(result, "default/fabric-job-2")["claims"][0]
    assert "deviceTaints" not in claim_entry  # no device is tainted
    device = claim_entry["devices"][0]
    assert (device["device"], device["bindsToNode"]) == ("gpu-1", True)
    assert claim_entry["bindingTimeoutSeconds"] == 600
