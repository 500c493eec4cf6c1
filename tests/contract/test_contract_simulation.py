"""CONTRACT section 3: which pods, queue order, targets, naming, search order, decisions."""

from __future__ import annotations

import json

import pytest

from tests.contract.conftest import (
    claim,
    claim_template,
    cli,
    device_class,
    gpu_cluster,
    gpu_devices,
    instance_type,
    namespace,
    node,
    nodeclaim,
    nodepool,
    pod,
    request,
    resource_slice,
    simulate,
    template_slice,
    write_yaml,
)


def _keys(run) -> list[str]:
    return [p["pod"] for p in run.doc["pods"]]


# --- which pods -----------------------------------------------------------------------------


def test_pending_pod_selection(tmp_path):
    docs = [
        namespace("default"),
        node("steady", cpu="32", memory="128Gi"),
        node("draining", cpu="32", memory="128Gi", deleting=True),
        node(
            "claim-deleting",
            cpu="32",
            memory="128Gi",
            labels={"karpenter.sh/nodepool": "general", "karpenter.sh/initialized": "true"},
        ),
        {
            **nodeclaim(
                "general-abcde",
                "general",
                "m5.2xlarge",
                node_name="claim-deleting",
                initialized=True,
            )
        },
        nodepool("general"),
        instance_type("m5.2xlarge", cpu="8", memory="32Gi"),
        pod("pending-0", cpu="1"),
        pod("pending-terminating", cpu="1", deleting=True),
        pod("bound-steady", cpu="1", node_name="steady"),
        pod("on-draining", cpu="1", node_name="draining", owner="ReplicaSet"),
        pod("ds-on-draining", cpu="1", node_name="draining", owner="DaemonSet"),
        pod("terminating-on-draining", cpu="1", node_name="draining", deleting=True),
        pod("on-claim-deleting", cpu="1", node_name="claim-deleting"),
    ]
    docs[4]["metadata"]["deletionTimestamp"] = "2026-12-01T09:00:00Z"
    run = simulate(tmp_path, docs)
    assert set(_keys(run)) == {
        "default/pending-0",
        "default/on-draining",
        "default/on-claim-deleting",
    }
    # Rescheduled pods never go back to a deleting node.
    for key in ("default/on-draining", "default/on-claim-deleting"):
        entry = run.pod(key)
        assert entry["scheduled"] and entry["target"]["name"] not in (
            "draining",
            "claim-deleting",
        ), entry


# --- queue order ----------------------------------------------------------------------------


def test_queue_order_with_every_tie_breaker(tmp_path):
    early, late = "2026-12-01T08:00:00Z", "2026-12-01T09:00:00Z"
    pods = [
        pod("z-small-cpu", cpu="500m", memory="64Gi"),
        pod("y-big-cpu", cpu="4", memory="1Gi"),
        pod("x-mem-small", cpu="2", memory="1Gi", created=early),
        pod("w-mem-big", cpu="2", memory="8Gi", created=late),
        pod(
            "v-late",
            cpu="1",
            memory="2Gi",
            created=late,
            uid="00000000-0000-4000-8000-000000000001",
        ),
        pod(
            "u-early",
            cpu="1",
            memory="2Gi",
            created=early,
            uid="ffffffff-0000-4000-8000-000000000001",
        ),
        pod(
            "t-uid-b",
            cpu="1",
            memory="1Gi",
            created=early,
            uid="bbbbbbbb-0000-4000-8000-000000000000",
        ),
        pod(
            "s-uid-a",
            cpu="1",
            memory="1Gi",
            created=early,
            uid="aaaaaaaa-0000-4000-8000-000000000000",
        ),
        pod(
            "same",
            ns="web",
            cpu="100m",
            memory="1Gi",
            created=early,
            uid="cccccccc-0000-4000-8000-000000000000",
        ),
        pod(
            "same",
            ns="api",
            cpu="100m",
            memory="1Gi",
            created=early,
            uid="cccccccc-0000-4000-8000-000000000000",
        ),
    ]
    run = simulate(
        tmp_path,
        [
            namespace("default"),
            namespace("web"),
            namespace("api"),
            node("big", cpu="64", memory="512Gi"),
            *pods,
        ],
    )
    assert _keys(run) == [
        "default/y-big-cpu",
        "default/w-mem-big",
        "default/x-mem-small",
        "default/u-early",
        "default/v-late",
        "default/s-uid-a",
        "default/t-uid-b",
        "default/z-small-cpu",
        "api/same",
        "web/same",
    ]


