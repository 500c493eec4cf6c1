"""Builders of the page tests: the GPU training snapshot's result and trace, finished runs.

Runs are stored through ``runs.worker.store_output`` with the result document and trace that
the simulator produces for tests/fixtures/pages/gpu-training.yaml, so the pages are tested on
the exact shapes of CONTRACT sections 4 and 5 whatever the state of the scheduler.
"""

from __future__ import annotations

from pathlib import Path

from allocator.trace import Trace

GPU = "gpu.nvidia.com"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pages" / "gpu-training.yaml"
NODE = "ip-10-0-1-7.us-west-2.compute.internal"
NO_INSTANCE_TYPE = (
    'incompatible with nodepool "gpu-pool", allocating dynamic resources, '
    "no instance type can satisfy the allocation: p5.48xlarge: no device of class "
    "gpu.nvidia.com matches; g6e.xlarge: no device of class gpu.nvidia.com matches"
)
COMPILE_ERROR = (
    "claim ml/notebook-gpu: request gpu: selector: failed to compile: "
    "ERROR: <input>:1:47: Syntax error: mismatched input '<EOF>'"
)


def result_device(pool: str, device: str, instance_type: str | None = None, **extra) -> dict:
    """One entry of a result's ``claims[].devices``: an in-cluster GPU, or with
    ``instance_type`` a template one."""
    return {
        "request": "gpu",
        "driver": "gpu.nvidia.com",
        "pool": pool,
        "device": device,
        "source": "template" if instance_type else "in-cluster",
        "instanceType": instance_type,
        **extra,
    }


def gpu_try(
    trace: Trace,
    parent: int,
    pool: str,
    device: str,
    status: str = "ok",
    reason: str | None = None,
    message: str | None = None,
) -> int:
    """A GPU the DFS tried: labelled driver/pool/device, the three also as fields (CONTRACT 5)."""
    return trace.add(
        parent,
        "device",
        f"{GPU}/{pool}/{device}",
        status,
        reason,
        message,
        driver=GPU,
        pool=pool,
        device=device,
    )


def gpu_training_trace(*, second_train_placed: bool = True) -> dict:
    """The DFS trace of the four pending pods (as allocator.trace.Trace records it)."""
    t = Trace()
    # train-0 fits the registered node's free H100 (gpu-0 is held by eval-0).
    pod = t.add(None, "pod", "ml/train-0")
    node = t.add(pod, "target", f"node/{NODE}", node=NODE)
    claim = t.add(node, "claim", "ml/train-0-gpu", claim="ml/train-0-gpu")
    req = t.add(claim, "request", "gpu", request="gpu")
    slot = t.add(req, "slot", "gpu[0]")
    gpu_try(
        t, slot, "ip-10-0-1-7", "gpu-0", "failed", "allocated", "already allocated to ml/eval-0-gpu"
    )
    gpu_try(t, slot, "ip-10-0-1-7", "gpu-1", "ok")
    # train-1: the node is full, a new p5.48xlarge NodeClaim takes it.
    pod = t.add(None, "pod", "ml/train-1", "ok" if second_train_placed else "failed")
    node = t.add(pod, "target", f"node/{NODE}", "failed", "allocated", "no free device", node=NODE)
    claim = t.add(node, "claim", "ml/train-1-gpu", "failed", claim="ml/train-1-gpu")
    for dev in ("gpu-0", "gpu-1"):
        gpu_try(t, claim, "ip-10-0-1-7", dev, "failed", "allocated", "already allocated")
    nc = t.add(
        pod,
        "target",
        "nodeclaim/gpu-pool-1",
        "ok" if second_train_placed else "failed",
        nodeClaim="gpu-pool-1",
    )
    it = t.add(
        nc,
        "instanceType",
        "g6e.xlarge",
        "pruned",
        "selector",
        "no device of class gpu.nvidia.com matches",
        instanceType="g6e.xlarge",
    )
    gpu_try(
        t,
        it,
        "g6e-gpus",
        "gpu-0",
        "failed",
        "selector",
        'device.attributes["gpu.nvidia.com"].model == "H100" is false (model L40S)',
    )
    it = t.add(nc, "instanceType", "p5.48xlarge", "ok", instanceType="p5.48xlarge")
    claim = t.add(it, "claim", "ml/train-1-gpu", claim="ml/train-1-gpu")
    req = t.add(claim, "request", "gpu", request="gpu")
    slot = t.add(req, "slot", "gpu[0]")
    gpu_try(
        t,
        slot,
        "p5-gpus",
        "gpu-0",
        "ok" if second_train_placed else "failed",
        None if second_train_placed else "taint",
        None if second_train_placed else "untolerated taint nvidia.com/maintenance:NoSchedule",
    )
    # infer-a100: nothing anywhere is an A100.
    pod = t.add(None, "pod", "ml/infer-a100", "failed", "selector", "no A100")
    node = t.add(pod, "target", f"node/{NODE}", "failed", "selector", node=NODE)
    for dev in ("gpu-0", "gpu-1"):
        gpu_try(
            t,
            node,
            "ip-10-0-1-7",
            dev,
            "failed",
            "selector",
            'device.attributes["gpu.nvidia.com"].model == "A100" is false (model H100)',
        )
    nc = t.add(pod, "target", "nodepool/gpu-pool (new gpu-pool-2)", "failed", "selector")
    t.add(
        nc,
        "instanceType",
        "g6e.xlarge",
        "pruned",
        "selector",
        "no device matches",
        instanceType="g6e.xlarge",
    )
    funnel_trace_node(t, nc)
    # notebook: the template's selector does not compile.
    pod = t.add(None, "pod", "ml/notebook", "failed", "selector", COMPILE_ERROR)
    t.add(
        pod,
        "claim",
        "ml/notebook-gpu",
        "failed",
        "selector",
        COMPILE_ERROR,
        claim="ml/notebook-gpu",
    )
    return t.to_json()


