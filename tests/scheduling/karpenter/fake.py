"""Karpenter's test fixtures as snapshot documents: the fake cloud provider's instance types
(``pkg/cloudprovider/fake``), ``test.NodePool()`` and ``test.UnschedulablePod()``, so that the
ported tests read like their Go originals.

A fake instance type's ``capacity`` here is what Karpenter's scheduler fits pods into: the
instance type's capacity less the fake's kube-reserved overhead (100m cpu, 10Mi memory).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from allocator.quantity import Quantity
from tests.scheduling.k8s import pod_result

ZONE = "topology.kubernetes.io/zone"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
HOSTNAME = "kubernetes.io/hostname"
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
VENDOR_A = "fake.com/vendor-a"
VENDOR_B = "fake.com/vendor-b"
_OVERHEAD = {"cpu": Fraction(1, 10), "memory": Fraction(10 * 2**20)}


def offering(zone: str, capacity_type: str, price: float, available: bool = True) -> dict:
    return {"zone": zone, "capacityType": capacity_type, "price": price, "available": available}


def price_from_resources(resources: dict[str, str]) -> float:
    """The fake cloud provider's price: 0.1 per cpu, 0.1 per GB of memory, 1 per GPU."""
    price = 0.0
    for name, value in resources.items():
        amount = float(Quantity.parse(value).value)
        if name == "cpu":
            price += 0.1 * amount
        elif name == "memory":
            price += 0.1 * amount / 1e9
        elif name in (VENDOR_A, VENDOR_B):
            price += 1.0
    return price


def instance_type(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: str = "5",
    extra: dict[str, str] | None = None,
    arch: str = "amd64",
    oses: tuple[str, ...] = ("darwin", "linux", "windows"),
    offerings: list[dict] | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    """fake.NewInstanceType: spot in test-zone-1/2, on-demand in test-zone-1/2/3 by default."""
    resources = {"cpu": cpu, "memory": memory, **(extra or {})}
    if offerings is None:
        price = price_from_resources(resources)
        offerings = [offering(z, "spot", price) for z in ZONES[:2]]
        offerings += [offering(z, "on-demand", price) for z in ZONES]
    capacity = {"pods": pods, **(extra or {})}
    for key, value in (("cpu", cpu), ("memory", memory)):
        left = Quantity.parse(value).value - _OVERHEAD[key]
        capacity[key] = f"{int(left * 1000)}m" if key == "cpu" else str(int(left))
    large = Quantity.parse(cpu).value > 4 and Quantity.parse(memory).value > 8 * 2**30
    requirements = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]},
        {"key": "kubernetes.io/os", "operator": "In", "values": list(oses)},
        {"key": "size", "operator": "In", "values": ["large" if large else "small"]},
        {"key": "integer", "operator": "In", "values": [str(int(Quantity.parse(cpu).value))]},
    ]
    if large:
        requirements.append({"key": "special", "operator": "In", "values": ["optional"]})
    for key, value in (labels or {}).items():
        requirements.append({"key": key, "operator": "In", "values": [value]})
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {"capacity": capacity, "requirements": requirements, "offerings": offerings},
    }


def default_instance_types() -> list[dict]:
    """The fake cloud provider's GetInstanceTypes without overrides."""
    return [
        instance_type("default-instance-type"),
        instance_type("small-instance-type", cpu="2", memory="2Gi"),
        instance_type("gpu-vendor-instance-type", extra={VENDOR_A: "2"}),
        instance_type("gpu-vendor-b-instance-type", extra={VENDOR_B: "2"}),
        instance_type(
            "arm-instance-type",
            cpu="16",
            memory="128Gi",
            arch="arm64",
            oses=("darwin", "ios", "linux", "windows"),
        ),
        instance_type("single-pod-instance-type", pods="1"),
    ]


def node_pool(
    name: str = "default",
    *,
    requirements: list[dict] | None = None,
    weight: int | None = None,
    limits: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    """test.NodePool()."""
    tspec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
        "requirements": requirements or [],
    }
    if taints:
        tspec["taints"] = taints
    spec: dict[str, Any] = {"template": {"metadata": {"labels": labels or {}}, "spec": tspec}}
    if weight is not None:
        spec["weight"] = weight
    if limits:
        spec["limits"] = limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    limits: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    required: list[list[dict]] | None = None,
    preferred: list[tuple[int, list[dict]]] | None = None,
    tolerations: list[dict] | None = None,
    node_name: str | None = None,
) -> dict:
    """test.UnschedulablePod(): no requests unless given. ``required``: node affinity terms
    (each a list of expressions); ``preferred``: (weight, expressions) terms."""
    resources: dict[str, Any] = {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "pause", "resources": resources}]
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    node_affinity: dict[str, Any] = {}
    if required:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in required]
        }
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": t}} for w, t in preferred
        ]
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-12-01T10:00:00Z",
        },
        "spec": spec,
        # test.UnschedulablePod: kube-scheduler marked it (Karpenter provisions only for those).
        "status": {"phase": "Running"}
        if node_name
        else {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def node(
    name: str, *, pool: str, instance_type: str, cpu: str, memory: str = "4Gi", pods: str = "5"
) -> dict:
    """A Node Karpenter launched from ``pool`` (initialized)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                NODEPOOL: pool,
                INSTANCE_TYPE: instance_type,
                HOSTNAME: name,
                ZONE: "test-zone-1",
                "karpenter.sh/initialized": "true",
            },
        },
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def expr(key: str, operator: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def placed(result: dict, name: str) -> dict | None:
    """The NodeClaim of this run (or node) the pod went to, None when not scheduled."""
    entry = pod_result(result, f"default/{name}")
    if not entry["scheduled"]:
        return None
    target = entry["target"]
    for nc in result["nodeClaims"]:
        if nc["name"] == target["name"]:
            return nc
    return {"name": target["name"], "existing": True}


def requirement(nc: dict, key: str) -> dict | None:
    return next((r for r in nc["requirements"] if r["key"] == key), None)
