"""Writes for runs on the web side: start (validate, store, queue by the task's name),
cancel, delete, fail, reap stale runs. What the worker does with a run is ``runs.worker``."""

from __future__ import annotations

import logging
import math
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, Subquery
from django.utils import timezone

import allocator
from allocator.simulation import SimulationOptions
from dra_web.celery import app as celery_app
from dra_web.runs import task_names
from dra_web.runs.models import Run
from dra_web.snapshots.selectors import object_refs, with_run_defaults
from dra_web.snapshots.services import create_variant

log = logging.getLogger(__name__)


class RunOptionsError(ValueError):
    """Options the simulation does not accept; the message names the field."""


def normalise_options(options: dict | None) -> dict:
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise RunOptionsError("options: must be an object")
    _check_number_sizes(options)
    try:
        parsed = SimulationOptions.from_json(options)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        message = str(exc) if str(exc).startswith("options") else f"options: {exc}"
        raise RunOptionsError(message) from None
    _check_bounds(parsed)
    return parsed.to_json()


MAX_OPTION_INT = 2**31 - 1


def _check_number_sizes(options: dict) -> None:
    """Numbers past any bound are refused before they are converted (a 400-digit integer has
    no float)."""
    bounds = {
        "timeout": settings.DRA_WEB_MAX_TIMEOUT_SECONDS,
        "traceMaxNodes": settings.DRA_WEB_MAX_TRACE_NODES,
        "bindingTimeoutSeconds": MAX_OPTION_INT,
    }
    for key, bound in bounds.items():
        value = options.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > bound:
            shown = int(bound) if float(bound).is_integer() else bound
            raise RunOptionsError(f"options.{key}: at most {shown}")


def _check_bounds(parsed) -> None:
    """The web's own bounds: a run holds a worker, and its options are stored as JSON."""
    limit = settings.DRA_WEB_MAX_TIMEOUT_SECONDS
    if not math.isfinite(parsed.timeout) or parsed.timeout > limit:
        raise RunOptionsError(
            f"options.timeout: at most {limit:g} seconds per Allocate (DRA_WEB_MAX_TIMEOUT_SECONDS)"
        )
    nodes = settings.DRA_WEB_MAX_TRACE_NODES
    if parsed.trace_max_nodes > nodes:
        raise RunOptionsError(f"options.traceMaxNodes: at most {nodes} (DRA_WEB_MAX_TRACE_NODES)")
    if parsed.binding_timeout_seconds > MAX_OPTION_INT:
        raise RunOptionsError(f"options.bindingTimeoutSeconds: at most {MAX_OPTION_INT}")


def _check_disrupt(snapshot, names: list[str]) -> None:
    """An unknown --disrupt node is a bad argument (400), as on the command line (exit 2),
    not a run that fails later."""
    if not names:
        return
    nodes = {ref["name"] for ref in object_refs(snapshot).get("Node", [])}
    for name in names:
        if name not in nodes:
            known = ", ".join(sorted(nodes)) or "none"
            raise RunOptionsError(f"options.disrupt: node {name!r} not found (nodes: {known})")


def start_run(owner, snapshot, options: dict | None = None) -> Run:
    """Store a queued run and hand it to Celery once the transaction commits.

    Stale runs are reaped first: beat reaps periodically where a worker runs it, and a
    deployment without one (tasks run in-process) still gets them reaped when runs start."""
    normalised = normalise_options(with_run_defaults(snapshot, options))
    _check_disrupt(snapshot, normalised.get("disrupt") or [])
    reap_stale_runs()
    run = Run.objects.create(
        snapshot=snapshot,
        owner=owner,
        options=normalised,
        task_id=str(uuid.uuid4()),
        allocator_version=allocator.__version__,
    )
    run_id, task_id = run.pk, run.task_id
    transaction.on_commit(lambda: _enqueue(run_id, task_id))
    return run


def _enqueue(run_id: int, task_id: str) -> None:
    """Queue the run's task by its registered name (the web never imports the worker side).
    Celery resolves the name to the task registered in this process, so that eager mode
    (tests, manage.py shell) runs it here, or sends it by name to a worker."""
    try:
        celery_app.signature(task_names.EXECUTE_RUN, args=(run_id,)).apply_async(task_id=task_id)
    except Exception:  # broker down: the run must not stay queued forever
        # The broker's address stays in the log: users see what happened, not where.
        log.exception("could not queue run %s", run_id)
        fail_run(
            run_id,
            "could not queue the run: the task broker is unreachable; "
            "try again when it is back (the server log has the details)",
        )


