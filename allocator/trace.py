"""The search trace (docs/TRACE.md): a flat list of nodes, capped, recorded only on demand.

Untraced runs pass ``NULL_TRACE``; callers on hot paths test ``trace.enabled`` before building
labels so that an untraced run pays one attribute read per tried device.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Any

KINDS = ("pod", "target", "instanceType", "claim", "request", "slot", "device")
STATUSES = ("ok", "failed", "pruned")
DEFAULT_MAX_NODES = 200_000
MAX_EXAMPLE_TARGETS = 5  # example targets of a node that stands for several (as in reasons)


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

    def group_targets(self, root: int, key: Callable[[list[dict[str, Any]]], Hashable]) -> None:
        """Targets under ``root`` (a pod's attempt, settled) that were refused the same way
        (``key`` of the target's node and its subtree) share the first one's node, which
        counts them (``targets``) and names a few (``exampleTargets``); the others and their
        subtrees are dropped and the attempt's nodes renumbered, as the result groups a failed
        pod's ``reasons``: a trace does not grow with the number of nodes refusing alike."""
        if root < 0:
            return
        nodes = self.nodes
        top: dict[int, int] = {}  # node id -> the target (child of root) it belongs under
        members: dict[int, list[dict[str, Any]]] = {}
        for node in nodes[root + 1 :]:
            parent = node["parent"]
            if parent == root:
                top[node["id"]] = node["id"]
                members[node["id"]] = [node]
            elif parent in top:
                owner = top[node["id"]] = top[parent]
                members[owner].append(node)
        groups: dict[Hashable, dict[str, Any]] = {}
        dropped: set[int] = set()
        for target, subtree in members.items():
            head = subtree[0]
            if head["kind"] != "target" or head["status"] == "ok":
                continue
            group_key = key(subtree)
            first = groups.get(group_key)
            if first is None:
                groups[group_key] = head
                continue
            first["targets"] = first.get("targets", 1) + 1
            examples = first.setdefault("exampleTargets", [first["label"]])
            if len(examples) < MAX_EXAMPLE_TARGETS and head["label"] not in examples:
                examples.append(head["label"])  # a target tried again (a relaxed try): once
            dropped.add(target)
        if not dropped:
            return
        kept = [n for n in nodes[root + 1 :] if top.get(n["id"], -1) not in dropped]
        renumbered = {root: root}
        for new_id, node in enumerate(kept, start=root + 1):
            renumbered[node["id"]] = new_id
            node["id"] = new_id
            parent = node["parent"]
            node["parent"] = renumbered.get(parent, parent)
        del nodes[root + 1 :]
        nodes.extend(kept)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "omitted": self.omitted, "maxNodes": self.max_nodes}


NULL_TRACE = Trace(enabled=False)
