"""The Celery application. Configuration comes from Django settings (CELERY_ prefix)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dra_web.settings")

app = Celery("dra_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
