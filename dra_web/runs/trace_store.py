"""Index a trace (docs/TRACE.md) into TraceNode rows with subtree counts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

BASE_FIELDS = ("id", "parent", "kind", "label", "status", "reason", "message")


def search_text(label: Any, extra: dict[str, Any]) -> str:
    parts = [str(label or "")]
    parts.extend(v for v in extra.values() if isinstance(v, str))
    return " ".join(parts).lower()


def index_rows(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yield one row per node: base fields, depth, child count, descendant counts, extras.

    Works for any order of ids (a parent need not precede its children); a node whose parent
    is unknown is treated as a root.
    """
    by_id = {node["id"]: i for i, node in enumerate(nodes)}
    n = len(nodes)
    parent_pos = [by_id.get(node.get("parent"), -1) for node in nodes]
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for i, p in enumerate(parent_pos):
        (children[p] if p >= 0 else roots).append(i)
    # Iterative preorder from the roots; descendants summed in reverse preorder.
    order: list[int] = []
    depth = [0] * n
    stack = list(reversed(roots))
    seen = [False] * n
    while stack:
        i = stack.pop()
        if seen[i]:
            continue  # a cycle in a malformed trace: visit once
        seen[i] = True
        order.append(i)
        for c in reversed(children[i]):
            depth[c] = depth[i] + 1
            stack.append(c)
    descendants = [0] * n
    failed = [0] * n
    for i in reversed(order):
        p = parent_pos[i]
        if p >= 0 and seen[p]:
            descendants[p] += descendants[i] + 1
            failed[p] += failed[i] + (1 if nodes[i].get("status") == "failed" else 0)
    for i in order:
        node = nodes[i]
        extra = {k: v for k, v in node.items() if k not in BASE_FIELDS}
        yield {
            "node_id": node["id"],
            "parent": node.get("parent") if parent_pos[i] >= 0 else None,
            "depth": depth[i],
            "kind": str(node.get("kind") or "")[:16],
            "label": str(node.get("label") or ""),
            "status": str(node.get("status") or "")[:8],
            "reason": (str(node["reason"])[:40] if node.get("reason") is not None else None),
            "message": node.get("message"),
            "child_count": len(children[i]),
            "descendants": descendants[i],
            "failed_descendants": failed[i],
            "extra": extra or None,
            "search": search_text(node.get("label"), extra),
        }
