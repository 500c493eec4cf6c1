"""The DaemonSet pods a new node would run (Karpenter's ``getDaemonSetPods``): their requests
are a new NodeClaim's daemon overhead, their host ports are bound on it before any pod lands.

Per DaemonSet of the snapshot: its newest pod in the snapshot when it has one (the pod may
differ from the template: admission webhooks and LimitRanges change pods), else the pod its
template describes; the template's required node affinity replaces the pod's, as the DaemonSet
controller pins each pod to its node by rewriting it (and those pins are not read). DaemonSet pods whose DaemonSet is not in
the snapshot stand for it, one per DaemonSet (docs/SNAPSHOT.md).
"""

from __future__ import annotations

import dataclasses

from allocator.model import DaemonSet, OwnerReference, Pod


def _daemon_owner(pod: Pod) -> OwnerReference | None:
    return next((ref for ref in pod.owner_references if ref.kind == "DaemonSet"), None)


def _controlled_by(ref: OwnerReference, ds: DaemonSet) -> bool:
    if ref.name != ds.name:
        return False
    return not (ref.uid and ds.uid) or ref.uid == ds.uid


def _without_node_pins(pod: Pod) -> Pod:
    """The pod with its affinity's ``matchFields`` dropped: the DaemonSet controller pins each
    pod to its node through them, and Karpenter reads only ``matchExpressions`` when it decides
    whether a DaemonSet runs on a new node."""
    affinity = pod.required_node_affinity
    terms = (affinity or {}).get("nodeSelectorTerms") or []
    if not any("matchFields" in term for term in terms):
        return pod
    stripped = [{k: v for k, v in term.items() if k != "matchFields"} for term in terms]
    return dataclasses.replace(
        pod, required_node_affinity={**affinity, "nodeSelectorTerms": stripped}
    )


def daemon_pods(daemon_sets: dict[str, DaemonSet], pods: list[Pod]) -> list[Pod]:
    """One pod per DaemonSet, by namespace and name."""
    newest: dict[str, Pod] = {}
    orphans: dict[tuple[str, str], Pod] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        ref = _daemon_owner(pod)
        if ref is None:
            continue
        ds = daemon_sets.get(f"{pod.namespace}/{ref.name}")
        if ds is None:
            orphans.setdefault((pod.namespace, ref.name), pod)
        elif _controlled_by(ref, ds):
            seen = newest.get(ds.key)
            if seen is None or pod.creation_timestamp > seen.creation_timestamp:
                newest[ds.key] = pod
    out: dict[tuple[str, str], Pod] = dict(orphans)
    for key, ds in daemon_sets.items():
        if ds.template is None:
            continue
        pod = newest.get(key)
        if pod is None:
            pod = ds.template
        elif ds.template.required_node_affinity is not None:
            pod = dataclasses.replace(
                pod, required_node_affinity=ds.template.required_node_affinity
            )
        out[(ds.namespace, ds.name)] = pod
    return [_without_node_pins(out[k]) for k in sorted(out)]
