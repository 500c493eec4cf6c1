"""The search trace (docs/TRACE.md): a flat list of nodes, capped, recorded only on demand.

Untraced runs pass ``NULL_TRACE``; callers on hot paths test ``trace.enabled`` before building
labels so that an untraced run pays one attribute read per tried device.
"""

from __future__ import annotations

import re
from typing import Any

KINDS = ("pod", "target", "instanceType", "claim", "request", "slot", "device")
STATUSES = ("ok", "failed", "pruned")
DEFAULT_MAX_NODES = 200_000


# A new NodeClaim's attempt is the trace target "nodepool/POOL (new NAME)", NAME the one it
# gets if the attempt creates it (the pages name it by that). Made and read here only.
_NEW_NODECLAIM = re.compile(r"^nodepool/(?P<pool>[^ ]+) \(new (?P<name>[^)]+)\)$")


def new_nodeclaim_label(pool: str, name: str) -> str:
    return f"nodepool/{pool} (new {name})"


def parse_new_nodeclaim_label(label: str) -> tuple[str, str] | None:
    """(NodePool, candidate NodeClaim name) of a new NodeClaim's attempt label, else None."""
    m = _NEW_NODECLAIM.match(label) if isinstance(label, str) else None
    return (m.group("pool"), m.group("name")) if m else None


class Trace:
    __slots__ = ("enabled", "max_nodes", "nodes", "omitted")

    def __init__(self, enabled: bool = True, max_nodes: int = DEFAULT_MAX_NODES) -> None:
        self.enabled = enabled
        self.max_nodes = max_nodes
        self.nodes: list[dict[str, Any]] = []
        self.omitted = 0

    def add(
        self,
        parent: int | None,
        kind: str,
        label: str,
        status: str = "ok",
        reason: str | None = None,
        message: str | None = None,
        **extra: Any,
    ) -> int:
        """Record a node and return its id; -1 when disabled, capped, or under a dropped parent."""
        if not self.enabled:
            return -1
        if parent == -1 or len(self.nodes) >= self.max_nodes:
            self.omitted += 1
            return -1
        node_id = len(self.nodes)
        node = {
            "id": node_id,
            "parent": parent,
            "kind": kind,
            "label": label,
            "status": status,
            "reason": reason,
            "message": message,
        }
        if extra:
            node.update(extra)
        self.nodes.append(node)
        return node_id

    def set(
        self, node_id: int, status: str, reason: str | None = None, message: str | None = None
    ) -> None:
        """Settle a node's outcome once its subtree is known."""
        if node_id < 0:
            return
        node = self.nodes[node_id]
        node["status"] = status
        if reason is not None:
            node["reason"] = reason
        if message is not None:
            node["message"] = message

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "omitted": self.omitted, "maxNodes": self.max_nodes}


NULL_TRACE = Trace(enabled=False)
