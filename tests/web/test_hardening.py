"""Hostile and broken input gets a JSON 4xx with a message, never a 500; runs always
end in a true state; deployment defaults hold no known secret."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from allocator.model import Snapshot as LoadedSnapshot
from bench.workloads import synthetic_cluster, to_json, to_yaml
from dra_web import blobs
from dra_web.runs import services as run_services
from dra_web.runs import worker as run_worker
from dra_web.runs.models import Run, TraceNode
from dra_web.snapshots import services as snapshot_services
from dra_web.snapshots.models import Snapshot

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = "/api/snapshots/"


def assert_json_problem(response, status: int = 400, *, says: str = "") -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail", "errors"}, body  # the API's one error shape
    assert body["detail"] and body["errors"], body
    assert says.lower() in json.dumps(body).lower(), body
    return body


@pytest.fixture
def snapshot(user):
    return snapshot_services.create_snapshot(user, [("c.yaml", to_yaml(synthetic_cluster()))])


@pytest.fixture
def run(snapshot, user, _web_settings):
    return Run.objects.create(snapshot=snapshot, owner=user, options={"trace": True})


# --- no 500 for any input ------------------------------------------------------------------


def test_canonical_form_of_mixed_key_types_is_the_json_one():
    # YAML `1.5: gpu` beside string keys: sorted as the strings JSON writes for them.
    assert blobs.canonical({"b": 1, 1.5: "gpu", True: 2}) == b'{"1.5":"gpu","b":1,"true":2}'


def test_yaml_float_key_in_labels_is_not_a_500(api):
    docs = synthetic_cluster()
    text = to_yaml(docs).replace("team: research", "team: research\n    1.5: float-key", 1)
    assert "1.5: float-key" in text
    response = api.post(SNAPSHOTS, text, content_type="application/yaml")
    assert response.status_code in (201, 400), response.content[:500]
    assert response.json()


def test_lone_surrogate_in_a_document_is_refused_naming_the_object(api):
    body = to_json(synthetic_cluster()).replace('"research"', '"res\\ud800earch"', 1)
    problem = assert_json_problem(
        api.post(SNAPSHOTS, body, content_type="application/json"), says="surrogate"
    )
    assert "Namespace ml-training: metadata.labels.team" in problem["detail"]
    assert not Snapshot.objects.exists()


def test_a_lone_surrogate_in_a_key_is_quoted_back_escaped_not_a_500(api):
    """The refusal names the field, and the field's name is the surrogate itself: the answer
    is ASCII JSON with the escape, which a client decodes back to the same path."""
    body = to_json(synthetic_cluster()).replace('"team"', '"\\ud800"', 1)
    response = api.post(SNAPSHOTS, body, content_type="application/json")
    problem = assert_json_problem(response, says="surrogate")
    assert "metadata.labels.\ud800" in problem["detail"]
    assert b"\\ud800" in response.content
    assert not Snapshot.objects.exists()


@pytest.mark.parametrize("value", ["\u00b9", "\u0663", "1.5", "-1"])
def test_a_snapshot_filter_that_is_not_an_ascii_id_is_a_400(api, value):
    """str.isdigit() admits superscripts and Arabic-Indic digits, which int() refuses."""
    assert_json_problem(api.get("/api/runs/", {"snapshot": value}), says="snapshot id")


def test_nul_escape_in_a_document_is_refused(api):
    body = to_json(synthetic_cluster()).replace('"research"', '"re\\u0000search"', 1)
    assert_json_problem(api.post(SNAPSHOTS, body, content_type="application/json"), says="NUL")
    # An escaped backslash followed by the text u0000 is ordinary text.
    ok = to_json(synthetic_cluster()).replace('"research"', '"re\\\\u0000search"', 1)
    assert api.post(SNAPSHOTS, ok, content_type="application/json").status_code == 201


@pytest.mark.parametrize(
    "url",
    [
        "/api/snapshots/?q=gpu%00",
        "/api/snapshots/?owner=%00alice",
        "/api/runs/?owner=al%00ice",
        "/api/runs/1/pods/ml-training/train%00-0/review/",
        "/runs/1/pods/ml-training/train%00-0/review/",
    ],
)
def test_nul_in_path_or_query_is_a_json_400(api, url):
    assert_json_problem(api.get(url), says="NUL")


def test_nul_in_filename_and_name_is_a_json_400(api, cluster_yaml):
    assert_json_problem(
        api.post(SNAPSHOTS + "?filename=a%00.yaml", cluster_yaml, content_type="application/yaml"),
        says="NUL",
    )
    upload = SimpleUploadedFile("c.yaml", cluster_yaml.encode())
    response = api.post(SNAPSHOTS, {"file": upload, "name": "prod\x00"}, format="multipart")
    assert_json_problem(response, says="NUL")


def test_nul_and_surrogates_in_json_bodies_are_refused(api, snapshot):
    response = api.post(
        "/api/runs/",
        '{"snapshot": ' + str(snapshot.pk) + ', "options": {"disrupt": ["node\\u0000"]}}',
        content_type="application/json",
    )
    assert_json_problem(response, says="NUL")
    response = api.post(
        "/api/runs/", '{"snapshot": 1, "x": "\\udc00"}', content_type="application/json"
    )
    assert_json_problem(response, says="surrogate")


@pytest.mark.parametrize(
    "options, field",
    [
        ({"timeout": int("9" * 400)}, "options.timeout"),
        ({"timeout": 10**6}, "options.timeout"),
        ({"traceMaxNodes": 10**12}, "options.traceMaxNodes"),
        ({"bindingTimeoutSeconds": 10**40}, "options.bindingTimeoutSeconds"),
    ],
)
def test_run_options_are_bounded(api, snapshot, options, field):
    response = api.post("/api/runs/", {"snapshot": snapshot.pk, "options": options}, format="json")
    assert_json_problem(response, says=field)
    assert not Run.objects.exists()


def test_nan_timeout_is_not_json(api, snapshot):
    body = '{"snapshot": ' + str(snapshot.pk) + ', "options": {"timeout": NaN}}'
    assert_json_problem(api.post("/api/runs/", body, content_type="application/json"))


def test_50000_deep_json_bodies_are_refused(api):
    deep = "[" * 50_000 + "]" * 50_000
    assert_json_problem(
        api.post("/api/runs/", deep, content_type="application/json"), says="nested too deeply"
    )
    response = api.post(SNAPSHOTS, deep, content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"]


def test_more_than_100_files_is_a_json_400_with_a_message(api, cluster_yaml):
    files = [SimpleUploadedFile(f"part-{i}.yaml", b"kind: List\nitems: []\n") for i in range(101)]
    response = api.post(SNAPSHOTS, {"file": files}, format="multipart")
    assert_json_problem(response, says="more than 100 files")


def test_unexpected_error_is_a_generic_json_500_without_its_text(api, monkeypatch, caplog):
    from dra_web.runs import selectors

    def broken(**kwargs):
        raise RuntimeError('connection to server at "10.1.2.3", port 5432 failed')

    monkeypatch.setattr(selectors, "run_list", broken)
    response = api.get("/api/runs/")
    body = assert_json_problem(response, 500, says="internal error")
    assert "10.1.2.3" not in json.dumps(body) and "5432" not in json.dumps(body)
    assert "10.1.2.3" in caplog.text  # logged for the operator


def test_pod_names_with_slashes_reverse_and_resolve(api, run, user):
    result = {
        "schemaVersion": "v1",
        "pods": [{"pod": "ml-training/odd/name", "scheduled": False, "error": "x", "target": None}],
        "stats": {"pods": 1, "scheduled": 0, "failed": 1},
    }
    run_worker.store_output(run.pk, result, None)
    page = reverse("pages:pod-review", args=[run.pk, "ml-training", "odd/name"])
    assert page == f"/runs/{run.pk}/pods/ml-training/odd/name/review/"
    api_url = reverse("reviews:pod-review", args=[run.pk, "ml-training", "odd/name"])
    assert api.get(api_url).json() == {"detail": "no review yet", "errors": ["no review yet"]}
    created = api.post(api_url + "comments/", {"body": "why?"}, format="json")
    assert created.status_code == 201, created.content
    assert api.get(api_url).json()["pod"] == "ml-training/odd/name"
    # Spaces, percent signs and question marks are quoted and come back the same.
    odd = reverse("pages:pod-review", args=[run.pk, "ml", "a b%?#"])
    assert odd == f"/runs/{run.pk}/pods/ml/a%20b%25%3F%23/review/"


# --- runs end in a true state --------------------------------------------------------------


def test_the_heartbeat_is_alive_while_the_output_is_stored(run, monkeypatch, settings):
    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 30  # started, never due during the test
    seen = []
    real = run_worker.store_output

    def store(*args, **kwargs):
        seen.append(any(t.name == f"run-{run.pk}-heartbeat" for t in threading.enumerate()))
        return real(*args, **kwargs)

    monkeypatch.setattr(run_worker, "store_output", store)
    run_worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED
    assert seen == [True]


def test_a_reaped_run_is_not_overwritten_by_a_late_store(run):
    Run.objects.filter(pk=run.pk).update(
        status=Run.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    assert run_services.reap_stale_runs() == 1
    trace = {"nodes": [{"id": 0, "parent": None, "kind": "pod", "label": "p", "status": "ok"}]}
    stored = run_worker.store_output(
        run.pk, {"stats": {"pods": 1}}, trace, expect_status=Run.RUNNING
    )
    run.refresh_from_db()
    assert stored is False
    assert run.status == Run.FAILED and "worker lost" in run.error
    assert not TraceNode.objects.filter(run=run).exists()  # rolled back with the result


def test_the_reaper_does_not_overwrite_a_stored_run(run):
    beat = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, heartbeat_at=beat)
    assert run_worker.store_output(run.pk, {"stats": {}}, None, expect_status=Run.RUNNING)
    assert run_services.reap_stale_runs() == 0
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and run.error == ""


def test_a_database_error_fails_the_run_at_once_without_connection_details(run, monkeypatch):
    def lost(*args, **kwargs):
        raise OperationalError(
            'connection to server at "10.0.0.5", port 5432 failed: server closed the connection'
        )

    monkeypatch.setattr(run_worker, "simulate", lost)
    run_worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.error.startswith("database error during the run (OperationalError")
    assert "10.0.0.5" not in run.error and "5432" not in run.error


def test_a_database_error_while_claiming_fails_the_run_instead_of_leaving_it_queued(
    run, monkeypatch
):
    """Left queued, the reaper would later call it a lost message ("no worker started this
    run"), which is not what happened."""

    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(run_worker, "_claim", locked)
    run_worker.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.error.startswith("database error during the run (OperationalError: database is")


def test_sqlite_transactions_take_the_write_lock_when_they_begin(settings):
    """A deferred transaction that reads then writes gets "database is locked" at once when
    another process writes; an immediate one waits for the busy timeout."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return  # the PostgreSQL run of this suite
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert database["OPTIONS"]["timeout"] == 30


def test_recording_a_failure_reconnects_until_the_database_is_back(
    run, monkeypatch, transactional_db
):
    # transactional_db: the retry closes the connection, which a test transaction cannot take.
    calls = []
    real = run_services.fail_run

    def flaky(run_id, message):
        calls.append(message)
        if len(calls) < 3:
            raise OperationalError("the database system is starting up")
        return real(run_id, message)

    monkeypatch.setattr(run_worker, "fail_run", flaky)
    assert run_worker._fail_reconnecting(run.pk, "boom", pause=0) == 1
    run.refresh_from_db()
    assert len(calls) == 3 and run.status == Run.FAILED and run.error == "boom"


def test_unreachable_broker_error_names_no_host_or_port(snapshot, user):
    from dra_web.celery import app

    conf = app.conf
    saved = conf.task_always_eager, conf.broker_url
    conf.task_always_eager = False
    conf.broker_url = "redis://127.0.0.1:9/0"
    conf.broker_connection_timeout = 0.5
    conf.broker_connection_max_retries = 0
    app.amqp._producer_pool = None
    app._pool = None
    try:
        run = Run.objects.create(snapshot=snapshot, owner=user)
        run_services._enqueue(run.pk, "task-1")
    finally:
        conf.task_always_eager, conf.broker_url = saved
        app.amqp._producer_pool = None
        app._pool = None
    run.refresh_from_db()
    assert run.status == Run.FAILED and "broker is unreachable" in run.error
    assert "127.0.0.1" not in run.error and ":9" not in run.error and "redis" not in run.error


def test_redact_removes_addresses_urls_and_users():
    text = (
        'connection to server at "db.internal" (10.0.0.5), port 5432 failed: FATAL: password '
        'authentication failed for user "dra"; broker redis://:secret@redis:6379/0 host=db port=5'
    )
    cleaned = run_worker.redact(text)
    for leak in ("db.internal", "10.0.0.5", "5432", "secret", '"dra"', "6379", "host=db"):
        assert leak not in cleaned, cleaned


def test_queued_runs_whose_message_was_lost_are_failed(snapshot, user, settings):
    settings.DRA_WEB_RUN_STALE_SECONDS = 60
    settings.DRA_WEB_RUN_QUEUED_STALE_SECONDS = 3600
    now = timezone.now()

    def queued(minutes_ago, **fields):
        run = Run.objects.create(snapshot=snapshot, owner=user, **fields)
        Run.objects.filter(pk=run.pk).update(queued_at=now - timedelta(minutes=minutes_ago))
        return run

    ancient = queued(120)  # past the absolute bound
    overtaken = queued(10)  # a run queued after it has started: its message is gone
    queued(5, status=Run.SUCCEEDED, started_at=now - timedelta(minutes=4))
    waiting = queued(2)  # behind the started run, within the bound: still waiting
    fresh = queued(0)
    assert run_services.reap_stale_runs(now) == 2
    statuses = {r.pk: r for r in Run.objects.all()}
    assert statuses[ancient.pk].status == Run.FAILED
    assert "message was lost" in statuses[ancient.pk].error
    assert statuses[overtaken.pk].status == Run.FAILED
    assert statuses[waiting.pk].status == Run.QUEUED
    assert statuses[fresh.pk].status == Run.QUEUED


def test_cancel_api_fails_a_queued_run_and_revokes_its_task(api, run, monkeypatch, settings):
    from dra_web.celery import app

    revoked = []
    Run.objects.filter(pk=run.pk).update(task_id="5d0c7a1e-task")
    run.refresh_from_db()
    monkeypatch.setattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)
    monkeypatch.setattr(app.control, "revoke", lambda *a, **k: revoked.append((a, k)))
    response = api.post(f"/api/runs/{run.pk}/cancel/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "failed"
    assert response.json()["error"].startswith("cancelled by alice at ")
    assert revoked == [((run.task_id,), {"terminate": True, "signal": "SIGKILL"})]
    # A cancelled run is never executed when its task still arrives.
    run_worker.execute_run(run.pk, task_id=run.task_id)
    run.refresh_from_db()
    assert run.status == Run.FAILED and run.result is None
    again = api.post(f"/api/runs/{run.pk}/cancel/")
    assert_json_problem(again, 409, says="only queued or running runs can be cancelled")


def test_concurrent_upload_race_returns_the_stored_snapshot(user, monkeypatch):
    """The pre-check misses (the other upload had not committed yet); the unique constraint
    catches it and the stored snapshot is answered."""
    files = [("c.yaml", to_yaml(synthetic_cluster()))]
    first = snapshot_services.create_snapshot(user, files)
    real_filter = Snapshot.objects.filter
    calls = []

    def blind_filter(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) <= 2:  # files_hash and content_hash look-ups see nothing
            return Snapshot.objects.none()
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(Snapshot.objects, "filter", blind_filter)
    second = snapshot_services.create_snapshot(user, files)
    assert second.pk == first.pk and second.existing is True
    assert Snapshot.objects.count() == 1


# --- authentication, throttling, settings ---------------------------------------------------


def test_anonymous_api_requests_get_401_with_www_authenticate_token(db):
    response = APIClient().get("/api/runs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_failed_token_requests_are_throttled(user, settings):
    cache.clear()
    settings.DRA_WEB_LOGIN_MAX_FAILURES = 3
    client = APIClient()
    bad = {"username": "alice", "password": "guess"}
    codes = [client.post("/api/auth/token/", bad, format="json").status_code for _ in range(4)]
    assert codes == [400, 400, 400, 429]
    good = {"username": "alice", "password": "alice-password-1"}
    assert client.post("/api/auth/token/", good, format="json").status_code == 429
    cache.clear()
    assert client.post("/api/auth/token/", good, format="json").status_code == 200


def test_failed_logins_on_the_form_are_throttled(client, user, settings):
    cache.clear()
    settings.DRA_WEB_LOGIN_MAX_FAILURES = 2
    for _ in range(2):
        assert (
            client.post("/accounts/login/", {"username": "alice", "password": "x"}).status_code
            == 200
        )
    refused = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert b"Too many failed logins" in refused.content
    cache.clear()
    ok = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"})
    assert ok.status_code == 302


def _django(env: dict, *args: str) -> subprocess.CompletedProcess:
    # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE is a test-process setting, not a deployment's.
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DRA_WEB_", "SECURE_")) and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "DATABASE_URL": "sqlite:///:memory:", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("key", ["", "change-me-in-production-please", "short-key"])
def test_without_debug_a_real_secret_key_is_required(key):
    done = _django({"DEBUG": "false", "SECRET_KEY": key}, "check")
    assert done.returncode != 0
    assert "SECRET_KEY must be set to a real secret" in done.stderr


def test_check_deploy_is_clean_with_the_https_settings():
    env = {
        "DEBUG": "false",
        "SECRET_KEY": "k3Y-" + "x9Qw2Er5Ty8Ui1Op4As7Df0Gh3Jk6Lz9Xc2Vb5Nm8Qa1Ws4Ed7",
        "ALLOWED_HOSTS": "dra.example.com",
        "DRA_WEB_HTTPS": "true",
        "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
    }
    done = _django(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_demo_user_gets_no_known_password_without_debug(settings, _fast_passwords):
    from io import StringIO

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    settings.DEBUG = False
    out = StringIO()
    call_command("ensure_demo_user", stdout=out)
    demo = get_user_model().objects.get(username="demo")
    assert not demo.check_password("demo")
    assert "with password 'demo'" not in out.getvalue()


def test_compose_ships_no_secret_and_no_demo_login():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "change-me" not in compose
    assert "${SECRET_KEY:?" in compose
    assert "DRA_WEB_DEMO_PASSWORD:-demo" not in compose
    assert "DRA_WEB_CREATE_DEMO_USER:-false" in compose


# --- reviews as a team tool --------------------------------------------------------------


def test_anyone_may_change_a_verdict_and_the_thread_keeps_every_change(run, user, other_user):
    from dra_web.reviews import selectors, services

    result = {
        "pods": [{"pod": "ml-training/train-9", "scheduled": False, "error": "x"}],
        "stats": {"pods": 1, "scheduled": 0, "failed": 1},
    }
    run_worker.store_output(run.pk, result, None)
    run.refresh_from_db()
    services.set_verdict(run, "ml-training/train-9", user, "needs-capacity")
    services.set_verdict(run, "ml-training/train-9", other_user, "bug-in-config", "typo")
    services.set_state(run, "ml-training/train-9", other_user, "resolved")
    review = selectors.review_for(run, "ml-training/train-9")
    assert review.verdict == "bug-in-config" and review.verdict_by == other_user
    entries = selectors.thread(review)
    assert [(e["author"], e["event"]) for e in entries] == [
        ("alice", "set the verdict to needs capacity"),
        ("bob", "changed the verdict from needs capacity to bug in config"),
        ("bob", "resolved the review"),
    ]
    assert all(e["at"] is not None for e in entries)


def test_a_time_limit_swallowed_where_it_landed_is_raised_on_exit():
    import contextlib
    import time

    limit = run_worker._TimeLimit(0.01)
    # Swallowed where it lands, as a gc callback or a library's catch-all would.
    with (
        pytest.raises(run_worker.RunTimeLimitExceeded),
        limit,
        contextlib.suppress(BaseException),
    ):
        time.sleep(0.2)
    assert limit.expired


def test_run_page_and_diff_render_a_pod_named_with_slashes(client, user, snapshot, _web_settings):
    """The run page and the diff link each failed pod's review: any name must reverse."""
    from allocator.simulation import SimulationOptions, simulate

    docs = synthetic_cluster(nodes=1, running_pods=0, pending_pods=1, gpus_per_pod=99)
    loaded = snapshot_services.load_snapshot(
        snapshot_services.create_snapshot(user, [("big.yaml", to_yaml(docs))])
    )
    output = simulate(loaded, SimulationOptions(trace=False))
    failed = [p for p in output.result["pods"] if not p["scheduled"]]
    assert failed
    for pod in failed:
        pod["pod"] = pod["pod"] + "/odd name?"
    runs = []
    for _ in range(2):
        run = Run.objects.create(snapshot=snapshot, owner=user)
        run_worker.store_output(run.pk, output.result, None)
        runs.append(run)
    client.force_login(user)
    page = client.get(f"/runs/{runs[0].pk}/")
    assert page.status_code == 200
    name = failed[0]["pod"].partition("/")[2]
    assert f"/pods/{failed[0]['pod'].partition('/')[0]}/" in page.content.decode()
    assert "odd%20name%3F/review/" in page.content.decode(), name
    diff = client.get(f"/runs/{runs[0].pk}/diff/{runs[1].pk}/")
    assert diff.status_code == 200
    review = client.get(
        reverse("pages:pod-review", args=[runs[0].pk, *failed[0]["pod"].split("/", 1)])
    )
    assert review.status_code == 200


_canonical_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-05, 2.5e-07, 0.0001, 1e16, 12345678901234567.0, 98.32, -0.0])
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@given(_canonical_values)
def test_canonical_bytes_are_the_standard_librarys_whoever_writes_them(value):
    # orjson writes most documents; what it writes must hash as the standard library's bytes
    # did (an identical upload is recognised by that hash, also one stored before).
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        reference = expected.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(blobs.UnstorableText):
            blobs.canonical(value)
        return
    if b"\\u0000" in reference:
        return  # refused by both: a NUL
    assert blobs.canonical(value) == reference


