from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "dra_web.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"
