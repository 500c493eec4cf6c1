"""Each rejection reason on a small, realistic snapshot: the funnel says which devices were in
reach, what refused each of them, and why, in ``explanation``, ``error``, the trace and the
command line's summary (CONTRACT section 4 "Why a pod was refused")."""

from __future__ import annotations

import json
import re

from allocator.cli import summary
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.contract.conftest import (
    claim,
    claim_template,
    device_class,
    namespace,
    node,
    pod,
    request,
    resource_slice,
)

H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
NODE = "ip-10-0-1-17.us-west-2.compute.internal"


def t4s(count: int = 4, **extra) -> list[dict]:
    return [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": "Tesla T4"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i:02x}"},
            },
            "capacity": {"memory": {"value": "16Gi"}},
            **extra,
        }
        for i in range(count)
    ]


def run(docs: list[dict], trace: bool = False, **gates):
    options = SimulationOptions(trace=trace)
    if gates:
        options = SimulationOptions.from_json({"featureGates": gates, "trace": trace})
    out = simulate(load_files([("cluster.json", json.dumps(docs))]), options)
    return out.result, out.trace


def failed(result: dict, name: str) -> dict:
    (entry,) = [p for p in result["pods"] if p["pod"] == name]
    assert not entry["scheduled"]
    for f in entry["explanation"]:
        assert f["usable"] + sum(r["devices"] for r in f["rejections"]) == f["candidates"]
    return entry


def t4_node(devices: list[dict] | None = None) -> list[dict]:
    return [
        namespace("default"),
        device_class(),
        node(NODE, cpu="8", memory="32Gi"),
        resource_slice(NODE, devices if devices is not None else t4s()),
    ]


def wants(name: str, *requests: dict, constraints: list | None = None) -> list[dict]:
    template = claim_template(f"{name}-gpu", requests=list(requests))
    if constraints:
        template["spec"]["spec"]["devices"]["constraints"] = constraints
    return [
        template,
        pod(name, claims=[{"name": "gpu", "resourceClaimTemplateName": f"{name}-gpu"}]),
    ]


def test_selector_names_the_expression_and_the_values_it_read() -> None:
    docs = t4_node() + wants("train-0", request(selectors=[{"cel": {"expression": H100}}]))
    result, trace = run(docs, trace=True)
    entry = failed(result, "default/train-0")
    # Karpenter's words, ending with the decisive cause (not "as if the GPUs were taken").
    assert entry["error"].endswith(
        'request gpu: 0 of 1 devices available (4 rejected by selector: productName is "Tesla T4")'
    )
    (funnel,) = entry["explanation"]
    assert funnel["claim"] == "default/train-0-gpu"
    assert (funnel["request"], funnel["needed"], funnel["targets"]) == ("gpu", 1, 1)
    assert funnel["exampleTargets"] == [f"node/{NODE}"]
    assert (funnel["candidates"], funnel["usable"]) == (4, 0)
    (group,) = funnel["rejections"]
    assert group["reason"] == "selector"
    assert group["message"] == f'{H100}: productName is "Tesla T4" on 4 devices'
    assert group["detail"] == {
        "expression": H100,
        "source": "request gpu",
        "values": {"productName": ["Tesla T4"]},
    }
    assert group["exampleDevices"][0] == f"gpu.nvidia.com/{NODE}/gpu-0"
    # The trace: the node refused by counting carries the funnel, under the cause's code.
    pruned = [n for n in trace["nodes"] if n.get("funnel")]
    assert {n["reason"] for n in pruned} == {"selector"}
    assert pruned[0]["funnel"][0]["rejections"][0]["message"] == group["message"]
    assert "targets" not in pruned[0]["funnel"][0]
    # The summary: two readable lines per funnel, nothing cut inside a word.
    text = summary(result)
    assert f"claim default/train-0-gpu request gpu on node/{NODE}: 0 of 4 devices usable" in text
    assert f'4 selector: {H100}: productName is "Tesla T4" on 4 devices' in text


def test_class_selector_is_named_as_the_device_class() -> None:
    docs = t4_node() + wants("train-0", request(cls="gpu.nvidia.com"))
    docs[1]["spec"]["selectors"].append({"cel": {"expression": H100}})
    result, _ = run(docs)
    (group,) = failed(result, "default/train-0")["explanation"][0]["rejections"]
    assert group["detail"]["source"] == "DeviceClass gpu.nvidia.com"


def test_cel_error_keeps_the_runtime_error() -> None:
    expression = 'device.attributes["gpu.nvidia.com"].memoryClockMHz > 5000'
    docs = t4_node() + wants("train-0", request(selectors=[{"cel": {"expression": expression}}]))
    result, _ = run(docs)
    (group,) = failed(result, "default/train-0")["explanation"][0]["rejections"]
    assert group["reason"] == "cel-error"
    assert group["detail"]["expression"] == expression
    assert group["detail"]["error"]
    assert group["message"].startswith(f"{expression}: ")


