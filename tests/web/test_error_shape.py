"""Every API error has one shape, whatever its status: {"detail": one message, "errors": every
problem on its own, naming its field} (dra_web.problems), through the real endpoints."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from bench.workloads import synthetic_cluster, to_yaml
from dra_web.problems import flatten
from dra_web.runs.models import Run

pytestmark = pytest.mark.django_db


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"detail", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert body["errors"] and all(isinstance(e, str) and e for e in body["errors"]), body
    return body


@pytest.fixture
def snapshot_id(api):
    response = api.post("/api/snapshots/", to_yaml(synthetic_cluster()), content_type="text/yaml")
    assert response.status_code == 201, response.content
    return response.json()["id"]


# --- 400 ---------------------------------------------------------------------------------------


def test_a_bad_query_parameter_names_it(api):
    body = problem(api.get("/api/runs/?status=finished"), 400)
    assert body["errors"] == ["status: must be one of queued, running, succeeded, failed"]
    assert body["detail"] == body["errors"][0]


def test_a_missing_body_field_names_it(api):
    body = problem(api.post("/api/runs/", {}, format="json"), 400)
    assert body["errors"] == ["snapshot: This field is required."]


def test_every_bad_body_field_is_listed_and_the_detail_counts_them(api):
    body = problem(api.post("/api/runs/", {"snapshot": "x", "options": 3}, format="json"), 400)
    assert body["errors"] == [
        "snapshot: A valid integer is required.",
        "options: must be an object",
    ]
    assert body["detail"].startswith("2 problems: snapshot: A valid integer is required.")


def test_a_bad_run_option_names_the_option(api, snapshot_id):
    body = problem(
        api.post("/api/runs/", {"snapshot": snapshot_id, "options": {"timeout": 10**6}}, "json"),
        400,
    )
    assert body["errors"] == [body["detail"]] and body["detail"].startswith("options.timeout:")


def test_an_unknown_snapshot_names_the_field(api):
    body = problem(api.post("/api/runs/", {"snapshot": 424242}, format="json"), 400)
    assert body["errors"] == ["snapshot: snapshot 424242 not found"]


def test_malformed_json_is_a_400_naming_the_body(api):
    body = problem(api.post("/api/runs/", "{", content_type="application/json"), 400)
    assert body["detail"].startswith("JSON body: malformed JSON")


def test_a_rejected_upload_lists_each_problem_naming_its_file(api):
    body = problem(
        api.post("/api/snapshots/?filename=broken.yaml", "a: [1", content_type="text/yaml"), 400
    )
    assert body["detail"].startswith("snapshot rejected: nothing was stored")
    assert all("broken.yaml" in e for e in body["errors"]), body


def test_a_nul_in_the_query_string_is_a_400(api):
    body = problem(api.get("/api/runs/?owner=a%00b"), 400)
    assert "NUL" in body["detail"]


def test_a_bad_trace_parameter_names_it(api, snapshot_id, user):
    run = Run.objects.create(snapshot_id=snapshot_id, owner=user, status=Run.SUCCEEDED)
    body = problem(api.get(f"/api/runs/{run.pk}/trace/?parent=up"), 400)
    assert body["errors"] == ["parent: must be a node id"]


# --- 401, 403, 404, 405 -----------------------------------------------------------------------


def test_anonymous_is_a_401_that_still_says_how_to_authenticate(db):
    response = APIClient().get("/api/runs/")
    body = problem(response, 401)
    assert response["WWW-Authenticate"] == "Token"
    assert "credentials" in body["detail"].lower()


def test_deleting_someone_elses_snapshot_is_a_403(api, bob_api, snapshot_id):
    body = problem(bob_api.delete(f"/api/snapshots/{snapshot_id}/"), 403)
    assert "owner" in body["detail"]


def test_a_missing_object_is_a_404(api):
    problem(api.get("/api/runs/999999/"), 404)
    problem(api.get("/api/snapshots/999999/"), 404)


def test_an_unknown_api_path_is_a_404_in_the_same_shape(api):
    body = problem(api.get("/api/no-such-thing/"), 404)
    assert body["detail"] == "not found: /api/no-such-thing/"


def test_a_wrong_method_is_a_405_with_its_allow_header(api):
    response = api.put("/api/runs/", {}, format="json")
    problem(response, 405)
    assert "POST" in response["Allow"]


def test_a_review_that_does_not_exist_yet_is_a_404(api, snapshot_id, user):
    run = Run.objects.create(snapshot_id=snapshot_id, owner=user)
    body = problem(api.get(f"/api/runs/{run.pk}/pods/ml-training/train-0/review/"), 404)
    assert body == {"detail": "no review yet", "errors": ["no review yet"]}


# --- 409, 413, 415, 429, 500 ------------------------------------------------------------------


def test_the_trace_of_an_unfinished_run_is_a_409(api, snapshot_id, user):
    run = Run.objects.create(snapshot_id=snapshot_id, owner=user)
    body = problem(api.get(f"/api/runs/{run.pk}/trace/"), 409)
    assert body["detail"] == f"run {run.pk} is queued: it has no trace"


def test_cancelling_a_finished_run_is_a_409(api, snapshot_id, user):
    run = Run.objects.create(snapshot_id=snapshot_id, owner=user, status=Run.SUCCEEDED)
    body = problem(api.post(f"/api/runs/{run.pk}/cancel/"), 409)
    assert "only queued or running runs can be cancelled" in body["detail"]


def test_an_upload_over_the_limit_is_a_413(api, settings):
    settings.DRA_WEB_MAX_UPLOAD_BYTES = 1000
    body = problem(api.post("/api/snapshots/", "x" * 80_000, content_type="text/yaml"), 413)
    assert body["detail"].startswith("snapshot too large")
    assert "DRA_WEB_MAX_UPLOAD_BYTES" in body["errors"][0]


def test_a_body_of_an_unknown_media_type_is_a_415(api):
    problem(api.post("/api/runs/", "snapshot=1", content_type="text/csv"), 415)


def test_too_many_failed_logins_are_a_429_with_retry_after(db, user, settings):
    settings.DRA_WEB_LOGIN_MAX_FAILURES = 2
    cache.clear()
    client = APIClient()
    wrong = {"username": "alice", "password": "not-her-password"}
    for _ in range(2):
        body = problem(client.post("/api/auth/token/", wrong, format="json"), 400)
        assert body["errors"] == ["Unable to log in with provided credentials."]
    response = client.post("/api/auth/token/", wrong, format="json")
    problem(response, 429)
    assert int(response["Retry-After"]) > 0
    cache.clear()


def test_an_unexpected_error_is_a_500_that_keeps_its_text_to_the_log(api, monkeypatch):
    from dra_web.runs import selectors

    def broken(**kwargs):
        raise RuntimeError("the secret text")

    monkeypatch.setattr(selectors, "run_list", broken)
    body = problem(api.get("/api/runs/"), 500)
    assert "secret" not in body["detail"] and body["detail"].startswith("internal error")


# --- DRF's details as field paths ------------------------------------------------------------


def test_nested_details_become_dotted_field_paths():
    detail = {
        "options": {"timeout": ["at most 300"]},
        "items": [{}, {"name": ["may not be blank", "too long"]}],
        "non_field_errors": ["the input as a whole"],
    }
    assert flatten(detail) == [
        "options.timeout: at most 300",
        "items[1].name: may not be blank",
        "items[1].name: too long",
        "the input as a whole",
    ]
    assert flatten(["one", "two"]) == ["one", "two"]
