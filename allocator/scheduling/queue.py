"""Which pods one provisioning loop schedules, and in what order (docs/SIMULATION.md).

Karpenter's queue sorts by CPU request descending, then memory descending, then creation time,
then UID; namespace/name breaks the remaining ties so that a run is reproducible.
"""

from __future__ import annotations

from dataclasses import field

from allocator.model import Node, NodeClaim, Pod
from allocator.records import record
from allocator.scheduling.provisionable import IgnoredPod, partition
from allocator.scheduling.volumes import Storage, VolumeTopology

_NO_RESCHEDULE_OWNERS = frozenset({"DaemonSet", "Node"})  # DaemonSet pods; mirror (static) pods
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@record
class PodSets:
    """The pods the loop works on, derived once from the snapshot."""

    pending: list[Pod] = field(default_factory=list)  # in queue order
    displaced: list[Pod] = field(default_factory=list)  # pods of --disrupt nodes rescheduled
    deleting: set[str] = field(default_factory=set)  # "ns/name" of deleting pods
    bound: list[Pod] = field(default_factory=list)  # pods that keep consuming node resources
    # Pending pods Karpenter does not provision for, in queue order (scheduling/provisionable,
    # docs/SIMULATION.md).
    ignored: list[IgnoredPod] = field(default_factory=list)
    # Pod key -> the volume requirement alternatives of a pending pod whose volumes pin it.
    volume_topology: dict[str, VolumeTopology] = field(default_factory=dict)


def _milli(pod: Pod, resource: str) -> int:
    quantity = pod.requests.get(resource)
    return quantity.milli_value() if quantity is not None else 0


def queue_key(pod: Pod) -> tuple:
    """Karpenter's order: cpu desc, memory desc, creationTimestamp asc, UID, namespace/name."""
    return (
        -_milli(pod, "cpu"),
        -_milli(pod, "memory"),
        pod.creation_timestamp or "",
        pod.uid or "",
        pod.namespace,
        pod.name,
    )


def is_reschedulable(pod: Pod) -> bool:
    """A bound pod Karpenter would move off a node going away."""
    if pod.deleting or pod.phase in _FINISHED_PHASES:
        return False
    return not any(kind in _NO_RESCHEDULE_OWNERS for kind in pod.owner_kinds)


def deleting_nodes(nodes: dict[str, Node], node_claims: dict[str, NodeClaim]) -> set[str]:
    """Nodes with a deletionTimestamp, or whose NodeClaim has one."""
    names = {name for name, node in nodes.items() if node.deleting}
    names.update(nc.node_name for nc in node_claims.values() if nc.deleting and nc.node_name)
    return names


def collect_pods(
    pods: list[Pod],
    going_away: set[str],
    disrupted: set[str] = frozenset(),
    storage: Storage | None = None,
) -> PodSets:
    """Split the snapshot's pods into pending (queue order), ignored, deleting and bound.

    ``going_away``: deleting nodes plus the nodes named by ``--disrupt``. ``storage``: the
    snapshot's claims, volumes and classes the pods' volumes are read from.
    """
    sets = PodSets()
    pending: list[Pod] = []
    for pod in pods:
        if pod.deleting:
            sets.deleting.add(pod.key)
        if pod.node_name is None:
            # DaemonSet pods are the DaemonSet controller's to place, never Karpenter's.
            if is_reschedulable(pod):
                pending.append(pod)
            continue
        if pod.node_name in going_away:
            sets.deleting.add(pod.key)
            if is_reschedulable(pod):
                pending.append(pod)
                if pod.node_name in disrupted:
                    sets.displaced.append(pod)
            continue
        if pod.phase not in _FINISHED_PHASES:
            sets.bound.append(pod)
    pending.sort(key=queue_key)
    provisioning = partition(pending, storage or Storage())
    sets.pending = provisioning.pending
    sets.ignored = provisioning.ignored
    sets.volume_topology = provisioning.volume_topology
    sets.displaced.sort(key=queue_key)
    return sets
