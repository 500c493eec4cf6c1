"""Raw Kubernetes documents, as ``kubectl get -o yaml`` prints them, for whole-snapshot tests.

Every test here runs the real loader on these documents and asserts on the result document,
so the builders produce the shapes users upload (ResourceSlice v1, Karpenter v1, InstanceType).
"""

from __future__ import annotations

from typing import Any

import yaml

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files

GPU = "gpu.nvidia.com"
NIC = "nic.example.com"
PCIE = "resource.kubernetes.io/pcieRoot"
ZONE = "topology.kubernetes.io/zone"
IT_LABEL = "node.kubernetes.io/instance-type"

# What kube-scheduler leaves on a pod it could not place: Karpenter provisions only for these.
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


def device_class(name: str = "gpu.nvidia.com", expression: str | None = None) -> dict:
    expr = expression or f'device.driver == "{name}"'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expr}}]},
    }


def gpu(i: int, model: str = "NVIDIA H100 80GB HBM3", pcie: str | None = None, **extra) -> dict:
    attrs: dict[str, Any] = {
        "productName": {"string": model},
        "architecture": {"string": "Hopper" if "H100" in model else "Ampere"},
        "driverVersion": {"version": "550.90.7"},
        "index": {"int": i},
    }
    if pcie:
        attrs[PCIE] = {"string": pcie}
    for key, value in extra.items():
        attrs[key] = {"string": value}
    return {"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}}


def nic(i: int, pcie: str | None = None) -> dict:
    attrs: dict[str, Any] = {"type": {"string": "efa"}}
    if pcie:
        attrs[PCIE] = {"string": pcie}
    return {"name": f"nic-{i}", "attributes": attrs}


def resource_slice(
    name: str,
    *,
    driver: str = GPU,
    pool: str | None = None,
    node: str | None = None,
    owner: str | None = None,
    devices: list[dict],
    generation: int = 1,
    count: int = 1,
    all_nodes: bool = False,
    node_selector: dict | None = None,
) -> dict:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": devices,
    }
    if node:
        spec["nodeName"] = node
    if all_nodes:
        spec["allNodes"] = True
    if node_selector:
        spec["nodeSelector"] = node_selector
    md: dict[str, Any] = {"name": name}
    if owner:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": owner, "uid": owner}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": md,
        "spec": spec,
    }


def zone_selector(zone: str) -> dict:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
        ]
    }


def node(
    name: str,
    *,
    zone: str = "us-west-2a",
    instance_type: str | None = "p5.48xlarge",
    cpu: str = "190",
    memory: str = "2000Gi",
    pool: str | None = None,
    initialized: bool = True,
    taints: list[dict] | None = None,
    deleting: bool = False,
    unschedulable: bool = False,
    labels: dict | None = None,
) -> dict:
    all_labels = {"kubernetes.io/hostname": name, ZONE: zone, "kubernetes.io/arch": "amd64"}
    if instance_type:
        all_labels[IT_LABEL] = instance_type
    if pool:
        all_labels["karpenter.sh/nodepool"] = pool
        if initialized:
            all_labels["karpenter.sh/initialized"] = "true"
    all_labels.update(labels or {})
    md: dict[str, Any] = {"name": name, "labels": all_labels}
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": md,
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def request(name: str, cls: str = "gpu.nvidia.com", count: int = 1, selectors=(), **extra) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


def claim_spec(requests: list[dict], match: str | None = None) -> dict:
    spec: dict[str, Any] = {"devices": {"requests": requests}}
    if match:
        spec["devices"]["constraints"] = [{"matchAttribute": match}]
    return spec


def claim(
    name: str,
    requests: list[dict],
    *,
    namespace: str = "default",
    match: str | None = None,
    allocated: list[tuple[str, str, str, str]] | None = None,
    reserved_for: list[str] | None = None,
    node_selector: dict | None = None,
) -> dict:
    doc: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": claim_spec(requests, match),
    }
    if allocated is not None:
        allocation: dict[str, Any] = {
            "devices": {
                "results": [
                    {"request": r, "driver": d, "pool": p, "device": dev}
                    for r, d, p, dev in allocated
                ]
            }
        }
        if node_selector:
            allocation["nodeSelector"] = node_selector
        doc["status"] = {
            "allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in reserved_for or []],
        }
    return doc


