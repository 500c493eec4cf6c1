"""A new NodeClaim's spec.resources.requests on the run page (pages/selectors.py
``node_claim_requests``): its pods' requests plus the DaemonSet overhead of the instance types
it may still launch as (Karpenter's addDaemonRequests: the least of their overhead groups)."""

from __future__ import annotations

import yaml

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.scheduling.karpenter.kit import (
    ARCH,
    daemon_set,
    default_instance_types,
    node_pool,
    pod,
)


def _requests(owner, *docs: dict) -> dict[str, dict[str, str]]:
    from dra_web.pages.selectors import node_claim_requests
    from dra_web.snapshots.services import create_snapshot

    text = yaml.safe_dump_all(list(docs))
    snapshot = create_snapshot(owner, [("cluster.yaml", text.encode())], "daemonsets")
    result = simulate(load_files([("cluster.yaml", text)]), SimulationOptions()).result
    return node_claim_requests(snapshot, result)


def test_only_the_daemonsets_of_the_nodeclaims_instance_types_count(maria):
    amd64 = [{"key": ARCH, "operator": "In", "values": ["amd64"]}]
    arm64 = [{"key": ARCH, "operator": "In", "values": ["arm64"]}]
    requests = _requests(
        maria,
        node_pool(),
        *default_instance_types(),
        daemon_set("amd64-agent", requests={"cpu": "500m"}, node_requirements=amd64),
        daemon_set("arm64-agent", requests={"cpu": "8"}, node_requirements=arm64),
        # Only amd64 instance types are left for it: the arm64 agent's 8 CPU never count.
        pod("api-0", cpu="1", node_requirements=amd64),
    )
    assert requests == {"default-1": {"cpu": "1500m", "pods": "2"}}
