"""Celery tasks: thin wrappers around the worker side (runs.worker) and the reaper."""

from __future__ import annotations

from celery import shared_task

from dra_web.runs import retention, services, task_names, worker


@shared_task(
    bind=True,
    name=task_names.EXECUTE_RUN,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def execute_run(self, run_id: int) -> None:
    worker.execute_run(run_id, task_id=self.request.id)


@shared_task(name=task_names.REAP_STALE_RUNS, ignore_result=True)
def reap_stale_runs() -> int:
    return services.reap_stale_runs()


@shared_task(name="dra_web.runs.tasks.prune_old_runs", ignore_result=True)
def prune_old_runs() -> int:
    """Celery beat, hourly: runs past DRA_WEB_RUN_RETENTION_DAYS (runs/retention.py)."""
    return retention.prune_runs().runs
