"""NVIDIA GPU DRA driver devices: attribute shapes, MIG partitions as partitionable devices, and
that the MIG tables are consistent (every set of placements NVIDIA allows fits the counters,
overlapping ones never do)."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.catalog import aws, nvidia
from allocator.quantity import Quantity

MIG_MODELS = ["a100-40gb", "a100-80gb", "h100", "h200", "b200"]
DRIVER = {"driverVersion": "580.95.05", "cudaDriverVersion": "13.0"}


def _model(key: str) -> dict:
    return aws.load_data()["gpuModels"][key]


def _template(key: str, index: int = 0) -> dict:
    return nvidia.partitioned_gpu("p5.48xlarge", index, _model(key), DRIVER)


def _q(value: str) -> Fraction:
    return Quantity.parse(value).value


def test_full_gpu_has_the_drivers_attributes():
    gpu = nvidia.full_gpu("p5.48xlarge", 3, _model("h100"), DRIVER)
    attrs = gpu["attributes"]
    assert gpu["name"] == "gpu-3"
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["brand"] == {"string": "Nvidia"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["driverVersion"] == {"version": "580.95.5"}
    assert attrs["cudaDriverVersion"] == {"version": "13.0.0"}
    assert re.fullmatch(
        r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", attrs["uuid"]["string"]
    )
    assert gpu["capacity"] == {"memory": {"value": "80Gi"}}


def test_uuids_are_deterministic_and_distinct():
    assert nvidia.gpu_uuid("p5.48xlarge", 0) == nvidia.gpu_uuid("p5.48xlarge", 0)
    uuids = {nvidia.gpu_uuid(it, i) for it in ("p5.48xlarge", "p4d.24xlarge") for i in range(8)}
    assert len(uuids) == 16


@pytest.mark.parametrize(
    ("text", "version"), [("580.95.05", "580.95.5"), ("9.0", "9.0.0"), ("13", "13.0.0")]
)
def test_versions_are_printed_as_the_driver_prints_them(text, version):
    assert nvidia.semver(text) == version


@pytest.mark.parametrize(
    ("profile", "profile_id", "start", "name"),
    [
        ("1g.10gb", 19, 0, "gpu-2-mig-1g10gb-19-0"),
        ("1g.10gb+me", 20, 6, "gpu-2-mig-1g10gb-me-20-6"),
        ("7g.141gb", 0, 0, "gpu-2-mig-7g141gb-0-0"),
    ],
)
def test_mig_device_names_follow_the_driver(profile, profile_id, start, name):
    assert nvidia.mig_device_name(2, profile, profile_id, start) == name


def test_partitioned_gpu_lists_full_gpu_then_every_placement_sorted_by_name():
    template = _template("h100")
    names = [d["name"] for d in template["devices"]]
    assert names == sorted(names)
    assert names[0] == "gpu-0"
    # 7 + 7 + 4 + 3 + 2 + 1 + 1 placements, plus the full GPU.
    assert len(names) == 26
    assert template["sharedCounters"][0]["name"] == "gpu-0-counter-set"
    mig = next(d for d in template["devices"] if d["name"] == "gpu-0-mig-3g40gb-9-4")
    assert mig["attributes"]["type"] == {"string": "mig"}
    assert mig["attributes"]["profile"] == {"string": "3g.40gb"}
    assert mig["attributes"]["parentUUID"] == template["devices"][0]["attributes"]["uuid"]
    assert "uuid" not in mig["attributes"]  # an abstract MIG device has none until created
    assert mig["capacity"]["multiprocessors"] == {"value": "60"}
    consumed = mig["consumesCounters"][0]["counters"]
    assert {k for k in consumed if k.startswith("memory-slice-")} == {
        f"memory-slice-{i}" for i in range(4, 8)
    }


def test_full_gpu_consumes_every_counter_of_its_gpu():
    template = _template("a100-80gb")
    full = template["devices"][0]
    assert full["consumesCounters"][0]["counters"] == template["sharedCounters"][0]["counters"]


def test_without_mig_the_gpus_are_plain_devices():
    templates = nvidia.gpu_templates("p4d.24xlarge", _model("a100-40gb"), 8, DRIVER, mig=False)
    assert len(templates) == 1
    assert [d["name"] for d in templates[0]["devices"]] == [f"gpu-{i}" for i in range(8)]
    assert "sharedCounters" not in templates[0]
    assert all("consumesCounters" not in d for d in templates[0]["devices"])


def test_gpus_without_mig_support_stay_whole_in_mig_mode():
    templates = nvidia.gpu_templates("g6e.12xlarge", _model("l40s"), 4, DRIVER, mig=True)
    assert [d["name"] for d in templates[0]["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def _counters(device: dict) -> dict[str, Fraction]:
    return {k: _q(v["value"]) for k, v in device["consumesCounters"][0]["counters"].items()}


def _fits(devices: list[dict], limits: dict[str, Fraction]) -> bool:
    used: dict[str, Fraction] = {}
    for device in devices:
        for name, value in _counters(device).items():
            used[name] = used.get(name, Fraction(0)) + value
    return all(value <= limits[name] for name, value in used.items())


def _media(device: dict) -> bool:
    return device["attributes"]["profile"]["string"].endswith("+me")


def _slices(device: dict) -> set[str]:
    return {k for k in device["consumesCounters"][0]["counters"] if k.startswith("memory-slice")}


@pytest.mark.parametrize("key", MIG_MODELS)
def test_nvidias_instance_counts_fit_and_one_more_does_not(key):
    """NVIDIA's 'Number of Instances Available': 7 of a 1g, 4 of a two-slice 1g, 3 of a 2g,
    2 of a 3g, 1 of a 4g / 7g / media-extension profile."""
    template = _template(key)
    limits = {k: _q(v["value"]) for k, v in template["sharedCounters"][0]["counters"].items()}
    by_profile: dict[str, list[dict]] = {}
    for device in template["devices"][1:]:
        by_profile.setdefault(device["attributes"]["profile"]["string"], []).append(device)
    expected = {19: 7, 20: 1, 15: 4, 14: 3, 9: 2, 5: 1, 0: 1}
    for profile in _model(key)["mig"]["profiles"]:
        devices = by_profile[profile["profile"]]
        disjoint: list[dict] = []
        for device in devices:
            if not any(_slices(device) & _slices(d) for d in disjoint):
                disjoint.append(device)
        count = expected[profile["id"]]
        assert len(disjoint) >= count, profile["profile"]
        assert _fits(disjoint[:count], limits), profile["profile"]
        assert not _fits(devices[: count + 1], limits) or len(devices) <= count, profile


@pytest.mark.parametrize("key", MIG_MODELS)
@settings(max_examples=80, deadline=None)
@given(order=st.randoms(use_true_random=False))
def test_any_non_overlapping_placements_fit_and_overlapping_ones_never(key, order):
    template = _template(key)
    limits = {k: _q(v["value"]) for k, v in template["sharedCounters"][0]["counters"].items()}
    migs = template["devices"][1:]
    shuffled = list(migs)
    order.shuffle(shuffled)
    chosen: list[dict] = []
    for device in shuffled:
        if any(_slices(device) & _slices(d) for d in chosen):
            # Overlapping memory slices: the counters refuse the pair.
            other = next(d for d in chosen if _slices(device) & _slices(d))
            assert not _fits([device, other], limits)
            continue
        if _media(device) and any(_media(d) for d in chosen):
            # "A single 1g profile can include media extensions": the OFA counter says so.
            assert not _fits([*chosen, device], limits)
            continue
        chosen.append(device)
        assert _fits(chosen, limits), [d["name"] for d in chosen]
    # The full GPU excludes every partition.
    assert not _fits([template["devices"][0], chosen[0]], limits)
