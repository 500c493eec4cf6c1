"""Why a new NodeClaim launches in the zones it does (the result's ``zonePinnedBy``).

Karpenter narrows a NodeClaim's zone requirement as pods are added: by the NodePool, by a
pod's node selector or required node affinity, by the zones its volumes live in, by its
topology (spread, pod affinity and anti-affinity over the zone key) and, with DRA, by the
node selectors of the devices picked. This reads the NodeClaim's pods after the run and names
each of those that constrains the zone; it changes no decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.model import Pod
from allocator.records import record
from allocator.requirements import LABEL_ZONE, Requirements
from allocator.scheduling.preferences import strict_pod_requirements


@record(frozen=True)
class ZonePin:
    """What pins a new NodeClaim's zone, for the result and the run page."""

    source: str  # nodepool | pod | volume | topology | devices
    detail: str
    pod: str | None = None

    def to_json(self) -> dict:
        return {"source": self.source, "pod": self.pod, "detail": self.detail}


def _zones(reqs: Requirements) -> str | None:
    """The zone requirement in Karpenter's words, None when the key is unconstrained."""
    return str(reqs.get(LABEL_ZONE)) if reqs.has(LABEL_ZONE) else None


def _topology(pod: Pod) -> Iterable[str]:
    for tsc in pod.topology_spread_constraints:
        if tsc.topology_key == LABEL_ZONE:
            yield f"topology spread over zones (maxSkew {tsc.max_skew}, {tsc.when_unsatisfiable})"
    for kind, affinity in (
        ("pod affinity", pod.pod_affinity),
        ("pod anti-affinity", pod.pod_anti_affinity),
    ):
        if affinity is None:
            continue
        terms = [*affinity.required, *(w.term for w in affinity.preferred)]
        if any(term.topology_key == LABEL_ZONE for term in terms):
            yield f"{kind} over zones"


def zone_pins(
    node_pool_requirements: Requirements,
    pods: Iterable[Pod],
    volume_alternatives,
    claim_node_selectors: dict[str, list[dict]],
) -> list[ZonePin]:
    """What constrains the zone of a NodeClaim holding ``pods`` (in the order they joined).

    ``volume_alternatives(pod)``: the pod's volume topology alternatives;
    ``claim_node_selectors``: per pod key, the node selectors its claims' allocations record."""
    pins: list[ZonePin] = []
    pool_zones = _zones(node_pool_requirements)
    if pool_zones is not None:
        pins.append(ZonePin("nodepool", f"NodePool requirement {pool_zones}"))
    for pod in pods:
        try:
            own = _zones(strict_pod_requirements(pod))
        except ValueError:  # a requirement that cannot be read constrains nothing here
            own = None
        if own is not None:
            pins.append(ZonePin("pod", f"node selector or affinity {own}", pod.key))
        for alternative in volume_alternatives(pod):
            if alternative.requirements.has(LABEL_ZONE):
                pins.append(ZonePin("volume", alternative.describe(), pod.key))
        for words in _topology(pod):
            pins.append(ZonePin("topology", words, pod.key))
        for selector in claim_node_selectors.get(pod.key, ()):
            terms = selector.get("nodeSelectorTerms") or []
            zoned = [
                expr
                for term in terms
                for expr in term.get("matchExpressions") or []
                if expr.get("key") == LABEL_ZONE
            ]
            if zoned:
                values = sorted({v for expr in zoned for v in expr.get("values") or []})
                pins.append(ZonePin("devices", f"devices in zone {', '.join(values)}", pod.key))
    return pins
