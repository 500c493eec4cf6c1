"""FirstAvailable subrequests: order, result names, constraint scoping, the gate."""

from __future__ import annotations

import pytest

from allocator.features.prioritized import (
    PrioritizedListError,
    constraint_applies,
    min_devices,
    request_alternatives,
    top_level_request,
)
from tests.features.conftest import gates_with, load_example


def gpu_request():
    snapshot = load_example("features-prioritized-list.yaml")
    template = snapshot.resource_claim_templates["default/big-or-two-small"]
    return template.spec.requests[0], template.spec.constraints


def test_subrequests_are_tried_in_listed_order() -> None:
    request, _ = gpu_request()
    alternatives = request_alternatives(request)
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
        request_alternatives(request)


def test_constraints_apply_to_the_chosen_subrequest() -> None:
    _, constraints = gpu_request()
    whole, h100_only = constraints
    assert constraint_applies(whole.requests, "gpu", "two-l4")
    assert constraint_applies(h100_only.requests, "gpu", "one-h100")
    assert not constraint_applies(h100_only.requests, "gpu", "two-l4")
    assert constraint_applies([], "nic", None)
    assert top_level_request("gpu/two-l4") == "gpu"
