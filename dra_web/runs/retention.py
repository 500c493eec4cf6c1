"""Writes for run retention: pin a run, prune finished runs past DRA_WEB_RUN_RETENTION_DAYS.

A run is kept while it is younger than the retention age, pinned, or reviewed (a review's
verdicts and thread refer to it); everything else finished is deleted with its trace blob and
trace index rows. Snapshots are not pruned: they are what a user uploads, and runs refer to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from dra_web.runs.models import Run
from dra_web.runs.storage import runs_storage_bytes

PRUNE_BATCH = 200


def set_pinned(run: Run, pinned: bool) -> Run:
    """Pin (keep past the retention age) or unpin a run; any logged-in user may, as with
    reviews: pinning is how a team keeps a run it refers to."""
    Run.objects.filter(pk=run.pk).update(pinned=pinned)
    run.pinned = pinned
    return run


@dataclass(slots=True)
class PruneReport:
    cutoff: datetime | None  # None: retention is off (0 days)
    runs: int = 0
    bytes: int = 0  # storage of the pruned runs (runs.storage), before they went
    ids: list[int] = field(default_factory=list)


def prunable(older_than_days: float, now: datetime | None = None) -> QuerySet[Run]:
    """Finished runs older than the age (by when they finished), neither pinned nor reviewed."""
    cutoff = (now or timezone.now()) - timedelta(days=older_than_days)
    return (
        Run.objects.filter(status__in=Run.FINISHED, finished_at__lt=cutoff, pinned=False)
        .exclude(reviews__isnull=False)
        .order_by("finished_at", "pk")
    )


def prune_runs(
    older_than_days: float | None = None, *, dry_run: bool = False, now: datetime | None = None
) -> PruneReport:
    """Delete the prunable runs in batches (their trace rows go with them); with ``dry_run``
    only report what would go. ``older_than_days`` defaults to DRA_WEB_RUN_RETENTION_DAYS."""
    days = settings.DRA_WEB_RUN_RETENTION_DAYS if older_than_days is None else older_than_days
    if days <= 0:
        return PruneReport(cutoff=None)
    now = now or timezone.now()
    report = PruneReport(cutoff=now - timedelta(days=days))
    if dry_run:
        qs = prunable(days, now)
        report.ids = list(qs.values_list("pk", flat=True))
        report.runs = len(report.ids)
        report.bytes = runs_storage_bytes(Run.objects.filter(pk__in=report.ids))
        return report
    while True:
        ids = list(prunable(days, now).values_list("pk", flat=True)[:PRUNE_BATCH])
        if not ids:
            return report
        with transaction.atomic():
            # Checked again in the delete: a run pinned or reviewed meanwhile stays.
            batch = prunable(days, now).filter(pk__in=ids)
            kept = list(batch.values_list("pk", flat=True))
            report.bytes += runs_storage_bytes(Run.objects.filter(pk__in=kept))
            batch.filter(pk__in=kept).delete()
        report.runs += len(kept)
        report.ids.extend(kept)
        if len(ids) < PRUNE_BATCH:
            return report