def test_failed_pods_report_the_reason_of_their_last_attempt(tmp_path):
    # A fills the only node; B fails. Nothing else changes, so one pass only: its reasons
    # name the node and the pool it tried, with the state after A.
    run = simulate(
        tmp_path,
        [
            namespace("default"),
            node("n1", cpu="4", memory="16Gi"),
            pod("a", cpu="3"),
            pod("b", cpu="2"),
        ],
    )
    b = run.pod("default/b")
    assert b["scheduled"] is False and b["target"] is None
    assert [r["target"] for r in b["reasons"]] == ["node/n1"]


# --- targets --------------------------------------------------------------------------------


def test_existing_targets_initialized_first_then_by_name(tmp_path):
    managed = {"karpenter.sh/nodepool": "general"}
    docs = [
        namespace("default"),
        node("a-launching", cpu="2", memory="4Gi", labels=managed),
        node(
            "b-managed-ready",
            cpu="2",
            memory="4Gi",
            labels={**managed, "karpenter.sh/initialized": "true"},
        ),
        node("c-unmanaged", cpu="2", memory="4Gi"),
        nodeclaim("general-x1", "general", "m5.large"),  # no node registered yet
        instance_type("m5.large", cpu="2", memory="8Gi"),
        pod("too-big", cpu="3", memory="1Gi"),
        pod("fits", cpu="1", memory="1Gi"),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/fits")["target"] == {
        "kind": "Node",
        "name": "b-managed-ready",
        "new": False,
    }
    reasons = [r["target"] for r in run.pod("default/too-big")["reasons"]]
    assert reasons == [
        "node/b-managed-ready",
        "node/c-unmanaged",
        "node/a-launching",
        "node/general-x1",
    ], reasons


def test_unregistered_nodeclaim_is_a_target_with_its_instance_type(tmp_path):
    docs = [
        namespace("default"),
        nodeclaim("general-x1", "general", "m5.large"),
        instance_type("m5.large", cpu="2", memory="8Gi"),
        pod("p", cpu="1"),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["target"] == {
        "kind": "NodeClaim",
        "name": "general-x1",
        "new": False,
    }
    assert run.doc["nodeClaims"] == []


def test_in_flight_nodeclaims_fewest_pods_first_then_creation_order(tmp_path):
    docs = [
        namespace("default"),
        nodepool("general"),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        pod("p1", cpu="3"),
        pod("p2", cpu="3"),
        pod("p3", cpu="500m"),
        pod("p4", cpu="400m"),
    ]
    run = simulate(tmp_path, docs)
    targets = {p["pod"]: p["target"]["name"] for p in run.doc["pods"]}
    assert targets == {
        "default/p1": "general-1",
        "default/p2": "general-2",
        "default/p3": "general-1",
        "default/p4": "general-2",
    }
    assert all(p["target"]["new"] for p in run.doc["pods"])
    assert [nc["name"] for nc in run.doc["nodeClaims"]] == ["general-1", "general-2"]
    assert run.doc["nodeClaims"][0]["pods"] == ["default/p1", "default/p3"]


def test_nodepools_by_weight_then_name_with_fall_through_and_per_pool_numbering(tmp_path):
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    docs = [
        namespace("default"),
        nodepool("b-pool", weight=10),
        nodepool("a-pool", weight=10),
        nodepool("z-heavy", weight=50, taints=taint),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        pod("tolerant", cpu="3", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        pod("plain", cpu="2"),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/tolerant")["target"]["name"] == "z-heavy-1"
    # plain cannot take z-heavy's taint: falls through to b-pool (of equal weights, the name
    # sorting later comes first: Karpenter's OrderByWeight).
    assert run.pod("default/plain")["target"]["name"] == "b-pool-1"
    assert {nc["name"]: nc["nodePool"] for nc in run.doc["nodeClaims"]} == {
        "z-heavy-1": "z-heavy",
        "b-pool-1": "b-pool",
    }


def test_nodepool_limits_make_the_pod_fall_through(tmp_path):
    docs = [
        namespace("default"),
        nodepool("capped", weight=100, limits={"cpu": "2"}),
        nodepool("open", weight=1),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        pod("p", cpu="3"),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["target"]["name"] == "open-1"


def _trace(tmp_path, docs, *flags):
    path = write_yaml(tmp_path, docs)
    trace = tmp_path / "trace.json"
    run = cli("simulate", path, "--json", "--trace", trace, *flags)
    assert run.status == 0, run.stderr
    data = json.loads(trace.read_text())
    return run, data["nodes"] if isinstance(data, dict) else data


def test_instance_types_tried_by_cheapest_available_compatible_offering(tmp_path):
    def off(price, zone="us-west-2a", available=True):
        return {"zone": zone, "capacityType": "on-demand", "price": price, "available": available}

    gpu = [template_slice("gpus", gpu_devices(1, model="A10G"))]
    its = [
        instance_type(
            "a-unavailable-cheap", slices=gpu, offerings=[off(0.5, available=False), off(3.0)]
        ),
        instance_type("b-mid", slices=gpu, offerings=[off(2.0)]),
        instance_type("c-mid", slices=gpu, offerings=[off(2.0)]),
        instance_type(
            "d-other-zone-cheap", slices=gpu, offerings=[off(0.1, zone="eu-west-1a"), off(5.0)]
        ),
        instance_type("e-cheapest", slices=gpu, offerings=[off(1.0)]),
    ]
    zone = [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}]
    h100 = claim_template(
        "h100",
        requests=[
            request(
                selectors=[
                    {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].model == "H100"'}}
                ]
            )
        ],
    )
    docs = [
        namespace("default"),
        device_class(),
        nodepool("gpu", requirements=zone),
        *its,
        h100,
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "h100"}]),
    ]
    run, nodes = _trace(tmp_path, docs)
    assert run.pod("default/p")["scheduled"] is False
    tried = [n["label"] for n in nodes if n["kind"] == "instanceType"]
    assert tried == ["e-cheapest", "b-mid", "c-mid", "a-unavailable-cheap", "d-other-zone-cheap"], (
        tried
    )
    assert "no instance type can satisfy the allocation" in run.pod("default/p")["error"]


