"""runs.services and runs.worker: idempotent execution, failures kept, stale runs reaped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bench.workloads import synthetic_cluster, to_yaml
from dra_web.celery import app as celery_app
from dra_web.runs import services, task_names, worker
from dra_web.runs.models import Run, TraceNode
from dra_web.snapshots.services import create_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(user):
    return create_snapshot(user, [("cluster.yaml", to_yaml(synthetic_cluster()))], "c")


@pytest.fixture
def run(snapshot, user, _web_settings):
    return Run.objects.create(snapshot=snapshot, owner=user, options={"trace": True})


def test_execute_stores_result_and_trace_then_is_idempotent(run):
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED
    assert run.attempts == 1
    first_finish = run.finished_at
    nodes = run.trace()["nodes"]
    assert TraceNode.objects.filter(run=run).count() == len(nodes) == run.trace_node_count
    # A redelivered task for a finished run does nothing.
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.finished_at == first_finish
    assert run.attempts == 1


def test_a_run_tunes_the_collector_for_its_length_and_puts_it_back(run, monkeypatch):
    # A worker lives on after the run: the thresholds a run needs (the defaults walked the
    # snapshot again and again: 4.4 s against 1.9 s for 5,000 nodes) hold only during it, and
    # the snapshot frozen for it is unfrozen after.
    import gc

    from allocator.collector import RUN_THRESHOLDS

    seen = []
    simulate = worker.simulate

    def watched(loaded, options, progress=None):
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return simulate(loaded, options, progress=progress)

    monkeypatch.setattr(worker, "simulate", watched)
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED
    assert seen == [(RUN_THRESHOLDS, True)]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_a_run_loads_its_snapshot_without_a_collector_pass(user):
    # Collecting resumed with the decoded documents alive walked all of them at the next
    # allocation, and again after the build: the snapshot is kept (frozen) before it resumes.
    import gc

    from allocator.collector import RUN_THRESHOLDS, collector_for_a_run

    cluster = synthetic_cluster(nodes=200, running_pods=800, pending_pods=20)
    snapshot = create_snapshot(user, [("cluster.yaml", to_yaml(cluster))], "200 nodes")
    passes = []

    def count(phase, info):
        if phase == "stop":
            passes.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with collector_for_a_run() as keep:
            loaded = worker._load_kept(snapshot, keep)
            assert gc.get_count()[0] < 10
            frozen = gc.get_freeze_count()
    finally:
        gc.callbacks.remove(count)
    assert passes == []
    assert len(loaded.nodes) == 200 and frozen > RUN_THRESHOLDS[0]


def test_storing_again_replaces_the_trace(run):
    worker.execute_run(run.pk)
    worker.store_output(
        run.pk,
        {"schemaVersion": "v1", "pods": [], "nodeClaims": [], "stats": {"pods": 0}},
        {"nodes": [{"id": 0, "parent": None, "kind": "pod", "label": "x", "status": "ok"}]},
    )
    assert TraceNode.objects.filter(run=run).count() == 1


def test_redelivery_of_a_running_run_fails_it_without_rerunning(run):
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, started_at=timezone.now())
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert "worker running this simulation was lost" in run.error
    assert run.result is None


def test_simulation_error_fails_the_run_with_a_message(run):
    Run.objects.filter(pk=run.pk).update(options={"timeout": "soon"})
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert "timeout" in run.error
    assert run.finished_at is not None
    assert run.options == {"timeout": "soon"}  # nothing lost


def test_reaper_fails_runs_without_heartbeat(run, snapshot, user, settings):
    settings.DRA_WEB_RUN_STALE_SECONDS = 30
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=Run.RUNNING,
        started_at=now - timedelta(minutes=5),
        heartbeat_at=now - timedelta(seconds=31),
    )
    fresh = Run.objects.create(
        snapshot=snapshot, owner=user, status=Run.RUNNING, started_at=now, heartbeat_at=now
    )
    assert services.reap_stale_runs(now) == 1
    run.refresh_from_db()
    fresh.refresh_from_db()
    assert run.status == Run.FAILED
    assert "no heartbeat for 31 s" in run.error
    assert fresh.status == Run.RUNNING


def test_reading_runs_writes_nothing_and_beats_reaper_task_fails_stale_ones(api, run, settings):
    settings.DRA_WEB_RUN_STALE_SECONDS = 10
    Run.objects.filter(pk=run.pk).update(
        status=Run.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=60)
    )
    assert api.get(f"/api/runs/{run.pk}/").json()["status"] == "running"
    assert api.get("/api/runs/").json()["results"][0]["status"] == "running"
    # What beat sends, by the name in the schedule.
    entry = settings.CELERY_BEAT_SCHEDULE["reap-stale-runs"]
    assert celery_app.signature(entry["task"]).apply().get() == 1
    body = api.get(f"/api/runs/{run.pk}/").json()
    assert body["status"] == "failed"
    assert "worker lost" in body["error"]


def test_the_beat_schedule_names_registered_tasks_at_the_configured_interval(settings):
    assert settings.CELERY_BEAT_SCHEDULE, "no periodic task"
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in celery_app.tasks, entry
    reaper = settings.CELERY_BEAT_SCHEDULE["reap-stale-runs"]
    assert reaper["task"] == task_names.REAP_STALE_RUNS
    assert reaper["schedule"] == settings.DRA_WEB_REAP_INTERVAL_SECONDS


def test_starting_a_run_reaps_stale_runs_first(api, run, snapshot, settings):
    """Without beat (tasks run in-process) stale runs are still failed: at the next start."""
    settings.DRA_WEB_RUN_STALE_SECONDS = 10
    Run.objects.filter(pk=run.pk).update(
        status=Run.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=60)
    )
    started = api.post("/api/runs/", {"snapshot": snapshot.pk}, format="json")
    assert started.status_code == 202, started.content
    run.refresh_from_db()
    assert run.status == Run.FAILED and "worker lost" in run.error


def _reset_pools(app) -> None:
    app._pool = None
    app.amqp._producer_pool = None


def test_unreachable_broker_fails_the_run_instead_of_leaving_it_queued(snapshot, user):
    from dra_web.celery import app

    conf = app.conf
    saved = conf.task_always_eager, conf.broker_url
    conf.task_always_eager = False
    conf.broker_url = "redis://127.0.0.1:9/0"  # discard port: nothing listens
    conf.broker_connection_timeout = 0.5
    _reset_pools(app)  # producer pools for the dead broker
    try:
        run = Run.objects.create(snapshot=snapshot, owner=user)
        services._enqueue(run.pk, "task-1")
    finally:
        conf.task_always_eager, conf.broker_url = saved
        _reset_pools(app)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert "broker" in run.error


def test_heartbeat_thread_writes_while_running(run, settings, transactional_db):
    import time

    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, heartbeat_at=None)
    with worker._Heartbeat(run.pk, 0.05):
        time.sleep(0.3)
    run.refresh_from_db()
    assert run.heartbeat_at is not None


def test_a_task_for_another_run_copy_is_ignored(run):
    Run.objects.filter(pk=run.pk).update(task_id="the-real-task")
    worker.execute_run(run.pk, task_id="a-stale-task")
    run.refresh_from_db()
    assert run.status == Run.QUEUED and run.attempts == 0
    worker.execute_run(run.pk, task_id="the-real-task")
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED


def test_reaper_uses_the_start_time_when_no_heartbeat_was_written(run, settings):
    settings.DRA_WEB_RUN_STALE_SECONDS = 30
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=Run.RUNNING, started_at=now - timedelta(seconds=45), heartbeat_at=None
    )
    assert services.reap_stale_runs(now) == 1
    run.refresh_from_db()
    assert run.status == Run.FAILED and "no heartbeat for 45 s" in run.error


def test_time_limit_interrupts_a_long_search(user, settings, _web_settings):
    from bench.workloads import pathological_cluster, to_json

    settings.DRA_WEB_RUN_TIME_LIMIT_SECONDS = 1
    snap = create_snapshot(user, [("p.json", to_json(pathological_cluster()))], "slow")
    run = Run.objects.create(snapshot=snap, owner=user, options={"timeout": 60})
    worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert "time limit exceeded" in run.error
    assert run.duration_seconds < 30


def test_a_stored_result_reads_back_whatever_orjson_refuses(run):
    # The result column is written by orjson; a 2**64 byte count (which orjson refuses) is
    # written by the standard library instead (SQLite and PostgreSQL both store it).
    result = {
        "schemaVersion": "v1",
        "pods": [{"pod": "ml-training/train-東京", "labels": {"team": "research"}}],
        "nodeClaims": [],
        "stats": {"pods": 1, "bytes": 2**64},
    }
    assert worker.store_output(run.pk, result, None)
    run.refresh_from_db()
    assert run.result == result
    plain = {**result, "pods": [{"pod": "ml-training/train-東京"}]}
    assert worker.store_output(run.pk, plain, None)
    run.refresh_from_db()
    assert run.result == plain
