"""Karpenter's test fixtures (``pkg/test``, ``pkg/cloudprovider/fake``) as snapshot documents, so
that its scheduling tests read here as they read there.

- ``default_instance_types()``: the fake cloud provider's six instance types (zones test-zone-1
  and -2 spot and on-demand, test-zone-3 on-demand only; capacity less the 100m / 10Mi it
  reserves; price 0.1 per CPU and per GB of memory).
- ``node_pool()``, ``unschedulable_pod()``, ``pvc()``, ``pv()``, ``storage_class()``,
  ``daemon_set()``, ``node()``, ``csi_node()``: ``test.NodePool`` ... with their defaults.
- ``provision(*docs)`` runs one simulation (Karpenter's ExpectProvisioned) and answers what
  ExpectScheduled / ExpectNotScheduled ask.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import yaml

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CSI_PROVIDER = "fake.csi.provider"
SIZE = "size"  # fake.LabelInstanceSize
SPECIAL = "special"  # fake.ExoticInstanceLabelKey
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}

_names = itertools.count(1)


def name(prefix: str) -> str:
    """test.RandomName, deterministic."""
    return f"{prefix}-{next(_names):04d}"


def _offerings(zones: dict[str, tuple[str, ...]], price: float) -> list[dict]:
    return [
        {"zone": zone, "capacityType": ct, "price": price, "available": True}
        for zone, types in zones.items()
        for ct in types
    ]


DEFAULT_ZONES = {
    "test-zone-1": ("spot", "on-demand"),
    "test-zone-2": ("spot", "on-demand"),
    "test-zone-3": ("on-demand",),
}


def _gi(quantity: str) -> float:
    return float(quantity.removesuffix("Gi"))


def fake_instance_type(
    it_name: str,
    *,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: str = "5",
    arch: str = "amd64",
    os: tuple[str, ...] = ("darwin", "linux", "windows"),
    extra: dict[str, str] | None = None,
    zones: dict[str, tuple[str, ...]] | None = None,
) -> dict:
    """fake.NewInstanceType: capacity less kube-reserved (100m CPU, 10Mi memory)."""
    large = float(cpu) > 4 and _gi(memory) > 8
    price = 0.1 * float(cpu) + 0.1 * _gi(memory) * (1 << 30) / 1e9 + (1.0 if extra else 0.0)
    capacity = {
        "cpu": f"{int(float(cpu) * 1000) - 100}m",
        "memory": f"{int(_gi(memory) * 1024) - 10}Mi",
        "pods": pods,
    }
    capacity.update(extra or {})
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": it_name},
        "spec": {
            "capacity": capacity,
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]},
                {"key": "kubernetes.io/os", "operator": "In", "values": list(os)},
                # The fake provider's own labels: large when over 4 CPU and 8Gi.
                {"key": SIZE, "operator": "In", "values": ["large" if large else "small"]},
                {"key": SPECIAL, "operator": "In", "values": ["optional"]}
                if large
                else {"key": SPECIAL, "operator": "DoesNotExist"},
            ],
            "offerings": _offerings(zones or DEFAULT_ZONES, round(price, 6)),
        },
    }


def default_instance_types() -> list[dict]:
    """The fake cloud provider's default catalog."""
    return [
        fake_instance_type("default-instance-type"),
        fake_instance_type("small-instance-type", cpu="2", memory="2Gi"),
        fake_instance_type("gpu-vendor-instance-type", extra={"fake.com/vendor-a": "2"}),
        fake_instance_type("gpu-vendor-b-instance-type", extra={"fake.com/vendor-b": "2"}),
        fake_instance_type(
            "arm-instance-type",
            cpu="16",
            memory="128Gi",
            arch="arm64",
            os=("darwin", "ios", "linux", "windows"),
        ),
        fake_instance_type("single-pod-instance-type", pods="1"),
    ]


def fake_instance_types(total: int) -> list[dict]:
    """fake.InstanceTypes(total): fake-it-i with i+1 CPUs, 2(i+1)Gi and 10(i+1) pods."""
    return [
        fake_instance_type(
            f"fake-it-{i}", cpu=str(i + 1), memory=f"{2 * (i + 1)}Gi", pods=str(10 * (i + 1))
        )
        for i in range(total)
    ]


