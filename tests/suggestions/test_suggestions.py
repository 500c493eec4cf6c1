"""Verified fix suggestions (CONTRACT section 4, ``pods[].suggestions``), one realistic cluster
per kind. Every test also applies the suggested change to the snapshot's documents, simulates
again and checks that the pod lands where the suggestion said (the failed pod is the only
pending pod, so NodeClaim names are the same in both runs)."""

from __future__ import annotations

import json

import pytest
import yaml

from allocator.cli import main
from allocator.suggestions import apply_change
from tests.scheduling.k8s import (
    GPU,
    NIC,
    PCIE,
    claim,
    device_class,
    families,
    gpu,
    instance_type,
    nic,
    node,
    node_pool,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

ARCH = "kubernetes.io/arch"


def failed(docs: list[dict], key: str = "default/train-0") -> dict:
    entry = pod_result(run(docs), key)
    assert entry["scheduled"] is False, entry["target"]
    return entry


def first(entry: dict, kind: str) -> dict:
    found = [s for s in entry["suggestions"] if s["kind"] == kind]
    assert found, [(s["kind"], s["message"]) for s in entry["suggestions"]]
    return found[0]


def placed_after(docs: list[dict], suggestion: dict, key: str = "default/train-0") -> dict:
    """Apply the change to the documents, simulate again: the pod goes to the target."""
    entry = pod_result(run(apply_change(docs, suggestion["change"]), suggestions=False), key)
    assert entry["scheduled"], entry["error"]
    assert entry["target"] == suggestion["target"]
    return entry


def gpu_node(name: str = "gpu-node-1", *, devices=None, taints=None, **kw) -> list[dict]:
    devices = devices if devices is not None else [gpu(i) for i in range(4)]
    return [
        node(name, **kw, taints=taints),
        resource_slice(f"{name}-gpus", node=name, devices=devices),
    ]


def gpu_pod(count: int = 1, *, selectors=(), cpu="8", memory="64Gi", **kw) -> list[dict]:
    return [
        template("train-gpu", [request("gpu", count=count, selectors=selectors)]),
        pod("train-0", cpu=cpu, memory=memory, templates={"gpu": "train-gpu"}, **kw),
    ]


def test_pod_missing_a_nodepool_taint_gets_tolerate_taint_naming_it():
    docs = [
        device_class(GPU),
        node_pool(
            "gpu-pool",
            requirements=families("p5"),
            taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        ),
        instance_type("p5.48xlarge", gpus=8),
        *gpu_pod(2),
    ]
    s = first(failed(docs), "tolerate-taint")
    assert "nvidia.com/gpu=true:NoSchedule" in s["message"]
    assert s["change"] == {
        "object": "Pod default/train-0",
        "field": "spec.tolerations",
        "op": "set",
        "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    placed_after(docs, s)


def test_device_taint_gets_a_request_toleration_on_the_claim_template():
    tainted = [
        {
            **gpu(i),
            "taints": [{"key": "nvidia.com/ecc-errors", "value": "true", "effect": "NoSchedule"}],
        }
        for i in range(2)
    ]
    docs = [device_class(GPU), *gpu_node(devices=tainted), *gpu_pod(1)]
    s = first(failed(docs), "tolerate-taint")
    assert "nvidia.com/ecc-errors=true:NoSchedule" in s["message"]
    assert s["change"]["object"] == "ResourceClaimTemplate default/train-gpu"
    assert s["change"]["field"] == "spec.spec.devices.requests[0].exactly.tolerations"
    assert s["change"]["value"] == [
        {"key": "nvidia.com/ecc-errors", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert s["target"] == {"kind": "Node", "name": "gpu-node-1", "new": False}
    placed_after(docs, s)


def test_more_gpus_than_any_instance_type_gets_reduce_count_with_the_largest_that_fits():
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("p5", "g5")),
        instance_type("p5.48xlarge", gpus=8),
        instance_type("g5.xlarge", cpu="4", memory="16Gi", gpus=1, model="NVIDIA A10G"),
        *gpu_pod(16),
    ]
    entry = failed(docs)
    s = entry["suggestions"][0]  # the least invasive change comes first
    assert s["kind"] == "reduce-count"
    assert s["change"]["value"] == 8
    assert s["change"]["field"] == "spec.spec.devices.requests[0].exactly.count"
    assert "from 16 to 8" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    placed_after(docs, s)


def test_selector_on_a_model_nobody_has_gets_relax_selector_naming_the_attribute():
    expr = f'device.attributes["{GPU}"].productName == "NVIDIA B200"'
    docs = [device_class(GPU), *gpu_node(), *gpu_pod(1, selectors=[expr])]
    s = first(failed(docs), "relax-selector")
    assert "productName" in s["message"]
    assert s["change"]["field"] == "spec.spec.devices.requests[0].exactly.selectors"
    assert s["change"]["value"] == []
    assert s["target"] == {"kind": "Node", "name": "gpu-node-1", "new": False}
    assert f"{GPU}/gpu-node-1/gpu-0" in s["message"]  # the devices it admits
    placed_after(docs, s)


def test_compound_class_selector_is_relaxed_one_conjunct_at_a_time_keeping_the_driver():
    expr = f'device.driver == "{GPU}" && device.attributes["{GPU}"].productName == "NVIDIA B200"'
    docs = [device_class("b200.nvidia.com", expr), *gpu_node()]
    docs += [
        template("train-gpu", [request("gpu", cls="b200.nvidia.com")]),
        pod("train-0", templates={"gpu": "train-gpu"}),
    ]
    s = first(failed(docs), "relax-selector")
    assert s["change"]["object"] == "DeviceClass b200.nvidia.com"
    assert s["change"]["value"] == [{"cel": {"expression": f'device.driver == "{GPU}"'}}]
    placed_after(docs, s)


def test_match_attribute_no_pair_meets_gets_drop_constraint():
    gpus = [gpu(0, pcie="pci-0"), gpu(1, pcie="pci-1")]
    nics = [nic(0, pcie="pci-2"), nic(1, pcie="pci-3")]
    docs = [
        device_class(GPU),
        device_class(NIC),
        node("gpu-node-1"),
        resource_slice("gpu-node-1-gpus", node="gpu-node-1", devices=gpus),
        resource_slice("gpu-node-1-nics", driver=NIC, node="gpu-node-1", devices=nics),
        template("pair", [request("gpu"), request("nic", cls=NIC)], match=PCIE),
        pod("train-0", templates={"pair": "pair"}),
    ]
    s = first(failed(docs), "drop-constraint")
    assert PCIE in s["message"]
    assert s["change"] == {
        "object": "ResourceClaimTemplate default/pair",
        "field": "spec.spec.devices.constraints",
        "op": "set",
        "value": [],
    }
    assert s["target"]["name"] == "gpu-node-1"
    placed_after(docs, s)


def test_arch_mismatch_gets_a_requirement_suggestion_naming_kubernetes_io_arch():
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("p5")),
        instance_type("p5.48xlarge", gpus=8),
        *gpu_pod(1, node_selector={ARCH: "arm64"}),
    ]
    s = first(failed(docs), "nodepool-requirement")
    assert ARCH in s["message"]
    assert s["change"] == {
        "object": "Pod default/train-0",
        "field": "spec.nodeSelector",
        "op": "set",
        "value": {},
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    placed_after(docs, s)


def test_nodepool_zone_requirement_excluding_the_pod_zone():
    zone_req = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=[*families("p5"), zone_req]),
        instance_type("p5.48xlarge", gpus=8),
        *gpu_pod(1, node_selector={"topology.kubernetes.io/zone": "us-west-2b"}),
    ]
    entry = failed(docs)
    pool_change = [
        s
        for s in entry["suggestions"]
        if s["kind"] == "nodepool-requirement" and s["change"]["object"] == "NodePool gpu-pool"
    ]
    assert len(pool_change) == 2, entry["suggestions"]
    # The smallest NodePool change first: allow the zone the pod asks for, then drop the
    # requirement altogether.
    allow, s = pool_change
    assert allow["change"]["value"] == [
        *families("p5"),
        {**zone_req, "values": ["us-west-2a", "us-west-2b"]},
    ]
    placed_after(docs, allow)
    assert s["change"]["value"] == families("p5")
    assert "topology.kubernetes.io/zone" in s["message"]
    # Dropping the pod's own zone selector gives up the zone it asked for: it ranks after the
    # NodePool change that keeps it, and says where the pod would run instead.
    assert entry["suggestions"][0]["change"]["object"] == "NodePool gpu-pool"
    assert entry["suggestions"][0]["scope"] == "nodepool"
    own = entry["suggestions"][-1]
    assert own["change"]["object"] == "Pod default/train-0" and own["scope"] == "pod"
    assert "topology.kubernetes.io/zone us-west-2a, not us-west-2b" in own["message"]
    placed_after(docs, s)


