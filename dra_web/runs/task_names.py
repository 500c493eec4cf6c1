"""The names the runs' Celery tasks are registered under. The web queues a run by name and the
beat schedule (``settings.CELERY_BEAT_SCHEDULE``) names its periodic tasks, so neither imports
the tasks (which import the worker side, which imports the web's services)."""

EXECUTE_RUN = "dra_web.runs.tasks.execute_run"
REAP_STALE_RUNS = "dra_web.runs.tasks.reap_stale_runs"
