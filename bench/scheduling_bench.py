"""Throughput of the provisioning loop on a scheduler_perf-like workload.

500 existing nodes x 10 GPUs (one node-local pool per node), 2,500 pending pods, each with one
template claim. Variant ``single``: 1 GPU per claim (every pod fits: 5,000 GPUs). Variant
``pcie``: 5 GPUs per claim sharing ``resource.kubernetes.io/pcieRoot`` (MatchAttribute): two per
node fit, the other 1,500 pods fail on every node and are retried once. Targets on a 2-core
machine: >= 250 pods/s (single) and >= 110 pods/s (pcie).

Run: .venv/bin/python bench/scheduling_bench.py [single|pcie|all] [--profile] [--nodes N]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allocator.model import (  # noqa: E402
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    ExactDeviceRequest,
    Namespace,
    Node,
    Pod,
    PodResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
    Snapshot,
    Version,
)
from allocator.quantity import Quantity  # noqa: E402
from allocator.simulation import SimulationOptions, simulate  # noqa: E402

DRIVER = "gpu.nvidia.com"
PCIE = "resource.kubernetes.io/pcieRoot"
TARGETS = {"single": 250.0, "pcie": 110.0}


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def build(variant: str, nodes: int = 500, gpus: int = 10, pods: int = 2500) -> Snapshot:
    snap = Snapshot()
    snap.namespaces["bench"] = Namespace("bench")
    snap.device_classes["gpu.nvidia.com"] = DeviceClass(
        "gpu.nvidia.com", [DeviceSelector(f'device.driver == "{DRIVER}"')]
    )
    for n in range(nodes):
        name = f"node-{n:04d}"
        snap.nodes[name] = Node(
            name=name,
            labels={
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "p4d.24xlarge",
                "topology.kubernetes.io/zone": f"us-west-2{'abc'[n % 3]}",
            },
            allocatable={"cpu": q("96"), "memory": q("1152Gi"), "pods": q("250")},
        )
        devices = [
            Device(
                name=f"gpu-{g}",
                attributes={
                    "productName": "NVIDIA A100-SXM4-80GB",
                    "architecture": "Ampere",
                    "driverVersion": Version("550.90.7"),
                    "uuid": f"GPU-{n:04d}-{g:02d}",
                    PCIE: f"pci0000:{0x10 + g // 5:02x}",
                },
                capacity={"memory": DeviceCapacity(q("80Gi"))},
            )
            for g in range(gpus)
        ]
        snap.resource_slices.append(
            ResourceSlice(
                name=f"{name}-gpus",
                driver=DRIVER,
                pool=name,
                generation=1,
                resource_slice_count=1,
                node_name=name,
                devices=devices,
                owner_node=name,
            )
        )
    count = 1 if variant == "single" else 5
    constraints = [DeviceConstraint(match_attribute=PCIE)] if variant == "pcie" else []
    snap.resource_claim_templates["bench/gpus"] = ResourceClaimTemplate(
        "bench",
        "gpus",
        ResourceClaimSpec(
            requests=[DeviceRequest("gpu", ExactDeviceRequest("gpu.nvidia.com", count=count))],
            constraints=constraints,
        ),
    )
    for p in range(pods):
        snap.pods.append(
            Pod(
                namespace="bench",
                name=f"worker-{p:05d}",
                uid=f"uid-{p:05d}",
                creation_timestamp=f"2026-12-01T10:{p // 60 % 60:02d}:{p % 60:02d}Z",
                requests={"cpu": q("1"), "memory": q("4Gi")},
                resource_claims=[PodResourceClaim("gpu", resource_claim_template_name="gpus")],
            )
        )
    return snap


def run(variant: str, nodes: int, profile: bool) -> float:
    snap = build(variant, nodes=nodes, pods=nodes * 5)
    options = SimulationOptions(timeout=5.0)
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    output = simulate(snap, options)
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - started
    stats = output.result["stats"]
    rate = stats["pods"] / seconds
    target = TARGETS[variant]
    verdict = "ok" if rate >= target else "BELOW TARGET"
    print(
        f"{variant:7s} nodes={nodes} pods={stats['pods']} scheduled={stats['scheduled']} "
        f"failed={stats['failed']} dfsNodes={stats['dfsNodes']} seconds={seconds:.2f} "
        f"pods/s={rate:.0f} (target {target:.0f}: {verdict})"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", nargs="?", default="all", choices=["single", "pcie", "all"])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    variants = ["single", "pcie"] if args.variant == "all" else [args.variant]
    for variant in variants:
        run(variant, args.nodes, args.profile)


if __name__ == "__main__":
    main()