def test_in_cluster_pool_order_and_slice_order(tmp_path):
    docs = [
        namespace("default"),
        device_class(),
        node("n1", cpu="32", memory="128Gi"),
        resource_slice("n1", [{"name": "gpu-b0"}], pool="pool-b", name="b-slice"),
        {
            **resource_slice("n1", [{"name": "gpu-a2"}], pool="pool-a", name="slice-2"),
        },
        {
            **resource_slice(
                "n1", [{"name": "gpu-a1"}, {"name": "gpu-a0"}], pool="pool-a", name="slice-1"
            )
        },
        claim_template("one"),
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}]),
    ]
    for doc in docs[3:6]:
        doc["spec"]["pool"]["resourceSliceCount"] = (
            2 if doc["spec"]["pool"]["name"] == "pool-a" else 1
        )
    run = simulate(tmp_path, docs)
    devices = run.pod("default/p")["claims"][0]["devices"]
    # pool-a before pool-b; slice-1 before slice-2; devices in listed order.
    assert [(d["pool"], d["device"]) for d in devices] == [("pool-a", "gpu-a1")]


def test_binding_condition_pools_come_after_the_others(tmp_path):
    bc = [
        {
            "name": "gpu-0",
            "bindingConditions": ["gpu.nvidia.com/attached"],
            "bindingFailureConditions": ["gpu.nvidia.com/attach-failed"],
        }
    ]
    docs = [
        namespace("default"),
        device_class(),
        node("n1", cpu="32", memory="128Gi"),
        resource_slice("n1", bc, pool="a-fabric", name="a-fabric"),
        resource_slice("n1", [{"name": "gpu-9"}], pool="z-local", name="z-local"),
        claim_template("one"),
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["claims"][0]["devices"][0]["pool"] == "z-local"


# --- decisions ------------------------------------------------------------------------------


def _allocated_claim(name, reserved_for):
    return claim(
        name,
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-node-1",
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": reserved_for,
        },
    )


