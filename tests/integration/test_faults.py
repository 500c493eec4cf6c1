"""Fault injection on a real PostgreSQL of this module's own (restarted by a test), Redis,
gunicorn and Celery: a database restarted mid-run, a long store, concurrent
identical uploads."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import requests

from bench.workloads import pathological_cluster, synthetic_cluster, to_json, to_yaml

from .conftest import make_stack, start_postgres
from .servers import stop, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg():
    cluster = start_postgres()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def fault_stack(pg, redis_url, tmp_path_factory):
    # Heartbeats every 0.5 s; a run silent for 5 s is reaped (by beat, every second, in the
    # workers started with it).
    with make_stack(
        tmp_path_factory.mktemp("faults"), pg.url, f"{redis_url}/7", DRA_WEB_RUN_STALE_SECONDS="5"
    ) as stack:
        yield stack


def _upload(stack, text: str, content_type: str = "application/json") -> int:
    response = stack.session().post(
        f"{stack.url}/api/snapshots/",
        data=text.encode(),
        headers={"Content-Type": content_type},
        timeout=60,
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _start(stack, snapshot: int, options: dict) -> int:
    response = stack.session().post(
        f"{stack.url}/api/runs/", json={"snapshot": snapshot, "options": options}, timeout=30
    )
    assert response.status_code == 202, response.text
    return response.json()["id"]


def _status(stack, run_id: int) -> dict | None:
    """The run, or None while the web cannot answer (its database restarting)."""
    try:
        response = stack.session().get(f"{stack.url}/api/runs/{run_id}/", timeout=10)
    except requests.RequestException:
        return None
    return response.json() if response.status_code == 200 else None


def test_database_restart_mid_run_fails_the_run_at_once_with_the_error(fault_stack, pg):
    worker = fault_stack.start_worker("pg-restart")
    try:
        snap = _upload(fault_stack, to_json(pathological_cluster(pods=3)))
        run_id = _start(fault_stack, snap, {"timeout": 4, "trace": False})
        fault_stack.wait_run(run_id, statuses=("running",), timeout=60)
        pg.restart()  # every open connection, the worker's too, is terminated
        restarted = time.monotonic()

        def finished():
            run = _status(fault_stack, run_id)
            return run if run and run["status"] in ("succeeded", "failed") else None

        run = wait_for(finished, 60, "the run to end after the restart", 0.25)
        seconds = time.monotonic() - restarted
    finally:
        stop(worker)
    assert run["status"] == "failed", run
    # The worker's own error, recorded once the database answered again (the heartbeat
    # reconnects meanwhile, so the reaper has nothing to say).
    assert run["error"].startswith("database error during the run ("), run["error"]
    assert seconds < 25, seconds
    assert "127.0.0.1" not in run["error"] and str(pg.port) not in run["error"]
    # The server is answering and a new run succeeds.
    ok = _start(
        fault_stack, _upload(fault_stack, to_yaml(synthetic_cluster()), "application/yaml"), {}
    )
    worker = fault_stack.start_worker("after-restart")
    try:
        assert fault_stack.wait_run(ok)["status"] == "succeeded"
    finally:
        stop(worker)


def test_a_long_store_is_not_taken_for_a_lost_worker(fault_stack, pg):
    """The trace table is locked by another session for several stale periods while the run
    stores: the heartbeat goes on, the reaper (beat, on the worker's second pool process)
    leaves the run `running`, then it succeeds."""
    worker = fault_stack.start_worker("long-store", beat=True, concurrency=2)
    snap = _upload(
        fault_stack, to_json(synthetic_cluster(nodes=3, running_pods=2, pending_pods=12))
    )
    seen: list[str] = []
    try:
        with psycopg.connect(pg.url.replace("postgres://", "postgresql://")) as blocker:
            blocker.execute("LOCK TABLE runs_tracenode IN EXCLUSIVE MODE")
            run_id = _start(fault_stack, snap, {"trace": True})
            # Wait until the store is blocked on the lock (the simulation itself is quick).
            wait_for(
                lambda: blocker.execute(
                    "SELECT count(*) FROM pg_locks WHERE relation = 'runs_tracenode'::regclass "
                    "AND NOT granted"
                ).fetchone()[0],
                60,
                "the store to wait for the trace table",
                0.1,
            )
            deadline = time.monotonic() + 12  # more than two stale periods
            while time.monotonic() < deadline:
                run = _status(fault_stack, run_id)
                seen.append(run["status"])
                assert run["status"] == "running", run
                time.sleep(0.25)
            blocker.rollback()  # releases the lock: the store completes
        run = fault_stack.wait_run(run_id)
    finally:
        stop(worker)
    assert set(seen) == {"running"}
    assert run["status"] == "succeeded", run["error"]
    reaped = fault_stack.worker_log(worker).count("reap_stale_runs[")
    assert reaped >= 10, "the reaper did not run while the store waited"
    assert run["error"] is None and run["traceNodes"] > 0


def test_twenty_concurrent_identical_uploads_make_one_snapshot(fault_stack):
    body = to_yaml(synthetic_cluster(nodes=4, pending_pods=8)).encode()

    def upload(_):
        return fault_stack.session().post(
            f"{fault_stack.url}/api/snapshots/?name=same",
            data=body,
            headers={"Content-Type": "application/yaml"},
            timeout=60,
        )

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(upload, range(20)))
    assert [r.status_code for r in responses] == [201] * 20, [r.text for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    assert sum(not r.json()["existing"] for r in responses) == 1