def test_nodepool_limit_gets_the_raise_that_lets_the_node_launch():
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("p5"), limits={"cpu": "100"}),
        instance_type("p5.48xlarge", gpus=8),
        *gpu_pod(1),
    ]
    s = first(failed(docs), "nodepool-limit")
    assert s["change"] == {
        "object": "NodePool gpu-pool",
        "field": "spec.limits",
        "op": "set",
        "value": {"cpu": "192"},
    }
    assert "cpu from 100 to 192 (+92)" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    placed_after(docs, s)


def test_device_held_by_a_running_pod_gets_free_device_naming_that_pod():
    docs = [
        device_class(GPU),
        *gpu_node(devices=[gpu(0)]),
        claim(
            "old-job-gpu",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-1", "gpu-0")],
            reserved_for=["old-job-0"],
        ),
        pod("old-job-0", node_name="gpu-node-1", claims={"gpu": "old-job-gpu"}),
        *gpu_pod(1),
    ]
    s = first(failed(docs), "free-device")
    assert "default/old-job-0" in s["message"]
    assert "default/old-job-gpu" in s["message"]
    assert s["change"] == {
        "object": "Pod default/old-job-0",
        "op": "delete",
        "objects": ["Pod default/old-job-0"],
    }
    assert s["target"] == {"kind": "Node", "name": "gpu-node-1", "new": False}
    placed_after(docs, s)


