"""What-if runs (CONTRACT section 6): ``POST /api/snapshots/{id}/variants/`` derives a snapshot
by JSON patches and runs it; the diff of the two runs shows the edits and the cost change,
and reads the same in both directions."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from dra_web.snapshots.models import Snapshot

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml"
POD = "ml-training/giant-a100-0"


def _pod(result: dict, key: str) -> dict:
    return next(p for p in result["pods"] if p["pod"] == key)


@pytest.fixture
def demo(api, django_capture_on_commit_callbacks):
    response = api.post(
        "/api/snapshots/",
        {"file": SimpleUploadedFile("demo-snapshot.yaml", DEMO.read_bytes())},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    snapshot = response.json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        run = api.post("/api/runs/", {"snapshot": snapshot, "options": {}}, format="json").json()
    result = api.get(f"/api/runs/{run['id']}/").json()
    assert result["status"] == "succeeded", result.get("error")
    return snapshot, run["id"], result["result"]


def test_a_suggestion_patch_makes_a_derived_snapshot_whose_run_places_the_pod(
    api, user, demo, django_capture_on_commit_callbacks
):
    snapshot, run_id, result = demo
    failed = _pod(result, POD)
    assert not failed["scheduled"]
    fix = next(s for s in failed["suggestions"] if s["kind"] == "reduce-count")
    edits = [{"object": fix["change"]["object"], "patch": fix["patch"]}]
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/snapshots/{snapshot}/variants/",
            {"edits": edits, "run": {"options": {}}},
            format="json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    derived = Snapshot.objects.get(pk=body["snapshot"]["id"])
    assert derived.parent_id == snapshot
    assert derived.edits == edits
    assert derived.owner == user
    assert body["snapshot"]["parent"] == snapshot and body["snapshot"]["edits"] == edits
    assert body["run"]["snapshot"] == derived.pk
    after = api.get(f"/api/runs/{body['run']['id']}/").json()
    assert after["status"] == "succeeded"
    assert _pod(after["result"], POD)["scheduled"]

    # The detail of the derived snapshot shows where it came from.
    detail = api.get(f"/api/snapshots/{derived.pk}/").json()
    assert detail["parent"] == snapshot and detail["source"] == "variant"

    diff = api.get(f"/api/runs/{run_id}/diff/{body['run']['id']}/").json()
    assert [p["pod"] for p in diff["pods"]["newlyPlaced"]] == [POD]
    assert diff["inputChanges"] == [
        {**edits[0], "snapshot": derived.pk, "author": user.get_username()}
    ]
    assert diff["cost"]["after"] > diff["cost"]["before"]
    assert diff["cost"]["delta"] == pytest.approx(diff["cost"]["after"] - diff["cost"]["before"])
    assert diff["before"] == run_id
    # New compared with old reads the same: the fix is no loss.
    back = api.get(f"/api/runs/{body['run']['id']}/diff/{run_id}/").json()
    assert back["pods"] == diff["pods"] and back["cost"] == diff["cost"]
    assert back["inputChanges"] == diff["inputChanges"]


def test_a_patch_that_does_not_apply_is_a_400_naming_the_edit(api, demo):
    snapshot, _, _ = demo
    before = Snapshot.objects.count()
    response = api.post(
        f"/api/snapshots/{snapshot}/variants/",
        {
            "edits": [
                {"object": "NodePool gpu-h100", "patch": [{"op": "remove", "path": "/spec/nope"}]}
            ],
            "run": {"options": {}},
        },
        format="json",
    )
    assert response.status_code == 400
    assert "edits[0] (NodePool gpu-h100): patch does not apply" in response.json()["detail"]
    assert Snapshot.objects.count() == before


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"edits": []}, "edits: a non-empty list"),
        ({"edits": [{"object": "NodePool nowhere", "patch": []}]}, "not in the snapshot"),
        ({"edits": [{"object": "NodePool gpu-h100", "patch": "x"}]}, "'patch' must be a list"),
        (
            {
                "edits": [
                    {
                        "object": "NodePool gpu-h100",
                        "patch": [{"op": "replace", "path": "/kind", "value": "Pod"}],
                    }
                ]
            },
            "may not",
        ),
        (
            {
                "edits": [
                    {
                        "object": "NodePool gpu-h100",
                        "patch": [{"op": "replace", "path": "/spec/limits/cpu", "value": "2000"}],
                    }
                ],
                "run": {"options": {"timeout": "soon"}},
            },
            "options",
        ),
    ],
)
def test_bad_edits_and_options_are_400_and_store_nothing(api, demo, body, says):
    snapshot, _, _ = demo
    before = Snapshot.objects.count()
    response = api.post(f"/api/snapshots/{snapshot}/variants/", body, format="json")
    assert response.status_code == 400, response.content
    assert says in str(response.json())
    assert Snapshot.objects.count() == before


def test_the_schema_documents_the_variants_endpoint(api):
    schema = api.get("/api/schema/?format=json").json()
    post = schema["paths"]["/api/snapshots/{snapshot_id}/variants/"]["post"]
    assert post["operationId"] == "snapshots_variants_create"
    assert set(post["responses"]) >= {"201", "400"}


def test_two_runs_of_one_snapshot_diff_the_same_both_ways(
    api, demo, django_capture_on_commit_callbacks
):
    snapshot, first, _ = demo
    with django_capture_on_commit_callbacks(execute=True):
        second = api.post(
            "/api/runs/",
            {"snapshot": snapshot, "options": {"featureGates": {"DRADeviceTaints": False}}},
            format="json",
        ).json()["id"]
    forward = api.get(f"/api/runs/{first}/diff/{second}/").json()
    backward = api.get(f"/api/runs/{second}/diff/{first}/").json()
    assert forward["before"] == backward["before"] == first
    assert forward["pods"] == backward["pods"] and forward["inputChanges"] == []


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"[1, 2]", "application/json"),
        (
            b'{"edits": [{"object": "NodePool gpu-h100", "patch": ['
            + b'{"op": "test", "path": "/a", "value": "'
            + b"x" * 3_000_000
            + b'"}]}]}',
            "application/json",
        ),
        (
            b'{"edits": [{"object": "NodePool gpu-h100", "patch": [{"op": "add", "path": "/metadata/labels/a", "value": "\\u0000"}]}]}',
            "application/json",
        ),
    ],
    ids=["malformed", "not-an-object", "too-large", "nul-in-value"],
)
def test_bad_bodies_are_4xx_never_500(api, demo, body, content_type):
    snapshot, _, _ = demo
    response = api.generic("POST", f"/api/snapshots/{snapshot}/variants/", body, content_type)
    assert 400 <= response.status_code < 500, response.content[:300]
