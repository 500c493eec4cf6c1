"""The features inside whole simulations: each docs example, with its gate on and off."""

from __future__ import annotations

from allocator.simulation import SimulationOptions, simulate
from tests.features.conftest import consumable_capacity_allocator, load_example


def run(example: str, trace: bool = False, **gates: bool) -> tuple[dict, dict | None]:
    options = SimulationOptions.from_json({"featureGates": gates, "trace": trace})
    out = simulate(load_example(example), options)
    return out.result, out.trace


def pods(result: dict) -> dict[str, dict]:
    return {p["pod"]: p for p in result["pods"]}


def devices(pod: dict) -> list[dict]:
    return [d for c in pod["claims"] for d in c["devices"]]


def trace_reasons(trace: dict) -> set[str]:
    return {n["reason"] for n in trace["nodes"] if n["kind"] == "device" and n["reason"]}


# --- taints --------------------------------------------------------------------------------


def test_taints_steer_devices_and_report_tolerations() -> None:
    result, trace = run("features-taints.yaml", trace=True)
    by_pod = pods(result)
    (train0,) = devices(by_pod["ml-training/train-0"])
    # gpu-0 is allocated, gpu-1 has an ECC taint train-0 does not tolerate.
    assert train0["device"] == "gpu-2"
    assert train0["tolerations"] == [{"operator": "Exists", "key": "dra.example.com/unhealthy"}]
    (train1,) = devices(by_pod["ml-training/train-1"])
    assert train1["device"] == "gpu-1"
    assert train1["tolerations"] == [{"operator": "Exists"}]
    assert "taint" in trace_reasons(trace)
    rules = {r["name"]: r for r in result["deviceTaintRules"]}
    assert rules["dry-run"]["podsToEvict"] == 1


def test_without_taint_rules_gpu_is_free_of_the_unhealthy_taint() -> None:
    result, _ = run("features-taints.yaml", DRADeviceTaintRules=False)
    assert result["deviceTaintRules"] == []
    (train0,) = devices(pods(result)["ml-training/train-0"])
    assert train0["device"] == "gpu-2"
    assert "tolerations" not in train0  # no rule taint left to tolerate on gpu-2


def test_without_device_taints_every_device_is_usable() -> None:
    result, _ = run("features-taints.yaml", DRADeviceTaints=False)
    by_pod = pods(result)
    # No taints at all: the ECC taint no longer pushes train-0 past gpu-1.
    assert devices(by_pod["ml-training/train-0"])[0]["device"] == "gpu-1"
    assert devices(by_pod["ml-training/train-1"])[0]["device"] == "gpu-2"
    assert result["pools"][0]["unavailableDevices"] == 0


# --- partitionable devices -------------------------------------------------------------------


def test_counters_and_compatibility_groups_fail_with_their_reasons() -> None:
    result, trace = run("features-partitionable.yaml", trace=True)
    by_pod = pods(result)
    assert "only 2Gi of 8Gi left" in by_pod["default/needs-two-partitions"]["error"]
    assert "compatibility-group" in by_pod["default/needs-mig-and-vgpu"]["error"]
    assert {"counter", "compatibility-group"} <= trace_reasons(trace)


def test_without_compatibility_groups_the_grouped_pool_is_skipped() -> None:
    result, _ = run("features-partitionable.yaml", DRADeviceCompatibilityGroups=False)
    error = pods(result)["default/needs-mig-and-vgpu"]["error"]
    assert "treated as incomplete" in error


def test_without_partitionable_devices_counter_devices_are_not_allocatable() -> None:
    result, _ = run("features-partitionable.yaml", DRAPartitionableDevices=False)
    error = pods(result)["default/needs-two-partitions"]["error"]
    assert "DRAPartitionableDevices feature is disabled" in error


# --- consumable capacity ----------------------------------------------------------------------


def test_share_of_the_docs_nic() -> None:
    result, _ = run("features-consumable-capacity.yaml")
    (share,) = devices(pods(result)["default/web-new-0"])
    assert share["device"] == "eth1"
    assert share["consumedCapacity"] == {"bandwidth": "1G"}
    assert len(share["shareID"]) == 36
    again, _ = run("features-consumable-capacity.yaml")
    assert devices(pods(again)["default/web-new-0"])[0]["shareID"] == share["shareID"]


