"""Why a pod was not placed, in Karpenter's words (docs/RESULT.md, ``error``/``reasons``).

Every target tried leaves one reason. The summary follows Karpenter's log line: existing
targets first, grouped where many nodes failed the same way (a 500-node cluster must not yield a
500-clause sentence), then each NodePool's ``incompatible with nodepool "X", ...`` last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allocator.funnel import signature
from allocator.scheduling.fit import Resources, format_resources
from allocator.scheduling.topology import TopologyError

MAX_NAMES = 3
MAX_GROUPS = 6  # groups of existing targets the line names; the NodePools are all named
MAX_REASON_CHARS = 600  # one target group's reason, cut between words (error and reasons)
MAX_EXAMPLES = 5  # example targets of a grouped ``reasons`` entry
# Up to this many targets, ``reasons`` keeps one entry per target in the order tried; beyond,
# targets refusing the same way share one entry, so the result does not grow with the cluster.
MAX_PLAIN_REASONS = 8
MAX_REASON_GROUPS = 10  # grouped entries; the targets beyond share one last entry, counted


def nodepool_reason(pool: str, reason: str, overhead: str = "{}") -> str:
    """Karpenter's wording, daemonset overhead included (``overhead``: resources JSON)."""
    return f'incompatible with nodepool "{pool}", daemonset overhead={overhead}, {reason}'


def exceeds(requests: Resources, available: Resources) -> str:
    """An existing node without room for the pod (the room left shown, never below zero)."""
    shown = {k: max(v, 0) for k, v in available.items() if k in requests}
    return (
        f"exceeds node resources, requests {format_resources(requests)}, "
        f"available {format_resources(shown)}"
    )


def dra_reason(error: str) -> str:
    return f"allocating dynamic resources, {error}"


def topology_kind(err: TopologyError) -> tuple:
    """What a topology's refusal says whichever target it refused: its type and key, whose
    it is, and the counts it read (the words add the target's domains and the pods there)."""
    return ("topology", str(err.type), err.key, err.inverse, err.counts_text)


def summarize(reasons: list[tuple[str, str]], kinds: Mapping[str, tuple] | None = None) -> str:
    """One line from ``[(target, reason)]``; NodePool reasons (already worded) come last.
    Targets refused the same way (the same words, or the same ``kinds`` entry) are one group,
    worded as the first of them."""
    if not reasons:
        return "no target could be tried: the snapshot has no schedulable node and no NodePool"
    grouped: dict[object, tuple[str, list[str]]] = {}
    pools: list[str] = []
    for target, reason in reasons:
        if target.startswith("nodepool/"):
            pools.append(reason)
            continue
        kind = kinds.get(target) if kinds else None
        group = grouped.get(kind or reason)
        if group is None:
            grouped[kind or reason] = (reason, [target])
        else:
            group[1].append(target)
    parts = []
    ordered = list(grouped.values())
    for reason, targets in ordered[:MAX_GROUPS]:
        names = ", ".join(targets[:MAX_NAMES])
        if len(targets) > MAX_NAMES:
            names += f" and {len(targets) - MAX_NAMES} more"
        parts.append(f"{names}: {clip(reason)}")
    if len(ordered) > MAX_GROUPS:
        rest = sum(len(t) for _, t in ordered[MAX_GROUPS:])
        parts.append(
            f"{rest} more targets refused it {len(ordered) - MAX_GROUPS} other ways (see reasons)"
        )
    parts.extend(clip(reason) for reason in pools)
    return "could not schedule pod, " + "; ".join(parts)


def clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` within about ``limit`` characters: its head (Karpenter's words) and, twice as
    long, its tail (the last refusal and its decisive cause), the middle cut between words."""
    if len(text) <= limit:
        return text
    head_end = text.rfind(" ", 0, limit // 3)
    tail_start = text.find(" ", len(text) - (2 * limit) // 3)
    if head_end <= 0 or tail_start <= head_end:
        return text[: limit // 3] + " ... " + text[-((2 * limit) // 3) :]
    return text[:head_end].rstrip(" ;,") + " ... " + text[tail_start + 1 :]


def target_kinds(funnels: Iterable[tuple], memo: dict | None = None) -> dict[str, tuple]:
    """Per target of a funnel log, its kinds of device refusal, each once in the order met
    (as the trace groups: a NodeClaim's instance types refusing alike may come as one funnel
    or as one each). ``memo``: funnel object id -> signature, for many calls."""
    sigs: dict[int, tuple] = memo if memo is not None else {}
    kinds: dict[str, dict[tuple, None]] = {}
    for entry in funnels:
        target, f = entry[0], entry[1]
        sig = sigs.get(id(f))
        if sig is None:
            sig = sigs[id(f)] = signature(f)[1:]
        kinds.setdefault(target, {})[sig] = None
    return {target: tuple(seen) for target, seen in kinds.items()}


def grouped_reasons(
    reasons: list[tuple[str, str]],
    funnels: Iterable[tuple] = (),
    memo: dict | None = None,
    kinds: Mapping[str, tuple] | None = None,
    reason_kinds: Mapping[str, tuple] | None = None,
) -> list[dict]:
    """``pods[].reasons``: targets that refused the pod the same way share one entry
    (``target`` the first, its words, ``targets`` their count, ``exampleTargets`` up to 5), in
    the order first met, so the result does not grow with the cluster. The same way: the same
    kinds of device refusal (``funnels``, the pod's funnel log: the words of an ``allocated``
    refusal name each node's holders, the kind does not), the same cause of other refusals
    whose words name what differs per target (``reason_kinds``: a topology's domains), else
    the same words; each NodePool keeps its own entry. A few targets keep one entry each, in
    the order tried."""
    if len(reasons) <= MAX_PLAIN_REASONS:
        return [{"target": t, "reason": clip(r)} for t, r in reasons]
    if kinds is None:
        kinds = target_kinds(funnels, memo)
    other = reason_kinds or {}
    groups: dict[tuple, dict] = {}
    for target, reason in reasons:
        kind = kinds.get(target)
        if target.startswith("nodepool/"):
            key = ("nodepool", target)  # few, each named (the error ends with the last)
        elif kind:
            key = ("devices", kind)
        elif target in other:
            key = ("cause", other[target])
        else:
            key = ("words", reason)
        entry = groups.get(key)
        if entry is None:
            # Worded (clipped) only if kept: 1,000 targets may refuse 1,000 ways.
            groups[key] = {
                "target": target,
                "reason": reason,
                "targets": 1,
                "exampleTargets": [target],
            }
            continue
        entry["targets"] += 1
        if len(entry["exampleTargets"]) < MAX_EXAMPLES:
            entry["exampleTargets"].append(target)
    # NodePools come last and are all kept (the error names each); the node groups are capped.
    entries = [e for k, e in groups.items() if k[0] != "nodepool"]
    pools = [e for k, e in groups.items() if k[0] == "nodepool"]
    rest = []
    if len(entries) > MAX_REASON_GROUPS:
        rest = [_rest_of(entries[MAX_REASON_GROUPS - 1 :])]
        del entries[MAX_REASON_GROUPS - 1 :]
    for e in entries + pools:
        e["reason"] = clip(e["reason"])
    return entries + rest + pools


def _rest_of(rest: list[dict]) -> dict:
    """One entry for the node groups past the first few."""
    count = sum(e["targets"] for e in rest)
    examples = [t for e in rest for t in e["exampleTargets"]][:MAX_EXAMPLES]
    first = clip(clip(rest[0]["reason"]), MAX_REASON_CHARS // 2)
    return {
        "target": rest[0]["target"],
        "reason": f"{count} more targets refused the pod {len(rest)} other ways (first: {first})",
        "targets": count,
        "exampleTargets": examples,
    }
