"""Shared helpers: the docs' examples live in examples/features-*.yaml and load as snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocator.cel import SelectorEngine
from allocator.features.gates import FeatureGates
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


@pytest.fixture
def engine() -> SelectorEngine:
    return SelectorEngine()
