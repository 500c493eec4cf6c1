"""Admin access: only in labelled namespaces, refused with the gate off."""

from __future__ import annotations

import pytest

from allocator.featuregates import ALL_ON
from allocator.features.adminaccess import (
    AdminAccessError,
    admin_may_take,
    check_admin_access,
    claim_admin_access_problems,
)
from allocator.model import ResourceClaim
from tests.features.conftest import gates_with, load_example


def test_labelled_namespace_may_use_admin_access() -> None:
    snapshot = load_example("features-admin-access.yaml")
    check_admin_access("monitoring/dcgm-exporter-gpus", "gpus", snapshot.namespaces, gates=ALL_ON)


def test_unlabelled_namespace_is_refused_with_admin_access_in_the_message() -> None:
    snapshot = load_example("features-admin-access.yaml")
    with pytest.raises(AdminAccessError, match="admin access") as err:
        check_admin_access("default/dcgm-exporter-gpus", "gpus", snapshot.namespaces, gates=ALL_ON)
    assert "resource.kubernetes.io/admin-access" in str(err.value)


def test_gate_off_refuses_admin_access_everywhere() -> None:
    snapshot = load_example("features-admin-access.yaml")
    with pytest.raises(AdminAccessError, match="DRAAdminAccess feature is disabled"):
        check_admin_access(
            "monitoring/dcgm-exporter-gpus",
            "gpus",
            snapshot.namespaces,
            gates_with(DRAAdminAccess=False),
        )


def test_claim_level_problems_and_same_claim_rule() -> None:
    snapshot = load_example("features-admin-access.yaml")
    spec = snapshot.resource_claim_templates["default/all-gpus-admin"].spec
    claim = ResourceClaim("default", "dcgm-exporter-gpus", spec)
    (problem,) = claim_admin_access_problems(claim, snapshot.namespaces, gates=ALL_ON)
    assert "namespace default" in problem
    monitoring = ResourceClaim("monitoring", "dcgm-exporter-gpus", spec)
    assert claim_admin_access_problems(monitoring, snapshot.namespaces, gates=ALL_ON) == []
    assert admin_may_take(already_in_this_claim=False)
    assert not admin_may_take(already_in_this_claim=True)