def test_reallocated_only_when_every_reserver_is_deleting(tmp_path):
    old = pod(
        "old",
        node_name="gpu-node-1",
        deleting=True,
        uid="11111111-0000-4000-8000-000000000000",
        claims=[{"name": "gpu", "resourceClaimName": "shared"}],
    )
    live = pod(
        "live",
        node_name="gpu-node-1",
        uid="22222222-0000-4000-8000-000000000000",
        claims=[{"name": "gpu", "resourceClaimName": "mixed"}],
    )
    old2 = pod(
        "old2",
        node_name="gpu-node-1",
        deleting=True,
        uid="33333333-0000-4000-8000-000000000000",
        claims=[{"name": "gpu", "resourceClaimName": "mixed"}],
    )

    def ref(p):
        return {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}

    docs = gpu_cluster(
        [
            old,
            live,
            old2,
            pod("n-shared", claims=[{"name": "gpu", "resourceClaimName": "shared"}]),
            pod("n-mixed", claims=[{"name": "gpu", "resourceClaimName": "mixed"}]),
            pod("n-empty", claims=[{"name": "gpu", "resourceClaimName": "unreserved"}]),
        ],
        extra=[
            _allocated_claim("shared", [ref(old)]),
            _allocated_claim("mixed", [ref(live), ref(old2)]),
            _allocated_claim("unreserved", []),
        ],
    )
    run = simulate(tmp_path, docs)
    states = {p["pod"]: p["claims"][0]["state"] for p in run.doc["pods"]}
    assert states["default/n-shared"] == "reallocated"
    assert states["default/n-mixed"] == "allocated-in-cluster"
    assert states["default/n-empty"] == "allocated-in-cluster"
    empty = run.pod("default/n-empty")["claims"][0]["devices"]
    assert [(d["device"], d["source"], d["instanceType"]) for d in empty] == [
        ("gpu-0", "in-cluster", None)
    ]


