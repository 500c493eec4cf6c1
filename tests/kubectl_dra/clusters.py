"""Recorded clusters for ``kubectl dra why``: the documents, and the API server routes that
serve them (list responses, as the API server returns them)."""

from __future__ import annotations

from tests.scheduling.k8s import (
    claim,
    device_class,
    families,
    gpu,
    node,
    node_pool,
    pod,
    request,
    resource_slice,
    template,
)
from tests.web.fake_apiserver import recorded_routes

GPU_CLASS = device_class(
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
)
NODE = "ip-10-0-1-7.us-west-2.compute.internal"


def routes(docs: list[dict]) -> dict:
    """Every list endpoint the import reads; kinds recorded_routes leaves out are added."""
    out = recorded_routes(docs)
    extra = {
        "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "NodeClaim": "/apis/karpenter.sh/v1/nodeclaims",
    }
    for kind, path in extra.items():
        out[path] = [
            {k: v for k, v in d.items() if k not in ("kind", "apiVersion")}
            for d in docs
            if d["kind"] == kind
        ]
    return out


def _gpu_node(name: str = NODE, gpus: int = 2) -> list[dict]:
    devices = []
    for i in range(gpus):
        device = gpu(i)
        device["attributes"]["type"] = {"string": "gpu"}
        devices.append(device)
    labels = {"topology.kubernetes.io/region": "us-west-2"}
    return [
        node(name, zone="us-west-2a", instance_type="p5.48xlarge", labels=labels),
        resource_slice(f"{name}-gpu", node=name, devices=devices),
    ]


def held_gpus() -> list[dict]:
    """Two GPUs, both held by running inference pods; no NodePool: train-0 waits."""
    docs = [GPU_CLASS, *_gpu_node()]
    for i in range(2):
        docs.append(
            claim(
                f"serve-{i}-gpu",
                [request("gpu")],
                namespace="ml",
                allocated=[("gpu", "gpu.nvidia.com", NODE, f"gpu-{i}")],
                reserved_for=[f"serve-{i}"],
            )
        )
        docs.append(
            pod(f"serve-{i}", namespace="ml", node_name=NODE, claims={"gpu": f"serve-{i}-gpu"})
        )
    docs.append(template("one-gpu", [request("gpu")], namespace="ml"))
    docs.append(pod("train-0", namespace="ml", templates={"gpu": "one-gpu"}))
    return docs


def karpenter_gpu_pool() -> list[dict]:
    """A p5 NodePool over the existing full node: one pod fits a new NodeClaim from the
    catalog, one asks for an A100 that no p5 has."""
    docs = [GPU_CLASS, *_gpu_node(gpus=1)]
    docs.append(node_pool("gpu", requirements=families("p5")))
    docs.append(
        claim(
            "serve-0-gpu",
            [request("gpu")],
            namespace="ml",
            allocated=[("gpu", "gpu.nvidia.com", NODE, "gpu-0")],
            reserved_for=["serve-0"],
        )
    )
    docs.append(pod("serve-0", namespace="ml", node_name=NODE, claims={"gpu": "serve-0-gpu"}))
    docs.append(template("eight-gpus", [request("gpus", count=8)], namespace="ml"))
    docs.append(
        template(
            "a100",
            [
                request(
                    "gpu",
                    selectors=[
                        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
                    ],
                )
            ],
            namespace="ml",
        )
    )
    docs.append(
        pod("train-0", namespace="ml", cpu="16", memory="128Gi", templates={"gpus": "eight-gpus"})
    )
    docs.append(pod("legacy-0", namespace="ml", templates={"gpu": "a100"}))
    return docs