def template(name: str, requests: list[dict], *, namespace: str = "default", match=None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(requests, match)},
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    created: str = "2026-12-01T10:00:00Z",
    uid: str | None = None,
    claims: dict[str, str] | None = None,  # entry name -> claim name
    templates: dict[str, str] | None = None,  # entry name -> template name
    statuses: dict[str, str | None] | None = None,
    node_name: str | None = None,
    node_selector: dict | None = None,
    affinity_terms: list[list[dict]] | None = None,
    tolerations: list[dict] | None = None,
    deleting: bool = False,
    owner_kind: str = "ReplicaSet",
    phase: str | None = None,
) -> dict:
    entries = [{"name": e, "resourceClaimName": c} for e, c in (claims or {}).items()]
    entries += [{"name": e, "resourceClaimTemplateName": t} for e, t in (templates or {}).items()]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ]
    }
    if entries:
        spec["resourceClaims"] = entries
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity_terms:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in affinity_terms]
                }
            }
        }
    if tolerations:
        spec["tolerations"] = tolerations
    md: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "creationTimestamp": created,
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "o"}
        ],
    }
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:05:00Z"
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if not node_name:
        status["conditions"] = [UNSCHEDULABLE]
    if statuses is not None:
        status["resourceClaimStatuses"] = [
            {"name": e, "resourceClaimName": c} for e, c in statuses.items()
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def node_pool(
    name: str,
    *,
    weight: int = 0,
    requirements: list[dict] | None = None,
    taints: list[dict] | None = None,
    startup_taints: list[dict] | None = None,
    limits: dict | None = None,
    labels: dict | None = None,
) -> dict:
    tspec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements or [],
    }
    if taints:
        tspec["taints"] = taints
    if startup_taints:
        tspec["startupTaints"] = startup_taints
    spec: dict[str, Any] = {"template": {"metadata": {"labels": labels or {}}, "spec": tspec}}
    if weight:
        spec["weight"] = weight
    if limits:
        spec["limits"] = limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


def node_claim(
    name: str,
    *,
    pool: str,
    instance_type: str,
    zone: str = "us-west-2a",
    node_name: str | None = None,
    annotations: dict | None = None,
    initialized: bool = False,
    deleting: bool = False,
) -> dict:
    md: dict[str, Any] = {
        "name": name,
        "labels": {"karpenter.sh/nodepool": pool, IT_LABEL: instance_type, ZONE: zone},
    }
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    if annotations:
        md["annotations"] = annotations
    status: dict[str, Any] = {
        "conditions": [{"type": "Initialized", "status": "True" if initialized else "Unknown"}]
    }
    if node_name:
        status["nodeName"] = node_name
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": md,
        "spec": {"requirements": [{"key": IT_LABEL, "operator": "In", "values": [instance_type]}]},
        "status": status,
    }


def offering(zone: str, price: float, capacity_type: str = "on-demand", available: bool = True):
    return {"zone": zone, "capacityType": capacity_type, "price": price, "available": available}


def families(*names: str) -> list[dict]:
    """NodePool requirements limiting it to AWS instance families (``p5``, ``g6e``, ...)."""
    return [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(names)}]


def instance_type(
    name: str,
    *,
    cpu: str = "192",
    memory: str = "2048Gi",
    offerings: list[dict] | None = None,
    gpus: int = 0,
    model: str = "NVIDIA H100 80GB HBM3",
    nics: int = 0,
    family: str | None = None,
) -> dict:
    spec: dict[str, Any] = {
        "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
        "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {
                "key": "karpenter.k8s.aws/instance-family",
                "operator": "In",
                "values": [family or name.split(".")[0]],
            },
        ],
        "offerings": offerings or [offering("us-west-2a", 10.0), offering("us-west-2b", 10.0)],
    }
    templates = []
    bindings = []
    if gpus:
        templates.append(
            {
                "driver": GPU,
                "pool": {"name": f"{name}-gpus"},
                "devices": [gpu(i, model) for i in range(gpus)],
            }
        )
    if nics:
        templates.append(
            {
                "driver": NIC,
                "pool": {"name": f"{name}-nics"},
                "devices": [nic(i) for i in range(nics)],
            }
        )
        for i in range(min(gpus, nics)):
            bindings.append(
                {
                    "attribute": PCIE,
                    "devices": [
                        {"driver": GPU, "pool": f"{name}-gpus", "device": f"gpu-{i}"},
                        {"driver": NIC, "pool": f"{name}-nics", "device": f"nic-{i}"},
                    ],
                }
            )
    if templates:
        spec["dynamicResources"] = {"resourceSliceTemplates": templates}
        if bindings:
            spec["dynamicResources"]["attributeBindings"] = bindings
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": spec,
    }


def snapshot(docs: list[dict]):
    return load_files([("snapshot.yaml", yaml.safe_dump_all(docs))])


def run(docs: list[dict], **options) -> dict:
    """Simulate the documents and return the result document."""
    return simulate(snapshot(docs), SimulationOptions(**options)).result


def pod_result(result: dict, key: str) -> dict:
    for entry in result["pods"]:
        if entry["pod"] == key:
            return entry
    raise KeyError(key)


def node_claim_result(result: dict, name: str) -> dict:
    for entry in result["nodeClaims"]:
        if entry["name"] == name:
            return entry
    raise KeyError(name)
