"""POST/GET /api/runs/, the trace endpoint and the diff endpoint (CONTRACT section 6)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from allocator.trace import Trace
from bench.workloads import synthetic_cluster, to_yaml
from dra_web.runs.models import Run, TraceNode
from tests.pages.builders import gpu_try

pytestmark = pytest.mark.django_db


def _snapshot(api, docs, name="cluster.yaml") -> int:
    response = api.post(
        "/api/snapshots/",
        {"file": SimpleUploadedFile(name, to_yaml(docs).encode())},
        format="multipart",
    )
    assert response.status_code in (200, 201), response.content
    return response.json()["id"]


def _run(api, capture, snapshot_id, options=None) -> dict:
    with capture(execute=True):
        response = api.post(
            "/api/runs/", {"snapshot": snapshot_id, "options": options or {}}, format="json"
        )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    return api.get(f"/api/runs/{response.json()['id']}/").json()


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def test_run_is_queued_then_succeeds_with_result(api, capture, cluster_docs):
    snap = _snapshot(api, cluster_docs)
    run = _run(api, capture, snap, {"trace": True, "timeout": 2})
    assert run["status"] == "succeeded", run
    result = run["result"]
    assert result["schemaVersion"] == "v1"
    assert [p["pod"] for p in result["pods"]] == ["ml-training/train-0", "ml-training/train-1"]
    assert all(p["scheduled"] for p in result["pods"])
    assert run["stats"] == {"pods": 2, "scheduled": 2, "failed": 0}
    assert run["progress"] == {"done": 2, "total": 2}
    assert run["startedAt"] and run["finishedAt"] and run["durationSeconds"] >= 0
    assert run["options"]["timeout"] == 2
    assert run["traceNodes"] == TraceNode.objects.filter(run_id=run["id"]).count() > 0
    assert run["allocatorVersion"]
    assert run["error"] is None


def test_bad_options_name_the_field_and_store_nothing(api, cluster_docs):
    snap = _snapshot(api, cluster_docs)
    response = api.post(
        "/api/runs/",
        {"snapshot": snap, "options": {"featureGates": {"DRANoSuchGate": False}}},
        format="json",
    )
    assert response.status_code == 400
    assert "DRANoSuchGate" in response.json()["detail"]
    bad_timeout = api.post(
        "/api/runs/", {"snapshot": snap, "options": {"timeout": "soon"}}, format="json"
    )
    assert bad_timeout.status_code == 400
    assert "timeout" in bad_timeout.json()["detail"]
    missing = api.post("/api/runs/", {"snapshot": 424242}, format="json")
    assert missing.status_code == 400
    assert "424242" in missing.json()["detail"]
    assert Run.objects.count() == 0


def test_list_filters_status_snapshot_owner(api, bob_api, capture, cluster_docs):
    a = _snapshot(api, cluster_docs)
    b = _snapshot(bob_api, synthetic_cluster(nodes=1, pending_pods=1))
    _run(api, capture, a)
    _run(bob_api, capture, b)
    Run.objects.create(snapshot_id=a, owner=Run.objects.first().owner)  # still queued
    everything = api.get("/api/runs/").json()
    assert everything["count"] == 3
    assert "result" not in everything["results"][0]
    assert api.get("/api/runs/?status=queued").json()["count"] == 1
    assert api.get("/api/runs/?status=succeeded&owner=bob").json()["count"] == 1
    assert api.get(f"/api/runs/?snapshot={a}").json()["count"] == 2
    assert api.get("/api/runs/?page_size=1").json()["next"]
    bad = api.get("/api/runs/?status=done")
    assert bad.status_code == 400 and "status" in bad.json()["detail"]


def test_has_open_review_filter(api, capture, cluster_docs, user):
    from dra_web.reviews.models import Review

    snap = _snapshot(api, cluster_docs)
    reviewed = _run(api, capture, snap)
    _run(api, capture, snap)
    Review.objects.create(run_id=reviewed["id"], pod="ml-training/train-0", opened_by=user)
    open_runs = api.get("/api/runs/?has_open_review=true").json()
    assert [r["id"] for r in open_runs["results"]] == [reviewed["id"]]
    assert api.get("/api/runs/?has_open_review=false").json()["count"] == 1


def _gpu_tree(run_id: int) -> None:
    """Store a realistic trace through the same service the worker uses."""
    from dra_web.runs.worker import store_output

    t = Trace()
    pod = t.add(None, "pod", "ml-training/train-0", "failed", "selector")
    target = t.add(pod, "target", "nodepool/gpu", "failed", "selector")
    it = t.add(target, "instanceType", "p5.48xlarge", "failed", "selector")
    claim = t.add(it, "claim", "ml-training/train-0-gpu", "failed", "selector")
    request = t.add(claim, "request", "gpu", "failed", "selector")
    for g in range(8):
        gpu_try(t, request, "p5.48xlarge-gpus", f"gpu-{g}", "failed", "selector")
    other = t.add(None, "pod", "ml-training/train-1", "ok", "scheduled")
    t.add(other, "target", "node/ip-10-0-0-1", "ok", "allocated")
    store_output(
        run_id,
        {
            "schemaVersion": "v1",
            "pods": [],
            "nodeClaims": [],
            "stats": {"pods": 2, "scheduled": 1, "failed": 1},
        },
        t.to_json(),
    )


def test_trace_by_subtree_node_search_and_pages(api, cluster_docs, user):
    snap = _snapshot(api, cluster_docs)
    run = Run.objects.create(snapshot_id=snap, owner=user, options={"trace": True})
    assert api.get(f"/api/runs/{run.pk}/trace/").status_code == 409  # no trace yet
    _gpu_tree(run.pk)
    base = f"/api/runs/{run.pk}/trace/"

    roots = api.get(base + "?parent=root").json()
    assert [(n["label"], n["descendants"], n["failedDescendants"]) for n in roots["results"]] == [
        ("ml-training/train-0", 12, 12),
        ("ml-training/train-1", 1, 0),
    ]
    children = api.get(base + "?parent=4&page_size=3").json()
    assert children["count"] == 8
    assert [n["device"] for n in children["results"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert children["results"][0]["depth"] == 5 and children["results"][0]["childCount"] == 0

    node = api.get(base + "?node=7").json()
    assert node["label"] == "gpu.nvidia.com/p5.48xlarge-gpus/gpu-2"
    assert [p["label"] for p in node["path"]] == [
        "ml-training/train-0",
        "nodepool/gpu",
        "p5.48xlarge",
        "ml-training/train-0-gpu",
        "gpu",
    ]
    assert api.get(base + "?node=999").status_code == 404
    assert api.get(base + "?parent=abc").status_code == 400

    found = api.get(base + "?q=gpu-7").json()
    assert [n["id"] for n in found["results"]] == [12]
    by_claim = api.get(base + "?q=train-0-gpu").json()
    assert [n["kind"] for n in by_claim["results"]] == ["claim"]
    assert api.get(base + "?reason=selector").json()["count"] == 13
    assert api.get(base + "?reason=allocated").json()["count"] == 1

    everything = api.get(base + "?page_size=5").json()
    assert everything["count"] == 15 and everything["traceNodes"] == 15
    assert [n["id"] for n in everything["results"]] == [0, 1, 2, 3, 4]
    download = api.get(base + "?download=1")
    assert download.status_code == 200
    assert len(download.json()["nodes"]) == 15


def test_diff_endpoint(api, capture):
    with_gpus = _snapshot(api, synthetic_cluster(nodes=1, running_pods=0, pending_pods=2))
    without = _snapshot(
        api, synthetic_cluster(nodes=0, running_pods=0, pending_pods=2, instance_types=False)
    )
    a = _run(api, capture, with_gpus, {"trace": True})
    b = _run(api, capture, without, {"trace": True})
    assert a["status"] == b["status"] == "succeeded"
    d = api.get(f"/api/runs/{a['id']}/diff/{b['id']}/").json()
    assert sorted(p["pod"] for p in d["pods"]["newlyFailed"]) == [
        "ml-training/train-0",
        "ml-training/train-1",
    ]
    assert d["a"]["id"] == a["id"] and d["b"]["id"] == b["id"]
    assert d["trace"]["divergenceCount"] >= 1
    assert d["trace"]["firstDivergence"]["path"][0] == "ml-training/train-0"
    same = api.get(f"/api/runs/{a['id']}/diff/{a['id']}/").json()
    assert same["trace"]["identical"] is True
    queued = Run.objects.create(snapshot_id=without, owner=Run.objects.first().owner)
    assert api.get(f"/api/runs/{a['id']}/diff/{queued.pk}/").status_code == 409


def test_only_owner_deletes_a_run(api, bob_api, capture, cluster_docs):
    run = _run(api, capture, _snapshot(api, cluster_docs))
    assert bob_api.delete(f"/api/runs/{run['id']}/").status_code == 403
    assert api.delete(f"/api/runs/{run['id']}/").status_code == 204
