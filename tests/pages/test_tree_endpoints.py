"""The search tree's JSON helpers: children pages, details, search, reveal, overview."""

from __future__ import annotations

from django.urls import reverse


def test_children_are_paged_with_counts(browser_client, run):
    url = reverse("pages:tree-children", args=[run.pk])
    roots = browser_client.get(url).json()
    assert roots["total"] == 4
    assert [n["label"] for n in roots["nodes"]] == [
        "ml/train-0",
        "ml/train-1",
        "ml/infer-a100",
        "ml/notebook",
    ]
    train1 = roots["nodes"][1]
    assert train1["childCount"] == 2 and train1["descendants"] == 12
    page = browser_client.get(url, {"parent": train1["id"], "offset": 1, "limit": 1}).json()
    assert page["total"] == 2 and [n["label"] for n in page["nodes"]] == ["nodeclaim/gpu-pool-1"]


def test_node_details_carry_the_device_from_the_snapshot(browser_client, run):
    search = browser_client.get(
        reverse("pages:tree-search", args=[run.pk]), {"q": "g6e-gpus"}
    ).json()
    assert search["total"] == 1
    node = search["results"][0]
    assert node["pathLabels"] == ["ml/train-1", "nodeclaim/gpu-pool-1", "g6e.xlarge"]
    detail = browser_client.get(reverse("pages:tree-node", args=[run.pk, node["id"]])).json()
    assert detail["reason"] == "selector"
    assert "model L40S" in detail["message"]
    assert detail["device_info"]["attributes"] == {"model": "L40S", "index": 0}
    assert detail["device_info"]["source"] == "template"
    assert detail["device_info"]["instanceType"] == "g6e.xlarge"
    assert [p["label"] for p in detail["path"]] == [
        "ml/train-1",
        "nodeclaim/gpu-pool-1",
        "g6e.xlarge",
    ]


def test_search_filters_by_reason(browser_client, run):
    url = reverse("pages:tree-search", args=[run.pk])
    by_reason = browser_client.get(url, {"reason": "allocated"}).json()
    assert by_reason["total"] == 4  # one device for train-0, a node and two devices for train-1
    assert all(r["reason"] == "allocated" for r in by_reason["results"])
    by_claim = browser_client.get(url, {"q": "ml/notebook-gpu"}).json()
    assert [r["kind"] for r in by_claim["results"]] == ["claim"]


def test_reveal_gives_the_sibling_index_of_each_step(browser_client, run):
    search = browser_client.get(
        reverse("pages:tree-search", args=[run.pk]), {"q": "p5-gpus"}
    ).json()
    target = search["results"][0]["id"]
    path = browser_client.get(reverse("pages:tree-reveal", args=[run.pk, target])).json()["path"]
    assert [step["index"] for step in path] == [1, 1, 1, 0, 0, 0, 0]
    # Each step carries the page of its siblings, so the tree opens in one round trip.
    assert [n["id"] for n in path[-1]["page"]["nodes"]] == [target]
    assert path[-1]["id"] == target
    assert browser_client.get(reverse("pages:tree-reveal", args=[run.pk, 9999])).status_code == 404


def test_overview_rectangles_cover_the_tree(browser_client, run):
    data = browser_client.get(reverse("pages:tree-overview", args=[run.pk])).json()
    assert data["total"] == run.trace_node_count
    roots = [r for r in data["rects"] if r[1] == 0]
    assert sum(r[3] for r in roots) == data["total"]
    # Each child lies inside its parent's span.
    by_id = {r[0]: r for r in data["rects"]}
    assert by_id[0][2] == 0 and by_id[1][2] == 1
    assert data["depth"] >= 4


def test_node_details_show_what_the_claim_asked_for(browser_client, run):
    search = browser_client.get(
        reverse("pages:tree-search", args=[run.pk]), {"q": "p5-gpus"}
    ).json()
    detail = browser_client.get(
        reverse("pages:tree-node", args=[run.pk, search["results"][0]["id"]])
    ).json()
    # train-1's device tries hang under its claim: the template's request and selector.
    assert detail["intent"]["claim"] == "ml/train-1-gpu"
    assert detail["intent"]["source"] == "ResourceClaimTemplate one-h100"
    (request,) = detail["intent"]["requests"]
    assert request["deviceClassName"] == "gpu.nvidia.com"
    assert request["selectors"] == ['device.attributes["gpu.nvidia.com"].model == "H100"']


def test_the_tree_does_not_read_the_runs_result(browser_client, run):
    # The result of a run where many pods fail is tens of megabytes; the tree shows none of it.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    node_id = browser_client.get(reverse("pages:tree-children", args=[run.pk])).json()["nodes"][0]
    urls = [
        reverse("pages:tree-children", args=[run.pk]),
        reverse("pages:tree-node", args=[run.pk, node_id["id"]]),
        reverse("pages:tree-search", args=[run.pk]) + "?q=ml",
        reverse("pages:tree-overview", args=[run.pk]),
    ]
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            assert browser_client.get(url).status_code == 200
        run_reads = [q["sql"] for q in queries if 'FROM "runs_run"' in q["sql"]]
        assert run_reads, url
        assert not any('"runs_run"."result"' in sql for sql in run_reads), url
