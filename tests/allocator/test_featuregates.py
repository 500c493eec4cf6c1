"""Feature gates and the Kubernetes version presets (``--kubernetes-version``)."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.cli import main
from allocator.featuregates import (
    GATE_NAMES,
    GATE_STAGES,
    KUBERNETES_VERSIONS,
    FeatureGateError,
    FeatureGates,
    gate_stage,
    kubernetes_version,
    preset,
    release_of,
)
from allocator.simulation import SimulationOptions, simulate
from tests.features.conftest import EXAMPLES, load_example

CAPACITY = str(EXAMPLES / "features-consumable-capacity.yaml")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_every_gate_has_its_published_stages():
    assert set(GATE_STAGES) == set(GATE_NAMES)
    for name, stages in GATE_STAGES.items():
        releases = [tuple(map(int, since.split("."))) for since, _, _ in stages]
        assert releases == sorted(releases), name
        assert stages[0][1] == "alpha" and stages[0][2] is False, name  # alpha starts off


def test_a_1_34_cluster_has_only_the_beta_gates_of_1_34_on():
    # DRAAdminAccess and DRAPrioritizedList went beta (on) in 1.34; the rest were alpha or
    # did not exist yet.
    on = {name for name, value in preset("1.34").items() if value}
    assert on == {"DRAAdminAccess", "DRAPrioritizedList"}


def test_1_36_turns_on_the_features_that_went_beta_in_1_36():
    on = {name for name, value in preset("1.36").items() if value}
    assert on == {
        "DRAAdminAccess",
        "DRAPrioritizedList",
        "DRADeviceTaints",
        "DRADeviceBindingConditions",
        "DRAPartitionableDevices",
        "DRAConsumableCapacity",
        "DRAExtendedResource",
    }
    assert preset("1.36")["DRADeviceTaintRules"] is False  # beta, but off by default


def test_1_37_adds_device_taint_rules_and_keeps_its_alpha_gates_off():
    values = preset("1.37")
    assert values["DRADeviceTaintRules"] is True
    for alpha in (
        "DRADeviceCompatibilityGroups",
        "DRAOptionalNodeOperations",
        "DRAListTypeAttributes",
        "DRANodeAllocatableResources",
        "DRAResourcePoolStatus",
    ):
        assert values[alpha] is False, alpha


def test_a_gate_that_did_not_exist_in_a_release_is_off():
    assert gate_stage("DRAOptionalNodeOperations", "1.36") is None
    assert preset("1.36")["DRAOptionalNodeOperations"] is False
    assert gate_stage("DRADeviceTaintRules", "1.34") is None
    assert gate_stage("DRADeviceTaintRules", "1.35") == ("alpha", False)


@given(st.sampled_from(KUBERNETES_VERSIONS), st.sampled_from(KUBERNETES_VERSIONS))
def test_a_later_release_never_turns_a_gate_off(older, newer):
    if tuple(map(int, older.split("."))) > tuple(map(int, newer.split("."))):
        older, newer = newer, older
    before, after = preset(older), preset(newer)
    assert all(after[name] for name, on in before.items() if on)


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("1.34", "1.34"),
        ("v1.35.2", "1.35"),
        ("v1.34.1-eks-113cf36", "1.34"),
        ("1.36+", "1.36"),  # EKS and GKE report minor "36+"
        ("v1.37.0-gke.1000", "1.37"),
        ("latest", None),
        ("1", None),
    ],
)
def test_release_of_reads_kubernetes_version_strings(text, release):
    assert release_of(text) == release


def test_a_release_without_a_preset_is_refused_naming_the_known_ones():
    with pytest.raises(FeatureGateError, match="1.34, 1.35, 1.36, 1.37"):
        kubernetes_version("1.33")
    assert kubernetes_version("v1.35.4") == "1.35"


def test_overrides_apply_over_the_preset():
    gates = FeatureGates.for_version("1.34", {"DRAConsumableCapacity": True})
    assert gates.enabled("DRAConsumableCapacity") is True
    assert gates.enabled("DRADeviceTaints") is False
    assert FeatureGates.for_version(None, {"DRADeviceTaints": False}).as_dict() == {
        name: name != "DRADeviceTaints" for name in GATE_NAMES
    }


def test_api_options_take_the_version_and_apply_feature_gates_over_it():
    opts = SimulationOptions.from_json(
        {"kubernetesVersion": "1.35", "featureGates": {"DRADeviceTaints": True}}
    )
    assert opts.kubernetes_version == "1.35"
    assert opts.gates.as_dict() == {**preset("1.35"), "DRADeviceTaints": True}
    # Stored options read back to the same run (the effective gates are kept).
    again = SimulationOptions.from_json(opts.to_json())
    assert again.gates == opts.gates and again.kubernetes_version == "1.35"
    assert SimulationOptions.from_json(
        {"kubernetesVersion": None}
    ).gates.as_dict() == dict.fromkeys(GATE_NAMES, True)


@pytest.mark.parametrize("value", ["1.30", 1.34, "", ["1.34"]])
def test_api_options_refuse_an_unknown_version(value):
    with pytest.raises(ValueError, match="options.kubernetesVersion"):
        SimulationOptions.from_json({"kubernetesVersion": value})


def _decisions(result: dict) -> list:
    return [(p["pod"], p["scheduled"], p["target"], p["error"]) for p in result["pods"]]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    "example",
    [
        "features-consumable-capacity.yaml",
        "features-partitionable.yaml",
        "features-taints.yaml",
        "features-extended-resources.yaml",
        "features-prioritized-list.yaml",
    ],
)
def test_a_preset_run_decides_as_its_gates_given_one_by_one(example, version):
    snapshot = load_example(example)
    by_preset = simulate(
        snapshot,
        SimulationOptions(
            gates=FeatureGates.for_version(version), kubernetes_version=version, suggestions=False
        ),
    ).result
    spelled_out = simulate(
        load_example(example),
        SimulationOptions(gates=FeatureGates.from_mapping(preset(version)), suggestions=False),
    ).result
    assert _decisions(by_preset) == _decisions(spelled_out)
    assert by_preset["featureGates"] == preset(version)
    assert by_preset["kubernetesVersion"] == version
    assert spelled_out["kubernetesVersion"] is None


def test_a_1_34_run_refuses_consumable_capacity_as_the_gate_switched_off_does():
    code, out, _ = cli("simulate", CAPACITY, "--kubernetes-version", "1.34", "--json")
    assert code == 0
    on_1_34 = json.loads(out)
    _, out, _ = cli(
        "simulate", CAPACITY, "--feature-gates", "DRAConsumableCapacity=false", "--json"
    )
    gate_off = json.loads(out)
    assert [p["error"] for p in on_1_34["pods"]] == [p["error"] for p in gate_off["pods"]]
    assert "DRAConsumableCapacity feature is disabled" in on_1_34["pods"][0]["error"]
    assert on_1_34["kubernetesVersion"] == "1.34"
    assert on_1_34["featureGates"]["DRAConsumableCapacity"] is False
    # 1.36 made it beta (on): the same pod gets its share of eth1.
    _, out, _ = cli("simulate", CAPACITY, "--kubernetes-version", "1.36", "--json")
    assert all(p["scheduled"] for p in json.loads(out)["pods"])


def test_feature_gates_still_override_single_gates_of_a_preset():
    code, out, _ = cli(
        "simulate",
        CAPACITY,
        "--kubernetes-version",
        "1.34",
        "--feature-gates",
        "DRAConsumableCapacity=true",
        "--json",
    )
    result = json.loads(out)
    assert code == 0 and all(p["scheduled"] for p in result["pods"])
    assert result["featureGates"] == {**preset("1.34"), "DRAConsumableCapacity": True}


def test_the_summary_says_which_gates_the_run_had():
    _, out, _ = cli("simulate", CAPACITY)
    assert "Feature gates: every DRA feature on (no --kubernetes-version)" in out
    _, out, _ = cli(
        "simulate",
        CAPACITY,
        "--kubernetes-version",
        "1.34",
        "--feature-gates",
        "DRADeviceTaints=true",
    )
    assert (
        "Feature gates: Kubernetes 1.34 defaults (2 of 13 on: DRAPrioritizedList, "
        "DRAAdminAccess); set: DRADeviceTaints=true"
    ) in out


def test_the_command_line_takes_a_version_as_a_server_prints_it():
    _, out, _ = cli("simulate", CAPACITY, "--kubernetes-version", "v1.36.2-eks-3025e55", "--json")
    assert json.loads(out)["kubernetesVersion"] == "1.36"


@pytest.mark.parametrize("version", ["1.33", "1.38", "latest"])
def test_a_version_without_a_preset_exits_2(version):
    code, out, err = cli("simulate", CAPACITY, "--kubernetes-version", version)
    assert code == 2 and out == ""
    assert "--kubernetes-version" in err and "1.34" in err
