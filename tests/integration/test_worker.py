"""Runs queued through the HTTP API, executed by a real Celery worker over a real Redis."""

from __future__ import annotations

import os
import signal
import time

import pytest
import requests

from bench.workloads import pathological_cluster, synthetic_cluster, to_json, to_yaml

from .servers import stop, wait_for

pytestmark = pytest.mark.integration


def _upload(stack, text: str, content_type: str, name: str) -> int:
    response = stack.session().post(
        f"{stack.url}/api/snapshots/?name={name}",
        data=text.encode(),
        headers={"Content-Type": content_type},
        timeout=60,
    )
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def _start(stack, snapshot: int, options: dict) -> int:
    response = stack.session().post(
        f"{stack.url}/api/runs/", json={"snapshot": snapshot, "options": options}, timeout=30
    )
    assert response.status_code == 202, response.text
    # Handed to the worker, not run in the request: a fast worker may already have taken it.
    assert response.json()["status"] in ("queued", "running"), response.json()
    return response.json()["id"]


def test_runs_queued_through_the_api_succeed(stack):
    worker = stack.start_worker("ok")
    try:
        small = _upload(stack, to_yaml(synthetic_cluster()), "application/yaml", "small")
        bigger = _upload(
            stack,
            to_json(synthetic_cluster(nodes=6, running_pods=6, pending_pods=60, gpus_per_pod=2)),
            "application/json",
            "bigger",
        )
        a = _start(stack, small, {"trace": True})
        b = _start(stack, bigger, {"trace": True, "timeout": 2})
        run_a, run_b = stack.wait_run(a), stack.wait_run(b)
    finally:
        stop(worker)
    assert run_a["status"] == "succeeded", run_a["error"]
    assert run_b["status"] == "succeeded", run_b["error"]
    assert run_a["result"]["stats"]["scheduled"] == 2
    assert run_b["result"]["stats"]["pods"] == 60
    assert run_b["progress"] == {"done": 60, "total": 60}
    assert run_b["taskId"] and run_b["attempts"] == 1
    s = stack.session()
    roots = s.get(f"{stack.url}/api/runs/{b}/trace/?parent=root&page_size=500").json()
    assert roots["count"] >= 60
    first = roots["results"][0]
    kids = s.get(f"{stack.url}/api/runs/{b}/trace/?parent={first['id']}").json()
    assert kids["count"] == first["childCount"]
    diff = s.get(f"{stack.url}/api/runs/{a}/diff/{b}/").json()
    assert diff["a"]["id"] == a and diff["trace"]["nodesB"] == run_b["traceNodes"]


def test_killed_worker_fails_the_run_with_a_message(stack):
    worker = stack.start_worker("doomed")
    snap = _upload(stack, to_json(pathological_cluster()), "application/json", "pathological")
    run_id = _start(stack, snap, {"timeout": 300})
    running = stack.wait_run(run_id, statuses=("running",), timeout=60)
    assert running["startedAt"]
    time.sleep(1.5)  # mid-search, heartbeats flowing
    assert stack.session().get(f"{stack.url}/api/runs/{run_id}/").json()["status"] == "running"
    os.killpg(worker.pid, signal.SIGKILL)  # the whole worker: main process and pool child
    worker.wait(10)
    # Reading the run writes nothing: it stays running until the reaper sees its heartbeat
    # stop, and the reaper is beat's, in a worker (restarted, as docker compose does).
    time.sleep(5)  # past DRA_WEB_RUN_STALE_SECONDS of the stack
    assert stack.session().get(f"{stack.url}/api/runs/{run_id}/").json()["status"] == "running"
    replacement = stack.start_worker("replacement", beat=True)
    try:
        failed = stack.wait_run(run_id, statuses=("failed",), timeout=30)
    finally:
        stop(replacement)
    assert "worker lost" in failed["error"], failed
    assert failed["finishedAt"]
    # The redelivered task, should a worker receive it, must not run it again.
    assert stack.session().get(f"{stack.url}/api/runs/{run_id}/").json()["status"] == "failed"


def test_killed_pool_child_is_requeued_and_not_run_again(stack):
    worker = stack.start_worker("child")
    try:
        snap = _upload(stack, to_json(pathological_cluster(gpus=58)), "application/json", "p2")
        run_id = _start(stack, snap, {"timeout": 300})
        running = stack.wait_run(run_id, statuses=("running",), timeout=60)
        children = [
            int(pid)
            for pid in os.listdir("/proc")
            if pid.isdigit() and _ppid(int(pid)) == worker.pid
        ]
        assert children, "prefork pool child not found"
        os.kill(children[0], signal.SIGKILL)
        failed = stack.wait_run(run_id, statuses=("failed",), timeout=60)
        # The main process sees WorkerLostError and requeues the task (acks_late +
        # reject_on_worker_lost); the redelivered task finds the run marked running (or
        # already reaped) and fails it instead of running the killing search again.
        task = running["taskId"]
        wait_for(
            lambda: stack.worker_log(worker).count(f"[{task}] received") == 2,
            30,
            "the redelivered task",
        )
        wait_for(
            lambda: f"[{task}] succeeded" in stack.worker_log(worker),
            30,
            "the redelivered task to finish",
        )
    finally:
        stop(worker)
    assert "WorkerLostError" in stack.worker_log(worker)
    final = stack.session().get(f"{stack.url}/api/runs/{run_id}/").json()
    assert final["status"] == "failed" and final["result"] is None
    assert "lost" in failed["error"], failed
    assert final["error"] == failed["error"]  # failed once, never re-run or overwritten


def test_time_limit_fails_the_run(stack):
    worker = stack.start_worker("limited", DRA_WEB_RUN_TIME_LIMIT_SECONDS="3")
    try:
        snap = _upload(stack, to_json(pathological_cluster(gpus=56)), "application/json", "p3")
        run_id = _start(stack, snap, {"timeout": 300})
        failed = stack.wait_run(run_id, timeout=60)
    finally:
        stop(worker)
    assert failed["status"] == "failed"
    assert "time limit exceeded" in failed["error"], failed


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_production_settings_serve_health_static_and_login(stack):
    assert requests.get(f"{stack.url}/healthz/", timeout=10).json() == {"status": "ok"}
    asset = requests.get(
        f"{stack.url}/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js",
        timeout=10,
    )
    assert asset.status_code == 200 and len(asset.content) > 100_000
    anonymous = requests.get(f"{stack.url}/api/runs/", timeout=10)
    assert anonymous.status_code in (401, 403)
    token = requests.post(
        f"{stack.url}/api/auth/token/", json={"username": "alice", "password": "x"}, timeout=10
    )
    assert token.status_code == 400  # create_token --create-user set a random password


def test_waiting_helper_times_out_cleanly():
    with pytest.raises(TimeoutError, match="never"):
        wait_for(lambda: False, 0.2, "never")
