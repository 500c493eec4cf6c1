"""A synthetic GPU cluster in snapshot form (CONTRACT section 1), for benchmarks and tests.

H100 nodes (p5.48xlarge, 8 GPUs each, published by ``gpu.nvidia.com``) across three zones of
us-west-2, some GPUs already allocated to running pods, a Karpenter NodePool that can launch
more, and pending training pods that ask for GPUs through ResourceClaimTemplates.
"""

from __future__ import annotations

import copy
import json
import random
import uuid
import zlib

import yaml

ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
DRIVER = "gpu.nvidia.com"
INSTANCE_TYPE = "p5.48xlarge"


def _gpu(index: int, node: str) -> dict:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "model": {"string": "H100"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "uuid": {"string": f"GPU-{zlib.crc32(f'{node}/{index}'.encode()):08x}-{index:04x}"},
            "driverVersion": {"version": "550.54.15"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index // 2:02x}"},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def _node(i: int) -> tuple[str, str]:
    return f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal", ZONES[i % len(ZONES)]


def synthetic_cluster(
    *,
    nodes: int = 2,
    gpus_per_node: int = 8,
    running_pods: int = 1,
    pending_pods: int = 2,
    gpus_per_pod: int = 1,
    namespace: str = "ml-training",
    instance_types: bool = True,
) -> list[dict]:
    docs: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"team": "research"}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "h100", "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "count": gpus_per_pod,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.attributes["{DRIVER}"]'
                                                '.model == "H100"'
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {
                "weight": 10,
                "template": {
                    "metadata": {"labels": {"workload": "training"}},
                    "spec": {
                        "requirements": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": [INSTANCE_TYPE],
                            },
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            },
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                    },
                },
                "limits": {"cpu": "10000"},
            },
        },
    ]
    if instance_types:
        docs.append(
            {
                "apiVersion": "dra-web.io/v1alpha1",
                "kind": "InstanceType",
                "metadata": {"name": INSTANCE_TYPE},
                "spec": {
                    "capacity": {"cpu": "192", "memory": "2000Gi", "pods": "110"},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "offerings": [
                        {"zone": z, "capacityType": "on-demand", "price": 98.32, "available": True}
                        for z in ZONES
                    ],
                    "dynamicResources": {
                        "resourceSliceTemplates": [
                            {
                                "driver": DRIVER,
                                "pool": {"name": f"{INSTANCE_TYPE}-gpus"},
                                "devices": [_gpu(g, "template") for g in range(gpus_per_node)],
                            }
                        ]
                    },
                },
            }
        )
    allocated: list[tuple[str, int]] = []
    for i in range(nodes):
        name, zone = _node(i)
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/arch": "amd64",
                        "kubernetes.io/os": "linux",
                        "topology.kubernetes.io/zone": zone,
                        "topology.kubernetes.io/region": "us-west-2",
                        "node.kubernetes.io/instance-type": INSTANCE_TYPE,
                    },
                },
                "status": {"allocatable": {"cpu": "191450m", "memory": "1980Gi", "pods": "110"}},
            }
        )
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}-slice"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [_gpu(g, name) for g in range(gpus_per_node)],
                },
            }
        )
    for p in range(running_pods):
        node, _ = _node(p % max(nodes, 1))
        if not nodes:
            break
        gpu = (p // nodes) % gpus_per_node
        allocated.append((node, gpu))
        pod = f"serve-{p}"
        claim = f"{pod}-gpu"
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": namespace},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                },
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpu",
                                    "driver": DRIVER,
                                    "pool": node,
                                    "device": f"gpu-{gpu}",
                                }
                            ]
                        },
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
                },
            }
        )
        docs.append(_pod(namespace, pod, p, node_name=node, claim_name=claim))
    for p in range(pending_pods):
        docs.append(_pod(namespace, f"train-{p}", p, template="h100"))
    return docs


def _pod(
    namespace: str,
    name: str,
    index: int,
    *,
    node_name: str | None = None,
    claim_name: str | None = None,
    template: str | None = None,
) -> dict:
    entry: dict = {"name": "gpu"}
    if claim_name:
        entry["resourceClaimName"] = claim_name
    else:
        entry["resourceClaimTemplateName"] = template
    spec: dict = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "requests": {"cpu": "8", "memory": "64Gi"},
                    "claims": [{"name": "gpu"}],
                },
            }
        ],
        "resourceClaims": [entry],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-11-30T10:{index // 60 % 60:02d}:{index % 60:02d}Z",
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
    node = "ip-10-0-9-9.us-west-2.compute.internal"
    docs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-training"}},
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node,
                "labels": {
                    "kubernetes.io/hostname": node,
                    "topology.kubernetes.io/zone": "us-west-2a",
                    "node.kubernetes.io/instance-type": INSTANCE_TYPE,
                },
            },
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110"}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"numa": {"int": i // 2}, "pcieRoot": {"string": "pci-0"}},
                    }
                    for i in range(gpus)
                ]
                + [
                    {
                        "name": f"gpu-x{j}",
                        "attributes": {
                            "numa": {"int": gpus // 2 + j},
                            "pcieRoot": {"string": "pci-1"},
                        },
                    }
                    for j in range(2)
                ],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "spread-gpus", "namespace": "ml-training"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count},
                            }
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
        docs.append(_pod("ml-training", f"allreduce-{p}", p, template="spread-gpus"))
    return docs