def test_capacity_requests_fail_without_the_gate() -> None:
    result, _ = run("features-consumable-capacity.yaml", DRAConsumableCapacity=False)
    pod = pods(result)["default/web-new-0"]
    assert not pod["scheduled"]
    assert "DRAConsumableCapacity feature is disabled" in pod["error"]


def test_distinct_attribute_spreads_shares_over_nics() -> None:
    result, _ = run("features-distinct-attribute.yaml")
    by_pod = pods(result)
    assert [d["device"] for d in devices(by_pod["default/router-0"])] == ["eth1", "eth2"]
    # List-typed attributes: numaNodes must intersect, l3Caches must be disjoint.
    assert [d["device"] for d in devices(by_pod["default/pinned-0"])] == [
        "core-group-1",
        "core-group-2",
    ]


def test_list_semantics_off_rejects_list_values() -> None:
    result, trace = run("features-distinct-attribute.yaml", trace=True, DRAListTypeAttributes=False)
    pinned = pods(result)["default/pinned-0"]
    assert not pinned["scheduled"]
    assert "DRAListTypeAttributes" in pinned["error"]
    assert pods(result)["default/router-0"]["scheduled"]


def test_distinct_rejections_are_traced_as_distinct() -> None:
    _, trace = run("features-distinct-attribute.yaml", trace=True)
    assert "distinct" in trace_reasons(trace)


# --- prioritized list ------------------------------------------------------------------------


def test_first_available_falls_back_to_two_l4s() -> None:
    result, _ = run("features-prioritized-list.yaml")
    chosen = devices(pods(result)["default/llm-0"])
    assert [(d["request"], d["device"]) for d in chosen] == [
        ("gpu/two-l4", "gpu-1"),
        ("gpu/two-l4", "gpu-2"),
    ]


def test_first_available_rejected_without_the_gate() -> None:
    result, _ = run("features-prioritized-list.yaml", DRAPrioritizedList=False)
    pod = pods(result)["default/llm-0"]
    assert not pod["scheduled"]
    assert "only Exactly requests" in pod["error"]


# --- admin access ----------------------------------------------------------------------------


def test_admin_access_takes_an_allocated_gpu_in_a_labelled_namespace() -> None:
    result, _ = run("features-admin-access.yaml")
    by_pod = pods(result)
    (gpu,) = devices(by_pod["monitoring/dcgm-exporter"])
    assert gpu["device"] == "gpu-0" and gpu["adminAccess"] is True
    refused = by_pod["default/dcgm-exporter"]
    assert not refused["scheduled"] and "admin access" in refused["error"]
    # Nothing is reserved: the pool still counts gpu-0 once, as the trainer's.
    assert result["pools"][0]["allocatedDevices"] == 1


def test_admin_access_refused_without_the_gate() -> None:
    result, _ = run("features-admin-access.yaml", DRAAdminAccess=False)
    pod = pods(result)["monitoring/dcgm-exporter"]
    assert not pod["scheduled"]
    assert "admin access is requested, but the DRAAdminAccess feature is disabled" in pod["error"]


# --- binding conditions ----------------------------------------------------------------------


def test_binding_failure_reallocates_and_binds_to_node_records_the_node() -> None:
    result, _ = run("features-binding-conditions.yaml")
    by_pod = pods(result)
    (old,) = by_pod["default/fabric-job"]["claims"]
    assert old["state"] == "reallocated"
    # Pools with binding-condition devices come last: the local GPU is found first.
    assert old["devices"][0]["device"] == "gpu-local-0"
    (fresh,) = by_pod["default/fabric-job-2"]["claims"]
    (gpu,) = fresh["devices"]
    assert gpu["bindsToNode"] is True
    assert gpu["bindingConditions"] == ["dra.example.com/is-prepared"]
    assert fresh["bindingTimeoutSeconds"] == 600
    assert fresh["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-3"]


