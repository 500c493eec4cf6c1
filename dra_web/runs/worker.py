"""The worker side of a run, what the Celery task does: claim the queued run, simulate it under
a heartbeat and a time limit, store result and trace, or fail it with a message.

The web side (validate, store, queue, cancel, reap) is ``runs.services``; the task that calls
``execute_run`` is ``runs.tasks``. Nothing here is imported by the web side.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

import allocator
from allocator.collector import collector_for_a_run, collector_paused
from allocator.model import Snapshot
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import SnapshotError
from dra_web import blobs
from dra_web.runs import failures, page_facts
from dra_web.runs.failures import Failures
from dra_web.runs.models import Run, TraceNode
from dra_web.runs.page_facts import PageFacts
from dra_web.runs.services import fail_run
from dra_web.runs.trace_store import index_rows
from dra_web.snapshots.services import load_snapshot

log = logging.getLogger(__name__)

TRACE_BATCH = 5000


class RunTimeLimitExceeded(BaseException):
    """Raised in the simulation by SIGALRM. A BaseException on purpose: the allocator treats
    an Exception inside a CEL evaluation as "device does not match" and would swallow it."""


class _TimeLimit:
    """DRA_WEB_RUN_TIME_LIMIT_SECONDS as a SIGALRM timer (main thread only: the Celery pool
    process). Elsewhere (eager runs in a web thread) the DFS's own timeout bounds the run."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.active = (
            seconds > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        self.previous = None
        self.expired = False

    def _expired(self, signum, frame) -> None:
        # Raised where the signal lands; if that is a place that swallows it (a gc callback,
        # a __del__), the timer fires again shortly and __exit__ raises it at the latest.
        self.expired = True
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        raise RunTimeLimitExceeded()

    def __enter__(self) -> _TimeLimit:
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._expired)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous or signal.SIG_DFL)
            if self.expired and exc_type is None:
                raise RunTimeLimitExceeded()


def _fail_reconnecting(run_id: int, message: str, *, attempts: int = 20, pause: float = 1.0):
    """Record a failure even when the error was the database going away: drop the broken
    connection and retry while it comes back (a PostgreSQL restart takes a few seconds)."""
    for attempt in range(attempts):
        try:
            return fail_run(run_id, message)
        except DatabaseError:
            log.warning("run %s: failure not recorded yet (database down?)", run_id)
            connection.close()
            if attempt + 1 < attempts:
                time.sleep(pause)
    log.error("run %s: could not record its failure: %s", run_id, message)
    return 0


# Host, port, user and URL credentials that database and broker errors carry.
_CONNECTION_DETAILS = [
    (re.compile(r'(?:connection to )?server at "[^"]*"(?: \([^)]*\))?,? port \d+'), "server"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+"), "<url>"),
    (re.compile(r"\b(host|hostaddr|port|user|password|dbname)=\S+"), r"\1=…"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<address>"),
    (re.compile(r'for user "[^"]*"'), "for user …"),
]


def redact(text: str) -> str:
    for pattern, replacement in _CONNECTION_DETAILS:
        text = pattern.sub(replacement, text)
    return text


class _Heartbeat:
    """Writes Run.heartbeat_at from a thread while the simulation holds the main thread."""

    def __init__(self, run_id: int, interval: float) -> None:
        self.run_id = run_id
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"run-{run_id}-heartbeat")
        self.thread.daemon = True

    def _loop(self) -> None:
        try:
            while not self.stop.wait(self.interval):
                try:
                    Run.objects.filter(pk=self.run_id, status=Run.RUNNING).update(
                        heartbeat_at=timezone.now()
                    )
                except Exception:  # a locked database must not kill the run
                    log.warning("heartbeat of run %s not written", self.run_id, exc_info=True)
                    connection.close()  # a lost connection: reconnect on the next beat
        finally:
            connection.close()

    def __enter__(self) -> _Heartbeat:
        if self.interval > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=self.interval + 5)


