"""dra-web: the Django service around the allocator (uploads, runs, traces, diffs)."""

from dra_web.celery import app as celery_app

__all__ = ("celery_app",)