def test_all_mode_request_with_no_eligible_device_fails(tmp_path):
    all_b200 = claim_template(
        "all-b200",
        requests=[
            request(
                allocationMode="All",
                selectors=[
                    {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].model == "B200"'}}
                ],
            )
        ],
    )
    docs = [
        namespace("default"),
        device_class(),
        node("n1", cpu="32", memory="128Gi"),
        resource_slice("n1", gpu_devices(2)),
        all_b200,
        pod("p", claims=[{"name": "gpus", "resourceClaimTemplateName": "all-b200"}]),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["scheduled"] is False


def test_cel_runtime_error_makes_the_device_not_match_and_is_traced(tmp_path):
    devices = [
        {"name": "gpu-0", "attributes": {"model": {"string": "H100"}}},
        {"name": "gpu-1", "attributes": {"model": {"string": "H100"}, "memoryGiB": {"int": 80}}},
    ]
    tmpl = claim_template(
        "big",
        requests=[
            request(
                selectors=[
                    {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].memoryGiB >= 40'}}
                ]
            )
        ],
    )
    docs = [
        namespace("default"),
        device_class(),
        node("n1", cpu="32", memory="128Gi"),
        resource_slice("n1", devices),
        tmpl,
        pod("p", claims=[{"name": "gpu", "resourceClaimTemplateName": "big"}]),
    ]
    run, nodes = _trace(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["scheduled"] and entry["claims"][0]["devices"][0]["device"] == "gpu-1"
    gpu0 = [n for n in nodes if n["kind"] == "device" and n.get("device") == "gpu-0"]
    assert gpu0 and gpu0[0]["status"] == "failed" and gpu0[0]["reason"]
    assert "memoryGiB" in (gpu0[0].get("message") or ""), gpu0[0]


def test_requested_dra_drivers_cover_every_claim_sorted(tmp_path):
    pair = claim_template("pair", requests=[request("nic", "nic.example.com"), request("gpu")])
    its = [
        instance_type(
            "p5.48xlarge",
            cpu="64",
            memory="512Gi",
            slices=[
                template_slice("p5-gpus", gpu_devices(2)),
                template_slice("p5-nics", [{"name": "nic-0"}], driver="nic.example.com"),
            ],
        )
    ]
    docs = [
        namespace("default"),
        device_class(),
        device_class("nic.example.com"),
        nodepool("gpu"),
        *its,
        pair,
        pod("p", claims=[{"name": "pair", "resourceClaimTemplateName": "pair"}]),
    ]
    run = simulate(tmp_path, docs)
    nc = run.doc["nodeClaims"][0]
    assert nc["annotations"]["karpenter.sh/requested-dra-drivers"] == (
        "gpu.nvidia.com,nic.example.com"
    )


def test_new_nodeclaim_requirements_reflect_pool_and_instance_types(tmp_path):
    docs = [
        namespace("default"),
        nodepool(
            "general",
            requirements=[
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
        ),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        pod("p", cpu="1"),
    ]
    run = simulate(tmp_path, docs)
    reqs = {r["key"]: r for r in run.doc["nodeClaims"][0]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"]["values"] == ["on-demand"]
    assert reqs["karpenter.sh/nodepool"]["values"] == ["general"]


def test_new_nodeclaim_requirements_name_its_instance_types(demo):
    # As Karpenter's NodeClaimTemplate.ToNodeClaim: node.kubernetes.io/instance-type In the
    # NodeClaim's remaining instance types.
    for nc in demo["nodeClaims"]:
        reqs = {r["key"]: r for r in nc["requirements"]}
        it = reqs.get("node.kubernetes.io/instance-type")
        assert it is not None, (nc["name"], sorted(reqs))
        assert it["operator"] == "In" and it["values"] == nc["instanceTypes"]


def test_unservable_claims_fail_only_their_pods(tmp_path):
    bad_cel = claim_template(
        "bad-cel",
        requests=[
            request(
                selectors=[{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].model =='}}]
            )
        ],
    )
    no_class = claim_template("no-class", requests=[request(cls="tpu.google.com")])
    docs = gpu_cluster(
        [
            pod("a-bad-cel", claims=[{"name": "g", "resourceClaimTemplateName": "bad-cel"}]),
            pod("b-no-class", claims=[{"name": "g", "resourceClaimTemplateName": "no-class"}]),
            pod("c-fine", claims=[{"name": "g", "resourceClaimTemplateName": "one-gpu"}]),
        ],
        extra=[bad_cel, no_class, claim_template("one-gpu")],
    )
    run = simulate(tmp_path, docs)
    assert "failed to compile" in run.pod("default/a-bad-cel")["error"]
    assert "not found" in run.pod("default/b-no-class")["error"]
    assert run.pod("default/c-fine")["scheduled"] is True


def test_node_named_by_a_nodeclaim_is_managed_even_without_the_nodepool_label(tmp_path):
    docs = [
        namespace("default"),
        node("a-claimed", cpu="4", memory="16Gi"),  # no karpenter labels, but a NodeClaim
        node("b-plain", cpu="4", memory="16Gi"),
        nodeclaim("general-q7", "general", "m5.xlarge", node_name="a-claimed"),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        pod("p", cpu="1"),
    ]
    run = simulate(tmp_path, docs)
    # a-claimed is not initialized (no karpenter.sh/initialized label): b-plain comes first.
    assert run.pod("default/p")["target"]["name"] == "b-plain"


def test_node_taints_keep_untolerating_pods_away(tmp_path):
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    docs = [
        namespace("default"),
        node("a-gpu", cpu="8", memory="32Gi", taints=taint),
        node("b-cpu", cpu="8", memory="32Gi"),
        pod("plain", cpu="1"),
        pod("tolerant", cpu="1", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/plain")["target"]["name"] == "b-cpu"
    assert run.pod("default/tolerant")["target"]["name"] == "a-gpu"


def test_unavailable_offerings_are_skipped(tmp_path):
    gone = {"zone": "us-west-2a", "capacityType": "on-demand", "price": 0.1, "available": False}
    docs = [
        namespace("default"),
        nodepool("general"),
        instance_type("a-sold-out", cpu="8", memory="32Gi", offerings=[gone]),
        instance_type(
            "b-available",
            cpu="8",
            memory="32Gi",
            offerings=[{**gone, "price": 0.5, "available": True}],
        ),
        pod("p", cpu="2"),
    ]
    run = simulate(tmp_path, docs)
    assert run.doc["nodeClaims"][0]["instanceTypes"] == ["b-available"]


@pytest.mark.parametrize(
    "requirement, expected",
    [
        (
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]},
            ["m5.xlarge"],
        ),
        (
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]},
            ["m5.2xlarge"],
        ),
        (
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ["m5.2xlarge"],
        ),
        ({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}, ["m7g.xlarge"]),
    ],
)
def test_nodepool_launches_every_compatible_instance_type(tmp_path, requirement, expected):
    def off(zone="us-west-2a", ct="on-demand", price=1.0):
        return {"zone": zone, "capacityType": ct, "price": price, "available": True}

    arm = instance_type("m7g.xlarge", cpu="4", memory="16Gi")
    arm["spec"]["requirements"][0]["values"] = ["arm64"]
    docs = [
        namespace("default"),
        nodepool("general", requirements=[requirement]),
        instance_type("m5.xlarge", cpu="4", memory="16Gi"),
        instance_type(
            "m5.2xlarge",
            cpu="8",
            memory="32Gi",
            offerings=[off(), off("us-west-2b"), off(ct="spot", price=0.4)],
        ),
        arm,
        pod("p", cpu="1"),
    ]
    run = simulate(tmp_path, docs)
    assert run.pod("default/p")["scheduled"], run.pod("default/p")["error"]
    assert run.doc["nodeClaims"][0]["instanceTypes"] == expected


def test_terminating_pods_free_their_devices(tmp_path):
    held = claim(
        "old-gpu",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-node-1",
                            "device": "gpu-0",
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "old", "uid": "0ld"}],
        },
    )
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-1", cpu="32", memory="128Gi"),
        resource_slice("gpu-node-1", gpu_devices(1)),
        held,
        claim_template("one"),
        pod(
            "old",
            node_name="gpu-node-1",
            uid="0ld",
            deleting=True,
            claims=[{"name": "gpu", "resourceClaimName": "old-gpu"}],
        ),
        pod("new", claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    entry = run.pod("default/new")
    assert entry["target"]["name"] == "gpu-node-1", entry["error"]
    assert entry["claims"][0]["devices"][0]["device"] == "gpu-0"


def test_claims_of_pods_on_disrupted_nodes_are_reallocated(tmp_path):
    held = _allocated_claim("train-gpu", [{"resource": "pods", "name": "train", "uid": "tr41n"}])
    docs = gpu_cluster(
        [
            pod(
                "train",
                node_name="gpu-node-1",
                uid="tr41n",
                claims=[{"name": "gpu", "resourceClaimName": "train-gpu"}],
            )
        ],
        extra=[held],
    )
    run = simulate(tmp_path, docs, "--disrupt", "gpu-node-1")
    entry = run.pod("default/train")
    assert entry["claims"][0]["state"] == "reallocated"
    assert entry["target"]["kind"] == "NodeClaim" and entry["target"]["new"]
    assert entry["claims"][0]["devices"][0]["source"] == "template"


def test_retry_pass_reason_reflects_the_last_attempt(tmp_path):
    # big is first in the queue and never fits n1 (4 cpu); small is placed in pass 1, so
    # pass 2 retries big and its reason shows n1 after small took 1 cpu.
    run = simulate(
        tmp_path,
        [
            namespace("default"),
            node("n1", cpu="4", memory="16Gi"),
            pod("big", cpu="5"),
            pod("small", cpu="1"),
        ],
    )
    assert _keys(run) == ["default/big", "default/small"]
    (reason,) = run.pod("default/big")["reasons"]
    assert '"cpu":"3"' in reason["reason"], reason


def test_queue_cpu_is_the_pods_effective_request(tmp_path):
    # Kubernetes' effective request: max(init containers, sum of containers + sidecars)
    # plus overhead, as Karpenter's resources.RequestsForPods computes it.
    init_heavy = pod("a-init-heavy", cpu="1")
    init_heavy["spec"]["initContainers"] = [
        {
            "name": "warm-cache",
            "image": "registry.example.com/warm:1",
            "resources": {"requests": {"cpu": "4"}},
        }
    ]
    overhead = pod("c-overhead", cpu="1")
    overhead["spec"]["overhead"] = {"cpu": "2500m"}
    sidecar = pod("d-sidecar", cpu="1")
    sidecar["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "registry.example.com/envoy:1",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "2"}},
        }
    ]
    docs = [
        namespace("default"),
        node("n1", cpu="64", memory="64Gi"),
        init_heavy,
        pod("b-two", cpu="2"),
        overhead,
        sidecar,
    ]
    run = simulate(tmp_path, docs)
    assert _keys(run) == [
        "default/a-init-heavy",
        "default/c-overhead",
        "default/d-sidecar",
        "default/b-two",
    ]


