"""Reads for runs (no writes): lists, the trace (subtrees, searches, the tree's windows and
overview), what the trace says about new NodeClaims, downloads, diffs."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.core.cache import cache
from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404

from allocator import jsonwrite
from allocator.collector import collector_paused
from allocator.trace import parse_new_nodeclaim_label
from dra_web import blobs
from dra_web.runs import diff
from dra_web.runs.failures import Failures
from dra_web.runs.models import Run, TraceNode
from dra_web.runs.page_facts import PageFacts
from dra_web.snapshots.models import Snapshot

DEFAULT_LIMIT = 200


def run_list(
    *, owner=None, status: str | None = None, snapshot=None, has_open_review: bool | None = None
) -> QuerySet[Run]:
    qs = Run.objects.select_related("owner", "snapshot").defer(
        "result",
        "trace_blob",
        "page_facts_blob",
        "failures_blob",
        "snapshot__files_blob",
        "snapshot__documents_blob",
    )
    if owner is not None:
        qs = qs.filter(owner__username=owner) if isinstance(owner, str) else qs.filter(owner=owner)
    if status:
        qs = qs.filter(status=status)
    if snapshot is not None:
        qs = qs.filter(snapshot=snapshot)
    if has_open_review is not None:
        qs = _filter_open_review(qs, has_open_review)
    return qs


def _filter_open_review(qs: QuerySet[Run], wanted: bool) -> QuerySet[Run]:
    """Runs with (or without) an open review, when the reviews app is installed."""
    if not apps.is_installed("dra_web.reviews"):
        return qs
    from dra_web.reviews import selectors as review_selectors

    open_ids = review_selectors.run_ids_with_open_review()
    return qs.filter(pk__in=open_ids) if wanted else qs.exclude(pk__in=open_ids)


def get_run(run_id, *, with_result: bool = True) -> Run:
    """The run (404 when there is none); ``with_result=False`` leaves its result unread (tens
    of megabytes where many pods fail) for views that show none of it, such as the tree's."""
    runs = Run.objects.select_related("owner", "snapshot")
    if not with_result:
        return get_object_or_404(runs.defer("result"), pk=run_id)
    # The cycle collector's passes over the objects the result decodes into (none cyclic)
    # would cost more than the decoding.
    with collector_paused():
        return get_object_or_404(runs, pk=run_id)


def page_facts(run: Run) -> PageFacts | None:
    """The snapshot facts stored with a finished run for its page; None for a run stored
    before they were."""
    data = blobs.unpack(run.page_facts_blob)
    return PageFacts.from_json(data) if data is not None else None


def failures(run: Run) -> Failures | None:
    """The failed pods kept apart from a finished run's result; None for a run stored before
    they were."""
    data = blobs.unpack(run.failures_blob)
    return Failures.from_json(data) if data is not None else None


def _nodes(qs) -> list[dict]:
    return [node.as_json() for node in qs]


def trace_children_queryset(run: Run, node_id: int | None) -> QuerySet[TraceNode]:
    qs = TraceNode.objects.filter(run=run)
    qs = qs.filter(parent__isnull=True) if node_id is None else qs.filter(parent=node_id)
    return qs.order_by("node_id")


def trace_children(
    run: Run, node_id: int | None, *, offset: int = 0, limit: int = DEFAULT_LIMIT
) -> list[dict]:
    return _nodes(trace_children_queryset(run, node_id)[offset : offset + limit])


def trace_node(run: Run, node_id: int) -> dict | None:
    node = TraceNode.objects.filter(run=run, node_id=node_id).first()
    if node is None:
        return None
    out = node.as_json()
    path = []
    parent = node.parent
    while parent is not None:
        ancestor = TraceNode.objects.filter(run=run, node_id=parent).first()
        if ancestor is None:
            break
        path.append(
            {
                "id": ancestor.node_id,
                "kind": ancestor.kind,
                "label": ancestor.label,
                "status": ancestor.status,
            }
        )
        parent = ancestor.parent
    out["path"] = path[::-1]
    return out


@dataclass(frozen=True, slots=True)
class TraceFilter:
    """Which trace nodes a search wants (the API's and the tree's ``q``, ``reason``,
    ``status``, ``kind``); an empty filter wants every node."""

    q: str | None = None  # label, or the device / claim / NodeClaim a node records
    reason: str | None = None
    status: str | None = None
    kind: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> TraceFilter:
        """From query parameters; an empty value asks for nothing."""
        return cls(**{name: params.get(name) or None for name in ("q", "reason", "status", "kind")})

    def __bool__(self) -> bool:
        return any((self.q, self.reason, self.status, self.kind))