def gpu_training_result(*, second_train_placed: bool = True) -> dict:
    """The result document (CONTRACT section 4) for the four pending pods."""

    def device(dev, pool, source="in-cluster", it=None):
        return {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": pool,
            "device": dev,
            "source": source,
            "instanceType": it,
        }

    train1 = {
        "pod": "ml/train-1",
        "scheduled": second_train_placed,
        "target": {"kind": "NodeClaim", "name": "gpu-pool-1", "new": True}
        if second_train_placed
        else None,
        "claims": [
            {
                "claim": "ml/train-1-gpu",
                "state": "unallocated",
                "devices": [device("gpu-0", "p5-gpus", "template", "p5.48xlarge")]
                if second_train_placed
                else [],
                "nodeSelector": None,
            }
        ],
        "error": None if second_train_placed else "could not schedule pod, no free device",
        "reasons": []
        if second_train_placed
        else [
            {"target": f"node/{NODE}", "reason": "allocating dynamic resources, no free device"},
        ],
    }
    node_claims = (
        [
            {
                "name": "gpu-pool-1",
                "nodePool": "gpu-pool",
                "instanceTypes": ["p5.48xlarge"],
                "requirements": [
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu-pool"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["p5.48xlarge"],
                    },
                    {
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": ["us-west-2a", "us-west-2b"],
                    },
                ],
                "annotations": {"karpenter.sh/requested-dra-drivers": "gpu.nvidia.com"},
                "pods": ["ml/train-1"],
                "price": 98.32,
                "instanceTypesPruned": [
                    {
                        "name": "g6e.xlarge",
                        "reason": "devices",
                        "message": "no device of class gpu.nvidia.com matches",
                    }
                ],
            }
        ]
        if second_train_placed
        else []
    )
    pods = [
        {
            "pod": "ml/train-0",
            "scheduled": True,
            "target": {"kind": "Node", "name": NODE, "new": False},
            "claims": [
                {
                    "claim": "ml/train-0-gpu",
                    "state": "unallocated",
                    "devices": [device("gpu-1", "ip-10-0-1-7")],
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [NODE]}
                                ]
                            }
                        ]
                    },
                }
            ],
            "error": None,
            "reasons": [],
        },
        train1,
        {
            "pod": "ml/infer-a100",
            "scheduled": False,
            "target": None,
            "claims": [
                {
                    "claim": "ml/infer-a100-gpu",
                    "state": "unallocated",
                    "devices": [],
                    "nodeSelector": None,
                }
            ],
            "error": f"could not schedule pod, {NODE}: allocating dynamic resources, "
            f"cannot allocate all claims; {NO_INSTANCE_TYPE}",
            "reasons": [
                {
                    "target": f"node/{NODE}",
                    "reason": "allocating dynamic resources, cannot allocate all claims",
                },
                {"target": "nodepool/gpu-pool", "reason": NO_INSTANCE_TYPE},
            ],
        },
        {
            "pod": "ml/notebook",
            "scheduled": False,
            "target": None,
            "claims": [
                {
                    "claim": "ml/notebook-gpu",
                    "state": "unallocated",
                    "devices": [],
                    "nodeSelector": None,
                }
            ],
            "error": f"could not schedule pod, {COMPILE_ERROR}",
            "reasons": [
                {"target": f"node/{NODE}", "reason": COMPILE_ERROR},
                {
                    "target": "nodepool/gpu-pool",
                    "reason": f'incompatible with nodepool "gpu-pool", {COMPILE_ERROR}',
                },
            ],
        },
    ]
    pods[2]["explanation"] = a100_funnels()
    pods[2]["suggestions"] = a100_suggestions()
    pods[3]["explanation"] = [
        {
            "claim": "ml/notebook-gpu",
            "request": "gpu",
            "needed": 1,
            "instanceType": None,
            "targets": 2,
            "exampleTargets": [f"node/{NODE}", "nodepool/gpu-pool"],
            "candidates": 0,
            "usable": 0,
            "rejections": [],
            "message": COMPILE_ERROR,
        }
    ]
    pods[3]["suggestions"] = []
    scheduled = sum(1 for p in pods if p["scheduled"])
    return {
        "schemaVersion": "v1",
        "pods": pods,
        "nodeClaims": node_claims,
        "stats": {
            "pods": 4,
            "scheduled": scheduled,
            "failed": 4 - scheduled,
            "dfsNodes": 23,
            "seconds": 0.0132,
            "nodeClaims": len(node_claims),
        },
        "featureGates": {"DRADeviceTaints": True, "DRAPrioritizedList": True},
        "pools": [
            {
                "driver": "gpu.nvidia.com",
                "pool": "ip-10-0-1-7",
                "nodeName": NODE,
                "generation": 2,
                "resourceSliceCount": 1,
                "totalDevices": 2,
                "allocatedDevices": 2 if second_train_placed else 1,
                "availableDevices": 0 if second_train_placed else 1,
                "unavailableDevices": 0,
                "validationError": None,
            }
        ],
        "deviceTaintRules": [],
        "initializationGating": [],
        "disruption": None,
        "warnings": [],
    }