def test_binding_conditions_gate_off_hides_the_fabric_gpu() -> None:
    off = SimulationOptions.from_json({"featureGates": {"DRADeviceBindingConditions": False}})
    snapshot = load_example("features-binding-conditions.yaml")
    result = simulate(snapshot, off).result
    # Without the gate the failure condition is not read: the old claim keeps gpu-1.
    (old,) = pods(result)["default/fabric-job"]["claims"]
    assert old["state"] == "allocated-in-cluster"
    assert [d["device"] for d in old["devices"]] == ["gpu-1"]
    # With gpu-1 free, it is still not selectable: it needs binding conditions.
    del snapshot.resource_claims["default/fabric-gpu-old"]
    snapshot.pods = [p for p in snapshot.pods if p.name != "fabric-job"]
    result = simulate(snapshot, off).result
    pod = pods(result)["default/fabric-job-2"]
    assert not pod["scheduled"]
    assert "rejected by binding-condition" in pod["error"]
    assert "DRADeviceBindingConditions feature is disabled" in pod["error"]


# --- node allocatable resources --------------------------------------------------------------


def test_overhead_moves_the_pod_and_mapping_adds_cpu() -> None:
    result, _ = run("features-node-allocatable.yaml")
    by_pod = pods(result)
    inference = by_pod["default/inference-x"]
    assert inference["target"]["name"] == "worker-2"
    assert inference["draNodeResources"] == {"memory": "8Gi"}
    pinned = by_pod["default/cpu-pinned"]
    assert pinned["target"]["name"] == "my-node"
    assert pinned["draNodeResources"] == {"cpu": "8"}


def test_without_node_allocatable_resources_the_pod_fits_my_node() -> None:
    result, _ = run("features-node-allocatable.yaml", DRANodeAllocatableResources=False)
    inference = pods(result)["default/inference-x"]
    assert inference["target"]["name"] == "my-node"
    assert "draNodeResources" not in inference


def test_capacity_rejections_are_traced() -> None:
    snapshot = load_example("features-consumable-capacity.yaml")
    template = snapshot.resource_claim_templates["default/bandwidth-claim-template"]
    from allocator.quantity import Quantity

    # 9.5G: eth1 has 9G left after web-live's share; eth2 rounds up to 10G and fits.
    template.spec.requests[0].exactly.capacity.requests["bandwidth"] = Quantity.parse("9500M")
    out = simulate(snapshot, SimulationOptions.from_json({"trace": True}))
    (share,) = devices(pods(out.result)["default/web-new-0"])
    assert share["device"] == "eth2" and share["consumedCapacity"] == {"bandwidth": "10G"}
    assert "capacity" in trace_reasons(out.trace)
    # Pool status after the run: web-live's 1G on eth1 (web-old's is freed), eth2 used up.
    (pool,) = out.result["pools"]
    assert pool["shareableSummary"] == {
        "fullyAvailableDevices": 0,
        "partiallyAvailableDevices": 1,
        "capacity": [{"name": "bandwidth", "total": "20G", "consumed": "11G", "available": "9G"}],
    }
    assert (pool["allocatedDevices"], pool["availableDevices"]) == (2, 0)


ADMIN_TWICE = """
apiVersion: v1
kind: Namespace
metadata:
  name: monitoring
  labels: {resource.kubernetes.io/admin-access: "true"}
---
apiVersion: v1
kind: Node
metadata:
  name: worker-1
  labels: {kubernetes.io/hostname: worker-1}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.nvidia.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: worker-1-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: worker-1
  pool: {name: worker-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-admin-gpus, namespace: monitoring}
spec:
  devices:
    requests:
    - name: first
      exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}
    - name: second
      exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}
---
apiVersion: v1
kind: Pod
metadata: {name: prober, namespace: monitoring, uid: 8c9d0e1f-2a3b-4c4d-8e5f-6a7b8c9d0e10}
spec:
  containers:
  - name: prober
    image: registry.example.com/prober:1.0
    resources:
      requests: {cpu: 100m, memory: 64Mi}
  resourceClaims:
  - name: gpus
    resourceClaimName: two-admin-gpus
"""


def test_admin_request_cannot_take_a_device_its_claim_already_has() -> None:
    from tests.features.conftest import load_yaml

    out = simulate(load_yaml(ADMIN_TWICE), SimulationOptions.from_json({"trace": True}))
    (pod,) = out.result["pods"]
    assert not pod["scheduled"]
    assert "admin-access" in trace_reasons(out.trace)