def test_pools_sorted_by_driver_before_pool_name(tmp_path):
    cls = device_class("any-accel")
    cls["spec"]["selectors"] = [
        {"cel": {"expression": 'device.driver.endsWith(".accel.example.com")'}}
    ]
    docs = [
        namespace("default"),
        cls,
        node("n1", cpu="32", memory="128Gi"),
        resource_slice(
            "n1", [{"name": "b-dev"}], driver="b.accel.example.com", pool="a-pool", name="s1"
        ),
        resource_slice(
            "n1", [{"name": "a-dev"}], driver="a.accel.example.com", pool="z-pool", name="s2"
        ),
        claim_template("one", requests=[request(cls="any-accel")]),
        pod("p", claims=[{"name": "x", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    device = run.pod("default/p")["claims"][0]["devices"][0]
    assert (device["driver"], device["pool"]) == ("a.accel.example.com", "z-pool")


def test_in_cluster_devices_before_template_devices_on_a_new_nodeclaim(tmp_path):
    fabric = resource_slice(
        None,
        [{"name": "fabric-gpu-0", "attributes": {"model": {"string": "H100"}}}],
        pool="fabric",
        name="fabric",
        allNodes=True,
    )
    docs = [
        namespace("default"),
        device_class(),
        fabric,
        nodepool("gpu"),
        instance_type(
            "p5.8xlarge",
            cpu="32",
            memory="256Gi",
            slices=[template_slice("p5-gpus", gpu_devices(1))],
        ),
        claim_template("one"),
        pod("p", claims=[{"name": "g", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["target"]["new"], entry["error"]
    (device,) = entry["claims"][0]["devices"]
    assert (device["device"], device["source"], device["instanceType"]) == (
        "fabric-gpu-0",
        "in-cluster",
        None,
    )


def test_claims_are_searched_in_spec_order(tmp_path):
    docs = gpu_cluster(
        [
            pod(
                "p",
                claims=[
                    {"name": "zeta", "resourceClaimTemplateName": "one"},
                    {"name": "alpha", "resourceClaimTemplateName": "one"},
                ],
            )
        ],
        extra=[claim_template("one")],
    )
    run, nodes = _trace(tmp_path, docs)
    entry = run.pod("default/p")
    assert [c["claim"] for c in entry["claims"]] == ["default/p-zeta", "default/p-alpha"]
    # zeta is searched first, so it takes the first GPU.
    assert [c["devices"][0]["device"] for c in entry["claims"]] == ["gpu-0", "gpu-1"]
    claim_labels = [n["label"] for n in nodes if n["kind"] == "claim"]
    assert claim_labels.index("default/p-zeta") < claim_labels.index("default/p-alpha")


def _zone_fabric() -> dict:
    fabric = resource_slice(
        None,
        [{"name": "fabric-0", "attributes": {"model": {"string": "H100"}}}],
        driver="fabric.example.com",
        pool="fabric-b",
        name="fabric-b",
    )
    fabric["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": ["us-west-2b"],
                    }
                ]
            }
        ]
    }
    return fabric


def _two_zone_pool_docs(extra: list, pods: list) -> list:
    both = [
        {"zone": z, "capacityType": "on-demand", "price": 1.0, "available": True}
        for z in ("us-west-2a", "us-west-2b")
    ]
    return [
        namespace("default"),
        device_class("fabric.example.com"),
        nodepool("general"),
        instance_type("m5.2xlarge", cpu="8", memory="32Gi", offerings=both),
        *extra,
        *pods,
    ]


def test_new_nodeclaim_requirements_follow_the_topology_of_devices_picked(tmp_path):
    tmpl = claim_template("fabric", requests=[request(cls="fabric.example.com")])
    docs = _two_zone_pool_docs(
        [_zone_fabric(), tmpl],
        [pod("p", claims=[{"name": "f", "resourceClaimTemplateName": "fabric"}])],
    )
    run = simulate(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["target"]["new"], entry["error"]
    reqs = {r["key"]: r for r in run.doc["nodeClaims"][0]["requirements"]}
    assert reqs["topology.kubernetes.io/zone"]["values"] == ["us-west-2b"]
    drivers = run.doc["nodeClaims"][0]["annotations"]["karpenter.sh/requested-dra-drivers"]
    assert drivers == "fabric.example.com"


def test_requirements_and_drivers_follow_already_allocated_claims(tmp_path):
    allocated = claim(
        "fabric-held",
        requests=[request(cls="fabric.example.com")],
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "fabric.example.com",
                            "pool": "fabric-b",
                            "device": "fabric-0",
                        }
                    ]
                },
                "nodeSelector": _zone_fabric()["spec"]["nodeSelector"],
            },
            # Reserved by a running pod of another cluster tenant (not in the snapshot).
            "reservedFor": [{"resource": "pods", "name": "elsewhere", "uid": "e1"}],
        },
    )
    docs = _two_zone_pool_docs(
        [_zone_fabric(), allocated],
        [
            pod("p", claims=[{"name": "f", "resourceClaimName": "fabric-held"}]),
        ],
    )
    run = simulate(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["claims"][0]["state"] == "allocated-in-cluster"
    assert entry["target"]["new"], entry["error"]
    nc = run.doc["nodeClaims"][0]
    reqs = {r["key"]: r for r in nc["requirements"]}
    assert reqs["topology.kubernetes.io/zone"]["values"] == ["us-west-2b"]
    assert nc["annotations"]["karpenter.sh/requested-dra-drivers"] == "fabric.example.com"


def test_not_initialized_node_uses_its_instance_types_template_devices(tmp_path):
    managed = {
        "karpenter.sh/nodepool": "gpu-pool",
        "node.kubernetes.io/instance-type": "p5.8xlarge",
    }
    published = resource_slice("gpu-node-9", gpu_devices(4), name="gpu-node-9-gpus")
    published["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-9", "uid": "9f0e"}
    ]
    docs = [
        namespace("default"),
        device_class(),
        node("gpu-node-9", cpu="32", memory="256Gi", labels=managed),
        published,
        nodepool("gpu-pool"),
        instance_type(
            "p5.8xlarge",
            cpu="32",
            memory="256Gi",
            slices=[template_slice("p5.8xlarge-gpus", gpu_devices(4))],
        ),
        nodeclaim("gpu-pool-x9", "gpu-pool", "p5.8xlarge", node_name="gpu-node-9"),
        claim_template("one"),
        pod("p", claims=[{"name": "g", "resourceClaimTemplateName": "one"}]),
    ]
    run = simulate(tmp_path, docs)
    entry = run.pod("default/p")
    assert entry["target"] == {"kind": "Node", "name": "gpu-node-9", "new": False}
    (device,) = entry["claims"][0]["devices"]
    assert (device["source"], device["instanceType"], device["pool"]) == (
        "template",
        "p5.8xlarge",
        "p5.8xlarge-gpus",
    )