A100_SELECTOR = 'device.attributes["gpu.nvidia.com"].model == "A100"'


def a100_funnels() -> list[dict]:
    """infer-a100's funnels: on the node, gpu-0 is held by eval-0 and gpu-1 is an H100; on a
    new p5.48xlarge every template GPU is an H100."""
    return [
        {
            "claim": "ml/infer-a100-gpu",
            "request": "gpu",
            "needed": 1,
            "instanceType": None,
            "targets": 1,
            "exampleTargets": [f"node/{NODE}"],
            "candidates": 2,
            "usable": 0,
            "rejections": [
                {
                    "reason": "selector",
                    "devices": 1,
                    "message": f'{A100_SELECTOR}: model is "H100" on 1 device',
                    "exampleDevices": [f"{GPU}/ip-10-0-1-7/gpu-1"],
                    "detail": {
                        "expression": A100_SELECTOR,
                        "source": "request gpu",
                        "values": {"model": ["H100"]},
                    },
                },
                {
                    "reason": "allocated",
                    "devices": 1,
                    "message": "allocated to claim ml/eval-0-gpu (reserved for pod ml/eval-0)",
                    "exampleDevices": [f"{GPU}/ip-10-0-1-7/gpu-0"],
                    "detail": {
                        "holders": [
                            {"claim": "ml/eval-0-gpu", "pods": ["ml/eval-0"], "inRun": False}
                        ]
                    },
                },
            ],
        },
        {
            "claim": "ml/infer-a100-gpu",
            "request": "gpu",
            "needed": 1,
            "instanceType": "p5.48xlarge",
            "targets": 1,
            "exampleTargets": ["nodepool/gpu-pool"],
            "candidates": 8,
            "usable": 0,
            "rejections": [
                {
                    "reason": "selector",
                    "devices": 8,
                    "message": f'{A100_SELECTOR}: model is "H100" on 8 devices',
                    "exampleDevices": [f"{GPU}/p5-gpus/gpu-{i}" for i in range(5)],
                    "detail": {
                        "expression": A100_SELECTOR,
                        "source": "request gpu",
                        "values": {"model": ["H100"]},
                    },
                }
            ],
        },
    ]


