"""Reads for runs: lists, summaries, trace subtrees and searches, pools, diffs."""

from __future__ import annotations

from django.apps import apps
from django.core.cache import cache
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from dra_web.runs import diff
from dra_web.runs.models import Run, TraceNode
from dra_web.runs.services import reap_stale_runs

DEFAULT_LIMIT = 200


def run_list(
    *, owner=None, status: str | None = None, snapshot=None, has_open_review: bool | None = None
) -> QuerySet[Run]:
    reap_stale_runs()
    qs = Run.objects.select_related("owner", "snapshot").defer(
        "result", "trace_blob", "snapshot__files_blob", "snapshot__documents_blob"
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

    open_ids = review_selectors.open_review_run_ids()
    return qs.filter(pk__in=open_ids) if wanted else qs.exclude(pk__in=open_ids)


def get_run(run_id) -> Run:
    reap_stale_runs()
    return get_object_or_404(Run.objects.select_related("owner", "snapshot"), pk=run_id)


def run_summary(run: Run) -> dict:
    result = run.result or {}
    return {
        "id": run.pk,
        "status": run.status,
        "snapshot": run.snapshot_id,
        "snapshotName": run.snapshot.name,
        "owner": run.owner.get_username(),
        "queuedAt": run.queued_at,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
        "durationSeconds": run.duration_seconds,
        "progress": {"done": run.progress_done, "total": run.progress_total},
        "error": run.error or None,
        "options": run.options,
        "allocatorVersion": run.allocator_version,
        "stats": result.get("stats"),
        "featureGates": result.get("featureGates"),
        "traceNodes": run.trace_node_count,
        "traceOmitted": run.trace_omitted,
    }


def _nodes(qs) -> list[dict]:
    return [node.as_json() for node in qs]


def trace_roots(run: Run, *, offset: int = 0, limit: int = DEFAULT_LIMIT) -> list[dict]:
    return trace_children(run, None, offset=offset, limit=limit)


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


def trace_search_queryset(
    run: Run,
    q: str | None = None,
    *,
    reason: str | None = None,
    status: str | None = None,
    kind: str | None = None,
) -> QuerySet[TraceNode]:
    qs = TraceNode.objects.filter(run=run)
    if q:
        # The label, or the device / claim / NodeClaim fields a node records (lower-cased).
        qs = qs.filter(search__contains=q.lower())
    if reason:
        qs = qs.filter(reason=reason)
    if status:
        qs = qs.filter(status=status)
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("node_id")


def trace_search(
    run: Run,
    q: str | None = None,
    *,
    reason: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[dict]:
    return _nodes(trace_search_queryset(run, q, reason=reason, status=status, kind=kind)[:limit])


def trace_page_queryset(run: Run) -> QuerySet[TraceNode]:
    return TraceNode.objects.filter(run=run).order_by("node_id")


def pools(run: Run) -> list[dict]:
    return list((run.result or {}).get("pools") or [])


def diff_runs(a: Run, b: Run) -> dict:
    """The diff of two runs; cached, since a finished run never changes (a re-store moves
    ``finished_at``, which is part of the key)."""
    key = "dra-web:diff:" + ":".join(
        f"{r.pk}-{r.finished_at.timestamp() if r.finished_at else 'x'}" for r in (a, b)
    )
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
    return out
