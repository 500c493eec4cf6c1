"""FirstAvailable subrequests: order, result names, constraint scoping, the gate."""

from __future__ import annotations

import pytest

from allocator.featuregates import ALL_ON
from allocator.features.prioritized import (
    PrioritizedListError,
    constraint_applies,
    min_devices,
    request_alternatives,
    top_level_request,
)
from tests.features.conftest import EXAMPLES, gates_with, load_example, load_yaml


def gpu_request():
    snapshot = load_example("features-prioritized-list.yaml")
    template = snapshot.resource_claim_templates["default/big-or-two-small"]
    return template.spec.requests[0], template.spec.constraints


def test_subrequests_are_tried_in_listed_order() -> None:
    request, _ = gpu_request()
    alternatives = request_alternatives(request, gates=ALL_ON)
    assert [a.result_name for a in alternatives] == ["gpu/one-h100", "gpu/two-l4"]
    assert [a.spec.count for a in alternatives] == [1, 2]
    assert min_devices(alternatives) == 1
    assert not any(a.admin_access for a in alternatives)


def test_gate_off_rejects_first_available() -> None:
    request, _ = gpu_request()
    with pytest.raises(PrioritizedListError, match="only Exactly requests"):
        request_alternatives(request, gates_with(DRAPrioritizedList=False), "default/llm-0-gpu")


def test_exactly_request_is_its_own_single_alternative() -> None:
    snapshot = load_example("features-taints.yaml")
    request = snapshot.resource_claim_templates["ml-training/one-gpu"].spec.requests[0]
    (only,) = request_alternatives(request, gates_with(DRAPrioritizedList=False))
    assert only.result_name == "gpu" and only.subrequest is None


def test_duplicate_subrequest_names_are_refused() -> None:
    request, _ = gpu_request()
    request.first_available[1].name = "one-h100"
    with pytest.raises(PrioritizedListError, match="unique"):
        request_alternatives(request, gates=ALL_ON)


def test_constraints_apply_to_the_chosen_subrequest() -> None:
    _, constraints = gpu_request()
    whole, h100_only = constraints
    assert constraint_applies(whole.requests, "gpu", "two-l4")
    assert constraint_applies(h100_only.requests, "gpu", "one-h100")
    assert not constraint_applies(h100_only.requests, "gpu", "two-l4")
    assert constraint_applies([], "nic", None)
    assert top_level_request("gpu/two-l4") == "gpu"


# --- All mode inside a prioritized list -------------------------------------------------------

ALL_H100_FIRST = (
    (EXAMPLES / "features-prioritized-list.yaml")
    .read_text()
    .replace(
        "        - name: one-h100\n          deviceClassName: gpu.example.com\n",
        "        - name: all-h100\n          deviceClassName: gpu.example.com\n"
        "          allocationMode: All\n",
    )
    .replace("requests: [gpu/one-h100]", "requests: [gpu/all-h100]")
)


def _llm_0(text: str) -> dict:
    from allocator.simulation import SimulationOptions, simulate

    result = simulate(load_yaml(text), SimulationOptions.from_json({})).result
    return next(p for p in result["pods"] if p["pod"] == "default/llm-0")


def test_all_mode_subrequest_matching_no_device_falls_through_to_the_next() -> None:
    # "All-mode requires at least one device to be satisfiable" (Karpenter's dfs): worker-1
    # has no H100, so gpu/all-h100 fails instead of being granted zero devices.
    assert "allocationMode: All" in ALL_H100_FIRST
    pod = _llm_0(ALL_H100_FIRST)
    assert pod["scheduled"], pod.get("error")
    chosen = [(d["request"], d["device"]) for c in pod["claims"] for d in c["devices"]]
    assert chosen == [("gpu/two-l4", "gpu-1"), ("gpu/two-l4", "gpu-2")]


def test_all_mode_subrequest_alone_matching_no_device_fails_the_request() -> None:
    only_all = ALL_H100_FIRST.split("        - name: two-l4")[0] + (
        "      constraints:\n      - requests: [gpu]\n        matchAttribute: "
        "gpu.example.com/numaNode\n"
        + ALL_H100_FIRST.split("matchAttribute: gpu.example.com/nvlinkDomain\n")[1]
    )
    assert "- name: two-l4" not in only_all and "kind: Pod" in only_all
    pod = _llm_0(only_all)
    assert not pod["scheduled"]
    assert "all-h100: no device matches (allocation mode All needs at least one)" in pod["error"]
    assert pod["claims"] == [] or all(not c["devices"] for c in pod["claims"])