def a100_suggestions() -> list[dict]:
    """Two verified changes for infer-a100: widen the selector, or free eval-0's GPU."""
    return [
        {
            "kind": "relax-selector",
            "message": f"drop the selector {A100_SELECTOR}: 8 H100 devices of p5.48xlarge "
            "would match",
            "change": {
                "object": "ResourceClaimTemplate ml/one-a100",
                "field": "spec.spec.devices.requests[0].exactly.selectors",
                "op": "set",
                "value": [],
            },
            "target": {"kind": "NodeClaim", "name": "gpu-pool-2", "new": True},
        },
        {
            "kind": "free-device",
            "message": "gpu-0 of the node is held by ml/eval-0-gpu: delete pod ml/eval-0",
            "change": {
                "object": "Pod ml/eval-0",
                "objects": ["Pod ml/eval-0"],
                "op": "delete",
            },
            "target": {"kind": "Node", "name": NODE, "new": False},
        },
    ]


def funnel_trace_node(trace: Trace, parent: int) -> int:
    """A target refused by counting (CONTRACT section 5): its reason is the decisive cause
    and it carries the funnel (without targets/exampleTargets)."""
    funnel = {k: v for k, v in a100_funnels()[1].items() if k not in ("targets", "exampleTargets")}
    return trace.add(
        parent,
        "instanceType",
        "p5.48xlarge",
        "pruned",
        "selector",
        funnel["rejections"][0]["message"],
        instanceType="p5.48xlarge",
        funnel=[funnel],
    )


def make_run(snapshot, owner, *, second_train_placed: bool = True, options: dict | None = None):
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output

    run = Run.objects.create(
        snapshot=snapshot,
        owner=owner,
        options=options or {"timeout": 5, "disrupt": [], "trace": True},
    )
    store_output(
        run.pk,
        gpu_training_result(second_train_placed=second_train_placed),
        gpu_training_trace(second_train_placed=second_train_placed),
    )
    run.refresh_from_db()
    return run


# --- a big failing run (the run page stays bounded) -------------------------------------------


def big_cluster_documents(nodes: int = 1000, gpus: int = 8) -> list[dict]:
    """``nodes`` registered p5.48xlarge nodes, each with a ResourceSlice of ``gpus`` H100s."""
    docs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
        },
    ]
    for i in range(nodes):
        name = f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/arch": "amd64",
                        "topology.kubernetes.io/zone": "us-west-2a",
                        "node.kubernetes.io/instance-type": "p5.48xlarge",
                    },
                },
                "status": {"allocatable": {"cpu": "190", "memory": "2000Gi", "pods": "110"}},
            }
        )
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": GPU,
                    "nodeName": name,
                    "pool": {"name": f"pool-{i}", "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{g}",
                            "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                        }
                        for g in range(gpus)
                    ],
                },
            }
        )
    return docs


