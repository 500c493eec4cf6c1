"""AllocationTracker: who holds which device, at the granularity of (NodeClaim, instance type).

A device reserved for NodeClaim A is unavailable to every other NodeClaim, and to A's own
instance type that reserved it; A's other instance types may still use it, because only one
instance type of A will ever be launched. Template devices are local to (NodeClaim, IT).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from allocator.model import DeviceID


class AllocationTracker:
    __slots__ = ("preallocated", "cluster", "cluster_by_node_claim", "templates", "versions")

    def __init__(self, allocated_devices: Iterable[DeviceID] = ()) -> None:
        # The caller passes the seed already filtered for deleting pods.
        self.preallocated: frozenset[DeviceID] = frozenset(allocated_devices)
        # device -> NodeClaim -> instance types holding it
        self.cluster: dict[DeviceID, dict[str, set[str]]] = {}
        # NodeClaim -> IT -> devices (inverse index, for release)
        self.cluster_by_node_claim: dict[str, dict[str, set[DeviceID]]] = {}
        self.templates: dict[str, dict[str, set[DeviceID]]] = {}
        # NodeClaim -> how many times what it holds changed (what is worked out of its
        # holdings is kept while its version stays).
        self.versions: dict[str, int] = {}

    def is_allocated(
        self, device: DeviceID, template: bool, node_claim: str, instance_type: str
    ) -> bool:
        """The visibility rules of the design's Device Eligibility Checks, step 1 (the
        allocated check, allocator/eligibility.py)."""
        if template:
            its = self.templates.get(node_claim)
            return its is not None and device in its.get(instance_type, ())
        if device in self.preallocated:
            return True
        holders = self.cluster.get(device)
        if not holders:
            return False
        return any(holder != node_claim or instance_type in its for holder, its in holders.items())

    def holders(self, device: DeviceID) -> dict[str, set[str]]:
        return self.cluster.get(device, {})

    def record(
        self,
        node_claim: str,
        instance_type: str,
        cluster_devices: Iterable[DeviceID],
        template_devices: Iterable[DeviceID],
    ) -> None:
        self.versions[node_claim] = self.versions.get(node_claim, 0) + 1
        by_it = self.cluster_by_node_claim.setdefault(node_claim, {}).setdefault(
            instance_type, set()
        )
        for d in cluster_devices:
            self.cluster.setdefault(d, {}).setdefault(node_claim, set()).add(instance_type)
            by_it.add(d)
        self.templates.setdefault(node_claim, {}).setdefault(instance_type, set()).update(
            template_devices
        )

    def record_instance_types(
        self, node_claim: str, held: Sequence[tuple[str, list[DeviceID], list[DeviceID]]]
    ) -> None:
        """``record`` for each (instance type, in-cluster devices, template devices) of one
        NodeClaim's commit (a NodeClaim of 400 instance types records 400 at once)."""
        if not held:
            return
        self.versions[node_claim] = self.versions.get(node_claim, 0) + 1
        cluster_by_it = self.cluster_by_node_claim.setdefault(node_claim, {})
        templates_by_it = self.templates.setdefault(node_claim, {})
        cluster = self.cluster
        for instance_type, cluster_devices, template_devices in held:
            by_it = cluster_by_it.setdefault(instance_type, set())
            for d in cluster_devices:
                cluster.setdefault(d, {}).setdefault(node_claim, set()).add(instance_type)
                by_it.add(d)
            templates = templates_by_it.get(instance_type)
            if templates is None:
                templates_by_it[instance_type] = set(template_devices)
            else:
                templates.update(template_devices)

    def release_instance_type(self, node_claim: str, instance_type: str) -> list[DeviceID]:
        """Drop every reservation of (NodeClaim, IT); returns the devices now free again (no
        other instance type of any NodeClaim holds them)."""
        self.versions[node_claim] = self.versions.get(node_claim, 0) + 1
        freed: list[DeviceID] = []
        by_it = self.cluster_by_node_claim.get(node_claim)
        devices = by_it.pop(instance_type, set()) if by_it is not None else set()
        for d in sorted(devices):
            holders = self.cluster.get(d)
            if holders is None:
                continue
            its = holders.get(node_claim)
            if its is not None:
                its.discard(instance_type)
                if not its:
                    del holders[node_claim]
            if not holders:
                del self.cluster[d]
                freed.append(d)
        templates = self.templates.get(node_claim)
        if templates is not None:
            templates.pop(instance_type, None)
        return freed

    def allocated_cluster_devices(self) -> set[DeviceID]:
        """Every in-cluster device held: seed plus in-flight reservations (for pool status)."""
        return set(self.preallocated) | set(self.cluster)
