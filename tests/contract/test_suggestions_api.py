"""Verified suggestions through the REST API (CONTRACT sections 4 and 6): a run's result carries
them for failed pods, with their cost in ``stats``; the run option ``suggestions: false``
leaves them out. The snapshot is uploaded as users do it: the cluster's YAML and the instance
type catalog's JSON List as two file parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "suggestions"


def _upload(api, scenario: str) -> int:
    files = [
        SimpleUploadedFile(name, (FIXTURES / name).read_bytes())
        for name in (scenario, "aws-gpu-instance-types.json")
    ]
    response = api.post("/api/snapshots/", {"file": files, "name": scenario}, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _run(api, capture, snapshot_id: int, options: dict) -> dict:
    with capture(execute=True):
        response = api.post(
            "/api/runs/", {"snapshot": snapshot_id, "options": options}, format="json"
        )
    assert response.status_code == 202, response.content
    body = api.get(f"/api/runs/{response.json()['id']}/").json()
    assert body["status"] == "succeeded", body.get("error")
    return body["result"]


def test_api_result_carries_verified_suggestions_and_their_cost(
    api, django_capture_on_commit_callbacks
):
    snapshot = _upload(api, "held-device.yaml")
    result = _run(api, django_capture_on_commit_callbacks, snapshot, {})
    (entry,) = result["pods"]
    assert entry["pod"] == "research/train-bob-0" and not entry["scheduled"]
    s = entry["suggestions"][0]
    assert s["kind"] == "free-device"
    assert "delete pod research/jupyter-alice" in s["message"]
    assert s["target"] == {
        "kind": "Node",
        "name": "ip-10-0-51-9.us-west-2.compute.internal",
        "new": False,
    }
    assert result["stats"]["suggestionTrials"] >= 1
    assert 0 <= result["stats"]["suggestionSeconds"] < 1.0


def test_api_option_suggestions_false_leaves_them_out(api, django_capture_on_commit_callbacks):
    snapshot = _upload(api, "missing-model.yaml")
    result = _run(api, django_capture_on_commit_callbacks, snapshot, {"suggestions": False})
    (entry,) = result["pods"]
    assert not entry["scheduled"]
    assert "suggestions" not in entry
    assert "suggestionTrials" not in result["stats"]
    assert "suggestionSeconds" not in result["stats"]
    # The explanation is still there: switching suggestions off only skips the trials.
    assert entry["explanation"]


def test_api_refuses_a_suggestions_option_that_is_not_a_boolean(api):
    snapshot = _upload(api, "missing-model.yaml")
    response = api.post(
        "/api/runs/", {"snapshot": snapshot, "options": {"suggestions": "no"}}, format="json"
    )
    assert response.status_code == 400
    assert "suggestions" in response.content.decode()
