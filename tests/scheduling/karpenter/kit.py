"""Karpenter's test fixtures (``pkg/test``, ``pkg/cloudprovider/fake``) as snapshot documents, so
that its scheduling tests read here as they read there. The one kit of tests/scheduling/karpenter.

The fake cloud provider (``pkg/cloudprovider/fake``):
- ``instance_type()``: fake.NewInstanceType: capacity less the 100m CPU / 10Mi kube-reserved,
  price 0.1 per CPU and per GB of memory plus 1 per GPU resource (PriceFromResources), the
  fake's own labels (``size`` small or large, ``special`` on large ones, ``integer`` = CPUs).
- ``default_instance_types()``: its six instance types, under AWS-like names (below), spot in
  the first two zones and on-demand in all three; ``fake_instance_types(n)``
  (fake.InstanceTypes) and ``assorted_instance_types()`` (fake.InstanceTypesAssorted).
- Its zones ``test-zone-1..3`` are ``us-west-2a..c`` (``ZONE1..3``); its GPU resources
  ``fake.com/vendor-a`` / ``-b`` are ``nvidia.com/gpu`` / ``amd.com/gpu``.

Objects (``pkg/test``): ``node_pool()``, ``pod()`` (test.UnschedulablePod; ``unschedulable=False``
for test.Pod), ``node()``, ``launched_node()``, ``daemon_set()``, ``pvc()``, ``pv()``,
``storage_class()``, ``csi_node()``, ``namespace()``; ``req()``, ``spread()``, ``term()``.

Running: ``provision(*docs)`` is one provisioning loop (ExpectProvisioned) answering what
ExpectScheduled / ExpectNotScheduled ask; ``Cluster`` keeps the objects between loops,
launching each new NodeClaim as the fake cloud provider does and binding the pods, so that a
later loop sees them running; ``placed()`` / ``requirement()`` read a result document.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import yaml

from allocator.model import LabelSelector
from allocator.quantity import Quantity
from allocator.requirements import Requirements
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.scheduling.k8s import pod_result

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
CSI_PROVIDER = "fake.csi.provider"
SIZE = "size"  # fake.LabelInstanceSize
SPECIAL = "special"  # fake.ExoticInstanceLabelKey
INTEGER = "integer"  # fake.IntegerInstanceLabelKey
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
ZONE1, ZONE2, ZONE3 = ZONES
SPOT, ON_DEMAND = "spot", "on-demand"
GPU_VENDOR_A = "nvidia.com/gpu"  # fake.ResourceGPUVendorA
GPU_VENDOR_B = "amd.com/gpu"  # fake.ResourceGPUVendorB
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
_KUBE_RESERVED = {"cpu": Quantity.parse("100m").value, "memory": Quantity.parse("10Mi").value}

_names = itertools.count(1)


def name(prefix: str) -> str:
    """test.RandomName, deterministic."""
    return f"{prefix}-{next(_names):04d}"


# --- the fake cloud provider -----------------------------------------------------------------


def offering(zone: str, capacity_type: str, price: float, available: bool = True) -> dict:
    return {"zone": zone, "capacityType": capacity_type, "price": price, "available": available}


def price_from_resources(resources: dict[str, str]) -> float:
    """fake.PriceFromResources: 0.1 per CPU, 0.1 per GB of memory, 1 per GPU resource."""
    price = 0.0
    for key, value in resources.items():
        amount = float(Quantity.parse(str(value)).value)
        if key == "cpu":
            price += 0.1 * amount
        elif key == "memory":
            price += 0.1 * amount / 1e9
        elif key in (GPU_VENDOR_A, GPU_VENDOR_B):
            price += 1.0
    return round(price, 6)


def instance_type(
    it_name: str,
    *,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: str = "5",
    arch: str = "amd64",
    oses: tuple[str, ...] = ("darwin", "linux", "windows"),
    extended: dict[str, str] | None = None,
    offerings: list[dict] | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    """fake.NewInstanceType: spot in the first two zones, on-demand in all three, unless
    ``offerings`` (``offering()``) are given; ``labels``: more requirements (In, one value)."""
    resources = {"cpu": str(cpu), "memory": memory, **(extended or {})}
    if offerings is None:
        price = price_from_resources(resources)
        offerings = [offering(z, SPOT, price) for z in ZONES[:2]]
        offerings += [offering(z, ON_DEMAND, price) for z in ZONES]
    cpus, mem = Quantity.parse(str(cpu)).value, Quantity.parse(memory).value
    capacity = {"pods": str(pods), **(extended or {})}
    capacity["cpu"] = f"{int((cpus - _KUBE_RESERVED['cpu']) * 1000)}m"
    capacity["memory"] = str(int(mem - _KUBE_RESERVED["memory"]))
    large = cpus > 4 and mem > 8 * 2**30
    requirements = [
        {"key": ARCH, "operator": "In", "values": [arch]},
        {"key": "kubernetes.io/os", "operator": "In", "values": list(oses)},
        {"key": SIZE, "operator": "In", "values": ["large" if large else "small"]},
        {"key": SPECIAL, "operator": "In", "values": ["optional"]}
        if large
        else {"key": SPECIAL, "operator": "DoesNotExist"},
        {"key": INTEGER, "operator": "In", "values": [str(int(cpus))]},
    ]
    for key, value in (labels or {}).items():
        requirements.append({"key": key, "operator": "In", "values": [value]})
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": it_name},
        "spec": {"capacity": capacity, "requirements": requirements, "offerings": offerings},
    }


def default_instance_types() -> list[dict]:
    """The fake cloud provider's GetInstanceTypes without overrides (Karpenter's names in the
    comments)."""
    return [
        instance_type("c6i.xlarge"),  # default-instance-type
        instance_type("c6i.large", cpu="2", memory="2Gi"),  # small-instance-type
        instance_type("g5.xlarge", extended={GPU_VENDOR_A: "2"}),  # gpu-vendor-instance-type
        instance_type("g4ad.xlarge", extended={GPU_VENDOR_B: "2"}),  # gpu-vendor-b-...
        instance_type(  # arm-instance-type
            "r7g.4xlarge",
            cpu="16",
            memory="128Gi",
            arch="arm64",
            oses=("darwin", "ios", "linux", "windows"),
        ),
        instance_type("t3.nano", pods="1"),  # single-pod-instance-type
    ]


def fake_instance_types(total: int) -> list[dict]:
    """fake.InstanceTypes(total): fake-it-i with i+1 CPUs, 2(i+1)Gi and 10(i+1) pods."""
    return [
        instance_type(
            f"fake-it-{i}", cpu=str(i + 1), memory=f"{2 * (i + 1)}Gi", pods=str(10 * (i + 1))
        )
        for i in range(total)
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
                cpu=str(cpu),
                memory=f"{mem}Gi",
                arch=arch,
                oses=(os_,),
                offerings=[
                    offering(
                        zone, ct, price_from_resources({"cpu": str(cpu), "memory": f"{mem}Gi"})
                    )
                ],
            )
        )
    return out


# --- objects (pkg/test) -------------------------------------------------------------------------


def node_pool(
    pool_name: str = "default",
    *,
    requirements: list[dict] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    startup_taints: list[dict] | None = None,
    limits: dict[str, str] | None = None,
    weight: int = 0,
) -> dict:
    """test.NodePool: a CPU limit of 2000 unless ``limits`` are given."""
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
        "metadata": {"name": pool_name},
        "spec": spec,
    }


def req(key: str, operator: str, *values: str) -> dict:
    """A NodeSelectorRequirement."""
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


def _node_affinity(
    terms: list[list[dict]] | None, preferred: list[tuple[int, list[dict]]] | None
) -> dict:
    out: dict[str, Any] = {}
    if terms:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
        }
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": t}} for w, t in preferred
        ]
    return out


def pod(
    pod_name: str | None = None,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    extended: dict[str, str] | None = None,
    init_containers: list[dict] | None = None,
    node_selector: dict[str, str] | None = None,
    node_requirements: list[dict] | None = None,
    node_terms: list[list[dict]] | None = None,
    node_preferences: list[dict] | None = None,
    preferred: list[tuple[int, list[dict]]] | None = None,
    spread: list[dict] | None = None,
    affinity: list[dict] | None = None,
    anti_affinity: list[dict] | None = None,
    affinity_preferences: list[tuple[int, dict]] | None = None,
    anti_affinity_preferences: list[tuple[int, dict]] | None = None,
    tolerations: list[dict] | None = None,
    host_ports: tuple[int, ...] = (),
    pvcs: tuple[str, ...] = (),
    ephemeral: tuple[str | None, ...] = (),
    node_name: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
    unschedulable: bool = True,
    conditions: list[dict] | None = None,
    daemon_set: str | None = None,
) -> dict:
    """test.UnschedulablePod (kube-scheduler marked it Unschedulable); ``unschedulable=False``:
    test.Pod. Requests from ``cpu``, ``memory``, ``extended`` and ``requests``; node affinity:
    ``node_requirements`` (one term) or ``node_terms`` (ORed), ``node_preferences`` (one
    preferred term of weight 1) or ``preferred`` ((weight, expressions) terms); pod
    (anti-)affinity: required terms and (weight, term) preferences; ``init_containers``: their
    ``resources``; ``ephemeral``: generic ephemeral volumes by storage class; ``conditions``:
    the status conditions as given; ``daemon_set``: the DaemonSet that owns the pod."""
    pod_name = pod_name or name("pod")
    resources: dict[str, Any] = {}
    wanted = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    wanted.update(extended or {})
    wanted.update(requests or {})
    if wanted:
        resources["requests"] = wanted
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {
        "name": "app",
        "image": "vllm/vllm-openai:v0.6.3",
        "resources": resources,
    }
    if host_ports:
        container["ports"] = [
            {"containerPort": 80, "hostPort": p, "protocol": "TCP"} for p in host_ports
        ]
    spec: dict[str, Any] = {"containers": [container]}
    if init_containers:
        spec["initContainers"] = [
            {"name": f"init-{i}", "image": "busybox:1.36", "resources": r}
            for i, r in enumerate(init_containers)
        ]
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    aff: dict[str, Any] = {}
    if node_requirements:
        node_terms = [node_requirements]
    if node_preferences:
        preferred = [(1, node_preferences)]
    node_affinity = _node_affinity(node_terms, preferred)
    if node_affinity:
        aff["nodeAffinity"] = node_affinity
    for key, required, wished in (
        ("podAffinity", affinity, affinity_preferences),
        ("podAntiAffinity", anti_affinity, anti_affinity_preferences),
    ):
        if required is None and wished is None:
            continue
        aff[key] = {}
        if required is not None:
            aff[key]["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if wished is not None:
            aff[key]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in wished
            ]
    if aff:
        spec["affinity"] = aff
    if spread:
        spec["topologySpreadConstraints"] = spread
    if tolerations:
        spec["tolerations"] = tolerations
    volumes: list[dict] = [
        {"name": f"vol-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(pvcs)
    ]
    for i, storage_class in enumerate(ephemeral):
        template_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
        if storage_class is not None:
            template_spec["storageClassName"] = storage_class
        volumes.append(
            {"name": f"eph-{i}", "ephemeral": {"volumeClaimTemplate": {"spec": template_spec}}}
        )
    if volumes:
        spec["volumes"] = volumes
    md: dict[str, Any] = {
        "name": pod_name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{pod_name}",
        "labels": dict(labels or {}),
        "creationTimestamp": "2026-12-01T10:00:00Z",
    }
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T10:05:00Z"
    if daemon_set:
        md["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": daemon_set,
                "uid": f"uid-{daemon_set}",
                "controller": True,
            }
        ]
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if conditions is not None:
        status["conditions"] = conditions
    elif unschedulable and not node_name:
        status["conditions"] = [UNSCHEDULABLE]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def unschedulable_pod(pod_name: str | None = None, **options: Any) -> dict:
    """test.UnschedulablePod, under Karpenter's name (for tests whose pod is called ``pod``)."""
    return pod(pod_name, unschedulable=True, **options)


