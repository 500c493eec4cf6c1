"""Generated GPU clusters in snapshot form (docs/SNAPSHOT.md), the one generator of the tests
and the benchmarks; fixed seeds, so the same call gives the same documents.

For the tests:

* ``synthetic_cluster``: H100 nodes (p5.48xlarge, 8 GPUs each, published by
  ``gpu.nvidia.com``) across three zones of us-west-2, some GPUs already allocated to running
  pods, a Karpenter NodePool that can launch more, and pending training pods that ask for GPUs
  through a ResourceClaimTemplate;
* ``pathological_cluster``: a device search that only ends at its timeout (time limits,
  killed workers, database restarts);
* ``as_exported`` (as ``kubectl get -o yaml`` writes them), ``to_yaml``, ``to_json``.

The benchmark shapes:

* ``existing``: 5,000 existing H100 nodes x 8 GPUs, 1,000 pending pods; every 20th (5 %) asks
  for an A100 that no node has (no NodePool, so the failing pods fail on every node);
* ``nodeclaims``: 100 existing GPU nodes with 2 GPUs free each and 1,000 pending pods asking
  for 1 or 2 GPUs of one of five models; the other pods need about 170 new NodeClaims from a
  NodePool over 100 instance types (five GPU families x 1/2/4/8 GPUs x five CPU sizes, zones,
  spot and on-demand offerings), each with a GPU ResourceSlice template;
* ``busy``: 2,000 CPU nodes, all but 100 of them full, and 1,000 pending web pods (5 % asking
  more CPU than any node has): each pod passes the full nodes before it finds room;
  ``busy-selector``: the same nodes with room, but the pods select a node group only the last
  100 carry;
* ``upload``: a YAML snapshot of about 10 MB (the synthetic H100 cluster with running pods).

Run: .venv/bin/python bench/workloads.py existing|nodeclaims|upload [--out FILE] [--scale F]
writes the snapshot (JSON for the first two, YAML for the third) and prints its size.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import uuid
import zlib
from pathlib import Path

import yaml

SEED = 20261203
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
DRIVER = "gpu.nvidia.com"
PCIE = "resource.kubernetes.io/pcieRoot"
INSTANCE_TYPE = "p5.48xlarge"
NAMESPACE = "ml-training"
# family, GPU model, GPU memory, price of one GPU per hour
FAMILIES = (
    ("p5", "H100", "80Gi", 12.29),
    ("p4de", "A100", "80Gi", 5.12),
    ("g6e", "L40S", "48Gi", 1.86),
    ("g6", "L4", "24Gi", 0.80),
    ("g5", "A10G", "24Gi", 1.01),
)
GPU_COUNTS = (1, 2, 4, 8)
SIZES = ((8, 64), (16, 128), (32, 256), (48, 384), (96, 768))  # vCPU, GiB per GPU-node size


# --- building blocks ---------------------------------------------------------------------------


def namespace(name: str = NAMESPACE, labels: dict[str, str] | None = None) -> dict:
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def gpu_device_class() -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def gpu(index: int, owner: str, model: str, memory: str, product_name: str | None = None) -> dict:
    """GPU ``index`` of a node or instance type (``owner``): a stable uuid per owner and index;
    a product name makes the uuid carry the index too, as a driver publishing it does."""
    crc = zlib.crc32(f"{owner}/{index}".encode())
    attributes: dict = {"model": {"string": model}}
    if product_name:
        attributes["productName"] = {"string": product_name}
        attributes["uuid"] = {"string": f"GPU-{crc:08x}-{index:04x}"}
    else:
        attributes["uuid"] = {"string": f"GPU-{crc:08x}"}
    attributes["driverVersion"] = {"version": "550.54.15"}
    attributes[PCIE] = {"string": f"pci0000:{index // 2:02x}"}
    attributes["index"] = {"int": index}
    return {
        "name": f"gpu-{index}",
        "attributes": attributes,
        "capacity": {"memory": {"value": memory}},
    }


def h100(index: int, owner: str) -> dict:
    return gpu(index, owner, "H100", "80Gi", "NVIDIA H100 80GB HBM3")


def gpu_node_pool(requirements: list[dict], cpu_limit: str) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "weight": 10,
            "template": {
                "metadata": {"labels": {"workload": "training"}},
                "spec": {
                    "requirements": requirements,
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                },
            },
            "limits": {"cpu": cpu_limit},
        },
    }


def instance_type(
    name: str,
    capacity: dict[str, str],
    requirements: list[dict],
    offerings: list[dict],
    devices: list[dict],
) -> dict:
    """An InstanceType whose nodes publish ``devices`` in one GPU ResourceSlice."""
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {
            "capacity": capacity,
            "requirements": requirements,
            "offerings": offerings,
            "dynamicResources": {
                "resourceSliceTemplates": [
                    {"driver": DRIVER, "pool": {"name": f"{name}-gpus"}, "devices": devices}
                ]
            },
        },
    }


def requirement(key: str, *values: str) -> dict:
    return {"key": key, "operator": "In", "values": list(values)}


def linux_amd64() -> list[dict]:
    return [requirement("kubernetes.io/arch", "amd64"), requirement("kubernetes.io/os", "linux")]


def node(
    name: str,
    zone: str,
    instance_type_name: str,
    allocatable: dict[str, str],
    *,
    linux_amd64: bool = True,
    region: str | None = None,
) -> dict:
    labels = {"kubernetes.io/hostname": name}
    if linux_amd64:
        labels |= {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}
    labels["topology.kubernetes.io/zone"] = zone
    if region:
        labels["topology.kubernetes.io/region"] = region
    labels["node.kubernetes.io/instance-type"] = instance_type_name
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable},
    }


def node_slice(slice_name: str, node_name: str, devices: list[dict]) -> dict:
    """The one ResourceSlice of a node's GPU pool (named after the node)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu_claim_template(name: str, model: str, count: int) -> dict:
    """A ResourceClaimTemplate asking for ``count`` GPUs of ``model``."""
    selector = f'device.attributes["{DRIVER}"].model == "{model}"'
    exactly = {
        "deviceClassName": DRIVER,
        "count": count,
        "selectors": [{"cel": {"expression": selector}}],
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def allocated_claim(name: str, pod_name: str, node_name: str, device: str, *, pinned: bool) -> dict:
    """A claim for one GPU, allocated ``device`` of the node's pool and reserved for the pod;
    ``pinned``: its allocation carries the node selector of that node, as the scheduler
    writes it."""
    allocation: dict = {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}]
        }
    }
    if pinned:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
        "status": {
            "allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}],
        },
    }