def test_bound_pods_consume_node_resources(tmp_path):
    docs = [
        namespace("default"),
        node("a-busy", cpu="4", memory="16Gi"),
        node("b-idle", cpu="4", memory="16Gi"),
        pod("running", cpu="3", node_name="a-busy"),
        pod("p", cpu="2"),
    ]
    run = simulate(tmp_path, docs)
    assert [p["pod"] for p in run.doc["pods"]] == ["default/p"]
    assert run.pod("default/p")["target"]["name"] == "b-idle"


def test_nodepool_limits_count_the_pools_existing_nodes(tmp_path):
    managed = {"karpenter.sh/nodepool": "capped", "karpenter.sh/initialized": "true"}
    docs = [
        namespace("default"),
        nodepool("capped", weight=100, limits={"cpu": "20"}),
        nodepool("open", weight=1),
        node("capped-node", cpu="16", memory="64Gi", labels=managed),
        instance_type("m5.2xlarge", cpu="8", memory="32Gi"),
        pod("filler", cpu="15", node_name="capped-node"),
        pod("p", cpu="3"),
    ]
    run = simulate(tmp_path, docs)
    # 16 + 8 cpu would exceed capped's limit of 20: the pod falls through to open.
    assert run.pod("default/p")["target"]["name"] == "open-1"


