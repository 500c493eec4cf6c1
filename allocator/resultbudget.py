"""A failed pod's entry within a byte budget, whatever the names in the cluster.

The entry is bounded by construction (grouped reasons, at most 6 funnels, 5 examples of
each), but names are not: node names of 253 characters in every example would take a
grouped entry past 20 kB. Once built, an entry larger than the budget is trimmed, what says
least first: the other pods a fix would move (``affects``) past the first few counted in
``affectsOmitted`` (a workload-wide fix moves every replica), example lists shortened, words
clipped to 300 characters, a funnel's rejection
groups past the largest merged per reason, explanation funnels past the first counted in
``explanationOmitted``, then words clipped further, reasons past the first few counted in one
last entry, and last the error (Karpenter's words, read first) clipped to 1,200 characters.
The suggestions (the fixes) are otherwise kept whole, and the decisive cause never trimmed.
"""

from __future__ import annotations

from collections.abc import Callable

from allocator import jsonwrite
from allocator.scheduling.explain import clip

# As the command line writes it: two-space indented JSON (the compact form is smaller).
MAX_ENTRY_BYTES = 19_000


def size(entry: dict) -> int:
    return len(jsonwrite.to_bytes(entry, indent=True))


def within_budget(entry: dict, limit: int = MAX_ENTRY_BYTES) -> None:
    """Trim a failed pod's entry in place until it is ``limit`` bytes or fewer (or nothing
    is left to trim)."""
    if size(entry) <= limit:
        return
    for step in _STEPS:
        step(entry, limit)
        if size(entry) <= limit:
            return


def _examples(keep: int) -> Callable[[dict, int], None]:
    def shorten(entry: dict, limit: int) -> None:
        for reason in entry.get("reasons") or ():
            if "exampleTargets" in reason:
                reason["exampleTargets"] = reason["exampleTargets"][:keep]
        for funnel in entry.get("explanation") or ():
            funnel["exampleTargets"] = funnel.get("exampleTargets", [])[:keep]
            if "exampleInstanceTypes" in funnel:
                funnel["exampleInstanceTypes"] = funnel["exampleInstanceTypes"][:keep]
            for group in funnel.get("rejections") or ():
                group["exampleDevices"] = group.get("exampleDevices", [])[:keep]

    return shorten


def _fewer_funnels(entry: dict, limit: int) -> None:
    funnels = entry.get("explanation") or []
    while len(funnels) > 1 and size(entry) > limit:
        funnels.pop()
        entry["explanationOmitted"] = entry.get("explanationOmitted", 0) + 1


def _fewer_groups(keep: int) -> Callable[[dict, int], None]:
    """Each funnel's rejection groups past the first ``keep`` (the largest) merged into one
    per reason, their devices added up (``usable`` + the groups' devices still make the
    candidates): 40 counter sets each refusing a few partitions are one line past the 8th."""

    def merge(entry: dict, limit: int) -> None:
        for funnel in entry.get("explanation") or ():
            groups = funnel.get("rejections") or []
            if len(groups) <= keep:
                continue
            merged: dict[str, list[dict]] = {}
            for group in groups[keep:]:
                merged.setdefault(group["reason"], []).append(group)
            funnel["rejections"] = groups[:keep] + [
                {
                    "reason": reason,
                    "devices": sum(g["devices"] for g in rest),
                    "message": f"{len(rest)} more groups of devices refused by {reason} "
                    f"(first: {clip(rest[0]['message'], 150)})",
                    "exampleDevices": rest[0].get("exampleDevices", [])[:1],
                    "also": sorted({a for g in rest for a in g.get("also") or ()}),
                    "detail": {},
                }
                for reason, rest in merged.items()
            ]

    return merge


def _words(chars: int, error_chars: int | None = None) -> Callable[[dict, int], None]:
    """Reasons and rejection messages clipped to ``chars``; the error (Karpenter's words and
    the decisive cause, read first) to ``error_chars`` only, last of all."""

    def shorten(entry: dict, limit: int) -> None:
        for reason in entry.get("reasons") or ():
            reason["reason"] = clip(reason["reason"], chars)
        if error_chars is not None and isinstance(entry.get("error"), str):
            entry["error"] = clip(entry["error"], error_chars)
        for funnel in entry.get("explanation") or ():
            for group in funnel.get("rejections") or ():
                group["message"] = clip(group["message"], chars)

    return shorten


AFFECTS_KEPT = 5


def _fewer_affects(entry: dict, limit: int) -> None:
    """Each suggestion's ``affects`` past the first few (those that lose their placement
    first) counted in ``affectsOmitted``."""
    for suggestion in entry.get("suggestions") or ():
        affects = suggestion.get("affects")
        if not isinstance(affects, list) or len(affects) <= AFFECTS_KEPT:
            continue
        lost = [i for i, a in enumerate(affects) if isinstance(a, dict) and a.get("to") is None]
        kept = sorted(lost[:AFFECTS_KEPT])
        kept += [i for i in range(len(affects)) if i not in kept][: AFFECTS_KEPT - len(kept)]
        kept.sort()
        suggestion["affects"] = [affects[i] for i in kept]
        suggestion["affectsOmitted"] = len(affects) - len(kept)


def _fewer_reasons(entry: dict, limit: int) -> None:
    """The node groups past the first few counted in one last entry (NodePools kept)."""
    reasons = entry.get("reasons") or []
    pools = [r for r in reasons if r["target"].startswith("nodepool/")]
    nodes = [r for r in reasons if not r["target"].startswith("nodepool/")]
    while len(nodes) > 2 and size(entry) > limit:
        rest = nodes[-2:]
        count = sum(r.get("targets", 1) for r in rest)
        nodes[-2:] = [
            {
                "target": rest[0]["target"],
                "reason": f"{count} more targets refused the pod other ways "
                f"(first: {clip(rest[0]['reason'], 150)})",
                "targets": count,
                "exampleTargets": [rest[0]["target"]],
            }
        ]
        entry["reasons"] = nodes + pools


_STEPS: tuple[Callable[[dict, int], None], ...] = (
    _fewer_affects,
    _examples(2),
    _words(300),
    _fewer_groups(8),
    _examples(1),
    _fewer_groups(3),
    _fewer_funnels,
    _words(150),
    _fewer_reasons,
    _words(60, 1200),
)