def pod_doc(pod_name: str | None = None, **options: Any) -> dict:
    """test.Pod: not marked by kube-scheduler (for tests whose pod is called ``pod``)."""
    return pod(pod_name, unschedulable=False, **options)


def pods(n: int, **fields: Any) -> list[dict]:
    return [pod(**fields) for _ in range(n)]


def node(
    node_name: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict:
    """test.Node: a node Karpenter does not manage unless its labels say so; without
    ``allocatable`` it offers nothing (not even a pod slot), as test.Node's empty status does."""
    node_name = node_name or name("node")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": {HOSTNAME: node_name, **(labels or {})}},
        "spec": {"taints": list(taints or [])},
        "status": {"allocatable": dict(allocatable or {"pods": "0"})},
    }


def launched_node(
    node_name: str,
    instance_type_name: str,
    *,
    pool: str = "default",
    zone: str = ZONE1,
    capacity_type: str = SPOT,
    **allocatable: str,
) -> dict:
    """A node Karpenter launched in an earlier loop, registered and initialized; allocatable
    10 CPU / 10Gi / 110 pods unless given."""
    return node(
        node_name,
        labels={
            NODEPOOL: pool,
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
            INSTANCE_TYPE: instance_type_name,
            CAPACITY_TYPE: capacity_type,
            ZONE: zone,
        },
        allocatable=allocatable or {"cpu": "10", "memory": "10Gi", "pods": "110"},
    )


