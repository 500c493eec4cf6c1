"""Karpenter's provisioning test harness, as snapshots through the public entry.

Karpenter's scheduling suites run pods through ``ExpectProvisioned`` against its fake cloud
provider and read the outcome from the API server (``ExpectScheduled``, ``ExpectSkew``). Here a
``Cluster`` holds the same objects as documents; ``provision`` simulates them (every pending pod
of the cluster, as Karpenter's provisioner lists them all), then launches each new NodeClaim as
the fake cloud provider does (its cheapest instance type, the first offering its requirements
allow) and binds the pods, so that a later ``provision`` sees them running on existing nodes.

The fake cloud provider's instance types keep their capacities and prices; they carry AWS-like
names, and its zones ``test-zone-1..3`` are ``us-west-2a..c``.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from allocator.model import LabelSelector
from allocator.requirements import Requirements
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
ZONE1, ZONE2, ZONE3 = ZONES
SPOT, ON_DEMAND = "spot", "on-demand"
GPU_VENDOR_A = "nvidia.com/gpu"
GPU_VENDOR_B = "amd.com/gpu"

# The fake provider's default offerings, in its order: spot in zones 1-2, on-demand in 1-3.
_OFFERINGS = [
    (SPOT, ZONE1),
    (SPOT, ZONE2),
    (ON_DEMAND, ZONE1),
    (ON_DEMAND, ZONE2),
    (ON_DEMAND, ZONE3),
]


def _price(cpu: int, memory_gib: int, gpus: int) -> float:
    # fake.PriceFromResources: 0.1 per CPU, 0.1 per 1e9 bytes of memory, 1.0 per GPU resource.
    return round(0.1 * cpu + 0.1 * memory_gib * 2**30 / 1e9 + (1.0 if gpus else 0.0), 6)


def instance_type(
    name: str,
    *,
    cpu: int = 4,
    memory_gib: int = 4,
    pods: int = 5,
    arch: str = "amd64",
    oses: tuple[str, ...] = ("darwin", "linux", "windows"),
    extended: dict[str, str] | None = None,
    offerings: Iterable[tuple[str, str]] = _OFFERINGS,
) -> dict:
    """A fake.NewInstanceType: capacity less the kube-reserved 100m CPU and 10Mi memory."""
    capacity = {
        "cpu": f"{cpu * 1000 - 100}m",
        "memory": f"{memory_gib * 1024 - 10}Mi",
        "pods": str(pods),
    }
    capacity.update(extended or {})
    price = _price(cpu, memory_gib, len(extended or {}))
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {
            "capacity": capacity,
            "requirements": [
                {"key": ARCH, "operator": "In", "values": [arch]},
                {"key": "kubernetes.io/os", "operator": "In", "values": list(oses)},
            ],
            "offerings": [
                {"zone": z, "capacityType": ct, "price": price, "available": True}
                for ct, z in offerings
            ],
        },
    }


def default_instance_types() -> list[dict]:
    """The fake cloud provider's six default instance types."""
    return [
        instance_type("c6i.xlarge"),  # default-instance-type
        instance_type("c6i.large", cpu=2, memory_gib=2),  # small-instance-type
        instance_type("g5.xlarge", extended={GPU_VENDOR_A: "2"}),  # gpu-vendor-instance-type
        instance_type("g4ad.xlarge", extended={GPU_VENDOR_B: "2"}),  # gpu-vendor-b-instance-type
        instance_type(  # arm-instance-type
            "r7g.4xlarge",
            cpu=16,
            memory_gib=128,
            arch="arm64",
            oses=("darwin", "ios", "linux", "windows"),
        ),
        instance_type("t3.nano", pods=1),  # single-pod-instance-type
    ]


def assorted_instance_types() -> list[dict]:
    """fake.InstanceTypesAssorted: one offering each, every cpu x memory x zone x capacity type x
    os x arch."""
    out = []
    for cpu, mem, zone, ct, os_, arch in itertools.product(
        [1, 2, 4, 8, 16, 32, 64],
        [1, 2, 4, 8, 16, 32, 64, 128],
        ZONES,
        [SPOT, ON_DEMAND],
        ["linux", "windows"],
        ["amd64", "arm64"],
    ):
        out.append(
            instance_type(
                f"{cpu}-cpu-{mem}-mem-{arch}-{os_}-{zone}-{ct}",
                cpu=cpu,
                memory_gib=mem,
                arch=arch,
                oses=(os_,),
                offerings=[(ct, zone)],
            )
        )
    return out


