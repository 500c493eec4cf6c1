"""The result document validates against allocator/result_schema.json (JSON Schema 2020-12)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_paths

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())
DEMO = str(ROOT / "examples" / "demo-snapshot.yaml")


@pytest.fixture(scope="module")
def demo():
    return load_paths([DEMO])


@pytest.fixture(scope="module")
def validator():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


@pytest.mark.parametrize(
    "options",
    [
        SimulationOptions(),
        SimulationOptions(disrupt=["gpu-node-a"]),
        SimulationOptions(trace=True, timeout=2.0),
    ],
    ids=["plain", "disrupt", "trace"],
)
def test_demo_results_validate(demo, validator, options):
    result = simulate(demo, options).result
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(result)]
    assert errors == []
    json.dumps(result)  # plain JSON, no objects leaking out


def test_schema_rejects_broken_documents(demo, validator):
    result = simulate(demo, SimulationOptions()).result
    placed = next(p for p in result["pods"] if p["scheduled"] and p["claims"])
    broken = copy.deepcopy(result)
    next(p for p in broken["pods"] if p["pod"] == placed["pod"])["target"] = None
    assert not validator.is_valid(broken)  # scheduled needs a target
    broken = copy.deepcopy(result)
    broken["pods"][0]["claims"] = [
        {"claim": "x/y", "state": "pending", "devices": [], "nodeSelector": None}
    ]
    assert not validator.is_valid(broken)
    broken = copy.deepcopy(result)
    broken["nodeClaims"][0]["instanceTypes"] = []
    assert not validator.is_valid(broken)
    broken = copy.deepcopy(result)
    del broken["stats"]["dfsNodes"]
    assert not validator.is_valid(broken)


@pytest.mark.parametrize(
    "path", sorted(str(p) for p in (ROOT / "examples").glob("*.yaml")), ids=lambda p: Path(p).name
)
def test_every_example_result_validates(validator, path):
    result = simulate(load_paths([path]), SimulationOptions()).result
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(result)]
    assert errors == []
    assert [p["pod"] for p in result["pods"]]  # every example schedules something
