"""Generated clusters of the shapes issue 11 is judged on (fixed seeds, CONTRACT section 1 form).

* ``existing``: 5,000 existing H100 nodes x 8 GPUs, 1,000 pending pods; every 20th (5 %) asks
  for an A100 that no node has (no NodePool, so the failing pods fail on every node);
* ``nodeclaims``: 100 existing GPU nodes with 2 GPUs free each and 1,000 pending pods asking
  for 1 or 2 GPUs of one of five models; the other pods need about 170 new NodeClaims from a
  NodePool over 100 instance types (five GPU families x 1/2/4/8 GPUs x five CPU sizes, zones,
  spot and on-demand offerings), each with a GPU ResourceSlice template;
* ``upload``: a YAML snapshot of about 10 MB (the synthetic H100 cluster with running pods).

Run: .venv/bin/python bench/workloads.py existing|nodeclaims|upload [--out FILE] [--scale F]
writes the snapshot (JSON for the first two, YAML for the third) and prints its size.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dra_web.snapshots.synthetic import synthetic_cluster, to_yaml  # noqa: E402

SEED = 20261203
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
DRIVER = "gpu.nvidia.com"
PCIE = "resource.kubernetes.io/pcieRoot"
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


# --- (a) 5,000 existing nodes -----------------------------------------------------------------


def existing_nodes(nodes: int = 5000, pods: int = 1000, missing_every: int = 20) -> list[dict]:
    """The synthetic H100 cluster; every ``missing_every``-th pending pod asks for an A100."""
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
    # Without a NodePool the A100 pods fail on the existing nodes alone (no NodeClaims).
    return [d for d in docs if d["kind"] not in ("NodePool", "InstanceType")]


# --- (b) new NodeClaims from 100 instance types -----------------------------------------------


def _gpu(model: str, memory: str, index: int, owner: str) -> dict:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "model": {"string": model},
            "uuid": {"string": f"GPU-{zlib.crc32(f'{owner}/{index}'.encode()):08x}"},
            "driverVersion": {"version": "550.54.15"},
            PCIE: {"string": f"pci0000:{index // 2:02x}"},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": memory}},
    }


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
                    {
                        "apiVersion": "dra-web.io/v1alpha1",
                        "kind": "InstanceType",
                        "metadata": {"name": name},
                        "spec": {
                            "capacity": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"},
                            "requirements": [
                                {
                                    "key": "kubernetes.io/arch",
                                    "operator": "In",
                                    "values": ["amd64"],
                                },
                                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                {
                                    "key": "karpenter.k8s.aws/instance-family",
                                    "operator": "In",
                                    "values": [family],
                                },
                            ],
                            "offerings": offerings,
                            "dynamicResources": {
                                "resourceSliceTemplates": [
                                    {
                                        "driver": DRIVER,
                                        "pool": {"name": f"{name}-gpus"},
                                        "devices": [
                                            _gpu(model, memory, g, name) for g in range(gpus)
                                        ],
                                    }
                                ]
                            },
                        },
                    }
                )
    return out


def _template(model: str, count: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"{model.lower()}-x{count}", "namespace": "ml-training"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "count": count,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.attributes["{DRIVER}"]'
                                            f'.model == "{model}"'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }


def _pod(name: str, index: int, cpu: int, memory: int, template: str, **extra) -> dict:
    spec: dict = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "requests": {"cpu": str(cpu), "memory": f"{memory}Gi"},
                    "claims": [{"name": "gpu"}],
                },
            }
        ],
        "resourceClaims": [{"name": "gpu", **extra}]
        if extra
        else [{"name": "gpu", "resourceClaimTemplateName": template}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml-training",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-11-30T{10 + index // 3600:02d}:"
            f"{index // 60 % 60:02d}:{index % 60:02d}Z",
        },
        "spec": spec,
        # kube-scheduler marked it unschedulable: Karpenter provisions only for such pods.
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def new_nodeclaims(nodes: int = 100, pods: int = 1000, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    docs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-training"}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
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
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand", "spot"],
                            },
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                    },
                },
                "limits": {"cpu": "100000"},
            },
        },
    ]
    docs += _instance_types(rng)
    for _family, model, _memory, _price in FAMILIES:
        for count in (1, 2):
            docs.append(_template(model, count))
    # Existing nodes: 8 GPUs of one family each, 6 of them taken by running pods.
    running = 0
    for n in range(nodes):
        family, model, memory, _ = FAMILIES[n % len(FAMILIES)]
        name = f"ip-10-1-{n // 250}-{n % 250}.us-west-2.compute.internal"
        it = f"{family}.8g4x"
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
                        "topology.kubernetes.io/zone": ZONES[n % 3],
                        "node.kubernetes.io/instance-type": it,
                    },
                },
                "status": {"allocatable": {"cpu": "95", "memory": "760Gi", "pods": "110"}},
            }
        )
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [_gpu(model, memory, g, name) for g in range(8)],
                },
            }
        )
        for g in range(6):
            pod = f"serve-{running}"
            claim = f"{pod}-gpu"
            docs.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": claim, "namespace": "ml-training"},
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
                                        "pool": name,
                                        "device": f"gpu-{g}",
                                    }
                                ]
                            }
                        },
                        "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
                    },
                }
            )
            bound = _pod(pod, running, 4, 32, "", resourceClaimName=claim)
            bound["spec"]["nodeName"] = name
            bound["status"] = {"phase": "Running"}
            docs.append(bound)
            running += 1
    weights = (0.3, 0.25, 0.2, 0.15, 0.1)
    for p in range(pods):
        _family, model, _memory, _ = rng.choices(FAMILIES, weights=weights)[0]
        count = 2 if rng.random() < 0.5 else 1
        cpu = rng.choice((2, 4, 6, 8, 12))
        docs.append(_pod(f"train-{p}", p, cpu, cpu * 6, f"{model.lower()}-x{count}"))
    return docs


# --- (c) a 10 MB YAML upload ------------------------------------------------------------------


def upload_yaml(megabytes: float = 10.0) -> str:
    # About 8.5 kB of YAML per node with 8 GPUs and 4 running pods (and their claims).
    nodes = max(1, int(megabytes * 1e6 / 8500))
    pending = max(10, nodes // 6)
    docs = synthetic_cluster(
        nodes=nodes, gpus_per_node=8, running_pods=nodes * 4, pending_pods=pending
    )
    return to_yaml(docs)


def write(kind: str, path: Path, scale: float = 1.0) -> int:
    if kind == "existing":
        text = json.dumps(existing_nodes(int(5000 * scale), int(1000 * scale)))
    elif kind == "nodeclaims":
        text = json.dumps(new_nodeclaims(int(100 * scale), int(1000 * scale)))
    elif kind == "upload":
        text = upload_yaml(10.0 * scale)
    else:
        raise SystemExit(f"unknown workload {kind!r}")
    path.write_text(text)
    return len(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["existing", "nodeclaims", "upload"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    suffix = ".yaml" if args.kind == "upload" else ".json"
    out = args.out or Path(f"/tmp/bench-{args.kind}{suffix}")
    size = write(args.kind, out, args.scale)
    print(f"{out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
