from django.apps import AppConfig


class SnapshotsConfig(AppConfig):
    name = "dra_web.snapshots"
    label = "snapshots"
    default_auto_field = "django.db.models.BigAutoField"
