"""A finished run's failed pods, kept apart from its result when the run is stored: a failed
pod's explanation (the run page's partial, its reasons, its review page) reads its own entry
and the few names it links to instead of decoding a result of tens of megabytes (Karpenter's
DRA benchmark: 24 MB, 0.2 s for one pod's entry).

Pure: from the result document. Bounded by the failed pods' entries (each under 20 kB, see
docs/RESULT.md) and the result's NodeClaim and pool names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Failures:
    """The result's entries of the pods not placed, with what their pages link to."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod key -> its entry
    node_claim_names: frozenset[str] = frozenset()  # the result's nodeClaims[].name
    pool_keys: tuple[tuple[str, str], ...] = ()  # (driver, pool) of pools[], in order

    def pools(self) -> list[dict[str, str]]:
        """``pools[]`` as far as links to the Pools tab read it."""
        return [{"driver": driver, "pool": pool} for driver, pool in self.pool_keys]

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "nodeClaims": sorted(self.node_claim_names),
            "pools": [list(key) for key in self.pool_keys],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Failures:
        return cls(
            pods=dict(data.get("pods") or {}),
            node_claim_names=frozenset(data.get("nodeClaims") or ()),
            pool_keys=tuple((driver, pool) for driver, pool in data.get("pools") or ()),
        )


def derive(result: Mapping[str, Any]) -> Failures:
    return Failures(
        pods={
            p["pod"]: p
            for p in result.get("pods") or []
            if isinstance(p, dict) and not p.get("scheduled") and isinstance(p.get("pod"), str)
        },
        node_claim_names=frozenset(
            nc["name"]
            for nc in result.get("nodeClaims") or []
            if isinstance(nc, dict) and isinstance(nc.get("name"), str)
        ),
        pool_keys=tuple(
            (str(p.get("driver") or ""), str(p.get("pool") or ""))
            for p in result.get("pools") or []
            if isinstance(p, dict)
        ),
    )
