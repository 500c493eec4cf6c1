"""Run retention: pruning old runs with their traces, pins, reviews, storage per run."""

from __future__ import annotations

import zlib
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from bench.workloads import synthetic_cluster, to_yaml
from dra_web.reviews.models import Review
from dra_web.runs import retention, tasks
from dra_web.runs.models import Run, TraceNode
from dra_web.runs.storage import run_storage, runs_storage_bytes
from dra_web.snapshots.services import create_snapshot
from tests.pages.builders import make_run

pytestmark = pytest.mark.django_db

NOW = timezone.now()


@pytest.fixture(autouse=True)
def _fresh_cache():
    # run_storage caches finished runs by id and finish time; tests reuse both.
    cache.clear()


@pytest.fixture
def snapshot(user):
    return create_snapshot(user, [("cluster.yaml", to_yaml(synthetic_cluster()))], "gpu")


def finished(snapshot, user, days_ago: float, **fields) -> Run:
    """A succeeded run with a result and a trace, finished ``days_ago``."""
    run = make_run(snapshot, user)
    Run.objects.filter(pk=run.pk).update(finished_at=NOW - timedelta(days=days_ago), **fields)
    run.refresh_from_db()
    return run


def test_prune_deletes_old_runs_with_their_traces_and_keeps_pinned_reviewed_and_recent(
    snapshot, user
):
    old = finished(snapshot, user, 120)
    pinned = finished(snapshot, user, 120, pinned=True)
    reviewed = finished(snapshot, user, 120)
    Review.objects.create(run=reviewed, pod="ml-training/train-1", opened_by=user)
    recent = finished(snapshot, user, 10)
    running = Run.objects.create(snapshot=snapshot, owner=user, status=Run.RUNNING)
    Run.objects.filter(pk=running.pk).update(queued_at=NOW - timedelta(days=200))
    assert TraceNode.objects.filter(run=old).exists()
    freed = run_storage(old)["total"]

    report = retention.prune_runs(90, now=NOW)

    assert report.ids == [old.pk] and report.runs == 1
    assert report.bytes == freed > 0
    assert not Run.objects.filter(pk=old.pk).exists()
    assert not TraceNode.objects.filter(run_id=old.pk).exists()
    kept = set(Run.objects.values_list("pk", flat=True))
    assert kept == {pinned.pk, reviewed.pk, recent.pk, running.pk}
    assert TraceNode.objects.filter(run=pinned).exists()
    assert snapshot.__class__.objects.filter(pk=snapshot.pk).exists()  # snapshots stay


def test_a_dry_run_lists_what_would_go_and_deletes_nothing(snapshot, user):
    old = [finished(snapshot, user, 100 + i) for i in range(3)]
    report = retention.prune_runs(30, dry_run=True, now=NOW)
    assert sorted(report.ids) == sorted(r.pk for r in old)
    assert report.bytes == runs_storage_bytes(Run.objects.all())
    assert Run.objects.count() == 3


def test_retention_age_comes_from_the_setting_and_0_keeps_everything(snapshot, user, settings):
    run = finished(snapshot, user, 8)
    settings.DRA_WEB_RUN_RETENTION_DAYS = 0
    assert retention.prune_runs(now=NOW).cutoff is None
    assert Run.objects.filter(pk=run.pk).exists()
    settings.DRA_WEB_RUN_RETENTION_DAYS = 7
    assert retention.prune_runs(now=NOW).ids == [run.pk]


def test_pruning_goes_in_batches(snapshot, user, monkeypatch):
    monkeypatch.setattr(retention, "PRUNE_BATCH", 2)
    runs = [finished(snapshot, user, 400) for _ in range(5)]
    report = retention.prune_runs(365, now=NOW)
    assert sorted(report.ids) == sorted(r.pk for r in runs)
    assert Run.objects.count() == 0 and TraceNode.objects.count() == 0


def test_the_beat_schedule_prunes_hourly(snapshot, user, settings):
    entry = django_settings.CELERY_BEAT_SCHEDULE["prune-old-runs"]
    assert entry["task"] == tasks.prune_old_runs.name and entry["schedule"] == 3600.0
    finished(snapshot, user, settings.DRA_WEB_RUN_RETENTION_DAYS + 1)
    assert tasks.prune_old_runs() == 1
    assert Run.objects.count() == 0


def test_prune_runs_command(snapshot, user):
    old = finished(snapshot, user, 40)
    out = StringIO()
    call_command("prune_runs", "--older-than", "30", "--dry-run", stdout=out)
    assert out.getvalue().startswith("would delete 1 run finished before ")
    assert f"#{old.pk}" in out.getvalue() and Run.objects.filter(pk=old.pk).exists()
    out = StringIO()
    call_command("prune_runs", "--older-than", "30", stdout=out)
    assert out.getvalue().startswith("deleted 1 run ")
    assert not Run.objects.filter(pk=old.pk).exists()
    with pytest.raises(CommandError, match="--older-than"):
        call_command("prune_runs", "--older-than", "0")


def test_storage_counts_the_result_the_trace_and_its_index(snapshot, user):
    run = finished(snapshot, user, 1)
    storage = run_storage(run)
    TraceNode.objects.filter(run=run).delete()
    assert run_storage(run) == storage  # a finished run's figures are cached
    assert storage["trace"] == len(bytes(run.trace_blob))  # SQLite: the blob as stored
    assert storage["result"] > 1000
    assert storage["traceIndex"] > 0
    assert storage["total"] == storage["result"] + storage["trace"] + storage["traceIndex"]
    bare = Run.objects.create(snapshot=snapshot, owner=user)
    assert run_storage(bare) == {"result": 0, "trace": 0, "traceIndex": 0, "total": 0}
    assert zlib.decompress(bytes(run.trace_blob))  # really the compressed trace


def test_api_pins_and_unpins_a_run_and_shows_its_storage(api, snapshot, user):
    run = finished(snapshot, user, 1)
    detail = api.get(f"/api/runs/{run.pk}/").json()
    assert detail["pinned"] is False
    assert detail["storage"] == run_storage(run)
    response = api.patch(f"/api/runs/{run.pk}/", {"pinned": True}, format="json")
    assert response.status_code == 200 and response.json()["pinned"] is True
    assert Run.objects.get(pk=run.pk).pinned is True
    assert api.get("/api/runs/").json()["results"][0]["pinned"] is True
    response = api.patch(f"/api/runs/{run.pk}/", {"pinned": False}, format="json")
    assert response.json()["pinned"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pinned": "yes"}, "pinned"),
        ({"pinned": 1}, "pinned"),
        ({}, "pinned"),
        ({"pinned": True, "status": "failed"}, "status"),
    ],
)
def test_api_refuses_other_changes_naming_the_field(api, snapshot, user, body, field):
    run = finished(snapshot, user, 1)
    response = api.patch(f"/api/runs/{run.pk}/", body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"{field}: ")
    assert Run.objects.get(pk=run.pk).pinned is False


def test_pinning_needs_a_login_and_an_existing_run(client, api):
    assert (
        client.patch("/api/runs/1/", {"pinned": True}, content_type="application/json").status_code
        == 401
    )
    assert api.patch("/api/runs/999/", {"pinned": True}, format="json").status_code == 404