def namespace(name: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels or {}},
    }


def pvc(
    claim_name: str | None = None, *, storage_class: str | None = None, volume: str = ""
) -> dict:
    """test.PersistentVolumeClaim: bound (with the bind-completed annotation) when ``volume``."""
    claim_name = claim_name or name("pvc")
    metadata: dict[str, Any] = {"name": claim_name, "namespace": "default"}
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
        metadata["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def pv(
    volume_name: str | None = None,
    *,
    zones: tuple[str, ...] = (),
    terms: list[dict] | None = None,
    storage_class: str = "",
    driver: str = "test.driver",
    local: bool = False,
    host_path: bool = False,
    nfs: bool = False,
    aws_in_tree: bool = False,
) -> dict:
    """test.PersistentVolume: a CSI volume unless local or hostPath; ``zones`` one term."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "100Gi"}}
    if local:
        spec["local"] = {"path": "/mnt/local-disks"}
    elif host_path:
        spec["hostPath"] = {"path": "/mnt/local-disks"}
    elif nfs:
        spec["nfs"] = {"server": "fake.server", "path": "/some/path"}
    elif aws_in_tree:
        spec["awsElasticBlockStore"] = {"fsType": "ext4", "volumeID": "vol-0a1b2c3d"}
    else:
        spec["csi"] = {"driver": driver, "volumeHandle": "test-handle"}
    if storage_class:
        spec["storageClassName"] = storage_class
    if terms is None and zones:
        terms = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}]
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name or name("pv")},
        "spec": spec,
    }


def storage_class(
    class_name: str | None = None,
    *,
    zones: tuple[str, ...] | None = None,
    topologies: list[dict[str, list[str]]] | None = None,
    provisioner: str = "test-provisioner",
    mode: str | None = None,
    default: bool = False,
    created: str | None = None,
) -> dict:
    """test.StorageClass; without ``mode`` the API server's default (Immediate) applies."""
    doc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": class_name or name("sc")},
        "provisioner": provisioner,
    }
    if default:
        doc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if created:
        doc["metadata"]["creationTimestamp"] = created
    if mode:
        doc["volumeBindingMode"] = mode
    if topologies is None and zones is not None:
        topologies = [{ZONE: list(zones)}]
    if topologies:
        doc["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": v} for k, v in term.items()]}
            for term in topologies
        ]
    return doc


