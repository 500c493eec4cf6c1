"""Finalization (karpenter.sh/requested-dra-drivers) and NodeClaim Initialization Gating."""

from __future__ import annotations

from allocator.scheduling.gating import initialization_gating
from tests.scheduling.k8s import (
    GPU,
    NIC,
    claim,
    device_class,
    families,
    gpu,
    instance_type,
    nic,
    node,
    node_claim,
    node_claim_result,
    node_pool,
    pod,
    request,
    resource_slice,
    run,
    snapshot,
    template,
)

P5 = families("p5")
ANNOTATION = "karpenter.sh/requested-dra-drivers"


def test_annotation_lists_drivers_of_every_claim_whatever_its_state():
    docs = [
        device_class(),
        device_class(NIC),
        device_class("fabric.example.com"),
        node_pool("gpu", requirements=P5),
        instance_type("p5.48xlarge", gpus=8, nics=8),
        # A fabric attachment already allocated in the cluster (AllNodes): it contributes its
        # driver even though the DFS never touches it.
        resource_slice(
            "fabric",
            driver="fabric.example.com",
            pool="fabric",
            all_nodes=True,
            devices=[{"name": "port-0", "attributes": {}}],
        ),
        claim(
            "fabric-port",
            [request("port", cls="fabric.example.com")],
            allocated=[("port", "fabric.example.com", "fabric", "port-0")],
            reserved_for=["train-0"],
        ),
        template("gpu-nic", [request("gpu"), request("nic", cls=NIC)]),
        pod("train-0", cpu="8", claims={"fabric": "fabric-port"}, templates={"pair": "gpu-nic"}),
        pod("sidecar", cpu="1", node_selector={"karpenter.sh/nodepool": "cpu"}),
        node_pool(
            "cpu",
            requirements=families("m7i"),
        ),
        instance_type("m7i.xlarge", cpu="4", memory="16Gi"),
    ]
    result = run(docs)
    gpu_claim = node_claim_result(result, "gpu-1")
    assert gpu_claim["annotations"] == {ANNOTATION: f"fabric.example.com,{GPU},{NIC}"}
    cpu_claim = node_claim_result(result, "cpu-1")
    assert cpu_claim["annotations"] == {}  # no DRA: the gate is skipped, no annotation


def _first_of_two_gpu_slices() -> dict:
    """Slice 1 of gpu-node-a's pool, which declares two slices at generation 2."""
    return resource_slice(
        "a-gpus-1", node="gpu-node-a", pool="gpu-node-a", devices=[gpu(0)], count=2, generation=2
    )


def _gating_docs(gpu_slices: list[dict]) -> list[dict]:
    return [
        node("gpu-node-a", pool="gpu", initialized=False),
        node_claim(
            "gpu-abc12",
            pool="gpu",
            instance_type="p5.48xlarge",
            node_name="gpu-node-a",
            annotations={ANNOTATION: f"{GPU},{NIC}"},
        ),
        node_claim("gpu-plain", pool="gpu", instance_type="p5.48xlarge", node_name="gpu-node-a"),
        node_claim(
            "gpu-unregistered",
            pool="gpu",
            instance_type="p5.48xlarge",
            annotations={ANNOTATION: GPU},
        ),
        resource_slice("gpu-node-a-nics", driver=NIC, node="gpu-node-a", devices=[nic(0)]),
        # A cluster-wide pool never counts for a node.
        resource_slice("fabric-gpus", pool="fabric", all_nodes=True, devices=[gpu(9)]),
        *gpu_slices,
    ]


def test_gating_unknown_until_each_driver_has_a_complete_node_local_pool():
    # Two slices declared, one published at the newest generation (an older one is ignored).
    partial = [
        _first_of_two_gpu_slices(),
        resource_slice(
            "a-gpus-old",
            node="gpu-node-a",
            pool="gpu-node-a",
            devices=[gpu(1)],
            count=2,
            generation=1,
        ),
    ]
    report = initialization_gating(snapshot(_gating_docs(partial)))
    assert report == [
        {
            "nodeClaim": "gpu-abc12",
            "node": "gpu-node-a",
            "status": "Unknown",
            "reason": "DRADriverPoolsNotPublished",
            "missingDrivers": [GPU],
        },
        {
            "nodeClaim": "gpu-unregistered",
            "node": None,
            "status": "Unknown",
            "reason": "DRADriverPoolsNotPublished",
            "missingDrivers": [GPU],
        },
    ]


def test_gating_initialized_once_pools_complete_via_owner_reference_or_node_name():
    complete = [
        _first_of_two_gpu_slices(),
        # Owned by the node through its owner reference only (a per-device selector slice).
        resource_slice(
            "a-gpus-2",
            pool="gpu-node-a",
            owner="gpu-node-a",
            all_nodes=True,
            devices=[gpu(1)],
            count=2,
            generation=2,
        ),
    ]
    docs = _gating_docs(complete)
    report = {g["nodeClaim"]: g for g in initialization_gating(snapshot(docs))}
    assert report["gpu-abc12"] == {
        "nodeClaim": "gpu-abc12",
        "node": "gpu-node-a",
        "status": "Initialized",
        "reason": None,
        "missingDrivers": [],
    }
    assert "gpu-plain" not in report
    # The result document carries the same report.
    assert run(docs)["initializationGating"][0]["status"] == "Initialized"


def _capacity_types(result: dict, name: str) -> list[str] | None:
    reqs = node_claim_result(result, name)["requirements"]
    found = [r for r in reqs if r["key"] == "karpenter.sh/capacity-type"]
    return found[0]["values"] if found else None


def test_a_nodeclaim_is_narrowed_to_the_capacity_types_its_instance_types_offer():
    # Karpenter's ToNodeClaim: the NodePool allows spot and on-demand, but the only instance type
    # that fits is offered on-demand only: the NodeClaim asks for on-demand.
    docs = [
        node_pool("gpu", requirements=families("p5", "g6e")),
        instance_type(
            "p5.48xlarge",
            offerings=[
                {
                    "zone": "us-west-2a",
                    "capacityType": "on-demand",
                    "price": 98.32,
                    "available": True,
                },
                {"zone": "us-west-2a", "capacityType": "spot", "price": 35.1, "available": False},
            ],
        ),
        instance_type(
            "g6e.xlarge",
            cpu="4",
            memory="32Gi",
            offerings=[
                {"zone": "us-west-2b", "capacityType": "spot", "price": 0.9, "available": True}
            ],
        ),
        pod("trainer-0", cpu="96", memory="1000Gi"),
    ]
    result = run(docs)
    assert node_claim_result(result, "gpu-1")["instanceTypes"] == ["p5.48xlarge"]
    assert _capacity_types(result, "gpu-1") == ["on-demand"]


def test_the_capacity_types_of_every_instance_type_left_are_kept():
    docs = [
        node_pool("gpu", requirements=families("g6e")),
        instance_type(
            "g6e.xlarge",
            cpu="4",
            memory="32Gi",
            offerings=[
                {"zone": "us-west-2a", "capacityType": "spot", "price": 0.9, "available": True}
            ],
        ),
        instance_type(
            "g6e.2xlarge",
            cpu="8",
            memory="64Gi",
            offerings=[
                {
                    "zone": "us-west-2a",
                    "capacityType": "on-demand",
                    "price": 2.24,
                    "available": True,
                }
            ],
        ),
        pod("notebook-0", cpu="2", memory="8Gi"),
    ]
    assert _capacity_types(run(docs), "gpu-1") == ["on-demand", "spot"]
