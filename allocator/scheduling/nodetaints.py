"""Node taints Karpenter disregards on a node it manages until the node is initialized
(``StateNode.Taints``): the known ephemeral taints (exact key and effect, as ``MatchTaint``
compares them), every taint whose key has a known ephemeral prefix (the Node Readiness
Controller's ``readiness.k8s.io/<rule>``), and the NodeClaim's startup taints. Once the node is
initialized every taint counts again.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.model import Taint

# (key, effect): the taints a node carries while it starts (Karpenter's KnownEphemeralTaints).
KNOWN_EPHEMERAL_TAINTS: frozenset[tuple[str, str]] = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("karpenter.sh/unregistered", "NoExecute"),
    }
)
EPHEMERAL_TAINT_KEY_PREFIXES: tuple[str, ...] = ("readiness.k8s.io/",)


def is_known_ephemeral_taint(taint: Taint) -> bool:
    if (taint.key, taint.effect) in KNOWN_EPHEMERAL_TAINTS:
        return True
    return taint.key.startswith(EPHEMERAL_TAINT_KEY_PREFIXES)


def counted_while_initializing(taints: Iterable[Taint], startup: Iterable[Taint]) -> list[Taint]:
    """The taints of a managed, not yet initialized node that still refuse pods."""
    startup_keys = {(t.key, t.effect) for t in startup}
    return [
        t
        for t in taints
        if not is_known_ephemeral_taint(t) and (t.key, t.effect) not in startup_keys
    ]
