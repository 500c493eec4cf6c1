"""Sharing and the funnel on screen: a user takes the result away
(downloads, stable links), reads why a pod failed from the funnel table, and the pages keep
their polish (times in the browser's zone, kubectl-like YAML, dark mode, wide screens, a
favicon). Screenshots at 1280 and 1920 px under test-output/screenshots/."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD
from tests.browser.screens import shots
from tests.pages.builders import FIXTURE, GPU, NODE, make_run


@pytest.fixture
def stored_run(maria):
    """The GPU training snapshot and a finished run with funnels and suggestions."""
    from dra_web.snapshots.services import create_snapshot

    snapshot = create_snapshot(maria, [(FIXTURE.name, FIXTURE.read_bytes())], "gpu-training")
    return make_run(snapshot, maria)


def _login(page):
    page.goto(f"{page.base}/accounts/login/")
    page.fill("#id_username", "maria")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{page.base}/")


def _run_url(page, run) -> str:
    return f"{page.base}/runs/{run.pk}/"


def test_open_a_failed_pod_and_read_the_cause_from_the_funnel(logged_in, stored_run):
    page = logged_in
    page.goto(_run_url(page, stored_run))
    failure = page.locator("#failed-ml-infer-a100")
    decisive = failure.locator(".funnel-table tr.decisive").first
    expect(decisive.locator(".reason-code")).to_have_text("selector")
    expect(decisive).to_contain_text('model is "H100" on 1 device')
    shots(page, "funnel-summary")
    # Open the pod from its link: the Placements tab, the pod's details, the same cause.
    failure.locator("a[data-copy-link]").click()
    page.goto(f"{_run_url(page, stored_run)}#pod-ml-infer-a100")
    page.reload()
    expect(page.locator("#tab-placements")).to_have_attribute("aria-selected", "true")
    pod = page.locator("#pod-ml-infer-a100")
    expect(pod).to_have_attribute("open", "")
    rows = pod.locator(".funnel-table").nth(1).locator("tbody tr")
    expect(rows.first.locator(".reason-code")).to_have_text("selector")
    expect(rows.first).to_contain_text("on 8 devices")
    # An example device leads to its pool on the Pools tab.
    pod.locator(f"a:has-text('{GPU}/ip-10-0-1-7/gpu-1')").first.click()
    expect(page.locator("#tab-pools")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#pool-gpu-nvidia-com-ip-10-0-1-7")).to_be_visible()
    page.goto(f"{_run_url(page, stored_run)}#pod-ml-infer-a100")
    page.reload()
    shots(page, "funnel-placement")


def test_suggestion_patch_is_copyable(logged_in, stored_run):
    page = logged_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=page.base)
    page.goto(_run_url(page, stored_run))
    suggestion = page.locator("#failed-ml-infer-a100 .suggestion[data-kind=relax-selector]")
    expect(suggestion).to_contain_text("→ a new NodeClaim (gpu-pool-2 in the run with this change)")
    suggestion.locator("button[data-copy]").click()
    expect(suggestion.locator("button[data-copy]")).to_have_text("Copied")
    copied = suggestion.locator("button[data-copy]").get_attribute("data-copied")
    assert yaml.safe_load(copied)["kind"] == "ResourceClaimTemplate"
    delete = page.locator("#failed-ml-infer-a100 .suggestion[data-kind=free-device] pre")
    expect(delete).to_have_text("kubectl delete pod -n ml eval-0\n")
    suggestion.scroll_into_view_if_needed()
    shots(page, "suggestions")


def test_downloads_result_trace_and_nodeclaim_yaml(logged_in, stored_run):
    page = logged_in
    page.goto(_run_url(page, stored_run))
    bar = page.locator("nav.downloads")
    expect(bar.locator("a[data-download=result]")).to_have_attribute(
        "href", re.compile(r"result\.json$")
    )
    expect(bar.locator("a[data-download=trace]")).to_have_attribute(
        "href", re.compile(r"trace\.json$")
    )
    result = page.request.get(
        page.base + bar.locator("a[data-download=result]").get_attribute("href")
    )
    assert result.ok and json.loads(result.body())["pods"][0]["pod"] == "ml/train-0"
    trace = page.request.get(
        page.base + bar.locator("a[data-download=trace]").get_attribute("href")
    )
    assert trace.ok and len(json.loads(trace.body())["nodes"]) == stored_run.trace_node_count
    page.click("#tab-nodeclaims")
    link = page.locator("#nc-gpu-pool-1 a[data-download=nodeclaim]")
    claim = yaml.safe_load(page.request.get(page.base + link.get_attribute("href")).body())
    assert claim["kind"] == "NodeClaim" and claim["spec"]["nodeClassRef"]["kind"] == "EC2NodeClass"
    # Instance types by price, the cheapest marked.
    expect(page.locator("#nc-gpu-pool-1 .instance-types tr.cheapest")).to_contain_text("cheapest")
    shots(page, "nodeclaims")


def test_links_to_a_nodeclaim_and_a_tree_node_reveal_them(logged_in, stored_run):
    from dra_web.runs.models import TraceNode

    page = logged_in
    page.goto(f"{_run_url(page, stored_run)}#nc-gpu-pool-1")
    expect(page.locator("#tab-nodeclaims")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#nc-gpu-pool-1")).to_have_attribute("open", "")
    device = TraceNode.objects.filter(
        run=stored_run, kind="device", label=f"{GPU}/ip-10-0-1-7/gpu-0"
    ).first()
    page.goto(f"{_run_url(page, stored_run)}#node-{device.node_id}")
    page.reload()
    expect(page.locator("#tab-tree")).to_have_attribute("aria-selected", "true")
    item = page.locator(f"[role=tree] li[data-id='{device.node_id}']")
    expect(item).to_have_attribute("aria-selected", "true")
    detail = page.locator(".node-detail-body")
    # The device heading names the device (it read ".../undefined").
    expect(detail.locator("h3", has_text="Device ")).to_have_text(f"Device {GPU}/ip-10-0-1-7/gpu-0")
    expect(detail.locator("a.node-link")).to_have_attribute("href", f"#node-{device.node_id}")
    # No phantom NodeClaim name: the run never creates gpu-pool-2.
    tree = page.locator("[role=tree]")
    pool_target = tree.locator("li[data-kind=target] .label", has_text="nodepool/gpu-pool")
    page.fill(".tree-toolbar input[name=q]", "nodepool/gpu-pool")
    page.click(".tree-toolbar button[type=submit]")
    expect(pool_target.first).to_have_text("nodepool/gpu-pool (a new NodeClaim, not launched)")
    expect(tree).not_to_contain_text("gpu-pool-2")
    # A node refused by counting shows its funnel.
    page.fill(".tree-toolbar input[name=q]", "")
    page.select_option(".tree-toolbar select[name=reason]", "selector")
    pruned = TraceNode.objects.get(
        run=stored_run, kind="instanceType", label="p5.48xlarge", status="pruned"
    )
    page.locator(f".search-results button[data-id='{pruned.node_id}']").click()
    expect(detail.locator(".funnel-table")).to_contain_text("on 8 devices")
    shots(page, "tree-links")


def test_times_show_in_the_browsers_zone_with_utc_on_hover(
    chromium, live_server, web_settings, stored_run
):
    context = chromium.new_context(
        viewport={"width": 1280, "height": 900}, timezone_id="Asia/Tokyo"
    )
    page = context.new_page()
    page.base = live_server.url
    try:
        _login(page)
        page.goto(_run_url(page, stored_run))
        queued = page.locator("dl.kv time").first
        expect(queued).to_have_attribute("data-local", "Asia/Tokyo")
        utc = stored_run.queued_at
        tokyo_hour = (utc.hour + 9) % 24
        assert f" {tokyo_hour:02d}:{utc.minute:02d}" in queued.text_content()
        assert "UTC" in queued.get_attribute("title")
        assert queued.get_attribute("datetime").endswith("Z")
        shots(page, "times")
    finally:
        context.close()


def test_dark_mode_wide_screens_and_favicon(chromium, live_server, web_settings, stored_run):
    context = chromium.new_context(viewport={"width": 1920, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    page.base = live_server.url
    try:
        _login(page)
        page.goto(_run_url(page, stored_run))
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        red, green, blue = (int(x) for x in re.findall(r"\d+", background)[:3])
        assert max(red, green, blue) < 60, background
        width = page.evaluate("document.querySelector('main').getBoundingClientRect().width")
        assert width > 1800, width  # wide screens use their width
        icon = page.locator('link[rel=icon][type="image/svg+xml"]').get_attribute("href")
        response = page.request.get(page.base + icon)
        assert response.ok and b"<svg" in response.body()
        shots(page, "dark-run")
        page.goto(f"{page.base}/runs/{stored_run.pk}/#tree")
        expect(page.locator("[data-search-tree]")).to_have_attribute("data-ready", "true")
        shots(page, "dark-tree")
    finally:
        context.close()


def test_object_yaml_without_managed_fields_and_a_toggle(logged_in, stored_run):
    page = logged_in
    page.goto(f"{page.base}/snapshots/{stored_run.snapshot_id}/?kind=Node#objects")
    obj = page.locator("details.object").first
    obj.locator(":scope > summary").click()
    expect(obj.locator("pre.object-yaml")).to_contain_text(NODE)
    expect(obj.locator("pre.object-yaml")).not_to_contain_text("managedFields")
    toggle = obj.locator("details.managed-fields")
    toggle.locator("summary").click()
    expect(toggle.locator("pre")).to_contain_text("manager: kubelet")
    # CEL expressions wrap instead of being clipped.
    cel = page.locator("pre.cel").first
    assert cel.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    shots(page, "snapshot-yaml")


def test_cancel_a_queued_run_from_its_page(logged_in, stored_run, monkeypatch):
    from dra_web.runs import services
    from dra_web.runs.models import Run

    page = logged_in
    run = Run.objects.create(snapshot=stored_run.snapshot, owner=stored_run.owner, options={})
    cancelled = []

    def cancel(r, user):  # stands in for the runs service's cancel_run (web engineer)
        cancelled.append(r.pk)
        Run.objects.filter(pk=r.pk).update(status="failed", error="cancelled by maria")

    monkeypatch.setattr(services, "cancel_run", cancel, raising=False)
    page.goto(_run_url(page, run))
    expect(page.locator("#run-status time").first).to_have_attribute("datetime", re.compile(r"Z$"))
    shots(page, "run-queued")
    page.click("[data-cancel-run]")
    expect(page.locator(".messages")).to_contain_text("being cancelled")
    expect(page.locator("#run-status")).to_contain_text("cancelled by maria")
    assert cancelled == [run.pk]