def big_failing_result(nodes: int = 1000, failed: int = 100, placed: int = 100) -> dict:
    """The result of a run where ``failed`` pods ask for a model that none of ``nodes`` nodes
    has: one ``reasons`` entry per pod and node, as results were before aggregation (the worst
    case a page meets), with the funnel and suggestions of CONTRACT section 4."""
    names = [f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal" for i in range(nodes)]
    pods = []
    for p in range(placed):
        node = names[p % nodes]
        pods.append(
            {
                "pod": f"ml/train-{p}",
                "scheduled": True,
                "target": {"kind": "Node", "name": node, "new": False},
                "claims": [
                    {
                        "claim": f"ml/train-{p}-gpu",
                        "state": "unallocated",
                        "devices": [
                            {
                                "request": "gpu",
                                "driver": GPU,
                                "pool": f"pool-{p % nodes}",
                                "device": "gpu-0",
                                "source": "in-cluster",
                                "instanceType": None,
                            }
                        ],
                        "nodeSelector": None,
                    }
                ],
                "error": None,
            }
        )
    for p in range(failed):
        reason = (
            "allocating dynamic resources, request gpu: 0 of 1 devices available "
            '(8 rejected by selector: productName is "NVIDIA H100 80GB HBM3")'
        )
        pods.append(
            {
                "pod": f"ml/infer-b200-{p}",
                "scheduled": False,
                "target": None,
                "claims": [
                    {
                        "claim": f"ml/infer-b200-{p}-gpu",
                        "state": "unallocated",
                        "devices": [],
                        "nodeSelector": None,
                    }
                ],
                "error": f"could not schedule pod, {reason}",
                "reasons": [{"target": f"node/{n}", "reason": reason} for n in names],
                "explanation": [b200_funnel(f"ml/infer-b200-{p}-gpu", nodes, names[:5])],
                "suggestions": [],
            }
        )
    return {
        "schemaVersion": "v1",
        "pods": pods,
        "nodeClaims": [],
        "stats": {
            "pods": len(pods),
            "scheduled": placed,
            "failed": failed,
            "dfsNodes": nodes * failed,
            "seconds": 12.5,
        },
        "featureGates": {"DRADeviceTaints": True},
        "pools": [
            {
                "driver": GPU,
                "pool": f"pool-{i}",
                "nodeName": names[i],
                "generation": 1,
                "resourceSliceCount": 1,
                "totalDevices": 8,
                "allocatedDevices": 1 if i < placed else 0,
                "availableDevices": 7 if i < placed else 8,
                "unavailableDevices": 0,
                "validationError": None,
            }
            for i in range(nodes)
        ],
        "deviceTaintRules": [],
        "warnings": [],
    }


def b200_funnel(claim: str, targets: int, example_nodes: list[str]) -> dict:
    """A selector on a model nobody has: every H100 of every node refused by ``selector``."""
    return {
        "claim": claim,
        "request": "gpu",
        "needed": 1,
        "instanceType": None,
        "targets": targets,
        "exampleTargets": [f"node/{n}" for n in example_nodes],
        "candidates": 8,
        "usable": 0,
        "rejections": [
            {
                "reason": "selector",
                "devices": 8,
                "message": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200": '
                'productName is "NVIDIA H100 80GB HBM3" on 8 devices',
                "exampleDevices": [f"{GPU}/pool-0/gpu-{g}" for g in range(5)],
                "detail": {
                    "expression": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"',
                    "source": "request gpu",
                    "values": {"productName": ["NVIDIA H100 80GB HBM3"]},
                },
            }
        ],
    }


def make_big_run(owner, nodes: int = 1000, failed: int = 100):
    """A snapshot of ``nodes`` GPU nodes and a finished run of it where ``failed`` pods fail
    on every node (no trace: the page must stay bounded without one)."""
    import json

    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output
    from dra_web.snapshots.services import create_snapshot

    body = json.dumps(big_cluster_documents(nodes))
    snapshot = create_snapshot(owner, [("big-cluster.json", body)], f"{nodes} GPU nodes")
    run = Run.objects.create(snapshot=snapshot, owner=owner, options={"timeout": 5})
    store_output(run.pk, big_failing_result(nodes, failed), None)
    run.refresh_from_db()
    return run
