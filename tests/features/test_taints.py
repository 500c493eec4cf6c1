"""Device taints, tolerations and DeviceTaintRule previews, on the docs' examples."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allocator.featuregates import ALL_ON
from allocator.features.taints import (
    TaintIndex,
    blocking_taints,
    taint_rule_message,
    taint_rule_previews,
    toleration_matches,
    tolerations_used,
)
from allocator.model import DeviceID, DeviceTaint, DeviceToleration
from tests.features.conftest import devices_of, gates_with, load_example

UNHEALTHY = DeviceTaint("dra.example.com/unhealthy", "Broken", "NoExecute")
ECC = DeviceTaint("dra.example.com/ecc-errors", "high", "NoSchedule")
DEGRADED = DeviceTaint("dra.example.com/degraded", None, "None")

DOCS_DRY_RUN_MESSAGE = (
    "3 published devices selected. 1 allocated device selected.\n"
    "1 pod would be evicted in 1 namespace if the effect was NoExecute.\n"
    "This information will not be updated again. Recreate the DeviceTaintRule to trigger an "
    "update."
)


def test_exists_with_empty_key_tolerates_every_taint() -> None:
    everything = DeviceToleration(operator="Exists")
    assert all(toleration_matches(everything, t) for t in (UNHEALTHY, ECC, DEGRADED))


def test_equal_needs_key_and_value() -> None:
    assert toleration_matches(
        DeviceToleration(key="dra.example.com/unhealthy", operator="Equal", value="Broken"),
        UNHEALTHY,
    )
    assert not toleration_matches(
        DeviceToleration(key="dra.example.com/unhealthy", operator="Equal", value="Flaky"),
        UNHEALTHY,
    )
    assert not toleration_matches(
        DeviceToleration(key="dra.example.com/ecc-errors", operator="Exists"), UNHEALTHY
    )


def test_toleration_effect_restricts() -> None:
    no_schedule_only = DeviceToleration(operator="Exists", effect="NoSchedule")
    assert toleration_matches(no_schedule_only, ECC)
    assert not toleration_matches(no_schedule_only, UNHEALTHY)


def test_none_effect_never_blocks_and_untolerated_noschedule_does() -> None:
    assert blocking_taints([DEGRADED], []) == []
    assert blocking_taints([ECC, DEGRADED], []) == [ECC]
    assert blocking_taints([UNHEALTHY], [DeviceToleration(operator="Exists")]) == []


def test_tolerations_used_lists_only_those_that_matched() -> None:
    exists_unhealthy = DeviceToleration(key="dra.example.com/unhealthy", operator="Exists")
    other = DeviceToleration(key="example.com/maintenance", operator="Exists")
    assert tolerations_used([UNHEALTHY], [exists_unhealthy, other]) == [exists_unhealthy]


@given(
    key=st.text(alphabet="abcdefgh./-", min_size=1, max_size=12),
    value=st.one_of(st.none(), st.text(alphabet="abcXYZ019", max_size=6)),
    effect=st.sampled_from(["NoSchedule", "NoExecute", "None"]),
)
def test_exists_on_the_key_tolerates_any_value(key: str, value: str | None, effect: str) -> None:
    taint = DeviceTaint(key, value, effect)
    assert toleration_matches(DeviceToleration(key=key, operator="Exists"), taint)
    assert not toleration_matches(DeviceToleration(key=key + "x", operator="Exists"), taint)
    assert toleration_matches(DeviceToleration(key=key, operator="Equal", value=value), taint)


def test_rule_taints_join_slice_taints(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    devices = devices_of(snapshot)
    index = TaintIndex(
        snapshot.device_taint_rules, snapshot.device_classes, engine=engine, gates=ALL_ON
    )
    gpu0 = DeviceID("dra.example.com", "worker-1", "gpu-0")
    gpu_ecc = DeviceID("dra.example.com", "worker-1", "gpu-1")
    keys0 = sorted(t.key for t in index.taints(gpu0, devices[gpu0]))
    # gpu-0 is an H100: the class-based maintenance rule selects it as well.
    assert keys0 == [
        "dra.example.com/unhealthy",
        "dra.example.com/unhealthy",
        "example.com/maintenance",
    ]
    keys2 = sorted(t.key for t in index.taints(gpu_ecc, devices[gpu_ecc]))
    assert keys2 == [
        "dra.example.com/ecc-errors",
        "dra.example.com/unhealthy",
        "dra.example.com/unhealthy",
    ]
    tolerate_unhealthy = [DeviceToleration(key="dra.example.com/unhealthy", operator="Exists")]
    assert [t.key for t in index.blocking(gpu_ecc, devices[gpu_ecc], tolerate_unhealthy)] == [
        "dra.example.com/ecc-errors"
    ]
    gpu_clean = DeviceID("dra.example.com", "worker-1", "gpu-2")
    assert index.blocking(gpu_clean, devices[gpu_clean], tolerate_unhealthy) == []


def test_gates_switch_taints_off(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    devices = devices_of(snapshot)
    gpu_ecc = DeviceID("dra.example.com", "worker-1", "gpu-1")
    rules_off = TaintIndex(
        snapshot.device_taint_rules,
        snapshot.device_classes,
        engine=engine,
        gates=gates_with(DRADeviceTaintRules=False),
    )
    assert [t.key for t in rules_off.taints(gpu_ecc, devices[gpu_ecc])] == [
        "dra.example.com/ecc-errors"
    ]
    taints_off = TaintIndex(
        snapshot.device_taint_rules,
        snapshot.device_classes,
        engine=engine,
        gates=gates_with(DRADeviceTaints=False),
    )
    assert taints_off.taints(gpu_ecc, devices[gpu_ecc]) == ()
    assert taints_off.blocking(gpu_ecc, devices[gpu_ecc], []) == []


def test_rule_without_selector_taints_nothing(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    rule = snapshot.device_taint_rules[0]
    rule.driver = None
    devices = devices_of(snapshot)
    gpu2 = DeviceID("dra.example.com", "worker-1", "gpu-2")
    index = TaintIndex([rule], snapshot.device_classes, engine=engine, gates=ALL_ON)
    assert index.taints(gpu2, devices[gpu2]) == ()


def test_dry_run_rule_reports_the_docs_message(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    previews = {p["name"]: p for p in taint_rule_previews(snapshot, engine, gates=ALL_ON)}
    dry_run = previews["dry-run"]
    assert (
        dry_run["publishedDevices"],
        dry_run["allocatedDevices"],
        dry_run["podsToEvict"],
        dry_run["namespaces"],
    ) == (3, 1, 1, 1)
    assert dry_run["message"] == DOCS_DRY_RUN_MESSAGE
    assert dry_run["pods"] == ["ml-serving/inference-0"]
    assert previews["example"]["podsToEvict"] == 1
    assert previews["example"]["message"].endswith("1 pod needs to be evicted in 1 namespace.")
    maintenance = previews["h100-maintenance"]
    # NoSchedule evicts nobody, even though the H100 is allocated.
    assert (maintenance["publishedDevices"], maintenance["allocatedDevices"]) == (1, 1)
    assert maintenance["podsToEvict"] == 0


def test_allocation_tolerating_the_taint_is_not_evicted(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    result = snapshot.resource_claims["ml-serving/inference-gpu"].allocation.devices[0]
    result.tolerations = [DeviceToleration(key="dra.example.com/unhealthy", operator="Exists")]
    previews = {p["name"]: p for p in taint_rule_previews(snapshot, engine, gates=ALL_ON)}
    assert previews["example"]["podsToEvict"] == 0
    # A toleration that only delays eviction still counts the pod.
    result.tolerations[0].toleration_seconds = 300
    previews = {p["name"]: p for p in taint_rule_previews(snapshot, engine, gates=ALL_ON)}
    assert previews["example"]["podsToEvict"] == 1


def test_previews_off_with_the_rule_gate(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    assert taint_rule_previews(snapshot, engine, gates=gates_with(DRADeviceTaintRules=False)) == []


def test_message_pluralises_namespaces() -> None:
    message = taint_rule_message("NoExecute", 4, 2, 2, 2)
    assert message.endswith("2 pods need to be evicted in 2 different namespaces.")
    assert taint_rule_message("None", 1, 0, 0, 0).startswith(
        "1 published device selected. 0 allocated devices selected.\n0 pods would be evicted"
    )
