"""Builders of the page tests: the GPU training snapshot's result and trace, finished runs.

Runs are stored through ``runs.services.store_output`` with the result document and trace that
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
    nc = t.add(pod, "target", "nodepool/gpu-pool", "failed", "selector")
    for name in ("g6e.xlarge", "p5.48xlarge"):
        t.add(
            nc, "instanceType", name, "pruned", "selector", "no device matches", instanceType=name
        )
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


def make_run(snapshot, owner, *, second_train_placed: bool = True, options: dict | None = None):
    from dra_web.runs.models import Run
    from dra_web.runs.services import store_output

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
