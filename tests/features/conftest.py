"""Shared helpers: the docs' examples live in examples/features-*.yaml and load as snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocator.cel import SelectorEngine
from allocator.featuregates import ALL_ON, FeatureGates
from allocator.model import DeviceID, Snapshot
from allocator.snapshot import load_files, load_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> Snapshot:
    return load_paths([str(EXAMPLES / name)])


def load_yaml(text: str) -> Snapshot:
    return load_files([("test.yaml", text)])


def gates_with(**overrides: bool) -> FeatureGates:
    return FeatureGates.from_mapping(overrides)


def devices_of(snapshot: Snapshot) -> dict[DeviceID, object]:
    return {
        DeviceID(s.driver, s.pool, d.name): d for s in snapshot.resource_slices for d in s.devices
    }


def consumable_capacity_allocator(snapshot: Snapshot):
    """An Allocator over features-consumable-capacity.yaml with web-old's pod being deleted (its
    bandwidth share is freed), and worker-1, the node whose NICs it shares, as the target."""
    from allocator.allocator import Allocator
    from allocator.bindings import AttributeBindings
    from allocator.nodeclaim import SimpleNodeClaim
    from allocator.pipeline import build_pipeline
    from allocator.requirements import Requirements

    allocator = Allocator(
        snapshot.resource_slices,
        [],
        AttributeBindings.build({}),
        snapshot.device_classes,
        pipeline=build_pipeline(ALL_ON),
        deleting_pods={"default/web-old"},
        resource_claims=snapshot.resource_claims,
    )
    node = SimpleNodeClaim(
        "node/worker-1",
        Requirements.from_labels({"kubernetes.io/hostname": "worker-1"}),
        ["c6in.8xlarge"],
        node_name="worker-1",
    )
    return allocator, node


@pytest.fixture
def engine() -> SelectorEngine:
    return SelectorEngine()
