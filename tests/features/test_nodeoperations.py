"""Optional node operations: the docs' control-plane slice and declared node features."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.features.nodeoperations import (
    node_problem,
    skip_node_operations,
    validate_skip_node_operations,
)
from allocator.model import Node
from allocator.pipeline import build_pipeline
from tests.features.conftest import gates_with, load_yaml

CONTROL_PLANE = """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: control-plane-resources
spec:
  nodeName: worker-1
  pool:
    name: central-pool
    generation: 1
    resourceSliceCount: 1
  driver: control-plane.example.com
  skipNodeOperations:
  - "*"
  devices:
  - name: virtual-device-1
"""


def test_slice_operations_are_copied_with_the_gate_on() -> None:
    (s,) = load_yaml(CONTROL_PLANE).resource_slices
    assert skip_node_operations(s.raw, gates=ALL_ON) == ("*",)
    assert skip_node_operations(s.raw, gates_with(DRAOptionalNodeOperations=False)) == ()


def test_prepare_alone_is_invalid() -> None:
    assert validate_skip_node_operations(["NodePrepareResources"]) is not None
    assert validate_skip_node_operations(["NodePrepareResources", "NodeUnprepareResources"]) is None
    assert (
        skip_node_operations(
            {"spec": {"skipNodeOperations": ["NodePrepareResources"]}}, gates=ALL_ON
        )
        == ()
    )


def test_nodes_must_declare_the_feature() -> None:
    old = Node("worker-1", declared_features=None)
    new = Node("worker-2", declared_features=("DRAOptionalNodeOperations",))
    assert "does not declare" in node_problem(old, ["*"])
    assert node_problem(new, ["*"]) is None
    assert node_problem(None, ["*"]) is None  # a new NodeClaim declares every feature
    assert node_problem(old, []) is None


CLAIM = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: control-plane.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "control-plane.example.com"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: virtual
  namespace: default
spec:
  devices:
    requests:
    - name: dev
      exactly:
        deviceClassName: control-plane.example.com
"""


def _allocate(declared: tuple[str, ...] | None):
    import pytest

    from allocator.allocator import AllocationError, Allocator
    from allocator.bindings import AttributeBindings
    from allocator.nodeclaim import SimpleNodeClaim
    from allocator.requirements import Requirements

    snapshot = load_yaml(CONTROL_PLANE + "---\n" + CLAIM)
    node = Node("worker-1", labels={"kubernetes.io/hostname": "worker-1"})
    node.declared_features = declared
    allocator = Allocator(
        snapshot.resource_slices,
        [],
        AttributeBindings.build({}),
        snapshot.device_classes,
        nodes={"worker-1": node},
        pipeline=build_pipeline(ALL_ON),
    )
    view = SimpleNodeClaim(
        "node/worker-1", Requirements.from_labels(node.labels), ["m7i.large"], node_name="worker-1"
    )
    claim = snapshot.resource_claims["default/virtual"]
    if declared is None:
        with pytest.raises(AllocationError, match="does not declare") as err:
            allocator.allocate(view, [claim])
        return err.value
    return allocator.allocate(view, [claim])


def test_skip_operations_reach_the_result_on_a_declaring_node() -> None:
    result = _allocate(("DRAOptionalNodeOperations",))
    (device,) = result.claims[0].devices
    assert device.extra["skipNodeOperations"] == ["*"]


def test_node_without_the_declared_feature_cannot_take_the_device() -> None:
    err = _allocate(None)
    assert "DRAOptionalNodeOperations" in str(err)


def test_template_skip_node_operations_reach_a_new_node_claims_devices() -> None:
    # The instance type's control-plane driver template skips node operations: a pod placed on
    # a new NodeClaim gets the list in its device entries, as it would from the live slice.
    from allocator.simulation import SimulationOptions, simulate
    from tests.scheduling.k8s import instance_type, node_pool, pod, snapshot, template

    it = instance_type("m7i.4xlarge")
    it["spec"]["dynamicResources"] = {
        "resourceSliceTemplates": [
            {
                "driver": "control-plane.example.com",
                "pool": {"name": "central-pool"},
                "skipNodeOperations": ["*"],
                "devices": [{"name": "virtual-device-1"}],
            }
        ]
    }
    spec = load_yaml(CLAIM).resource_claims["default/virtual"].raw["spec"]
    docs = [
        *[d for d in _yaml_docs(CLAIM) if d["kind"] == "DeviceClass"],
        node_pool("general", requirements=[]),
        it,
        template("virtual", [], namespace="default") | {"spec": {"spec": spec}},
        pod("agent-0", templates={"dev": "virtual"}),
    ]
    for gates, expected in ((None, ["*"]), ({"DRAOptionalNodeOperations": False}, None)):
        options = SimulationOptions(gates=gates_with(**(gates or {})))
        result = simulate(snapshot(docs), options).result
        (entry,) = result["pods"]
        assert entry["target"]["new"] is True
        (device,) = entry["claims"][0]["devices"]
        assert device["source"] == "template"
        assert device.get("skipNodeOperations") == expected


def _yaml_docs(text: str) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all(text) if d]