def training_pod(
    name: str,
    index: int,
    *,
    claim: dict[str, str],
    cpu: int = 8,
    memory_gi: int = 64,
    node_name: str | None = None,
) -> dict:
    """A PyTorch pod using the claim ``claim`` (``{"resourceClaimName": ...}`` or
    ``{"resourceClaimTemplateName": ...}``), created ``index`` seconds after 10:00; running
    when bound to ``node_name``."""
    spec: dict = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "requests": {"cpu": str(cpu), "memory": f"{memory_gi}Gi"},
                    "claims": [{"name": "gpu"}],
                },
            }
        ],
        "resourceClaims": [{"name": "gpu", **claim}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-11-30T{10 + index // 3600:02d}:"
            f"{index // 60 % 60:02d}:{index % 60:02d}Z",
        },
        "spec": spec,
        "status": {"phase": "Running"}
        if node_name
        # kube-scheduler marked it unschedulable: Karpenter provisions only for such pods.
        else {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


# --- the tests' cluster ------------------------------------------------------------------------


def _synthetic_node(i: int) -> tuple[str, str]:
    return f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal", ZONES[i % len(ZONES)]


def synthetic_cluster(
    *,
    nodes: int = 2,
    gpus_per_node: int = 8,
    running_pods: int = 1,
    pending_pods: int = 2,
    gpus_per_pod: int = 1,
    instance_types: bool = True,
) -> list[dict]:
    """``nodes`` H100 nodes, ``running_pods`` pods holding a GPU each (round robin over the
    nodes), ``pending_pods`` pods asking for ``gpus_per_pod`` H100s, and a NodePool that can
    launch p5.48xlarge nodes (whose InstanceType is left out with ``instance_types=False``)."""
    docs: list[dict] = [
        namespace(NAMESPACE, {"team": "research"}),
        gpu_device_class(),
        gpu_claim_template("h100", "H100", gpus_per_pod),
        gpu_node_pool(
            [
                requirement("node.kubernetes.io/instance-type", INSTANCE_TYPE),
                requirement("karpenter.sh/capacity-type", "on-demand"),
            ],
            "10000",
        ),
    ]
    if instance_types:
        docs.append(
            instance_type(
                INSTANCE_TYPE,
                {"cpu": "192", "memory": "2000Gi", "pods": "110"},
                linux_amd64(),
                [
                    {"zone": z, "capacityType": "on-demand", "price": 98.32, "available": True}
                    for z in ZONES
                ],
                [h100(g, "template") for g in range(gpus_per_node)],
            )
        )
    for i in range(nodes):
        name, zone = _synthetic_node(i)
        allocatable = {"cpu": "191450m", "memory": "1980Gi", "pods": "110"}
        docs.append(node(name, zone, INSTANCE_TYPE, allocatable, region="us-west-2"))
        devices = [h100(g, name) for g in range(gpus_per_node)]
        docs.append(node_slice(f"{name}-{DRIVER}-slice", name, devices))
    for p in range(running_pods if nodes else 0):
        node_name, _ = _synthetic_node(p % nodes)
        device = f"gpu-{(p // nodes) % gpus_per_node}"
        pod, claim = f"serve-{p}", f"serve-{p}-gpu"
        docs.append(allocated_claim(claim, pod, node_name, device, pinned=True))
        docs.append(training_pod(pod, p, claim={"resourceClaimName": claim}, node_name=node_name))
    for p in range(pending_pods):
        docs.append(training_pod(f"train-{p}", p, claim={"resourceClaimTemplateName": "h100"}))
    return docs


def pathological_cluster(*, gpus: int = 60, count: int | None = None, pods: int = 1) -> list[dict]:
    """A device search that cannot succeed and is only found out at its last step.

    One node with ``gpus`` GPUs on one PCIe root, two per NUMA node, plus two GPUs on a second
    root with two more NUMA nodes; each pod asks for ``count`` GPUs on distinct NUMA nodes
    (distinctAttribute) sharing a PCIe root (matchAttribute), one more than the first root has
    NUMA nodes. Each constraint alone is satisfiable by counting (there are enough NUMA values
    and enough GPUs on the first root), so no feasibility check refuses it up front; together
    they fail only at the last slot after every choice of one GPU per NUMA node of the first
    root: 2**(gpus/2) leaves, so the DFS runs until its timeout. Used to exercise time limits,
    killed workers and database restarts.
    """
    count = count if count is not None else gpus // 2 + 1  # one more than NUMA nodes
    node_name = "ip-10-0-9-9.us-west-2.compute.internal"
    first_root = [
        {
            "name": f"gpu-{i}",
            "attributes": {"numa": {"int": i // 2}, "pcieRoot": {"string": "pci-0"}},
        }
        for i in range(gpus)
    ]
    second_root = [
        {
            "name": f"gpu-x{j}",
            "attributes": {"numa": {"int": gpus // 2 + j}, "pcieRoot": {"string": "pci-1"}},
        }
        for j in range(2)
    ]
    docs: list[dict] = [
        namespace(),
        node(
            node_name,
            "us-west-2a",
            INSTANCE_TYPE,
            {"cpu": "192", "memory": "2000Gi", "pods": "110"},
            linux_amd64=False,
        ),
        gpu_device_class(),
        node_slice(f"{node_name}-{DRIVER}", node_name, first_root + second_root),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "spread-gpus", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}
                        ],
                        "constraints": [
                            {"requests": ["gpu"], "distinctAttribute": "numa"},
                            {"requests": ["gpu"], "matchAttribute": "pcieRoot"},
                        ],
                    }
                }
            },
        },
    ]
    for p in range(pods):
        docs.append(
            training_pod(f"allreduce-{p}", p, claim={"resourceClaimTemplateName": "spread-gpus"})
        )
    return docs