def _claim(run_id: int, task_id: str | None) -> Run | None:
    """Move a queued run to running; None when there is nothing (left) to do."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            log.warning("run %s does not exist (deleted?)", run_id)
            return None
        if task_id and run.task_id and task_id != run.task_id:
            # A message meant for another database sharing this broker, or a stale copy.
            log.warning("task %s is not run %s's task %s: ignored", task_id, run_id, run.task_id)
            return None
        if run.status in Run.FINISHED:
            return None  # a redelivered task: the run is done, never re-executed
        run.attempts += 1
        now = timezone.now()
        if run.status == Run.RUNNING:
            # Delivered again while marked running: the worker that ran it was lost (killed,
            # out of memory, hard time limit). Running it again could kill this one too.
            run.status = Run.FAILED
            run.finished_at = now
            run.error = (
                "the worker running this simulation was lost (killed, out of memory or over "
                f"the hard time limit) after it started at {run.started_at:%Y-%m-%d %H:%M:%S} "
                "UTC; the run was not retried"
            )
            run.save(update_fields=["status", "finished_at", "error", "attempts"])
            return None
        run.status = Run.RUNNING
        run.started_at = now
        run.heartbeat_at = now
        run.allocator_version = allocator.__version__
        run.save(
            update_fields=["status", "started_at", "heartbeat_at", "allocator_version", "attempts"]
        )
        return run


def execute_run(run_id: int, task_id: str | None = None) -> Run | None:
    """Run the simulation of a queued run and store result and trace; idempotent.

    ``task_id`` (the Celery task's id) must match the run's when given.
    """
    try:
        run = _claim(run_id, task_id)
    except DatabaseError as exc:
        # Not left queued for the reaper to call a lost message: the run fails with its error.
        message = _failure_message(exc)
        log.warning("run %s could not start: %s", run_id, message, exc_info=exc)
        _fail_reconnecting(run_id, message)
        return _reload(run_id)
    if run is None:
        return Run.objects.filter(pk=run_id).first()
    interval = settings.DRA_WEB_PROGRESS_INTERVAL_SECONDS
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = timezone.now()
        stamp = now.timestamp()
        if stamp - last[0] < interval and done < total:
            return
        last[0] = stamp
        Run.objects.filter(pk=run_id, status=Run.RUNNING).update(
            progress_done=done, progress_total=total, heartbeat_at=now
        )

    try:
        # The heartbeat covers loading, the search and the store: a long store is not a lost
        # worker. The store only lands on a run still `running` (not reaped, not cancelled).
        with (
            _Heartbeat(run_id, settings.DRA_WEB_RUN_HEARTBEAT_SECONDS),
            collector_for_a_run() as keep_loaded,
        ):
            with _TimeLimit(settings.DRA_WEB_RUN_TIME_LIMIT_SECONDS):
                loaded = _load_kept(run.snapshot, keep_loaded)
                options = SimulationOptions.from_json(run.options)
                output = simulate(loaded, options, progress=progress)
            # The time limit is the simulation's; the store of a finished search completes.
            stored = store_output(
                run_id, output.result, output.trace, expect_status=Run.RUNNING, loaded=loaded
            )
        if not stored:
            log.warning(
                "run %s was finished meanwhile (reaped or cancelled): result dropped", run_id
            )
    except BaseException as exc:
        message = _failure_message(exc)
        log.warning("run %s failed: %s", run_id, message, exc_info=isinstance(exc, DatabaseError))
        _fail_reconnecting(run_id, message)
        if not isinstance(exc, Exception | RunTimeLimitExceeded):
            raise  # worker shutdown and the like: let Celery see it
    return _reload(run_id)


def _reload(run_id: int) -> Run | None:
    try:
        return Run.objects.filter(pk=run_id).first()
    except DatabaseError:
        connection.close()
        return None


def _failure_message(exc: BaseException) -> str:
    if isinstance(exc, SoftTimeLimitExceeded | RunTimeLimitExceeded):
        return (
            f"time limit exceeded: the simulation ran longer than "
            f"{settings.DRA_WEB_RUN_TIME_LIMIT_SECONDS} s (DRA_WEB_RUN_TIME_LIMIT_SECONDS)"
        )
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return "the worker was shut down while running this simulation"
    if isinstance(exc, DatabaseError):
        first = redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
        return (
            f"database error during the run ({type(exc).__name__}"
            + (f": {first}" if first else "")
            + "); the run was stopped, start it again"
        )
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    return redact(f"{type(exc).__name__}: {exc}{where}")


class _Superseded(Exception):
    """The run left the expected status while its output was being stored."""


def store_output(
    run_id: int,
    result: dict,
    trace: dict | None,
    *,
    expect_status: str | None = None,
    loaded: Snapshot | None = None,
) -> bool:
    """Replace the run's result and trace in one transaction, then mark it succeeded.

    With ``expect_status`` the store lands only on a run still in that status (the worker
    passes ``running``: a run reaped or cancelled meanwhile stays failed); False when not.
    The run's page facts are derived from ``loaded``, the typed snapshot the result was
    simulated from (the run's snapshot is loaded when it is not given).
    """
    nodes = (trace or {}).get("nodes") or []
    stats = (result or {}).get("stats") or {}
    facts = _page_facts(run_id, result, loaded)
    failed = _failures(run_id, result)
    try:
        with transaction.atomic():
            TraceNode.objects.filter(run_id=run_id).delete()
            _insert_trace_rows(run_id, nodes)
            qs = Run.objects.filter(pk=run_id)
            if expect_status is not None:
                qs = qs.filter(status=expect_status)
            if not _mark_succeeded(qs, result, trace, facts, failed, nodes, stats):
                raise _Superseded()
    except _Superseded:
        return False
    return True


def _load_kept(snapshot, keep: Callable[[], None]) -> Snapshot:
    """The run's snapshot, kept (frozen) for the collector before collecting resumes, so it
    never walks the snapshot: resuming with millions of young objects alive costs a pass over
    them at the next allocation (two passes, 0.11 s of a 10 MB snapshot's 0.46 s load)."""
    with collector_paused():
        loaded = load_snapshot(snapshot)
        keep()
    return loaded


def _page_facts(run_id: int, result: dict, loaded: Snapshot | None) -> PageFacts | None:
    """What the run's page shows from the snapshot; None (the page derives it when first
    shown) when it cannot be derived: deriving it must never fail a finished simulation."""
    if loaded is None:
        run = Run.objects.select_related("snapshot").filter(pk=run_id).first()
        if run is None:
            return None
        try:
            loaded = load_snapshot(run.snapshot)
        except SnapshotError:  # a snapshot the current loader rejects: its page shows raw only
            loaded = None
    try:
        return page_facts.derive(loaded, result or {})
    except Exception:
        log.warning("run %s: page facts not derived", run_id, exc_info=True)
        return None


def _failures(run_id: int, result: dict) -> Failures | None:
    """The failed pods kept apart; None (their pages read the result) when they cannot be:
    keeping them must never fail a finished simulation."""
    try:
        return failures.derive(result or {})
    except Exception:
        log.warning("run %s: failed pods not kept apart", run_id, exc_info=True)
        return None


def _mark_succeeded(qs, result, trace, facts, failed, nodes, stats) -> int:
    return qs.update(
        status=Run.SUCCEEDED,
        finished_at=timezone.now(),
        result=result,
        trace_blob=blobs.pack(trace) if trace is not None else None,
        page_facts_blob=blobs.pack(facts.to_json()) if facts is not None else None,
        failures_blob=blobs.pack(failed.to_json()) if failed is not None else None,
        trace_node_count=len(nodes),
        trace_omitted=int((trace or {}).get("omitted") or 0),
        error="",
        pods_total=stats.get("pods"),
        pods_scheduled=stats.get("scheduled"),
        pods_failed=stats.get("failed"),
        progress_done=stats.get("pods", 0),
        progress_total=stats.get("pods", 0),
    )


_TRACE_COLUMNS = (
    "run_id",
    "node_id",
    "parent",
    "depth",
    "kind",
    "label",
    "status",
    "reason",
    "message",
    "child_count",
    "descendants",
    "failed_descendants",
    "extra",
    "search",
)


def _insert_trace_rows(run_id: int, nodes: list[dict]) -> None:
    """executemany in chunks: the ORM's bulk_create spends ~10x longer building the SQL."""
    table = connection.ops.quote_name(TraceNode._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _TRACE_COLUMNS)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(_TRACE_COLUMNS))})"
    chunk: list[tuple] = []
    with connection.cursor() as cursor:
        for row in index_rows(nodes):
            extra = row["extra"]
            chunk.append(
                (
                    run_id,
                    row["node_id"],
                    row["parent"],
                    row["depth"],
                    row["kind"],
                    row["label"],
                    row["status"],
                    row["reason"],
                    row["message"],
                    row["child_count"],
                    row["descendants"],
                    row["failed_descendants"],
                    json.dumps(extra, separators=(",", ":")) if extra is not None else None,
                    row["search"],
                )
            )
            if len(chunk) >= TRACE_BATCH:
                cursor.executemany(sql, chunk)
                chunk = []
        if chunk:
            cursor.executemany(sql, chunk)