def trace_search_queryset(run: Run, wanted: TraceFilter) -> QuerySet[TraceNode]:
    qs = TraceNode.objects.filter(run=run)
    if wanted.q:
        qs = qs.filter(search__contains=wanted.q.lower())  # the search column is lower-cased
    if wanted.reason:
        qs = qs.filter(reason=wanted.reason)
    if wanted.status:
        qs = qs.filter(status=wanted.status)
    if wanted.kind:
        qs = qs.filter(kind=wanted.kind)
    return qs.order_by("node_id")


def trace_search(run: Run, wanted: TraceFilter, *, limit: int = DEFAULT_LIMIT) -> list[dict]:
    return _nodes(trace_search_queryset(run, wanted)[:limit])


def trace_page_queryset(run: Run) -> QuerySet[TraceNode]:
    return TraceNode.objects.filter(run=run).order_by("node_id")


# --- the search tree on the run page -----------------------------------------------------------


def _finished_key(what: str, *runs: Run) -> str:
    """A cache key for something read from finished runs, which never change (a re-store
    moves ``finished_at``, which is part of the key)."""
    return f"dra-web:{what}:" + ":".join(
        f"{r.pk}-{r.finished_at.timestamp() if r.finished_at else 'x'}" for r in runs
    )


def trace_overview(run: Run, *, max_depth: int = 12, min_fraction: float = 1 / 2000) -> dict:
    """Icicle rectangles from the indexed trace rows, without reading the whole trace.

    A DFS records a node before its subtree, so a subtree's ids are contiguous and a node's
    horizontal offset in the icicle is simply its id."""
    total = run.trace_node_count or TraceNode.objects.filter(run=run).count()
    if not total:
        return {"total": 0, "depth": 0, "rects": []}
    threshold = max(0, int(total * min_fraction) - 1)
    rows = (
        TraceNode.objects.filter(run=run, descendants__gte=threshold, depth__lte=max_depth)
        .order_by("node_id")
        .values_list("node_id", "depth", "descendants", "status")
    )
    rects = [[nid, depth, nid, desc + 1, status] for nid, depth, desc, status in rows]
    deepest = max((r[1] for r in rects), default=0)
    return {"total": total, "depth": deepest + 1, "rects": rects}


