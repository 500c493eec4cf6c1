"""Compare two runs: their results (docs/RESULT.md) and where their DFS traces diverge.

Pure functions over plain dicts, so the diff is tested without a database.

Traces are aligned by the path of labels from the root: a node's key is (its parent's key,
its label, how many earlier siblings carry the same label). A *divergence point* is a node
that exists in one trace only while its parent exists in both, or a node present in both
whose outcome (status, reason) differs while all its children agree: the place where the
search really went another way, not an ancestor that merely inherited the change.
"""

from __future__ import annotations

from typing import Any

MAX_POINTS = 200


# --- results ---------------------------------------------------------------------------------


def _pods(result: dict | None) -> dict[str, dict]:
    return {p.get("pod"): p for p in (result or {}).get("pods") or [] if p.get("pod")}


def _target_key(target: dict | None) -> tuple | None:
    if not target:
        return None
    return (target.get("kind"), target.get("name"), bool(target.get("new")))


def _device_set(pod: dict) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for claim in pod.get("claims") or []:
        out[claim.get("claim")] = {
            (
                d.get("request"),
                d.get("driver"),
                d.get("pool"),
                d.get("device"),
                d.get("source"),
                d.get("instanceType"),
            )
            for d in claim.get("devices") or []
        }
    return out


def _device_json(t: tuple) -> dict:
    keys = ("request", "driver", "pool", "device", "source", "instanceType")
    return dict(zip(keys, t, strict=True))


def _sort_devices(ds: set[tuple]) -> list[dict]:
    return [_device_json(t) for t in sorted(ds, key=lambda t: tuple(str(x) for x in t))]


def diff_results(a: dict | None, b: dict | None) -> dict[str, Any]:
    pa, pb = _pods(a), _pods(b)
    newly_placed, newly_failed, changed_targets, changed_devices, changed_errors = (
        [],
        [],
        [],
        [],
        [],
    )
    for name in sorted(set(pa) & set(pb)):
        x, y = pa[name], pb[name]
        if not x.get("scheduled") and y.get("scheduled"):
            newly_placed.append({"pod": name, "target": y.get("target"), "error": x.get("error")})
        elif x.get("scheduled") and not y.get("scheduled"):
            newly_failed.append({"pod": name, "target": x.get("target"), "error": y.get("error")})
        elif x.get("scheduled") and _target_key(x.get("target")) != _target_key(y.get("target")):
            changed_targets.append({"pod": name, "a": x.get("target"), "b": y.get("target")})
        elif not x.get("scheduled") and x.get("error") != y.get("error"):
            changed_errors.append({"pod": name, "a": x.get("error"), "b": y.get("error")})
        da, db = _device_set(x), _device_set(y)
        for claim in sorted(set(da) | set(db), key=str):
            sa, sb = da.get(claim, set()), db.get(claim, set())
            if sa != sb:
                changed_devices.append(
                    {
                        "pod": name,
                        "claim": claim,
                        "added": _sort_devices(sb - sa),
                        "removed": _sort_devices(sa - sb),
                    }
                )
    nca = {n.get("name"): n for n in (a or {}).get("nodeClaims") or []}
    ncb = {n.get("name"): n for n in (b or {}).get("nodeClaims") or []}
    changed_ncs = []
    for name in sorted(set(nca) & set(ncb)):
        x, y = nca[name], ncb[name]
        ita, itb = set(x.get("instanceTypes") or []), set(y.get("instanceTypes") or [])
        entry: dict[str, Any] = {"name": name}
        if ita != itb:
            entry["instanceTypesAdded"] = sorted(itb - ita)
            entry["instanceTypesRemoved"] = sorted(ita - itb)
        if (x.get("requirements") or []) != (y.get("requirements") or []):
            entry["requirements"] = {"a": x.get("requirements"), "b": y.get("requirements")}
        if x.get("nodePool") != y.get("nodePool"):
            entry["nodePool"] = {"a": x.get("nodePool"), "b": y.get("nodePool")}
        if sorted(x.get("pods") or []) != sorted(y.get("pods") or []):
            entry["podsAdded"] = sorted(set(y.get("pods") or []) - set(x.get("pods") or []))
            entry["podsRemoved"] = sorted(set(x.get("pods") or []) - set(y.get("pods") or []))
        if (x.get("annotations") or {}) != (y.get("annotations") or {}):
            entry["annotations"] = {"a": x.get("annotations"), "b": y.get("annotations")}
        if len(entry) > 1:
            changed_ncs.append(entry)
    sa, sb = (a or {}).get("stats") or {}, (b or {}).get("stats") or {}
    return {
        "stats": {"a": sa, "b": sb},
        "cost": cost(a, b),
        "pods": {
            "newlyPlaced": newly_placed,
            "newlyFailed": newly_failed,
            "onlyInA": sorted(set(pa) - set(pb)),
            "onlyInB": sorted(set(pb) - set(pa)),
            "changedTargets": changed_targets,
            "changedErrors": changed_errors,
        },
        "devices": changed_devices,
        "nodeClaims": {
            "added": [ncb[n] for n in sorted(set(ncb) - set(nca))],
            "removed": [nca[n] for n in sorted(set(nca) - set(ncb))],
            "changed": changed_ncs,
        },
    }


def launch_cost(result: dict | None) -> tuple[float, int]:
    """(per hour, NodeClaims without a price): the sum of each new NodeClaim's cheapest
    offering that its requirements allow (so its NodePool's capacity types), as the result
    records it in ``nodeClaims[].price``."""
    total, unpriced = 0.0, 0
    for nc in (result or {}).get("nodeClaims") or []:
        price = nc.get("price") if isinstance(nc, dict) else None
        if isinstance(price, int | float) and not isinstance(price, bool):
            total += float(price)
        else:
            unpriced += 1
    return round(total, 6), unpriced