def as_exported(docs: list[dict], *, seed: int = 0) -> list[dict]:
    """The documents as ``kubectl get -o yaml`` exports them: random UIDs (leading zeros
    included), resourceVersion, creationTimestamp and managedFields, which is what a real
    upload is made of (and what a YAML reader must not be slowed down by)."""
    rnd = random.Random(seed)
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.UUID(int=rnd.getrandbits(128), version=4)))
        meta["resourceVersion"] = str(rnd.randint(1_000, 99_999_999))
        meta["creationTimestamp"] = "2026-12-01T10:00:00Z"
        meta["managedFields"] = [
            {
                "apiVersion": doc.get("apiVersion"),
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}}},
                    "f:status": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}},
                },
                "manager": "kube-controller-manager",
                "operation": "Update",
                "time": "2026-12-01T10:00:00Z",
            }
        ]
        out.append(doc)
    return out


def to_yaml(docs: list[dict]) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump_all(docs, Dumper=dumper, sort_keys=False)


def to_json(docs: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


# --- (a) 5,000 existing nodes -----------------------------------------------------------------


def existing_nodes(
    nodes: int = 5000, pods: int = 1000, missing_every: int = 20, *, node_pool: bool = False
) -> list[dict]:
    """The synthetic H100 cluster; every ``missing_every``-th pending pod asks for an A100.
    Without a NodePool (``node_pool=False``) the A100 pods fail on the existing nodes alone
    (no NodeClaims)."""
    docs = synthetic_cluster(nodes=nodes, gpus_per_node=8, running_pods=0, pending_pods=pods)
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    a100 = copy.deepcopy(template)
    a100["metadata"]["name"] = "a100"
    exactly = a100["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["selectors"][0]["cel"]["expression"] = (
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'
    )
    docs.append(a100)
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"].startswith("train-"):
            index = int(d["metadata"]["name"].removeprefix("train-"))
            if index % missing_every == missing_every - 1:
                d["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "a100"
    if node_pool:
        return docs
    return [d for d in docs if d["kind"] not in ("NodePool", "InstanceType")]


def held_devices(nodes: int = 1000, pods: int = 1000, missing_every: int = 20) -> list[dict]:
    """H100 nodes x 8 GPUs, three GPUs of each held by three running pods' claims (every
    node's holders differ); every ``missing_every``-th pending pod asks for all 8 GPUs of a
    node, which no node has free: it fails on every node, each refusing it with its own
    holders. No NodePool."""
    docs = synthetic_cluster(
        nodes=nodes, gpus_per_node=8, running_pods=3 * nodes, pending_pods=pods
    )
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    whole = copy.deepcopy(template)
    whole["metadata"]["name"] = "h100-x8"
    whole["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 8
    docs.append(whole)
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"].startswith("train-"):
            index = int(d["metadata"]["name"].removeprefix("train-"))
            if index % missing_every == missing_every - 1:
                d["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "h100-x8"
    return [d for d in docs if d["kind"] not in ("NodePool", "InstanceType")]


# --- (b) new NodeClaims from 100 instance types -----------------------------------------------


def _service_pod(name: str, index: int, cpu: str, memory: str, node_name: str | None) -> dict:
    """A web service's pod without devices: running on ``node_name``, else pending."""
    pod = training_pod(name, index, claim={}, node_name=node_name)
    pod["metadata"]["labels"] = {"app": "storefront"}
    spec = pod["spec"]
    del spec["resourceClaims"]
    spec["containers"][0]["image"] = "public.ecr.aws/nginx/nginx:1.27"
    spec["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    return pod


def busy_nodes(
    nodes: int = 2000, pods: int = 1000, failing_every: int = 20, *, selector: bool = False
) -> list[dict]:
    """``nodes`` m7i.2xlarge nodes (8 vCPU, 32 GiB) of which all but 100 run a pod using
    7 vCPU; ``pods`` pending web pods asking 500m / 1 GiB, every ``failing_every``-th asking
    16 vCPU, more than any node has. Each pending pod passes the full nodes before it finds
    room: thousands of refusals per placed pod, words read only for the failing ones.
    ``selector``: the nodes are not full, but all but the last 100 belong to another node
    group than the one the pods select (refused by their requirements instead)."""
    docs: list[dict] = [namespace()]
    free = max(nodes - 100, 0)
    for i in range(nodes):
        name = f"ip-10-2-{i // 250}-{i % 250}.us-west-2.compute.internal"
        allocatable = {"cpu": "7910m", "memory": "31Gi", "pods": "58"}
        docs.append(node(name, ZONES[i % 3], "m7i.2xlarge", allocatable))
        if selector:
            group = "batch" if i < free else "storefront"
            docs[-1]["metadata"]["labels"]["example.com/node-group"] = group
        elif i < free:
            docs.append(_service_pod(f"batch-{i}", i, "7", "8Gi", name))
    for j in range(pods):
        failing = failing_every and j % failing_every == failing_every - 1
        cpu = "16" if failing else "500m"
        docs.append(_service_pod(f"storefront-{j}", nodes + j, cpu, "1Gi", None))
        if selector:
            docs[-1]["spec"]["nodeSelector"] = {"example.com/node-group": "storefront"}
    return docs


def _instance_types(rng: random.Random) -> list[dict]:
    out = []
    for family, model, memory, gpu_price in FAMILIES:
        for gpus in GPU_COUNTS:
            for s, (cpu, mem) in enumerate(SIZES):
                name = f"{family}.{gpus}g{s}x"
                price = round(gpus * gpu_price + cpu * 0.04 + rng.uniform(0, 0.05), 3)
                offerings = []
                for zone in ZONES:
                    for capacity_type, factor in (("on-demand", 1.0), ("spot", 0.4)):
                        offerings.append(
                            {
                                "zone": zone,
                                "capacityType": capacity_type,
                                "price": round(price * factor * rng.uniform(0.95, 1.05), 3),
                                "available": rng.random() > 0.1,
                            }
                        )
                out.append(
                    instance_type(
                        name,
                        {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"},
                        [*linux_amd64(), requirement("karpenter.k8s.aws/instance-family", family)],
                        offerings,
                        [gpu(g, name, model, memory) for g in range(gpus)],
                    )
                )
    return out


def new_nodeclaims(
    nodes: int = 100, pods: int = 1000, seed: int = SEED, *, failing_every: int = 0
) -> list[dict]:
    """With ``failing_every`` = N, every N-th pending pod asks for 16 GPUs of its model, more
    than any instance type has (8 at most): it fails on every node and NodeClaim."""
    rng = random.Random(seed)
    docs: list[dict] = [
        namespace(),
        gpu_device_class(),
        gpu_node_pool(
            [
                requirement("karpenter.sh/capacity-type", "on-demand", "spot"),
                requirement("kubernetes.io/arch", "amd64"),
            ],
            "100000",
        ),
    ]
    docs += _instance_types(rng)
    for _family, model, _memory, _price in FAMILIES:
        for count in (1, 2, 16) if failing_every else (1, 2):
            docs.append(gpu_claim_template(f"{model.lower()}-x{count}", model, count))
    # Existing nodes: 8 GPUs of one family each, 6 of them taken by running pods.
    running = 0
    for n in range(nodes):
        family, model, memory, _ = FAMILIES[n % len(FAMILIES)]
        name = f"ip-10-1-{n // 250}-{n % 250}.us-west-2.compute.internal"
        allocatable = {"cpu": "95", "memory": "760Gi", "pods": "110"}
        docs.append(node(name, ZONES[n % 3], f"{family}.8g4x", allocatable))
        docs.append(
            node_slice(f"{name}-gpus", name, [gpu(g, name, model, memory) for g in range(8)])
        )
        for g in range(6):
            pod, claim = f"serve-{running}", f"serve-{running}-gpu"
            docs.append(allocated_claim(claim, pod, name, f"gpu-{g}", pinned=False))
            docs.append(
                training_pod(
                    pod,
                    running,
                    cpu=4,
                    memory_gi=32,
                    claim={"resourceClaimName": claim},
                    node_name=name,
                )
            )
            running += 1
    weights = (0.3, 0.25, 0.2, 0.15, 0.1)
    for p in range(pods):
        _family, model, _memory, _ = rng.choices(FAMILIES, weights=weights)[0]
        count = 2 if rng.random() < 0.5 else 1
        cpu = rng.choice((2, 4, 6, 8, 12))
        if failing_every and p % failing_every == failing_every - 1:
            count = 16
        template = f"{model.lower()}-x{count}"
        docs.append(
            training_pod(
                f"train-{p}",
                p,
                cpu=cpu,
                memory_gi=cpu * 6,
                claim={"resourceClaimTemplateName": template},
            )
        )
    return docs


# --- (d) Karpenter's scheduling benchmark -------------------------------------------------------
# The pod mix and instance types of Karpenter's scheduling_benchmark_test.go (its
# makeDiversePods and the fake cloud provider's InstanceTypes(400)), which places 1,000 pods
# onto about 200 new nodes. Its random choices come from Go's math/rand (seed 42); these come
# from Python's with the same choices and weights, so the mix is the same, not the very pods.
# The fake instance types' labels "size", "special" and "integer" are left out: no pod of the
# benchmark selects them.

KARPENTER_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
KARPENTER_CPU_MILLIS = (100, 250, 500, 1000, 1500)
KARPENTER_MEMORY_MI = (100, 256, 512, 1024, 2048, 4096)
KARPENTER_LABEL_VALUES = ("a", "b", "c", "d", "e", "f", "g")
KARPENTER_NAMESPACE = "default"


def karpenter_instance_types(total: int = 400, *, gpus: bool = False) -> list[dict]:
    """``fake-it-0`` ... : i+1 vCPUs, 2(i+1) GiB, 10(i+1) pods, less Karpenter's fake
    kube-reserved (100m, 10Mi); spot and on-demand in test-zone-1/2, on-demand in test-zone-3,
    priced by resources as the fake does. ``gpus``: each also publishes 1 to 8 L4 GPUs."""
    out = []
    for i in range(total):
        cpu, memory_gi = i + 1, (i + 1) * 2
        price = round(0.1 * cpu + 0.1 * memory_gi * 2**30 / 1e9, 6)
        offerings = [
            {"zone": zone, "capacityType": capacity_type, "price": price, "available": True}
            for capacity_type, zones in (
                ("spot", KARPENTER_ZONES[:2]),
                ("on-demand", KARPENTER_ZONES),
            )
            for zone in zones
        ]
        name = f"fake-it-{i}"
        spec: dict = {
            "capacity": {
                "cpu": f"{cpu * 1000 - 100}m",
                "memory": f"{memory_gi * 1024 - 10}Mi",
                "pods": str((i + 1) * 10),
            },
            "requirements": [
                requirement("kubernetes.io/arch", "amd64"),
                requirement("kubernetes.io/os", "darwin", "linux", "windows"),
            ],
            "offerings": offerings,
        }
        if gpus:
            devices = [gpu(g, name, "L4", "24Gi") for g in range(1 + i % 8)]
            spec["dynamicResources"] = {
                "resourceSliceTemplates": [
                    {"driver": DRIVER, "pool": {"name": f"{name}-gpus"}, "devices": devices}
                ]
            }
        out.append(
            {
                "apiVersion": "dra-web.io/v1alpha1",
                "kind": "InstanceType",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return out


def _karpenter_pod(
    rng: random.Random,
    index: int,
    labels: dict[str, str],
    affinity: dict | None = None,
    spread: dict | None = None,
    claim: str | None = None,
    cpu_millis: int | None = None,
) -> dict:
    cpu = cpu_millis if cpu_millis is not None else rng.choice(KARPENTER_CPU_MILLIS)
    container: dict = {
        "name": "app",
        "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
        "resources": {
            "requests": {"cpu": f"{cpu}m", "memory": f"{rng.choice(KARPENTER_MEMORY_MI)}Mi"}
        },
    }
    spec: dict = {"containers": [container]}
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = [spread]
    if claim:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim}]
    name = f"pod-{index:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": KARPENTER_NAMESPACE,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": f"2026-11-30T10:{index // 60 % 60:02d}:{index % 60:02d}Z",
        },
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def _random_label(rng: random.Random, key: str = "my-label") -> dict[str, str]:
    return {key: rng.choice(KARPENTER_LABEL_VALUES)}


def karpenter_benchmark(
    pods: int = 1000,
    *,
    topology: bool = True,
    dra: bool = False,
    failing_every: int = 0,
    seed: int = 42,
) -> list[dict]:
    """Karpenter's benchmark cluster: no nodes, one NodePool without requirements over the 400
    fake instance types, and ``pods`` pending pods of makeDiversePods' five groups (generic,
    zone spread, hostname spread, zone self-affinity, hostname anti-affinity; ``topology=False``:
    all generic, as its makeGenericPods). ``dra``: the generic pods also ask for one L4 GPU
    each through a ResourceClaimTemplate. ``failing_every`` = N: every N-th generic pod asks
    for more than any instance type has (1,000 vCPUs; with ``dra``, 16 GPUs instead)."""
    rng = random.Random(seed)
    node_pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {
                        "group": "karpenter.test.sh",
                        "kind": "TestNodeClass",
                        "name": "default",
                    },
                }
            },
            "limits": {"cpu": "10000000", "memory": "10000000Gi"},
        },
    }
    docs: list[dict] = [namespace(KARPENTER_NAMESPACE), node_pool]
    docs += karpenter_instance_types(gpus=dra)
    if dra:
        docs.append(gpu_device_class())
        for count in (1, 16):
            template = gpu_claim_template(f"l4-x{count}", "L4", count)
            template["metadata"]["namespace"] = KARPENTER_NAMESPACE
            docs.append(template)
    group = pods // 5 if topology else 0
    out: list[dict] = []
    generic = 0

    def add_generic() -> None:
        nonlocal generic
        failing = failing_every and generic % failing_every == failing_every - 1
        claim = None
        cpu = None
        if dra:
            claim = "l4-x16" if failing else "l4-x1"
        elif failing:
            cpu = 1_000_000
        out.append(_karpenter_pod(rng, len(out), _random_label(rng), claim=claim, cpu_millis=cpu))
        generic += 1

    for _ in range(group):
        add_generic()
    for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname"):
        for _ in range(group):
            labels = _random_label(rng)
            spread = {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": _random_label(rng)},
            }
            out.append(_karpenter_pod(rng, len(out), labels, spread=spread))
    for _ in range(group):
        labels = _random_label(rng, "my-affininity")
        term = {
            "labelSelector": {"matchLabels": labels},
            "topologyKey": "topology.kubernetes.io/zone",
        }
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        out.append(_karpenter_pod(rng, len(out), labels, affinity=affinity))
    for _ in range(group):
        labels = {"app": "nginx"}
        term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        out.append(_karpenter_pod(rng, len(out), labels, affinity=affinity))
    while len(out) < pods:
        add_generic()
    return docs + out


def karpenter_preferences(pods: int = 4000, *, seed: int = 42) -> list[dict]:
    """Karpenter's preference benchmark (makePreferencePods): the same NodePool and 400
    instance types, and ``pods`` nginx pods preferring test-zone-1 (weight 1) and two
    preferred anti-affinities to each other: per zone (weight 10, which cannot hold past the
    third pod) and per hostname (weight 1). Every pod past the third is placed by relaxing."""
    rng = random.Random(seed)
    docs = karpenter_benchmark(0, topology=False, seed=seed)
    labels = {"app": "nginx"}

    def anti(weight: int, key: str) -> dict:
        term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
        return {"weight": weight, "podAffinityTerm": term}

    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            requirement("topology.kubernetes.io/zone", "test-zone-1")
                        ]
                    },
                }
            ]
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                anti(10, "topology.kubernetes.io/zone"),
                anti(1, "kubernetes.io/hostname"),
            ]
        },
    }
    return docs + [
        _karpenter_pod(rng, i, dict(labels), affinity=json.loads(json.dumps(affinity)))
        for i in range(pods)
    ]