def trace_reveal(run: Run, node_id: int, page: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """For each node from the root to ``node_id``: its id, its index among its siblings, and
    the page of siblings around it, so that the tree opens the path in one round trip."""
    chain = []
    current = TraceNode.objects.filter(run=run, node_id=node_id).values("node_id", "parent").first()
    while current is not None:
        chain.append(current)
        if current["parent"] is None:
            break
        current = (
            TraceNode.objects.filter(run=run, node_id=current["parent"])
            .values("node_id", "parent")
            .first()
        )
    chain.reverse()
    out = []
    for step in chain:
        siblings = TraceNode.objects.filter(run=run, parent=step["parent"])
        index = siblings.filter(node_id__lt=step["node_id"]).count()
        offset = max(0, index - page // 2)
        out.append(
            {
                "id": step["node_id"],
                "index": index,
                "page": {
                    "parent": step["parent"],
                    "offset": offset,
                    "total": siblings.count(),
                    "nodes": trace_children(run, step["parent"], offset=offset, limit=page),
                },
            }
        )
    return out


def trace_children_window(
    run: Run, parent: int | None, *, offset: int = 0, limit: int = DEFAULT_LIMIT, expand: int = 0
) -> dict[str, Any]:
    """One page of a node's children (the roots for None) with their total, optionally with
    the successful paths below opened (``expand_ok_paths``)."""
    total = TraceNode.objects.filter(run=run, parent=parent).count()
    nodes = trace_children(run, parent, offset=offset, limit=limit)
    if expand:
        expand_ok_paths(run, nodes, expand)
    if parent is None:
        passes = root_passes(run)
        for n in nodes:
            if n.get("kind") == "pod" and n["id"] in passes:
                n["pass"] = passes[n["id"]]
    return {"parent": parent, "offset": offset, "total": total, "nodes": nodes}


def root_passes(run: Run) -> dict[int, int]:
    """The retry pass of each pod attempt at the root of the trace (the n-th attempt of a pod
    is in pass n: a pass tries every pod left once), for runs with more than one pass; {}
    otherwise. Cached: a finished run's trace never changes."""

    def build() -> dict[int, int]:
        seen: dict[str, int] = {}
        out: dict[int, int] = {}
        rows = (
            TraceNode.objects.filter(run=run, parent=None, kind="pod")
            .order_by("node_id")
            .values_list("node_id", "label")
        )
        for node_id, label in rows.iterator():
            seen[label] = seen.get(label, 0) + 1
            out[node_id] = seen[label]
        return out if any(n > 1 for n in seen.values()) else {}

    return cache.get_or_set(_finished_key("root-passes", run), build, timeout=3600)


def trace_search_page(run: Run, wanted: TraceFilter, *, limit: int = 100) -> dict:
    """The first ``limit`` matches of a tree search, with their ancestors' labels and the
    total count."""
    qs = trace_search_queryset(run, wanted)
    matches = _nodes(qs[:limit])
    total = len(matches) if len(matches) < limit else qs.count()
    return {"total": total, "results": with_ancestor_labels(run, matches)}


def with_ancestor_labels(run: Run, nodes: list[dict]) -> list[dict]:
    """Add ``pathLabels`` (root first) to search results, one query per tree level."""
    known: dict[int, tuple[int | None, str, str]] = {
        n["id"]: (n.get("parent"), n.get("label") or "", n.get("status") or "") for n in nodes
    }
    wanted = {n.get("parent") for n in nodes} - {None} - set(known)
    while wanted:
        rows = TraceNode.objects.filter(run=run, node_id__in=wanted).values_list(
            "node_id", "parent", "label", "status"
        )
        for node_id, parent, label, status in rows:
            known[node_id] = (parent, label, status)
        wanted = {k[0] for k in known.values() if k[0] is not None and k[0] not in known}
        if not rows:
            break
    for n in nodes:
        labels, statuses = [], []
        parent = n.get("parent")
        while parent is not None and parent in known:
            parent, label, status = known[parent]
            labels.append(label)
            statuses.append(status)
        n["pathLabels"] = labels[::-1]
        # A new NodeClaim's attempt is named by the run's NodeClaim only where it succeeded.
        n["pathStatuses"] = statuses[::-1]
    return nodes


AUTO_EXPAND_DEPTH = 8


def expand_ok_paths(run: Run, nodes: list[dict], budget: int, page: int = DEFAULT_LIMIT) -> None:
    """Open the successful paths below ``nodes`` in place (``node["expanded"]``: its first
    children), depth first so that the first placed pods show down to their devices, within
    ``budget`` nodes. Failed and pruned subtrees stay collapsed: the page shows them closed
    with their size."""

    def openable(n: dict) -> bool:
        return (
            n.get("status") == "ok"
            and bool(n.get("childCount"))
            and n.get("depth", 0) < AUTO_EXPAND_DEPTH
            and min(n["childCount"], page) <= budget
        )

    stack = [n for n in reversed(nodes) if openable(n)]
    while stack and budget > 0:
        n = stack.pop()
        if not openable(n):
            continue
        kids = trace_children(run, n["id"], limit=page)
        n["expanded"] = kids
        budget -= len(kids)
        stack.extend(k for k in reversed(kids) if openable(k))


def trace_reason_counts(run: Run) -> list[tuple[str, int]]:
    """How many non-ok trace nodes carry each reason (for the tree's filter); cached like
    ``root_passes``."""

    def build() -> list[tuple[str, int]]:
        return list(
            TraceNode.objects.filter(run=run)
            .exclude(status="ok")
            .exclude(reason=None)
            .values_list("reason")
            .annotate(n=Count("id"))
            .order_by("-n", "reason")
        )

    return cache.get_or_set(_finished_key("reason-counts", run), build, timeout=3600)


# --- what the trace says about the run's new NodeClaims ---------------------------------------


def _node_claim_of(label: str) -> str:
    parsed = parse_new_nodeclaim_label(label or "")
    if parsed:
        return parsed[1]
    return (label or "").removeprefix("nodeclaim/")


def instance_types_pruned(run: Run, names: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Per NodeClaim of this run: the instance types the DFS dropped while placing its pods,
    read from the trace (targets that placed a pod, instanceType children not ok), first
    reason kept."""
    # Results that carry ``instanceTypesPruned`` (allocator/scheduling/report.py) say it
    # exactly; the trace is read only for older results without it.
    reported = {
        nc.get("name")
        for nc in (run.result or {}).get("nodeClaims") or []
        if isinstance(nc, dict) and "instanceTypesPruned" in nc
    }
    names = set(names) - reported
    if not names or not run.trace_node_count:
        return {}
    targets = {}
    for node_id, label, parent in TraceNode.objects.filter(
        run=run, kind="target", status="ok"
    ).values_list("node_id", "label", "parent"):
        name = _node_claim_of(label)
        if name in names:
            targets[node_id] = (name, parent)
    if not targets:
        return {}
    pods = dict(
        TraceNode.objects.filter(
            run=run, node_id__in={p for _, p in targets.values() if p is not None}
        ).values_list("node_id", "label")
    )
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    rows = (
        TraceNode.objects.filter(run=run, kind="instanceType", parent__in=list(targets))
        .exclude(status="ok")
        .order_by("node_id")
        .values_list("parent", "label", "reason", "message")
    )
    for parent, label, reason, message in rows:
        name, pod_id = targets[parent]
        if (name, label) in seen:
            continue
        seen.add((name, label))
        out.setdefault(name, []).append(
            {
                "name": label,
                "reason": message or reason or "",
                "pod": pods.get(pod_id),
            }
        )
    return out


# --- downloads ---------------------------------------------------------------------------------


def result_json_bytes(run: Run) -> bytes:
    return jsonwrite.to_bytes(run.result, indent=True)


def trace_json_bytes(run: Run) -> bytes:
    """The whole trace document as stored; ``null`` for a run that recorded none."""
    return b"null" if run.trace_blob is None else zlib.decompress(bytes(run.trace_blob))


# --- diffs -------------------------------------------------------------------------------------


def diff_order(a: Run, b: Run) -> tuple[Run, Run]:
    """The pair as (before, after), whichever way it was asked for, so that a diff reads the
    same in both directions: a run of an ancestor snapshot (a what-if's parent) comes first;
    otherwise the run queued first."""
    if a.snapshot_id != b.snapshot_id:
        if snapshot_lineage(a.snapshot, b.snapshot) is not None:
            return a, b
        if snapshot_lineage(b.snapshot, a.snapshot) is not None:
            return b, a
    return (a, b) if (a.queued_at, a.pk) <= (b.queued_at, b.pk) else (b, a)


MAX_LINEAGE = 50


def snapshot_lineage(ancestor, descendant) -> list | None:
    """The snapshots from ``ancestor`` (excluded) down to ``descendant`` (included), each a
    what-if of the one before; [] for the same snapshot; None when ``descendant`` does not
    derive from ``ancestor``."""
    chain = []
    node = descendant
    for _ in range(MAX_LINEAGE):
        if node is None:
            return None
        if node.pk == ancestor.pk:
            return chain[::-1]
        chain.append(node)
        node = node.parent
    return None


def latest_succeeded_run(snapshot) -> Run | None:
    return run_list(snapshot=snapshot, status=Run.SUCCEEDED).order_by("-queued_at", "-id").first()


def lineage_runs(run: Run) -> QuerySet[Run]:
    """Runs of the snapshots related to this run's by what-if derivation (its ancestors, their
    descendants), this run left out, newest first."""
    root = run.snapshot
    for _ in range(MAX_LINEAGE):
        if root.parent_id is None:
            break
        root = root.parent
    family, frontier = {root.pk}, [root.pk]
    for _ in range(MAX_LINEAGE):
        if not frontier:
            break
        frontier = list(
            Snapshot.objects.filter(parent_id__in=frontier)
            .exclude(pk__in=family)
            .values_list("pk", flat=True)[:500]
        )
        family.update(frontier)
    return run_list().filter(snapshot_id__in=family).exclude(pk=run.pk)


def input_changes(before: Run, after: Run) -> list[dict]:
    """The edits that lead from the before run's snapshot to the after run's (empty for the
    same snapshot or unrelated ones), each with the snapshot that made it and its author."""
    chain = snapshot_lineage(before.snapshot, after.snapshot) or []
    out = []
    for snap in chain:
        for edit in snap.edits or []:
            if isinstance(edit, dict):
                out.append({**edit, "snapshot": snap.pk, "author": snap.owner.get_username()})
    return out


def diff_runs(a: Run, b: Run) -> dict:
    """The diff of two runs, ordered before/after (``diff_order``); cached, since a finished
    run never changes (a re-store moves ``finished_at``, which is part of the key)."""
    a, b = diff_order(a, b)
    key = _finished_key("diff-ordered", a, b)
    cached = cache.get(key) if a.finished and b.finished else None
    if cached is not None:
        return cached
    out = _diff_runs(a, b)
    if a.finished and b.finished:
        cache.set(key, out, timeout=3600)
    return out


def _diff_runs(a: Run, b: Run) -> dict:
    out = diff.diff(a.result, b.result, a.trace(), b.trace())
    out["a"] = {"id": a.pk, "status": a.status, "snapshot": a.snapshot_id, "options": a.options}
    out["b"] = {"id": b.pk, "status": b.status, "snapshot": b.snapshot_id, "options": b.options}
    out["before"], out["after"] = a.pk, b.pk
    out["inputChanges"] = input_changes(a, b)
    return out