def node_pool(
    name: str = "default",
    *,
    requirements: list[dict] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    startup_taints: list[dict] | None = None,
    limits: dict[str, str] | None = None,
    weight: int = 0,
) -> dict:
    """test.NodePool: a CPU limit of 2000 unless given."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": list(requirements or []),
                "taints": list(taints or []),
                "startupTaints": list(startup_taints or []),
            },
        },
        "limits": dict(limits if limits is not None else {"cpu": "2000"}),
    }
    if weight:
        spec["weight"] = weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


def req(key: str, operator: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def selector(**labels: str) -> dict:
    return {"matchLabels": labels}


def spread(
    key: str,
    *,
    labels: dict[str, str] | None = None,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    **fields: Any,
) -> dict:
    tsc: dict[str, Any] = {"topologyKey": key, "whenUnsatisfiable": when, "maxSkew": max_skew}
    if labels is not None:
        tsc["labelSelector"] = {"matchLabels": labels}
    tsc.update(fields)
    return tsc


def term(key: str, labels: dict[str, str], **fields: Any) -> dict:
    return {"topologyKey": key, "labelSelector": {"matchLabels": labels}, **fields}


_names = itertools.count(1)


def pod(
    *,
    name: str | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    node_selector: dict[str, str] | None = None,
    node_requirements: list[dict] | None = None,
    node_preferences: list[dict] | None = None,
    spread: list[dict] | None = None,
    affinity: list[dict] | None = None,
    anti_affinity: list[dict] | None = None,
    affinity_preferences: list[tuple[int, dict]] | None = None,
    anti_affinity_preferences: list[tuple[int, dict]] | None = None,
    tolerations: list[dict] | None = None,
    pvcs: tuple[str, ...] = (),
    node_name: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
    unschedulable: bool = True,
    extended: dict[str, str] | None = None,
) -> dict:
    """test.UnschedulablePod (``unschedulable``: kube-scheduler marked it Unschedulable) or
    test.Pod."""
    name = name or f"pod-{next(_names):04d}"
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    requests.update(extended or {})
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "vllm/vllm-openai:v0.6.3", "resources": {"requests": requests}}
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    aff: dict[str, Any] = {}
    if node_requirements or node_preferences:
        aff["nodeAffinity"] = {}
        if node_requirements:
            aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": node_requirements}]
            }
        if node_preferences:
            aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 1, "preference": {"matchExpressions": node_preferences}}
            ]
    for key, required, preferred in (
        ("podAffinity", affinity, affinity_preferences),
        ("podAntiAffinity", anti_affinity, anti_affinity_preferences),
    ):
        if required is None and preferred is None:
            continue
        aff[key] = {}
        if required is not None:
            aff[key]["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred is not None:
            aff[key]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in preferred
            ]
    if aff:
        spec["affinity"] = aff
    if spread:
        spec["topologySpreadConstraints"] = spread
    if tolerations:
        spec["tolerations"] = tolerations
    if pvcs:
        spec["volumes"] = [
            {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(pvcs)
        ]
    md: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
        "creationTimestamp": "2026-12-01T10:00:00Z",
    }
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:05:00Z"
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if unschedulable and not node_name:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def pods(n: int, **fields: Any) -> list[dict]:
    return [pod(**fields) for _ in range(n)]


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict:
    """test.Node: an unmanaged node with the given labels; without ``allocatable`` it offers
    nothing (not even a pod slot), as test.Node's empty status does."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": list(taints or [])},
        "status": {"allocatable": dict(allocatable or {"pods": "0"})},
    }


def namespace(name: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels or {}},
    }


def _key(doc: dict) -> str:
    md = doc["metadata"]
    return f"{md.get('namespace', 'default')}/{md['name']}"