def allocated_to(claim_name: str, pod_name: str, devices: list[str]) -> list[dict]:
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": d} for d in devices
    ]
    return [
        claim(
            claim_name,
            requests=[request(count=len(devices))],
            status={
                "allocation": {"devices": {"results": results}},
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}],
            },
        ),
        pod(
            pod_name,
            node_name=NODE,
            claims=[{"name": "gpu", "resourceClaimName": claim_name}],
        ),
    ]


def test_allocated_names_the_holder_claim_and_its_pods() -> None:
    docs = (
        t4_node(t4s(2))
        + allocated_to("serve-0-gpu", "serve-0", ["gpu-0", "gpu-1"])
        + wants("train-0", request())
    )
    result, _ = run(docs)
    (group,) = failed(result, "default/train-0")["explanation"][0]["rejections"]
    assert group["reason"] == "allocated"
    assert group["detail"] == {
        "holders": [{"claim": "default/serve-0-gpu", "pods": ["default/serve-0"], "inRun": False}]
    }
    assert group["message"] == (
        "allocated to claim default/serve-0-gpu (reserved for default/serve-0) on 2 devices"
    )


def test_allocated_names_the_pod_of_this_run_that_took_the_device() -> None:
    docs = t4_node(t4s(1)) + wants("train-0", request()) + wants("train-1", request())
    docs[-1]["metadata"]["creationTimestamp"] = "2026-12-01T10:05:00Z"
    result, _ = run(docs)
    entry = failed(result, "default/train-1")
    (funnel,) = entry["explanation"]
    (group,) = funnel["rejections"]
    assert group["reason"] == "allocated"
    assert group["detail"]["holders"] == [
        {"claim": "default/train-0-gpu", "pods": ["default/train-0"], "inRun": True}
    ]
    assert "default/train-0" in group["message"] and "this run" in group["message"]


def test_taint_names_the_taint_no_toleration_matches() -> None:
    taint = {"key": "nvidia.com/gpu-unhealthy", "value": "xid-79", "effect": "NoSchedule"}
    docs = t4_node(t4s(2, taints=[taint])) + wants("train-0", request())
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    (group,) = entry["explanation"][0]["rejections"]
    assert group["reason"] == "taint"
    assert group["detail"] == {"taint": taint}
    assert "nvidia.com/gpu-unhealthy=xid-79:NoSchedule" in group["message"]
    assert entry["error"].endswith(
        "(2 rejected by taint: taint nvidia.com/gpu-unhealthy=xid-79:NoSchedule not tolerated "
        "by request gpu)"
    )


def test_pool_incomplete_names_the_pool_and_the_slices_missing() -> None:
    # The driver declared two slices for the node's pool and published one: Karpenter's
    # dfsExactCount skips the pool ("if pool.Incomplete { continue }").
    docs = t4_node()
    docs[3]["spec"]["pool"]["resourceSliceCount"] = 2
    docs += wants("train-0", request())
    result, trace = run(docs, trace=True)
    entry = failed(result, "default/train-0")
    (funnel,) = entry["explanation"]
    assert (funnel["candidates"], funnel["usable"]) == (4, 0)
    (group,) = funnel["rejections"]
    assert group["reason"] == "pool-incomplete"
    assert group["detail"] == {"pool": f"gpu.nvidia.com/{NODE}"}
    assert group["message"] == (
        f"pool gpu.nvidia.com/{NODE} is incomplete (missing slices): 1 of 2 ResourceSlices "
        "published at generation 1 on 4 devices"
    )
    assert entry["error"].endswith(
        "request gpu: 0 of 1 devices available (4 rejected by pool-incomplete: pool "
        f"gpu.nvidia.com/{NODE} is incomplete (missing slices): 1 of 2 ResourceSlices "
        "published at generation 1)"
    )
    pruned = [n for n in trace["nodes"] if n.get("funnel")]
    assert {n["reason"] for n in pruned} == {"pool-incomplete"}


def test_pool_invalid_names_the_duplicate_device() -> None:
    # Two slices of one pool both publish gpu-0: the pool is invalid and none of its
    # devices is allocated ("Invalid pools are skipped during allocation").
    docs = t4_node()
    first = docs[3]
    first["spec"]["pool"]["resourceSliceCount"] = 2
    second = resource_slice(NODE, t4s(2), name=f"{NODE}-gpu-2")
    second["spec"]["pool"]["resourceSliceCount"] = 2
    docs += [second, *wants("train-0", request())]
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    (group,) = entry["explanation"][0]["rejections"]
    assert (group["reason"], group["devices"]) == ("pool-invalid", 6)
    assert group["message"] == (
        f"pool gpu.nvidia.com/{NODE} is invalid (duplicate device name 'gpu-0'): its devices "
        "are not allocated on 6 devices"
    )


def partitions() -> list[dict]:
    """The Kubernetes docs' partitionable devices: two 6Gi partitions of one 8Gi counter set."""
    counters = resource_slice(
        NODE,
        [],
        pool="gpu-0",
        name="gpu-0-counters",
        sharedCounters=[{"name": "gpu-0-counters", "counters": {"memory": {"value": "8Gi"}}}],
    )
    devices = resource_slice(
        NODE,
        [
            {
                "name": f"device-{i}",
                "consumesCounters": [
                    {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "6Gi"}}}
                ],
            }
            for i in (1, 2)
        ],
        pool="gpu-0",
        name="gpu-0-devices",
    )
    for s in (counters, devices):
        s["spec"]["pool"]["resourceSliceCount"] = 2
    return [
        namespace("default"),
        device_class(),
        node(NODE, cpu="8", memory="32Gi"),
        counters,
        devices,
    ]