def daemon_set(ds_name: str | None = None, **pod_options: Any) -> dict:
    """test.DaemonSet: its pod template takes ``pod``'s options."""
    template = pod("template", unschedulable=False, **pod_options)
    ds_name = ds_name or name("daemonset")
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": ds_name, "namespace": "default", "uid": f"uid-{ds_name}"},
        "spec": {
            "selector": {"matchLabels": {"app": "ds"}},
            "template": {"spec": template["spec"]},
        },
    }


def csi_node(node_name: str, limits: dict[str, int] | None = None) -> dict:
    """A CSINode stating per-driver attach limits (default: the fake CSI driver, 10)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node_name},
        "spec": {
            "drivers": [
                {"name": driver, "nodeID": "fake-node-id", "allocatable": {"count": count}}
                for driver, count in (limits or {CSI_PROVIDER: 10}).items()
            ]
        },
    }


# --- running it ---------------------------------------------------------------------------------


@dataclass
class Provisioned:
    """What one provisioning loop decided (ExpectScheduled / ExpectNotScheduled)."""

    result: dict
    prices: dict[str, float]  # instance type -> its cheapest offering

    def _entry(self, pod: dict | str) -> dict | None:
        key = f"default/{pod if isinstance(pod, str) else pod['metadata']['name']}"
        return next((p for p in self.result["pods"] if p["pod"] == key), None)

    def scheduled(self, pod: dict | str) -> bool:
        entry = self._entry(pod)
        return entry is not None and entry["scheduled"]

    def ignored(self, pod: dict | str) -> str | None:
        key = f"default/{pod if isinstance(pod, str) else pod['metadata']['name']}"
        found = next((i for i in self.result["ignoredPods"] if i["pod"] == key), None)
        return found["reason"] if found else None

    def error(self, pod: dict | str) -> str | None:
        entry = self._entry(pod)
        return entry["error"] if entry else None

    def target(self, pod: dict | str) -> str:
        """The node or new NodeClaim the pod went to (ExpectScheduled)."""
        entry = self._entry(pod)
        assert entry is not None and entry["scheduled"], (pod, entry)
        return entry["target"]["name"]

    def node_claim(self, pod: dict | str) -> dict:
        target = self.target(pod)
        return next(nc for nc in self.result["nodeClaims"] if nc["name"] == target)

    def values(self, pod: dict | str, key: str) -> set[str]:
        """The values a label may take on the pod's new NodeClaim (one: the node's label)."""
        for r in self.node_claim(pod)["requirements"]:
            if r["key"] == key and r["operator"] == "In":
                return set(r["values"])
        return set()

    def launched(self, node_claim: dict) -> str:
        """The instance type a NodeClaim launches as: its cheapest."""
        return min(node_claim["instanceTypes"], key=lambda it: (self.prices[it], it))

    @property
    def new_node_claims(self) -> list[dict]:
        return self.result["nodeClaims"]


def provision(*docs: dict) -> Provisioned:
    """ExpectProvisioned: one scheduling loop over the documents."""
    snapshot = load_files([("snapshot.yaml", yaml.safe_dump_all(list(docs)))])
    prices = {
        d["metadata"]["name"]: min(o["price"] for o in d["spec"]["offerings"])
        for d in docs
        if d["kind"] == "InstanceType"
    }
    return Provisioned(simulate(snapshot, SimulationOptions(suggestions=False)).result, prices)


def placed(result: dict, pod_name: str) -> dict | None:
    """The NodeClaim of this run (or node) the pod went to, None when not scheduled."""
    entry = pod_result(result, f"default/{pod_name}")
    if not entry["scheduled"]:
        return None
    target = entry["target"]
    for nc in result["nodeClaims"]:
        if nc["name"] == target["name"]:
            return nc
    return {"name": target["name"], "existing": True}


def requirement(nc: dict, key: str) -> dict | None:
    return next((r for r in nc["requirements"] if r["key"] == key), None)


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
