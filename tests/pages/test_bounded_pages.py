"""The run page of a run where 100 pods fail on 1,000 nodes stays small and
fast (it was 22 MB of HTML and 4-12 s): reasons are grouped, long lists paginated or loaded
on demand."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from tests.pages.builders import make_big_run

MB = 1024 * 1024


@pytest.fixture
def big_run(maria):
    return make_big_run(maria, nodes=1000, failed=100)


def test_run_page_of_a_1000_node_failing_run_is_small_and_fast(browser_client, big_run):
    url = reverse("pages:run", args=[big_run.pk])
    first = time.process_time()
    response = browser_client.get(url)  # parses the snapshot: the cold page
    cold = time.process_time() - first
    assert response.status_code == 200
    # CPU time of this process, best of three: the machine is shared, wall time is not ours.
    # Measured about 0.25 s warm and 0.2 MB (22 MB and 4-12 s before); generous margins.
    warm = []
    for _ in range(3):
        start = time.process_time()
        response = browser_client.get(url)
        warm.append(time.process_time() - start)
    html = response.content.decode()
    assert len(response.content) < 3 * MB, f"{len(response.content) / MB:.1f} MB"
    assert len(response.content) < MB // 2, f"{len(response.content) / MB:.2f} MB"
    assert min(warm) < 1.0, f"{min(warm):.2f} s"
    assert cold < 3.0, f"{cold:.2f} s"
    # Still says what a user needs: the cause, from the funnel, and how many nodes refused.
    assert "1000 nodes" in html or "1000 <span" in html
    assert "productName is &quot;NVIDIA H100 80GB HBM3&quot; on 8 devices" in html
    # 1,000 pools: one page of them, the rest behind pagination.
    assert "Page 1 of 20" in html


def test_every_target_is_listed_on_demand_a_page_at_a_time(browser_client, big_run):
    url = reverse("pages:pod-reasons", args=[big_run.pk, "ml", "infer-b200-7"])
    html = browser_client.get(url, {"page": 3}).content.decode()
    assert html.count('<span class="target">') == 100
    assert "Entries 201–300 of 1000" in html
    assert "ip-10-0-0-200.us-west-2.compute.internal" in html  # the 201st node


def test_pool_links_of_the_funnel_point_at_the_pools_page_that_shows_the_pool(
    browser_client, big_run
):
    html = browser_client.get(reverse("pages:run", args=[big_run.pk])).content.decode()
    # pool-0 is on the first page of pools: a same-page anchor.
    assert 'href="#pool-gpu-nvidia-com-pool-0.' in html
    assert 'id="pool-gpu-nvidia-com-pool-0"' in html


def test_failed_pods_past_the_first_three_load_their_explanation_when_shown(
    browser_client, big_run
):
    html = browser_client.get(reverse("pages:run", args=[big_run.pk])).content.decode()
    summary = html[html.index('id="panel-summary"') : html.index('id="panel-placements"')]
    # The first three failed pods are explained in the page; the other 17 of the summary wait
    # to be scrolled to, as do the failed pods of the placements.
    assert summary.count('class="funnels"') == 3
    assert summary.count("data-failure-explanation") == 17
    placements = html[html.index('id="panel-placements"') : html.index('id="panel-nodeclaims"')]
    assert 'class="funnels"' not in placements
    assert placements.count("data-failure-explanation") == 25
    url = reverse("pages:pod-explanation", args=[big_run.pk, "ml", "infer-b200-7"])
    assert f'hx-get="{url}?where=summary"' in summary
    fragment = browser_client.get(url, {"where": "summary"}).content.decode()
    assert "productName is &quot;NVIDIA H100 80GB HBM3&quot; on 8 devices" in fragment
    assert "1000 nodes" in fragment or "1000 <span" in fragment
    assert len(fragment) < 100_000, len(fragment)


def test_pruned_instance_types_of_a_nodeclaim_are_grouped_by_why():
    from dra_web.pages.presenters import pruned_groups

    message = 'not enough resources, requests {"cpu":"12"}, capacity {"cpu":"8"}'
    pruned = [
        {"name": "g5.xlarge", "reason": "resources", "message": message},
        {"name": "p5.48xlarge", "reason": "offerings", "message": "no offering in us-west-2a"},
        {"name": "g6.xlarge", "reason": "resources", "message": message},
        "g6e.xlarge",
    ]
    groups = pruned_groups(pruned)
    assert [g["names"] for g in groups] == [
        ["g5.xlarge", "g6.xlarge"],
        ["p5.48xlarge"],
        ["g6e.xlarge"],
    ]
    assert groups[0]["reason"] == "resources" and groups[0]["message"] == message


def test_the_first_view_of_a_stored_failing_run_reads_no_snapshot(
    browser_client, big_run, monkeypatch
):
    """The page shows what the worker derived from the snapshot when it stored the run: a view
    builds no typed snapshot and decodes none of the stored documents (a second on this
    cluster, on every first view), and still says why the pods failed and what each pool holds."""
    from dra_web.pages import selectors as page_selectors
    from dra_web.snapshots.models import Snapshot

    def refused(*args, **kwargs):
        raise AssertionError("the run page read the whole snapshot")

    monkeypatch.setattr(page_selectors, "snapshot_model", refused)
    monkeypatch.setattr(page_selectors, "load_snapshot", refused)
    monkeypatch.setattr(Snapshot, "documents", refused)
    monkeypatch.setattr(Snapshot, "files", refused)
    response = browser_client.get(reverse("pages:run", args=[big_run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    summary = html[html.index('id="panel-summary"') : html.index('id="panel-placements"')]
    assert "productName is &quot;NVIDIA H100 80GB HBM3&quot; on 8 devices" in summary
    assert "ml/infer-b200-0" in summary
    pools = html[html.index('id="panel-pools"') :]
    # Each node's pool: its 8 H100s counted from the snapshot's ResourceSlice, and its node.
    assert 'id="pool-gpu-nvidia-com-pool-0"' in pools
    assert pools.count("<summary>8 devices</summary>") == 50
    assert "node ip-10-0-0-0.us-west-2.compute.internal" in pools


def test_nodeclaims_of_400_instance_types_show_each_device_and_template_once(browser_client, maria):
    """Karpenter's benchmark with DRA: every claim on a NodeClaim of 400 instance types lists
    its GPU once per type, each type's template its own pool. The page shows a device once,
    with the types it stands for counted, the types' templates once per shape of devices, and
    the cheapest kept types (it was 4.9 MB of HTML for this run's shape)."""
    from bench.workloads import karpenter_benchmark, to_json
    from dra_web.runs.models import Run
    from dra_web.runs.worker import execute_run
    from dra_web.snapshots.services import create_snapshot

    docs = karpenter_benchmark(150, topology=False, dra=True, failing_every=10)
    snapshot = create_snapshot(maria, [("karpenter.json", to_json(docs))], "karpenter-dra")
    run = Run.objects.create(snapshot=snapshot, owner=maria, options={"trace": False})
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED, run.error
    first_nc = run.result["nodeClaims"][0]["name"]  # on the first page of NodeClaims
    placed = next(
        p
        for p in run.result["pods"]
        if p["scheduled"] and p["target"]["name"] == first_nc and p["claims"]
    )
    devices = placed["claims"][0]["devices"]
    assert len(devices) > 20  # one per instance type the NodeClaim kept
    response = browser_client.get(reverse("pages:run", args=[run.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert len(response.content) < MB, f"{len(response.content) / MB:.2f} MB"
    section = html[html.index(f'id="nc-{first_nc}"') :]
    section = section[: section.find('<details class="placement" id="nc-', 1)]
    held = section[section.index("Devices held") : section.index("Device taints")]
    first = devices[0]
    # One row for the claim's GPU: its first instance types named, the others counted.
    assert held.count(f"{first['driver']}/{first['pool']}/{first['device']}") == 1
    assert f"{first['instanceType']}, " in held
    assert f"and {len(devices) - 3} more" in held
    assert "each instance type its own pool" in held
    templates = section[section.index("Template ResourceSlices per instance type") :]
    assert templates.count("<summary") < 12  # one per shape of devices, not one per type
    assert "the 12 cheapest of" in section