def test_template_devices_follow_the_instance_types_left_at_the_end(tmp_path):
    large_offer = [
        {"zone": "us-west-2a", "capacityType": "on-demand", "price": 2.0, "available": True}
    ]
    docs = [
        namespace("default"),
        device_class(),
        nodepool("gpu"),
        instance_type(
            "g-small",
            cpu="8",
            memory="64Gi",
            slices=[template_slice("g-small-gpus", gpu_devices(2))],
        ),
        instance_type(
            "g-large",
            cpu="16",
            memory="64Gi",
            offerings=large_offer,
            slices=[template_slice("g-large-gpus", gpu_devices(2))],
        ),
        claim_template("one"),
        pod("p1", cpu="6", claims=[{"name": "g", "resourceClaimTemplateName": "one"}]),
        pod("p2", cpu="5"),
    ]
    run = simulate(tmp_path, docs)
    # p2 joins p1's NodeClaim and leaves only g-large: p1's devices list only g-large.
    assert run.pod("default/p2")["target"] == run.pod("default/p1")["target"]
    assert run.doc["nodeClaims"][0]["instanceTypes"] == ["g-large"]
    devices = run.pod("default/p1")["claims"][0]["devices"]
    assert [(d["pool"], d["instanceType"]) for d in devices] == [("g-large-gpus", "g-large")]
