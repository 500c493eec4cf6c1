from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "dra_web.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The tasks join the Celery app in every process, not only in workers: the web queues
        # a run by the task's name, and in eager mode (tests, manage.py shell) Celery runs the
        # task registered under that name in-process.
        from dra_web.runs import tasks  # noqa: F401