def cost(a: dict | None, b: dict | None) -> dict[str, Any]:
    """``{"before", "after"}`` per hour of the new NodeClaims of run A (before) and B (after),
    their difference, and how many NodeClaims of each had no price."""
    before, unpriced_a = launch_cost(a)
    after, unpriced_b = launch_cost(b)
    return {
        "before": before,
        "after": after,
        "delta": round(after - before, 6),
        "unpriced": {"before": unpriced_a, "after": unpriced_b},
    }


# --- traces ----------------------------------------------------------------------------------


class _Aligned:
    """Key every node of a trace by its path of labels; keys are small ints shared by traces."""

    __slots__ = ("keys", "by_key", "parent", "children", "size", "nodes", "rank")

    def __init__(self, nodes: list[dict], table: dict[tuple, int]) -> None:
        self.nodes = nodes
        pos = {node["id"]: i for i, node in enumerate(nodes)}
        n = len(nodes)
        self.parent = [pos.get(node.get("parent"), -1) for node in nodes]
        self.children: list[list[int]] = [[] for _ in range(n)]
        roots: list[int] = []
        for i, p in enumerate(self.parent):
            (self.children[p] if p >= 0 else roots).append(i)
        self.keys = [-1] * n
        self.by_key: dict[int, int] = {}
        order: list[int] = []
        self.rank = [n] * n  # preorder position: the search order
        stack: list[tuple[int, int]] = [(-1, -1)]  # (position, key) of the virtual root
        while stack:
            i, key = stack.pop()
            if i >= 0:
                self.rank[i] = len(order)
                order.append(i)
            kids = roots if i < 0 else self.children[i]
            seen: dict[str, int] = {}
            pushed = []
            for c in kids:
                label = str(nodes[c].get("label"))
                occurrence = seen.get(label, 0)
                seen[label] = occurrence + 1
                ident = (key, nodes[c].get("kind"), label, occurrence)
                ckey = table.setdefault(ident, len(table))
                self.keys[c] = ckey
                self.by_key[ckey] = c
                pushed.append((c, ckey))
            stack.extend(reversed(pushed))
        self.size = [1] * n
        for i in reversed(order):
            p = self.parent[i]
            if p >= 0:
                self.size[p] += self.size[i]

    def path(self, i: int) -> list[str]:
        out = []
        while i >= 0:
            out.append(str(self.nodes[i].get("label")))
            i = self.parent[i]
        return out[::-1]


def _outcome(node: dict) -> tuple:
    return (node.get("status"), node.get("reason"))


def _brief(node: dict | None) -> dict | None:
    if node is None:
        return None
    return {
        k: node.get(k) for k in ("id", "kind", "label", "status", "reason", "message") if k in node
    }


def diff_traces(a: dict | None, b: dict | None, max_points: int = MAX_POINTS) -> dict[str, Any]:
    na = list((a or {}).get("nodes") or [])
    nb = list((b or {}).get("nodes") or [])
    table: dict[tuple, int] = {}
    ta, tb = _Aligned(na, table), _Aligned(nb, table)
    points: list[dict[str, Any]] = []

    def matched_parent(tree: _Aligned, other: _Aligned, i: int) -> bool:
        p = tree.parent[i]
        return p < 0 or tree.keys[p] in other.by_key

    for i, key in enumerate(ta.keys):
        j = tb.by_key.get(key)
        if j is None:
            if key >= 0 and matched_parent(ta, tb, i):
                points.append(
                    {
                        "type": "onlyInA",
                        "path": ta.path(i),
                        "a": _brief(na[i]),
                        "b": None,
                        "subtree": ta.size[i],
                        "order": ta.rank[i],
                    }
                )
            continue
        if _outcome(na[i]) == _outcome(nb[j]):
            continue
        children_agree = all(
            tb.by_key.get(ta.keys[c]) is not None
            and _outcome(na[c]) == _outcome(nb[tb.by_key[ta.keys[c]]])
            for c in ta.children[i]
        ) and all(tb.keys[c] in ta.by_key for c in tb.children[j])
        if children_agree:
            points.append(
                {
                    "type": "changed",
                    "path": ta.path(i),
                    "a": _brief(na[i]),
                    "b": _brief(nb[j]),
                    "subtree": max(ta.size[i], tb.size[j]),
                    "order": ta.rank[i],
                }
            )
    for j, key in enumerate(tb.keys):
        if key >= 0 and key not in ta.by_key and matched_parent(tb, ta, j):
            p = tb.parent[j]
            # Place a B-only subtree in A's order just after its (aligned) parent.
            order = ta.rank[ta.by_key[tb.keys[p]]] + 0.5 if p >= 0 else len(na)
            points.append(
                {
                    "type": "onlyInB",
                    "path": tb.path(j),
                    "a": None,
                    "b": _brief(nb[j]),
                    "subtree": tb.size[j],
                    "order": order,
                }
            )
    first = min(points, key=lambda p: p["order"]) if points else None
    points.sort(key=lambda p: (-p["subtree"], p["order"]))
    aligned = sum(1 for k in ta.keys if k in tb.by_key)
    return {
        "nodesA": len(na),
        "nodesB": len(nb),
        "aligned": aligned,
        "identical": not points and len(na) == len(nb),
        "firstDivergence": first,
        "divergenceCount": len(points),
        "divergences": points[:max_points],
    }


def diff(
    result_a: dict | None, result_b: dict | None, trace_a: dict | None, trace_b: dict | None
) -> dict[str, Any]:
    out = diff_results(result_a, result_b)
    out["trace"] = diff_traces(trace_a, trace_b)
    return out