_documents = st.lists(
    st.tuples(
        st.sampled_from(["Pod", "ResourceSlice", "ResourceClaim"]),
        st.dictionaries(
            st.sampled_from(["metadata", "spec", "status", 1.5, True]),
            _canonical_values | st.sampled_from(["gpu\x00.nvidia.com", "\ud800", "p5.48xlarge"]),
            max_size=3,
        ),
    ),
    max_size=5,
)


def _one_by_one(documents):
    """canonical_documents as it read each document alone: its digest and array, or the
    problems of its refusal."""
    loaded = LoadedSnapshot(documents=list(documents))
    try:
        parts = snapshot_services._canonical_one_by_one(loaded)
    except snapshot_services.SnapshotUploadError as exc:
        return exc.problems
    digest = hashlib.sha256(b"".join(p + b"\n" for p in parts)).hexdigest()
    return digest, b"[" + b",".join(parts) + b"]"


@given(_documents)
def test_documents_written_together_are_written_as_one_by_one(documents):
    written = blobs.canonical_all([[kind, raw] for kind, raw in documents])
    if written is not None:
        parts, array = written
        assert parts == [blobs.canonical([kind, raw]) for kind, raw in documents]
        assert array == b"[" + b",".join(parts) + b"]"
    try:
        together = snapshot_services.canonical_documents(LoadedSnapshot(documents=list(documents)))
    except snapshot_services.SnapshotUploadError as exc:
        together = exc.problems
    assert together == _one_by_one(documents)


_json_numbers_and_uids = st.lists(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.sampled_from([1e-05, 2.5e-07, 0.0001, 1e16, 12345678901234567.0, 1.5e300, 98.32])
    | st.from_regex(r"[0-9a-fE.:,\[]{0,12}", fullmatch=True)
    | st.sampled_from(["e3e70682-c209-4cac", "GPU-01d9ee16-0006", "1.0000", ":1e5", "x:1e5"]),
    max_size=6,
)


@given(_json_numbers_and_uids)
def test_the_number_scan_finds_what_the_regular_expression_finds(values):
    data = orjson.dumps(values, option=orjson.OPT_SORT_KEYS)
    expected = blobs._NUMBER_WRITTEN_OTHERWISE.search(data) is not None
    assert blobs._may_write_a_number_otherwise(data) is expected