def fail_run(run_id: int, message: str) -> int:
    """Fail the run with ``message`` unless it has finished already; 1 when it was failed."""
    qs = Run.objects.filter(pk=run_id).exclude(status__in=Run.FINISHED)
    return qs.update(status=Run.FAILED, error=message, finished_at=timezone.now())


def reap_stale_runs(now=None) -> int:
    """Fail runs whose worker is gone; returns how many.

    A running run whose heartbeat is older than DRA_WEB_RUN_STALE_SECONDS lost its worker. A
    queued run lost its message when no worker started it within
    DRA_WEB_RUN_QUEUED_STALE_SECONDS, or within DRA_WEB_RUN_STALE_SECONDS when a run queued
    after it has started already (workers take messages first in, first out). Each update is
    conditional on the state read, so it never overwrites a run that moved on meanwhile.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.DRA_WEB_RUN_STALE_SECONDS)
    count = 0
    candidates = Run.objects.filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff),
        status=Run.RUNNING,
    ).values_list("pk", "heartbeat_at", "started_at")
    for pk, beat, started in list(candidates):
        last = beat or started
        seconds = int((now - last).total_seconds())
        count += Run.objects.filter(pk=pk, status=Run.RUNNING, heartbeat_at=beat).update(
            status=Run.FAILED,
            finished_at=now,
            error=(
                f"worker lost: no heartbeat for {seconds} s (last at "
                f"{last:%Y-%m-%d %H:%M:%S} UTC); the worker was killed or crashed while "
                "running this simulation"
            ),
        )
    return count + _reap_lost_messages(now, cutoff)


def _reap_lost_messages(now, cutoff) -> int:
    queued_cutoff = now - timedelta(seconds=settings.DRA_WEB_RUN_QUEUED_STALE_SECONDS)
    queued = Run.objects.filter(status=Run.QUEUED, queued_at__lt=cutoff)
    latest_start = Subquery(
        Run.objects.filter(started_at__isnull=False).order_by("-queued_at").values("queued_at")[:1]
    )
    lost = queued.filter(Q(queued_at__lt=queued_cutoff) | Q(queued_at__lt=latest_start))
    count = 0
    for pk, queued_at in list(lost.values_list("pk", "queued_at")):
        seconds = int((now - queued_at).total_seconds())
        count += Run.objects.filter(pk=pk, status=Run.QUEUED).update(
            status=Run.FAILED,
            finished_at=now,
            error=(
                f"no worker started this run in {seconds} s: its message was lost by the task "
                "broker (or no worker is running); start it again"
            ),
        )
    return count


class RunNotCancellable(ValueError):
    """The run has finished: there is nothing to cancel."""


def cancel_run(run: Run, user) -> Run:
    """Fail a queued or running run as cancelled and stop its task (the pool process running
    it is killed: a stuck search may not return to Python for a long time)."""
    message = f"cancelled by {user.get_username()} at {timezone.now():%Y-%m-%d %H:%M:%S} UTC"
    changed = Run.objects.filter(pk=run.pk, status__in=(Run.QUEUED, Run.RUNNING)).update(
        status=Run.FAILED, error=message, finished_at=timezone.now()
    )
    if not changed:
        run.refresh_from_db()
        raise RunNotCancellable(
            f"run {run.pk} is {run.status}: only queued or running runs can be cancelled"
        )
    if run.task_id and not settings.CELERY_TASK_ALWAYS_EAGER:
        try:
            celery_app.control.revoke(run.task_id, terminate=True, signal="SIGKILL")
        except Exception:  # the run is failed already; a worker that gets it skips it
            log.warning("could not revoke the task of run %s", run.pk, exc_info=True)
    run.refresh_from_db()
    return run


def delete_run(run: Run, user) -> None:
    if run.owner_id != user.pk and not user.is_superuser:
        raise PermissionDenied("only the owner can delete this run")
    run.delete()


# --- what-if runs ------------------------------------------------------------------------------


def start_what_if(
    owner, parent, edits: object, *, name: str | None = None, run_options: object = None
) -> tuple[object, Run | None]:
    """A derived snapshot of ``parent`` with ``edits`` and, when ``run_options`` is not None, a
    queued run of it; one transaction, so that refused options leave no snapshot behind.
    Raises SnapshotUploadError (bad edits) or RunOptionsError (bad options)."""
    if run_options is not None and not isinstance(run_options, dict):
        raise RunOptionsError("run: must be an object with optional 'options'")
    with transaction.atomic():
        snapshot = create_variant(owner, parent, edits, name)
        if run_options is None:
            return snapshot, None
        return snapshot, start_run(owner, snapshot, run_options.get("options"))