def node_pool(
    pool_name: str = "default",
    *,
    requirements: list[dict] | None = None,
    taints: list[dict] | None = None,
    startup_taints: list[dict] | None = None,
    labels: dict[str, str] | None = None,
    limits: dict | None = None,
    weight: int = 0,
) -> dict:
    """test.NodePool: no requirements, a 2000 CPU limit."""
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.test.sh",
                    "kind": "TestNodeClass",
                    "name": "default",
                },
                "requirements": requirements or [],
            }
        },
        "limits": limits or {"cpu": "2000"},
    }
    if taints:
        spec["template"]["spec"]["taints"] = taints
    if startup_taints:
        spec["template"]["spec"]["startupTaints"] = startup_taints
    if labels:
        spec["template"]["metadata"] = {"labels": labels}
    if weight:
        spec["weight"] = weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool_name},
        "spec": spec,
    }


def _affinity(required=None, anti=None, terms=None, preferences=None) -> dict | None:
    """``required``: one node selector term; ``terms``: several (ORed); ``preferences``: one
    preferred term of weight 1."""
    affinity: dict[str, Any] = {}
    if required:
        terms = [required]
    node_affinity: dict[str, Any] = {}
    if terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
        }
    if preferences:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 1, "preference": {"matchExpressions": preferences}}
        ]
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    if anti:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return affinity or None


def pod_doc(
    pod_name: str | None = None,
    *,
    requests: dict | None = None,
    limits: dict | None = None,
    init_containers: list[dict] | None = None,
    node_selector: dict | None = None,
    node_requirements: list[dict] | None = None,
    node_terms: list[list[dict]] | None = None,
    node_preferences: list[dict] | None = None,
    host_ports: tuple[int, ...] = (),
    pvcs: tuple[str, ...] = (),
    ephemeral: tuple[str | None, ...] = (),
    labels: dict | None = None,
    anti_requirements: list[dict] | None = None,
    tolerations: list[dict] | None = None,
    node_name: str | None = None,
    conditions: list[dict] | None = None,
    daemon_set: str | None = None,
) -> dict:
    """test.Pod: one pause container; volumes named after their claim for a readable test.
    ``init_containers``: their ``resources``; ``daemon_set``: the DaemonSet that owns it."""
    pod_name = pod_name or name("pod")
    container: dict[str, Any] = {
        "name": "main",
        "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
    }
    if requests or limits:
        container["resources"] = {
            k: v for k, v in (("requests", requests), ("limits", limits)) if v
        }
    if host_ports:
        container["ports"] = [
            {"containerPort": 80, "hostPort": p, "protocol": "TCP"} for p in host_ports
        ]
    spec: dict[str, Any] = {"containers": [container]}
    if init_containers:
        spec["initContainers"] = [
            {"name": f"init-{i}", "image": "busybox:1.36", "resources": resources}
            for i, resources in enumerate(init_containers)
        ]
    volumes = [
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
    if node_selector:
        spec["nodeSelector"] = node_selector
    affinity = _affinity(node_requirements, anti_requirements, node_terms, node_preferences)
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    metadata: dict[str, Any] = {"name": pod_name, "namespace": "default", "uid": f"uid-{pod_name}"}
    if labels:
        metadata["labels"] = labels
    if daemon_set:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": daemon_set,
                "uid": f"uid-{daemon_set}",
                "controller": True,
            }
        ]
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if conditions is not None:
        status["conditions"] = conditions
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def unschedulable_pod(pod_name: str | None = None, **options) -> dict:
    """test.UnschedulablePod: marked Unschedulable by kube-scheduler."""
    return pod_doc(pod_name, conditions=[UNSCHEDULABLE], **options)


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


def daemon_set(ds_name: str | None = None, **pod_options) -> dict:
    """test.DaemonSet: its pod template takes ``pod_doc``'s options."""
    template = pod_doc("template", **pod_options)
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


def node(
    node_name: str | None = None,
    *,
    labels: dict | None = None,
    allocatable: dict | None = None,
    taints: list[dict] | None = None,
) -> dict:
    """test.Node: a node Karpenter does not manage unless its labels say so."""
    node_name = node_name or name("node")
    all_labels = {HOSTNAME: node_name, **(labels or {})}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": all_labels},
        "spec": {},
        "status": {"allocatable": allocatable or {"cpu": "10", "memory": "10Gi", "pods": "110"}},
    }
    if taints:
        doc["spec"]["taints"] = taints
    return doc


def launched_node(node_name: str, instance_type: str, zone: str = "test-zone-1", **alloc) -> dict:
    """A node Karpenter launched in an earlier loop, registered and initialized."""
    return node(
        node_name,
        labels={
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
            INSTANCE_TYPE: instance_type,
            CAPACITY_TYPE: "spot",
            ZONE: zone,
        },
        allocatable=alloc or None,
    )


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
