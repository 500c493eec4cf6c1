"""The embedded default: `make run`'s scripts/run-dev.sh without Redis serves with runserver
and a Celery worker (beat embedded) on kombu's filesystem broker; runs are queued, show
progress, can be cancelled, stale runs are reaped, and Ctrl-C stops both processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from bench.workloads import pathological_cluster, synthetic_cluster, to_json, to_yaml

from .servers import free_port, port_open, wait_for

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def _manage(env, *args) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_make_run_queues_runs_on_a_filesystem_broker_and_stops_together(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DRA_WEB_"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DRA_WEB_BROKER_DIR": str(tmp_path / "broker"),
        "DRA_WEB_PROGRESS_INTERVAL_SECONDS": "0.1",
        "DRA_WEB_REAP_INTERVAL_SECONDS": "1",
        "PY": sys.executable,
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
    }
    env.pop("REDIS_URL", None)
    _manage(env, "migrate", "--noinput")
    token = _manage(env, "create_token", "alice", "--create-user").strip()
    _manage(env, "ensure_demo_user", "--username", "bob", "--password", "bob-password-1")
    log = tmp_path / "run-dev.log"
    script = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "run-dev.sh")],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{env['PORT']}"
    s = requests.Session()
    s.headers["Authorization"] = f"Token {token}"
    try:
        wait_for(lambda: port_open(int(env["PORT"])), 60, "runserver")
        wait_for(lambda: b" ready." in log.read_bytes(), 60, "the celery worker")
        processes = _children(script.pid)
        assert len(processes) == 2, log.read_text()

        def upload(text, kind):
            r = s.post(f"{url}/api/snapshots/", data=text.encode(), headers={"Content-Type": kind})
            assert r.status_code == 201, r.text
            return r.json()["id"]

        def wait(run_id, statuses):
            return wait_for(
                lambda: (
                    (b := s.get(f"{url}/api/runs/{run_id}/").json())["status"] in statuses and b
                ),
                60,
                f"run {run_id} {statuses}",
                0.2,
            )

        small = upload(to_yaml(synthetic_cluster(nodes=2, pending_pods=4)), "application/yaml")
        started = s.post(f"{url}/api/runs/", json={"snapshot": small})
        assert started.status_code == 202 and started.json()["status"] == "queued"
        done = wait(started.json()["id"], ("succeeded", "failed"))
        assert done["status"] == "succeeded", done["error"]
        assert done["progress"] == {"done": 4, "total": 4}

        # A run whose worker was lost (running, its last heartbeat an hour ago) is failed by
        # the reaper on the worker's embedded beat.
        lost = _manage(
            env,
            "shell",
            "--no-imports",
            "-c",
            "from datetime import timedelta; from django.utils import timezone; "
            "from dra_web.runs.models import Run; from dra_web.snapshots.models import Snapshot; "
            f"s = Snapshot.objects.get(pk={small}); old = timezone.now() - timedelta(hours=1); "
            "print(Run.objects.create(snapshot=s, owner=s.owner, status='running', "
            "started_at=old, heartbeat_at=old).pk)",
        )
        reaped = wait(int(lost), ("failed",))
        assert reaped["error"].startswith("worker lost: no heartbeat"), reaped

        # A stuck search is cancelled from the API: the pool process running it is killed.
        stuck = upload(to_json(pathological_cluster(pods=2)), "application/json")
        run_id = s.post(f"{url}/api/runs/", json={"snapshot": stuck, "options": {"timeout": 300}})
        run_id = run_id.json()["id"]
        wait(run_id, ("running",))
        cancelled = s.post(f"{url}/api/runs/{run_id}/cancel/")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["error"].startswith("cancelled by alice")
        wait_for(lambda: b"Terminating" in log.read_bytes(), 30, "the task to be terminated")
        # The worker goes on with the next run.
        again = s.post(f"{url}/api/runs/", json={"snapshot": small}).json()["id"]
        assert wait(again, ("succeeded", "failed"))["status"] == "succeeded"
        assert s.get(f"{url}/api/runs/{run_id}/").json()["status"] == "failed"

        # The same from the pages, as a user in the browser: start a run from the form (the
        # answer comes at once), watch its status partial, cancel it with the page's button.
        page = requests.Session()
        page.get(f"{url}/accounts/login/")
        login = page.post(
            f"{url}/accounts/login/",
            data={
                "username": "bob",
                "password": "bob-password-1",
                "csrfmiddlewaretoken": page.cookies["csrftoken"],
            },
        )
        assert login.ok and "/accounts/login/" not in login.url, login.text[:300]
        started = page.post(
            f"{url}/runs/start/",
            data={
                "snapshot": stuck,
                "timeout": "300",
                "trace": "on",
                "csrfmiddlewaretoken": page.cookies["csrftoken"],
            },
            allow_redirects=False,
        )
        assert started.status_code == 302, started.text[:300]
        run_page = url + started.headers["Location"]
        page_run = int(started.headers["Location"].strip("/").split("/")[-1])
        assert page.get(run_page).elapsed.total_seconds() < 5  # never waits for the search
        assert wait(page_run, ("running", "succeeded", "failed"))["status"] == "running"
        status = page.get(f"{run_page}status/").text
        assert 'is <span class="badge running">running</span>' in status
        assert "data-cancel-run" in status and 'hx-trigger="every 1s"' in status
        cancel = page.post(
            f"{run_page}cancel/",
            data={"csrfmiddlewaretoken": page.cookies["csrftoken"]},
        )
        assert cancel.ok and f"Run #{page_run} is being cancelled." in cancel.text
        assert "cancelled by bob" in cancel.text and "data-cancelled" in cancel.text
        wait_for(lambda: log.read_bytes().count(b"Terminating") >= 2, 30, "the page's run to stop")
        assert s.get(f"{url}/api/runs/{page_run}/").json()["status"] == "failed"
    finally:
        os.killpg(script.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole group
        script.wait(30)
    for pid in processes:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
