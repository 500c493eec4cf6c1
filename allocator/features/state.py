"""What the DRA features keep for one Allocator (one scheduling loop): the taint index, the
counter and capacity ledgers, the in-cluster devices by ID and the nodes.

``setup_features`` builds it when the Allocator is built (the pipeline's ``setup``); a run built
with ``core_pipeline(gates)`` has none. Commits and releases update it (``commit``,
``release``). The features' checks each get the part they read through the pipeline
(``allocator/pipeline.py``), so that the ledgers' modules never import this one: it sits above
every feature module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from allocator.checks import PathEntry
from allocator.claims import reallocated
from allocator.featuregates import FeatureGates
from allocator.features.capacity import SHARE, CapacityLedger, commit_shares, release_shares
from allocator.features.counters import (
    CounterLedger,
    commit_counters,
    pool_has_compatibility_groups,
    release_counters,
)
from allocator.features.taints import TaintIndex
from allocator.model import (
    Device,
    DeviceClass,
    DeviceID,
    DeviceTaintRule,
    Node,
    PoolKey,
    ResourceClaim,
    ResourceSlice,
)
from allocator.pools import DeviceWithID, PoolInfo
from allocator.records import record


@record
class FeatureState:
    """What the features keep for one Allocator (one scheduling loop)."""

    taints: TaintIndex
    counters: CounterLedger
    capacity: CapacityLedger
    devices: dict[DeviceID, Device] = field(default_factory=dict)  # in-cluster, by ID
    nodes: Mapping[str, Node] | None = None

    def commit(self, node_claim_id: str, instance_type: str, path: Sequence[PathEntry]) -> None:
        """The counters the committed devices consume and the shares they give out."""
        commit_counters(self.counters, node_claim_id, instance_type, path)
        commit_shares(self.capacity, node_claim_id, instance_type, path)

    def commit_paths(self, node_claim_id: str, per_it: Mapping[str, Sequence[PathEntry]]) -> None:
        """``commit`` for every instance type of an allocation whose devices consume counters
        or give out shares (the others change nothing: 400 instance types of one GPU each are
        passed over in one loop)."""
        for instance_type, path in per_it.items():
            for e in path:
                if e.cand.device.consumes_counters or SHARE in e.extra:
                    self.commit(node_claim_id, instance_type, path)
                    break

    def holds_on_templates(
        self, node_claim_id: str, instance_type: str, devices: Sequence[DeviceWithID]
    ) -> bool:
        """Whether counters or capacity of these template devices are in use on this
        NodeClaim's instance type (what a template shape does not hold)."""
        committed = self.counters.template_committed
        if committed and committed.get((node_claim_id, instance_type)):
            return True
        shares = self.capacity.shares
        return bool(shares) and any(
            s.template and s.node_claim_id == node_claim_id and s.instance_type == instance_type
            for d in devices
            for s in shares.get(d.id, ())
        )

    def release(self, node_claim_id: str, instance_type: str) -> None:
        """What an instance type a NodeClaim lost consumed and shared."""
        release_counters(self.counters, node_claim_id, instance_type)
        release_shares(self.capacity, node_claim_id, instance_type)


@record(frozen=True)
class FeatureInputs:
    """What ``setup_features`` reads of the Allocator being built."""

    gates: FeatureGates  # the run's, from its pipeline
    in_cluster_slices: Sequence[ResourceSlice]
    pools: Iterable[PoolInfo]  # the slice universe's pools
    preallocated: frozenset[DeviceID]  # the tracker's seed
    resource_claims: Mapping[str, ResourceClaim]
    deleting_pods: frozenset[str]
    reallocation_predicates: Sequence[Callable[[ResourceClaim], bool]]
    device_taint_rules: Sequence[DeviceTaintRule]
    device_classes: Mapping[str, DeviceClass]
    engine: Any  # the run's SelectorEngine
    nodes: Mapping[str, Node] | None


def setup_features(inputs: FeatureInputs) -> FeatureState:
    """The taint index, the counter and capacity ledgers, the device index."""
    gates = inputs.gates
    claims = list(inputs.resource_claims.values())
    # Claims the run re-allocates free the shares they hold.
    freed = [
        c.key
        for c in claims
        if reallocated(c, inputs.deleting_pods, inputs.reallocation_predicates)
    ]
    cap = CapacityLedger(claims, freed, gates=gates)
    devices: dict[DeviceID, Device] = {}
    grouped: set[PoolKey] = set()
    for info in inputs.pools:
        for s in info.slices:
            for d in s.devices:
                devices[DeviceID(s.driver, s.pool, d.name)] = d
        if pool_has_compatibility_groups(d for s in info.slices for d in s.devices):
            grouped.add(info.key)
    consuming = set(inputs.preallocated) | set(cap.seed)
    return FeatureState(
        taints=TaintIndex(
            inputs.device_taint_rules,
            dict(inputs.device_classes),
            engine=inputs.engine,
            gates=gates,
        ),
        counters=CounterLedger(inputs.in_cluster_slices, consuming, gates=gates, grouped=grouped),
        capacity=cap,
        devices=devices,
        nodes=inputs.nodes,
    )