class Cluster:
    """The objects of one test, as an API server would hold them between provisioning loops."""

    def __init__(self, instance_types: list[dict] | None = None) -> None:
        self.instance_types = instance_types or default_instance_types()
        self.objects: dict[tuple[str, str], dict] = {}
        self._node_names = itertools.count(1)
        self.last: dict | None = None

    def apply(self, *docs: dict) -> None:
        for doc in docs:
            kind = doc["kind"]
            name = _key(doc) if kind == "Pod" else doc["metadata"]["name"]
            self.objects[(kind, name)] = doc

    def delete(self, doc: dict) -> None:
        self.objects.pop(("Pod", _key(doc)), None)

    def delete_unscheduled_pods(self) -> None:
        for key, doc in list(self.objects.items()):
            if key[0] == "Pod" and not doc["spec"].get("nodeName"):
                del self.objects[key]

    def documents(self) -> list[dict]:
        return [*self.instance_types, *self.objects.values()]

    def provision(self, *new_pods: dict) -> dict:
        """ExpectProvisioned: apply the pods, run one loop over every pending pod of the
        cluster, launch every new NodeClaim, and bind the pods passed in (only those, as
        Karpenter's harness does: the others stay pending)."""
        self.apply(*new_pods)
        snapshot = load_files([("cluster.json", json.dumps(self.documents()))])
        result = simulate(snapshot, SimulationOptions(suggestions=False)).result
        self.last = result
        launched = {nc["name"]: self._launch(nc) for nc in result["nodeClaims"]}
        passed = {_key(p) for p in new_pods}
        for entry in result["pods"]:
            if not entry["scheduled"] or entry["pod"] not in passed:
                continue
            target = entry["target"]
            node_name = launched[target["name"]] if target["new"] else target["name"]
            doc = self.objects[("Pod", entry["pod"])]
            doc["spec"]["nodeName"] = node_name
            doc["status"] = {"phase": "Running"}
        return result

    def _launch(self, nodeclaim: dict) -> str:
        """The fake cloud provider's Create (its cheapest instance type, the first offering
        the NodeClaim's requirements allow), then the node registering (not initialized)."""
        reqs = Requirements.from_node_selector_requirements(nodeclaim["requirements"])
        by_name = {it["metadata"]["name"]: it for it in self.instance_types}
        choices = []
        for name in nodeclaim["instanceTypes"]:
            spec = by_name[name]["spec"]
            allowed = [
                o
                for o in spec["offerings"]
                if o["available"]
                and reqs.get(ZONE).has(o["zone"])
                and reqs.get(CAPACITY_TYPE).has(o["capacityType"])
            ]
            if allowed:
                choices.append((min(o["price"] for o in allowed), name, allowed[0]))
        _, it_name, offering = min(choices, key=lambda c: (c[0], c[1]))
        spec = by_name[it_name]["spec"]
        pool = self.objects[("NodePool", nodeclaim["nodePool"])]["spec"]["template"]
        labels = {r["key"]: r["values"][0] for r in spec["requirements"] if r["operator"] == "In"}
        labels.update(reqs.labels())
        labels.update(pool["metadata"]["labels"])
        labels.update(
            {
                INSTANCE_TYPE: it_name,
                ZONE: offering["zone"],
                CAPACITY_TYPE: offering["capacityType"],
                NODEPOOL: nodeclaim["nodePool"],
                "karpenter.sh/registered": "true",
            }
        )
        name = f"node-{next(self._node_names):03d}"
        taints = [*pool["spec"]["taints"], *pool["spec"].get("startupTaints", [])]
        self.apply(node(name, labels=labels, taints=taints, allocatable=spec["capacity"]))
        return name

    # --- reading what happened ---------------------------------------------------------------

    def pod(self, doc: dict) -> dict:
        return self.objects[("Pod", _key(doc))]

    def node_of(self, doc: dict) -> dict | None:
        name = self.pod(doc)["spec"].get("nodeName")
        return self.objects[("Node", name)] if name else None

    def scheduled(self, doc: dict) -> bool:
        return self.node_of(doc) is not None

    def nodes(self) -> list[dict]:
        return [d for (kind, _), d in self.objects.items() if kind == "Node"]

    def skew(self, namespace: str, key: str, labels: dict[str, str] | None = None) -> list[int]:
        """ExpectSkew: running pods the selector lists (none: all of the namespace), counted by
        their node's value of ``key`` (hostname: the node's name), as a sorted list."""
        sel = LabelSelector(tuple((labels or {}).items()))
        counts: Counter[str] = Counter()
        for (kind, _), doc in self.objects.items():
            if kind != "Pod" or (namespace and doc["metadata"]["namespace"] != namespace):
                continue
            if doc["metadata"].get("deletionTimestamp") or doc["status"].get("phase") in (
                "Succeeded",
                "Failed",
            ):
                continue
            node_name = doc["spec"].get("nodeName")
            n = self.objects.get(("Node", node_name)) if node_name else None
            if n is None or not sel.matches(doc["metadata"].get("labels") or {}):
                continue
            if key == HOSTNAME:
                counts[n["metadata"]["name"]] += 1
            elif key in n["metadata"]["labels"]:
                counts[n["metadata"]["labels"][key]] += 1
        return sorted(counts.values())
