"""What the scheduler asks of topology, host ports and volumes, at the points Karpenter's
scheduler asks (``existingnode.go``, ``nodeclaim.go``, ``scheduler.go``).

The scheduler and its targets call these; a run is built with the implementations it uses
(``setup.build_run``). ``NO_TOPOLOGY`` is the answer for a run in which no pod has spread
constraints or pod (anti-)affinity and no running pod has anti-affinity: nothing to add.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from allocator.model import Pod, Taint
from allocator.requirements import Requirements
from allocator.scheduling.hostports import HostPort, HostPortConflict
from allocator.scheduling.volumes import VolumeLimitExceeded, Volumes


class Topology(Protocol):
    """Karpenter's ``Topology`` (``scheduling/topology.py``): domains counted from the cluster
    and the NodeClaims of the run."""

    @property
    def empty(self) -> bool:
        """No topology at all: nothing to add, nothing to record (callers may skip both)."""
        ...

    def constrains(self, pod: Pod) -> bool:
        """Whether a topology decides where the pod may go: its answers then depend on every
        placement of the run (no refusal of it may be reused)."""
        ...

    def hostname_anti_affinity_counts(self, pod: Pod) -> list[Mapping[str, int]]:
        """Per anti-affinity on hostnames that decides where the pod may go (its own, other
        pods' selecting it), the selected pods counted per hostname, live: a target whose
        one hostname counts one is refused by it whatever else it offers."""
        ...

    def add_requirements(
        self,
        pod: Pod,
        taints: list[Taint],
        pod_requirements: Requirements,
        node_requirements: Requirements,
    ) -> Requirements | None:
        """For each key a topology of the pod decides, ``node_requirements`` (the target's with
        the pod's term) narrowed to the domains allowed there, None when no topology applies;
        raises ``topology.TopologyError`` (Karpenter's refusal) when a topology leaves no
        domain. The caller checks the result is compatible with its requirements, then adds it.
        Called by every ``can_add``, after the target's own requirements (on a NodeClaim,
        after its devices too: the last narrowing)."""
        ...

    def record(self, pod: Pod, taints: list[Taint], requirements: Requirements) -> None:
        """Count the pod in the domains of the target it was added to (every ``add``)."""
        ...

    def register(self, key: str, domain: str) -> None:
        """A domain that exists from now on (a new NodeClaim's hostname placeholder)."""
        ...

    def update(self, pod: Pod) -> None:
        """The pod's groups after its preferences were relaxed (``Preferences.relax``)."""
        ...


class NoTopology:
    """No pod constrains its topology and none is constrained by another's."""

    __slots__ = ()

    @property
    def empty(self) -> bool:
        return True

    def constrains(self, pod: Pod) -> bool:
        return False

    def hostname_anti_affinity_counts(self, pod: Pod) -> list[Mapping[str, int]]:
        return []

    def add_requirements(self, pod, taints, pod_requirements, node_requirements) -> None:
        return None

    def record(self, pod, taints, requirements) -> None:
        return None

    def register(self, key: str, domain: str) -> None:
        return None

    def update(self, pod: Pod) -> None:
        return None


NO_TOPOLOGY = NoTopology()


class HostPortUsage(Protocol):
    """Karpenter's ``HostPortUsage`` of one target: the host ports its pods (and, for a new
    NodeClaim, its DaemonSet pods) hold. The pod's ports are ``PodData.host_ports``;
    ``allocator.scheduling.hostports.HostPortUsage`` implements it."""

    def conflicts(self, pod: Pod, ports: tuple[HostPort, ...]) -> HostPortConflict | None:
        """Why the pod's ports cannot be had here (None: they can)."""
        ...

    def add(self, pod: Pod, ports: tuple[HostPort, ...]) -> None: ...

    def copy(self) -> HostPortUsage: ...

    def holders(self) -> dict[str, tuple[HostPort, ...]]:
        """Pod (``namespace/name``) -> the host ports it binds (a fix suggestion's free port)."""
        ...


class VolumeUsage(Protocol):
    """Karpenter's ``VolumeUsage`` of an existing node: attached volumes per CSI driver against
    the node's attach limits. The pod's volumes are ``PodData.volumes``;
    ``allocator.scheduling.volumes.VolumeUsage`` implements it."""

    def exceeds_limits(self, volumes: Volumes) -> VolumeLimitExceeded | None: ...

    def add(self, pod: Pod, volumes: Volumes) -> None: ...