def test_no_allowed_instance_type_with_enough_devices_gets_the_cheapest_catalog_type():
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("g5")),
        instance_type("g5.xlarge", cpu="4", memory="16Gi", gpus=1, model="NVIDIA A10G"),
        instance_type(
            "p5.48xlarge",
            gpus=8,
            offerings=[
                {
                    "zone": "us-west-2a",
                    "capacityType": "on-demand",
                    "price": 98.32,
                    "available": True,
                }
            ],
        ),
        instance_type(
            "p4d.24xlarge",
            cpu="96",
            memory="1152Gi",
            gpus=8,
            model="NVIDIA A100-SXM4-40GB",
            offerings=[
                {
                    "zone": "us-west-2a",
                    "capacityType": "on-demand",
                    "price": 32.77,
                    "available": True,
                }
            ],
        ),
        *gpu_pod(4, cpu="2", memory="8Gi"),
    ]
    entry = failed(docs)
    s = first(entry, "add-instance-type")
    assert "p4d.24xlarge" in s["message"]  # the cheaper of the two that have 4 GPUs
    assert s["change"]["object"] == "NodePool gpu-pool"
    assert s["change"]["value"] == [
        {
            "key": "karpenter.k8s.aws/instance-family",
            "operator": "In",
            "values": ["g5", "p4d"],
        }
    ]
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
    placed_after(docs, s)


def test_cpu_no_allowed_instance_type_has_gets_instance_type_resources():
    docs = [
        node_pool("general", requirements=families("m7i")),
        instance_type("m7i.2xlarge", cpu="8", memory="32Gi"),
        instance_type("c7i.48xlarge", cpu="192", memory="384Gi"),
        pod("train-0", cpu="96", memory="64Gi"),
    ]
    s = first(failed(docs), "instance-type-resources")
    assert "c7i.48xlarge" in s["message"]
    assert "cpu=96" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "general-1", "new": True}
    placed_after(docs, s)


def test_placed_pods_carry_none_and_every_suggestion_has_a_target():
    docs = [
        device_class(GPU),
        *gpu_node(devices=[gpu(0), gpu(1)]),
        template("small", [request("gpu")]),
        pod("ok-0", templates={"gpu": "small"}),
        *gpu_pod(4),
    ]
    result = run(docs)
    ok = pod_result(result, "default/ok-0")
    assert ok["scheduled"] and ok["suggestions"] == []
    bad = pod_result(result, "default/train-0")
    assert bad["suggestions"], bad["error"]
    for s in bad["suggestions"]:
        assert s["target"]["kind"] in ("Node", "NodeClaim") and s["target"]["name"]
        assert s["message"] and s["change"]["object"]
    assert result["stats"]["suggestionTrials"] >= len(bad["suggestions"])
    assert result["stats"]["suggestionSeconds"] >= 0


def test_no_single_change_helps_gives_an_empty_list():
    docs = [pod("train-0", cpu="4096", memory="64Gi")]  # no node, no NodePool at all
    assert failed(docs)["suggestions"] == []


def test_suggestions_off_leaves_them_out():
    docs = [device_class(GPU), *gpu_node(), *gpu_pod(8)]
    result = run(docs, suggestions=False)
    assert "suggestions" not in pod_result(result, "default/train-0")
    assert "suggestionTrials" not in result["stats"]