def test_feature_examples_match_the_result_schema() -> None:
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "allocator" / "result_schema.json").read_text()
    )
    for name in (
        "features-taints.yaml",
        "features-partitionable.yaml",
        "features-consumable-capacity.yaml",
        "features-distinct-attribute.yaml",
        "features-prioritized-list.yaml",
        "features-admin-access.yaml",
        "features-binding-conditions.yaml",
        "features-node-allocatable.yaml",
        "features-partitionable-nodepool.yaml",
    ):
        result, _ = run(name)
        jsonschema.validate(result, schema)


def test_run_pool_status_counts_the_run_shares() -> None:
    from allocator.features.poolstatus import run_pool_status
    from allocator.model import ResourceClaim

    snapshot = load_example("features-consumable-capacity.yaml")
    allocator, node = consumable_capacity_allocator(snapshot)
    spec = snapshot.resource_claim_templates["default/bandwidth-claim-template"].spec
    claim = ResourceClaim("default", "web-new-0-net", spec)
    result = allocator.allocate(node, [claim])
    result.allocation.commit()
    assert allocator.features is not None
    (pool,) = run_pool_status(
        snapshot.resource_slices,
        allocator.allocated_cluster_devices(),
        allocator.features.capacity,
        allocator.features.taints,
        allocator.pipeline.gates,
    )
    # web-live's 1G stays, web-old's 1G is freed (deleting pod), the new share adds 1G.
    assert pool["shareableSummary"]["capacity"] == [
        {"name": "bandwidth", "total": "20G", "consumed": "2G", "available": "18G"}
    ]
    assert allocator.tracker.allocated_cluster_devices() == set()  # shares hold nothing


def test_template_counters_are_per_nodeclaim() -> None:
    result, trace = run("features-partitionable-nodepool.yaml", trace=True)
    targets = {p["pod"]: p["target"]["name"] for p in result["pods"]}
    assert targets == {
        "default/infer-0": "gpu-partitions-1",
        "default/infer-1": "gpu-partitions-1",
        "default/infer-2": "gpu-partitions-2",
        # 24Gi of gpu-partitions-2's 48Gi are taken: the full GPU needs a NodeClaim of its own.
        "default/train-0": "gpu-partitions-3",
    }
    # The counters committed on gpu-partitions-1 filter its full GPU out up front: the pruned
    # instance type's funnel counts it under "counter".
    assert any(
        r["reason"] == "counter" and r["exampleDevices"] == ["gpu.nvidia.com/l40s/gpu-0-full"]
        for n in trace["nodes"]
        for f in n.get("funnel", ())
        for r in f["rejections"]
    )
    assert [n["pods"] for n in result["nodeClaims"]] == [
        ["default/infer-0", "default/infer-1"],
        ["default/infer-2"],
        ["default/train-0"],
    ]


def test_one_request_can_take_several_shares_of_one_device() -> None:
    from allocator.quantity import Quantity

    snapshot = load_example("features-distinct-attribute.yaml")
    claim = snapshot.resource_claims["default/two-distinct-nics"]
    claim.spec.constraints = []  # without distinctAttribute
    result = simulate(snapshot, SimulationOptions()).result
    shares = devices(pods(result)["default/router-0"])
    assert [d["device"] for d in shares] == ["eth1", "eth1"]
    assert shares[0]["shareID"] != shares[1]["shareID"]
    # 6G twice does not fit in eth1's 10G: the second share goes to eth2.
    claim.spec.requests[0].exactly.capacity.requests["bandwidth"] = Quantity.parse("6G")
    result = simulate(snapshot, SimulationOptions()).result
    assert [d["device"] for d in devices(pods(result)["default/router-0"])] == ["eth1", "eth2"]


def test_shares_do_not_count_as_exclusive_devices_up_front() -> None:
    from allocator.quantity import Quantity

    snapshot = load_example("features-distinct-attribute.yaml")
    claim = snapshot.resource_claims["default/two-distinct-nics"]
    claim.spec.constraints = []
    request = claim.spec.requests[0].exactly
    request.count = 5  # two NICs, five 2G shares: eth1 takes all five (10G)
    out = simulate(snapshot, SimulationOptions.from_json({"trace": True}))
    assert [d["device"] for d in devices(pods(out.result)["default/router-0"])] == ["eth1"] * 5
    request.count = 11  # 22G over 20G of bandwidth: no way
    request.capacity.requests["bandwidth"] = Quantity.parse("2G")
    out = simulate(snapshot, SimulationOptions())
    assert not pods(out.result)["default/router-0"]["scheduled"]
