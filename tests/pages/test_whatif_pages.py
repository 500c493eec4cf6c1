"""The run page's Pools tab (who holds each device, counters used and left), the NodeClaims'
prices by their NodePool's capacity types, and the what-if forms of the pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from dra_web.runs import services as run_services
from dra_web.snapshots.models import Snapshot
from dra_web.snapshots.services import create_snapshot

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(owner, name: str, capture):
    snapshot = create_snapshot(owner, [(name, (EXAMPLES / name).read_bytes())], name)
    with capture(execute=True):
        run = run_services.start_run(owner, snapshot, {})
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def test_pool_devices_say_who_holds_each_device(
    browser_client, maria, django_capture_on_commit_callbacks
):
    run = _run(maria, "demo-snapshot.yaml", django_capture_on_commit_callbacks)
    html = browser_client.get(
        reverse("pages:pool-devices", args=[run.pk]) + "?driver=gpu.nvidia.com&pool=mig-node-1"
    ).content.decode()
    assert "<th>Held by</th>" in html
    row = re.search(r'<tr id="[^"]*\.gpu-0-mig-3g-0".*?</tr>', html, re.S)
    assert row and "pod inference/mig-infer-0 (this run)" in row.group(0)
    assert '<span class="muted">free</span>' in html


def test_counters_used_and_left_count_the_held_devices():
    from allocator.snapshot import load_paths
    from dra_web.pages import presenters

    model = load_paths([str(EXAMPLES / "features-partitionable.yaml")])
    slices = [s for s in model.resource_slices if s.driver == "dra.example.com"]
    consuming = [d.name for s in slices for d in s.devices if d.consumes_counters]
    assert consuming
    free = presenters.counter_usage(slices, {})
    assert {(c["counterSet"], c["counter"], c["total"], c["used"], c["left"]) for c in free} >= {
        ("gpu-1-counters", "memory", "8Gi", "0", "8Gi")
    }
    held = presenters.counter_usage(slices, {consuming[0]: ["claim default/x"]})
    memory = next(
        c for c in held if c["counterSet"] == "gpu-1-counters" and c["counter"] == "memory"
    )
    assert memory["used"] != "0"
    from allocator.quantity import Quantity

    assert Quantity.parse(memory["used"]) + Quantity.parse(memory["left"]) == Quantity.parse("8Gi")


def test_try_this_fix_makes_the_what_if_and_opens_the_diff(
    browser_client, maria, django_capture_on_commit_callbacks
):
    run = _run(maria, "demo-snapshot.yaml", django_capture_on_commit_callbacks)
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "data-try-fix" in html
    pod = next(p for p in run.result["pods"] if p["pod"] == "ml-training/giant-a100-0")
    fix = pod["suggestions"][0]
    edits = [{"object": fix["change"]["object"], "patch": fix["patch"]}]
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post(
            reverse("pages:try-fix", args=[run.pk]), {"edits": json.dumps(edits)}
        )
    derived = Snapshot.objects.get(parent=run.snapshot)
    new_run = derived.runs.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("pages:diff", args=[run.pk, new_run.pk])
    assert new_run.options == run.options
    diff = browser_client.get(response["Location"]).content.decode()
    assert "ml-training/giant-a100-0" in diff and "placed only in B" in diff
    assert "data-cost" in diff
    page = browser_client.get(reverse("pages:snapshot", args=[derived.pk])).content.decode()
    assert "derived from" in page and "ResourceClaimTemplate ml-training/a100-x40" in page


def test_a_bad_edit_goes_back_with_the_message(
    browser_client, maria, django_capture_on_commit_callbacks
):
    run = _run(maria, "demo-snapshot.yaml", django_capture_on_commit_callbacks)
    edits = [{"object": "NodePool gpu-h100", "patch": [{"op": "remove", "path": "/spec/nope"}]}]
    response = browser_client.post(
        reverse("pages:try-fix", args=[run.pk]), {"edits": json.dumps(edits)}, follow=True
    )
    assert (
        "What-if not made: edits[0] (NodePool gpu-h100): patch does not apply"
        in response.content.decode()
    )
    assert not Snapshot.objects.filter(parent=run.snapshot).exists()
    response = browser_client.post(
        reverse("pages:snapshot-edit", args=[run.snapshot.pk]),
        {"object": "NodePool gpu-h100", "yaml": "kind: [unclosed"},
        follow=True,
    )
    assert "the edited YAML does not parse" in response.content.decode()


def test_node_claim_prices_follow_the_node_pools_capacity_types(
    browser_client, maria, django_capture_on_commit_callbacks
):
    run = _run(maria, "demo-snapshot.yaml", django_capture_on_commit_callbacks)
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    from dra_web.pages import selectors as page_selectors

    model = page_selectors.snapshot_model(run.snapshot)
    checked = 0
    for nc in run.result["nodeClaims"]:
        capacity = next(
            (r["values"] for r in nc["requirements"] if r["key"] == "karpenter.sh/capacity-type"),
            None,
        )
        if capacity != ["on-demand"]:
            continue
        for name in nc["instanceTypes"]:
            offerings = model.instance_types[name].offerings
            spot = [o.price for o in offerings if o.capacity_type == "spot"]
            on_demand = min(o.price for o in offerings if o.capacity_type == "on-demand")
            assert f"${on_demand:,.3f}/h" in html
            for price in spot:
                if price < on_demand:
                    assert f"${price:,.3f}/h" not in html
            checked += 1
    assert checked
    # The summary lists each NodeClaim's instance types cheapest first.
    from dra_web.pages.presenters import allowed_prices

    cells = re.findall(r'<td class="instance-types-by-price"[^>]*>(.*?)</td>', html, re.S)
    assert len(cells) == len(run.result["nodeClaims"])
    for nc, cell in zip(run.result["nodeClaims"], cells, strict=True):
        shown = re.findall(r'<span class="tag[^"]*">([^<]+)</span>', cell)
        offerings = {name: it.offerings for name, it in model.instance_types.items()}
        prices = allowed_prices(offerings, nc["requirements"], nc["instanceTypes"])
        expected = sorted(nc["instanceTypes"], key=lambda n: (n not in prices, prices.get(n, 0), n))
        assert shown == expected[:4]


def test_compare_with_offers_the_runs_of_the_lineage_first(snapshot, maria):
    from dra_web.pages.run_page import other_runs
    from dra_web.snapshots.services import create_variant
    from tests.pages.builders import FIXTURE, make_run

    original = make_run(snapshot, maria)
    what_if = create_variant(
        maria,
        snapshot,
        [
            {
                "object": "Namespace ml",
                "patch": [{"op": "add", "path": "/metadata/labels", "value": {"team": "ml"}}],
            }
        ],
    )
    deeper = create_variant(
        maria,
        what_if,
        [
            {
                "object": "Namespace ml",
                "patch": [{"op": "add", "path": "/metadata/labels/tier", "value": "gold"}],
            }
        ],
    )
    fix_run, deeper_run = make_run(what_if, maria), make_run(deeper, maria)
    # Runs of an unrelated snapshot, started later, come after the lineage's.
    unrelated = create_snapshot(
        maria, [("other.yaml", FIXTURE.read_bytes().replace(b"ml", b"mx"))], "other"
    )
    later = [make_run(unrelated, maria) for _ in range(3)]
    offered = [r.pk for r in other_runs(deeper_run)]
    assert set(offered[:2]) == {original.pk, fix_run.pk}
    assert set(offered[2:]) >= {r.pk for r in later}
    # The deeper what-if's diff against the original lists both edits, in order, with authors.
    from dra_web.runs.selectors import diff_order, input_changes

    assert diff_order(deeper_run, original) == (original, deeper_run)
    changes = input_changes(original, deeper_run)
    assert [c["snapshot"] for c in changes] == [what_if.pk, deeper.pk]
    assert all(c["author"] == "maria" for c in changes)