def test_suggestions_do_not_change_the_run():
    """Trials commit nothing: placements, NodeClaims, pools and dfsNodes are those of a run
    without suggestions."""
    docs = [
        device_class(GPU),
        *gpu_node(devices=[gpu(0), gpu(1)]),
        node_pool("gpu-pool", requirements=families("p5"), limits={"cpu": "200"}),
        instance_type("p5.48xlarge", gpus=8),
        template("small", [request("gpu", count=2)]),
        *[pod(f"ok-{i}", templates={"gpu": "small"}) for i in range(3)],
        *gpu_pod(12),
    ]
    with_s, without = run(docs), run(docs, suggestions=False)
    for entry in with_s["pods"]:
        entry.pop("suggestions")
    for doc in (with_s, without):
        for key in ("seconds", "suggestionSeconds", "suggestionTrials", "suggestionReruns"):
            doc["stats"].pop(key, None)
    assert with_s == without


def test_cli_summary_shows_the_first_suggestion_and_no_suggestions_flag(tmp_path, capsys):
    import yaml

    docs = [device_class(GPU), *gpu_node(), *gpu_pod(8)]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "suggestion [reduce-count]: reduce request gpu" in out
    assert main(["simulate", str(path), "--json", "--no-suggestions"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "suggestions" not in result["pods"][0]


def test_options_from_json_accepts_suggestions():
    from allocator.simulation import SimulationOptions

    assert SimulationOptions.from_json({"suggestions": False}).suggestions is False
    assert SimulationOptions().to_json()["suggestions"] is True
    with pytest.raises(ValueError, match="options.suggestions: must be true or false"):
        SimulationOptions.from_json({"suggestions": "no"})


def test_replicas_are_tried_once_and_named_each_by_their_own_objects():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    base = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("p5"), taints=[taint]),
        instance_type("p5.48xlarge", gpus=8),
        template("train-gpu", [request("gpu", count=2)]),
    ]
    one = run([*base, pod("train-0", templates={"gpu": "train-gpu"})])
    two = run([*base, *[pod(f"train-{i}", templates={"gpu": "train-gpu"}) for i in range(2)]])
    assert two["stats"]["suggestionTrials"] == one["stats"]["suggestionTrials"]
    for i in range(2):
        s = first(pod_result(two, f"default/train-{i}"), "tolerate-taint")
        assert s["change"]["object"] == f"Pod default/train-{i}"
        assert f"pod default/train-{i} " in s["message"]
        assert s["target"] == {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}


def test_dropping_a_class_s_only_selector_keeps_its_driver():
    """An H100 class on a node of T4s and RDMA NICs (dra.net sorts before gpu.nvidia.com): a
    class left without selectors would hand the pod a NIC, so the driver stays."""
    expr = f'device.attributes["{GPU}"].productName == "NVIDIA H100 80GB HBM3"'
    nics = [{"name": "eth1", "attributes": {"dra.net/rdma": {"bool": True}}}]
    docs = [
        device_class("h100.nvidia.com", expr),
        *gpu_node(devices=[gpu(i, "Tesla T4") for i in range(2)]),
        resource_slice("gpu-node-1-nics", driver="dra.net", node="gpu-node-1", devices=nics),
        template("train-gpu", [request("gpu", cls="h100.nvidia.com")]),
        pod("train-0", templates={"gpu": "train-gpu"}),
    ]
    s = first(failed(docs), "relax-selector")
    assert s["change"] == {
        "object": "DeviceClass h100.nvidia.com",
        "field": "spec.selectors",
        "op": "set",
        "value": [{"cel": {"expression": f'device.driver == "{GPU}"'}}],
    }
    assert "the condition on gpu.nvidia.com/productName" in s["message"]
    assert f"{GPU}/gpu-node-1/gpu-0" in s["message"]
    entry = placed_after(docs, s)
    assert {d["driver"] for c in entry["claims"] for d in c["devices"]} == {GPU}


def test_admin_access_outside_a_labelled_namespace_gets_label_namespace():
    """dcgm-exporter's admin request in ``default`` (not labelled): label the namespace."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        device_class(GPU),
        *gpu_node(devices=[gpu(0)]),
        template("monitor", [request("gpus", adminAccess=True)]),
        pod("train-0", templates={"gpu": "monitor"}),
    ]
    entry = failed(docs)
    assert "admin access" in entry["error"]
    s = first(entry, "label-namespace")
    assert s["change"] == {
        "object": "Namespace default",
        "field": "metadata.labels",
        "op": "set",
        "value": {"resource.kubernetes.io/admin-access": "true"},
    }
    assert s["target"] == {"kind": "Node", "name": "gpu-node-1", "new": False}
    placed_after(docs, s)
    # A namespace the export left out is created by the patch, labelled.
    placed_after(docs[1:], s)


def test_more_nvidia_com_gpu_than_any_instance_type_has_gets_reduce_count_on_the_container():
    """The device plugin way of asking: ``nvidia.com/gpu: 16`` in the container's limits, on a
    catalog whose largest type has 8."""
    docs = yaml.safe_load_all(
        """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [p5, g5]}