def test_counter_names_the_counter_set_what_is_needed_and_what_is_left() -> None:
    docs = partitions() + wants("infer-0", request()) + wants("infer-1", request())
    docs[-1]["metadata"]["creationTimestamp"] = "2026-12-01T10:05:00Z"
    result, _ = run(docs)
    (funnel,) = failed(result, "default/infer-1")["explanation"]
    groups = {g["reason"]: g for g in funnel["rejections"]}
    assert groups["allocated"]["exampleDevices"] == ["gpu.nvidia.com/gpu-0/device-1"]
    counter = groups["counter"]
    assert counter["exampleDevices"] == ["gpu.nvidia.com/gpu-0/device-2"]
    assert counter["detail"] == {
        "counterSet": "gpu-0-counters",
        "counter": "memory",
        "needed": "6Gi",
        "left": "2Gi",
    }
    assert "counter set gpu-0-counters" in counter["message"]


def test_counter_used_up_inside_one_claim_is_named_after_the_search() -> None:
    docs = partitions() + wants("infer-0", request(count=2))
    result, _ = run(docs)
    (funnel,) = failed(result, "default/infer-0")["explanation"]
    assert funnel["message"].startswith("no combination fits: ")
    (counter,) = [g for g in funnel["rejections"] if g["reason"] == "counter"]
    assert counter["exampleDevices"] == ["gpu.nvidia.com/gpu-0/device-2"]
    assert counter["detail"]["counterSet"] == "gpu-0-counters"


def test_constraint_refused_after_the_search_says_so() -> None:
    constraint = [{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    docs = t4_node(t4s(2)) + wants("train-0", request(count=2), constraints=constraint)
    result, _ = run(docs)
    (funnel,) = failed(result, "default/train-0")["explanation"]
    assert (funnel["candidates"], funnel["needed"]) == (2, 2)
    assert "resource.kubernetes.io/pcieRoot" in funnel["message"]


def test_binding_conditions_with_the_gate_off() -> None:
    docs = t4_node(t4s(1, bindingConditions=["dra.example.com/fabric-attached"])) + wants(
        "train-0", request()
    )
    result, _ = run(docs, DRADeviceBindingConditions=False)
    (group,) = failed(result, "default/train-0")["explanation"][0]["rejections"]
    assert group["reason"] == "binding-condition"
    assert "DRADeviceBindingConditions" in group["message"]


def test_a_request_refused_as_a_whole_has_no_device_rejections() -> None:
    docs = t4_node() + wants("train-0", request(count=40))
    result, _ = run(docs)
    (funnel,) = failed(result, "default/train-0")["explanation"]
    assert funnel["rejections"] == [] and funnel["candidates"] == 0
    assert "exceeding maximum" in funnel["message"]
    assert funnel["needed"] == 40


def test_a_missing_device_class_is_refused_as_a_whole() -> None:
    docs = t4_node() + wants("train-0", request(cls="tpu.google.com"))
    result, _ = run(docs)
    (funnel,) = failed(result, "default/train-0")["explanation"]
    assert "not found" in funnel["message"]


def test_explanation_does_not_grow_with_nodes() -> None:
    docs = [namespace("default"), device_class()]
    for i in range(40):
        name = f"ip-10-0-2-{i}.us-west-2.compute.internal"
        docs += [node(name, cpu="8", memory="32Gi"), resource_slice(name, t4s())]
    docs += wants("train-0", request(selectors=[{"cel": {"expression": H100}}]))
    result, _ = run(docs)
    (funnel,) = failed(result, "default/train-0")["explanation"]
    assert funnel["targets"] == 40 and len(funnel["exampleTargets"]) == 5
    assert funnel["rejections"][0]["devices"] == 4  # per target, not summed over targets


def test_a_template_device_names_the_pod_placed_on_that_node_claim() -> None:
    # Karpenter's benchmark with one L4 per generic pod: a one-GPU instance type of a NodeClaim
    # that already took a pod refuses the next, naming the claim of the pod on that NodeClaim.
    from bench.workloads import karpenter_benchmark

    result, _ = run(karpenter_benchmark(40, topology=False, dra=True))
    on = {p["pod"]: p["target"]["name"] for p in result["pods"] if p["scheduled"]}
    named = 0
    for nc in result["nodeClaims"]:
        for pruned in nc.get("instanceTypesPruned") or []:
            if "rejected by allocated" not in pruned["message"]:
                continue
            holders = re.findall(r"claim \S+ of (\S+) \(placed in this run\)", pruned["message"])
            assert holders, pruned
            assert all(on[pod] == nc["name"] for pod in holders), (nc["name"], pruned)
            named += len(holders)
    assert named > 0