def anti_affinity_past_limits(
    pods: int = 5000, node_claims: int = 1000, seed: int = 7
) -> list[dict]:
    """A Deployment scaled past its NodePool's limits: ``pods`` nginx replicas (Karpenter's
    benchmark sizes) that must not share a hostname, on Karpenter's benchmark NodePool and 400
    instance types with a cpu limit for ``node_claims`` NodeClaims (each is charged at its
    largest instance type, 400 vCPUs). The rest fail on every NodeClaim (each holds a replica)
    and on the NodePool (its limit): one cause for thousands of targets and pods."""
    docs = karpenter_benchmark(0, topology=False, seed=seed)
    for doc in docs:
        if doc["kind"] == "NodePool":
            doc["spec"]["limits"] = {"cpu": str(400 * node_claims)}
    rng = random.Random(seed)
    labels = {"app": "nginx"}
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return docs + [
        _karpenter_pod(rng, i, dict(labels), affinity=json.loads(json.dumps(affinity)))
        for i in range(pods)
    ]


# --- (c) a 10 MB YAML upload ------------------------------------------------------------------


def upload_yaml(megabytes: float = 10.0) -> str:
    # About 8.5 kB of YAML per node with 8 GPUs and 4 running pods (and their claims).
    nodes = max(1, int(megabytes * 1e6 / 8500))
    pending = max(10, nodes // 6)
    docs = synthetic_cluster(
        nodes=nodes, gpus_per_node=8, running_pods=nodes * 4, pending_pods=pending
    )
    return to_yaml(docs)


# Karpenter's benchmark shapes: (topology, dra, failing_every).
KARPENTER_SHAPES = {
    "karpenter": (True, False, 0),
    "karpenter-failing": (True, False, 10),
    "karpenter-generic": (False, False, 0),
    "karpenter-generic-failing": (False, False, 20),
    "karpenter-dra": (True, True, 0),
    "karpenter-dra-failing": (True, True, 10),
}
KINDS = (
    "existing",
    "existing-yaml",
    "held",
    "busy",
    "busy-selector",
    "nodeclaims",
    "nodeclaims-failing",
    "upload",
    *KARPENTER_SHAPES,
    "karpenter-preferences",
    "anti-affinity-limits",
)


def documents(kind: str, scale: float = 1.0) -> list[dict]:
    """The snapshot documents of a benchmark shape (not ``upload``, which is YAML text)."""
    if kind in ("existing", "existing-yaml"):
        return existing_nodes(int(5000 * scale), int(1000 * scale))
    if kind == "held":
        return held_devices(int(1000 * scale), int(1000 * scale))
    if kind in ("busy", "busy-selector"):
        return busy_nodes(int(2000 * scale), int(1000 * scale), selector=kind == "busy-selector")
    if kind == "nodeclaims":
        return new_nodeclaims(int(100 * scale), int(1000 * scale))
    if kind == "nodeclaims-failing":
        return new_nodeclaims(int(100 * scale), int(1000 * scale), failing_every=20)
    if kind in KARPENTER_SHAPES:
        topology, dra, failing_every = KARPENTER_SHAPES[kind]
        return karpenter_benchmark(
            int(1000 * scale), topology=topology, dra=dra, failing_every=failing_every
        )
    if kind == "karpenter-preferences":
        return karpenter_preferences(int(4000 * scale))
    if kind == "anti-affinity-limits":
        return anti_affinity_past_limits(int(5000 * scale), max(1, int(1000 * scale)))
    raise SystemExit(f"unknown workload {kind!r}")


# Shapes written as YAML streams (the others as JSON).
YAML_KINDS = ("upload", "existing-yaml")


def suffix(kind: str) -> str:
    return ".yaml" if kind in YAML_KINDS else ".json"


def write(kind: str, path: Path, scale: float = 1.0) -> int:
    if kind == "upload":
        text = upload_yaml(10.0 * scale)
    elif kind in YAML_KINDS:
        text = to_yaml(documents(kind, scale))
    else:
        text = json.dumps(documents(kind, scale))
    path.write_text(text)
    return len(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    out = args.out or Path(f"/tmp/bench-{args.kind}{suffix(args.kind)}")
    size = write(args.kind, out, args.scale)
    print(f"{out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