---
apiVersion: dra-web.io/v1alpha1
kind: InstanceType
metadata: {name: p5.48xlarge}
spec:
  capacity: {cpu: 191450m, memory: 1938Gi, pods: "100", nvidia.com/gpu: "8"}
  requirements:
  - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [p5]}
  offerings:
  - {zone: us-west-2a, capacityType: on-demand, price: 98.32, available: true}
---
apiVersion: dra-web.io/v1alpha1
kind: InstanceType
metadata: {name: g5.12xlarge}
spec:
  capacity: {cpu: 47810m, memory: 178933Mi, pods: "100", nvidia.com/gpu: "4"}
  requirements:
  - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]}
  offerings:
  - {zone: us-west-2a, capacityType: on-demand, price: 5.672, available: true}
---
apiVersion: v1
kind: Pod
metadata: {name: train-0, namespace: default}
spec:
  containers:
  - name: trainer
    image: nvcr.io/nvidia/nemo:24.07
    resources:
      requests: {cpu: "32", memory: 256Gi}
      limits: {nvidia.com/gpu: "16", memory: 256Gi}
"""
    )
    docs = list(docs)
    s = failed(docs)["suggestions"][0]
    assert s["kind"] == "reduce-count"
    assert "nvidia.com/gpu" in s["message"] and "from 16 to 8" in s["message"]
    assert s["change"] == {
        "object": "Pod default/train-0",
        "field": "spec.containers[0].resources",
        "op": "set",
        "value": {
            "requests": {"cpu": "32", "memory": "256Gi"},
            "limits": {"nvidia.com/gpu": "8", "memory": "256Gi"},
        },
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    placed_after(docs, s)


@pytest.mark.parametrize(("gpus", "raised"), [(2, "48"), (8, "192")])
def test_nodepool_limit_raise_is_the_smallest_that_places_the_pod(gpus, raised):
    """Two GPUs fit a g5.12xlarge (48 vCPUs), eight only a p5.48xlarge (192): the limit is
    raised for the smaller node when that is enough."""
    docs = [
        device_class(GPU),
        node_pool("gpu-pool", requirements=families("p5", "g5"), limits={"cpu": "40"}),
        instance_type("p5.48xlarge", gpus=8),
        instance_type("g5.12xlarge", cpu="48", memory="192Gi", gpus=4, model="NVIDIA A10G"),
        *gpu_pod(gpus, cpu="8", memory="32Gi"),
    ]
    s = first(failed(docs), "nodepool-limit")
    assert s["change"]["value"] == {"cpu": raised}
    assert f"cpu from 40 to {raised}" in s["message"]
    placed_after(docs, s)


def test_prioritized_list_of_models_nobody_has_gets_a_subrequest_selector_relaxed():
    """firstAvailable: an H100, else an A100, on a node of T4s: the fallback's selector is the
    one relaxed first, so that an H100 stays the first choice."""
    h100 = f'device.attributes["{GPU}"].productName == "NVIDIA H100 80GB HBM3"'
    a100 = f'device.attributes["{GPU}"].productName == "NVIDIA A100-SXM4-80GB"'
    subs = [
        {"name": "h100", "deviceClassName": GPU, "selectors": [{"cel": {"expression": h100}}]},
        {"name": "a100", "deviceClassName": GPU, "selectors": [{"cel": {"expression": a100}}]},
    ]
    docs = [
        device_class(GPU),
        *gpu_node(devices=[gpu(i, "Tesla T4") for i in range(2)]),
        template("train-gpu", [{"name": "gpu", "firstAvailable": subs}]),
        pod("train-0", templates={"gpu": "train-gpu"}),
    ]
    s = first(failed(docs), "relax-selector")
    assert s["change"] == {
        "object": "ResourceClaimTemplate default/train-gpu",
        "field": "spec.spec.devices.requests[0].firstAvailable[1].selectors",
        "op": "set",
        "value": [],
    }
    assert "request gpu/a100" in s["message"]
    assert "the condition on gpu.nvidia.com/productName" in s["message"]
    entry = placed_after(docs, s)
    assert entry["claims"][0]["devices"][0]["request"] == "gpu/a100"
