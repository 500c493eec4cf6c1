"""The debugger as a user drives it: upload, run, read why pods failed, tree, pools, review,
diff. Each test asserts what is on screen and saves screenshots."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.screens import shot

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo-snapshot.yaml"
FALLBACK = ROOT / "tests" / "fixtures" / "pages" / "gpu-training.yaml"


def _snapshot_file() -> Path:
    return DEMO if DEMO.exists() else FALLBACK


def _upload_and_run(page) -> str:
    """Upload the demo snapshot through the dashboard, start a run; returns the run URL."""
    page.set_input_files("#id_files", str(_snapshot_file()))
    expect(page.locator("[data-dropzone] .files")).to_contain_text(_snapshot_file().name)
    page.fill("#id_name", "demo cluster")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/snapshots/\d+/$"))
    expect(page.locator("h1")).to_have_text("demo cluster")
    page.click("form.run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return page.url


def test_login_page(page, maria):
    page.goto(f"{page.base}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    expect(page.locator(".login-card h1")).to_have_text("Sign in")
    shot(page, "login")
    page.fill("#id_username", "maria")
    page.fill("#id_password", "not-her-password")
    page.click("button[type=submit]")
    expect(page.locator(".form-errors")).to_contain_text("didn't match")


def test_upload_run_and_read_why_pods_failed(logged_in):
    page = logged_in
    shot(page, "dashboard-empty")
    run_url = _upload_and_run(page)
    # The run finished in the request (eager Celery): the summary is there.
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    failed = page.locator("#panel-summary .failure")
    expect(failed.first).to_be_visible()
    first_reason = failed.first.locator(".summary-line")
    expect(first_reason).to_contain_text(re.compile(r"0/\d+ (nodes|NodeClaims|NodePools): \d+ "))
    shot(page, "run-summary")

    # Placements: failed pod open with its error, a placed pod with intent and decision.
    page.click("#tab-placements")
    placements = page.locator("#panel-placements")
    expect(placements).to_be_visible()
    expect(placements.locator("details.placement[open]").first.locator(".error")).not_to_be_empty()
    placed_id = placements.locator("details.placement:not([open])").first.get_attribute("id")
    placed = page.locator(f"#{placed_id}")
    placed.locator("summary").click()
    expect(placed.locator("h4", has_text="Decision").first).to_be_visible()
    expect(placed.locator("h4", has_text="Intent").first).to_be_visible()
    shot(page, "run-placements")

    # NodeClaims: the first one is open with kept instance types and its annotation.
    page.click("#tab-nodeclaims")
    nodeclaim = page.locator("#panel-nodeclaims details.placement").first
    expect(nodeclaim).to_have_attribute("open", "")
    expect(nodeclaim).to_contain_text("Instance types kept")
    expect(nodeclaim).to_contain_text("karpenter.sh/requested-dra-drivers")
    shot(page, "run-nodeclaims")

    # Pools: one row per pool, expand to the devices.
    page.click("#tab-pools")
    pools = page.locator("#panel-pools")
    if pools.locator("table.data > tbody > tr:not(.sub)").count():
        pools.locator("tr.sub details > summary").first.click()
        expect(pools.locator("tr.sub details[open] table").first).to_be_visible()
    shot(page, "run-pools")

    # Dashboard: the run is listed as finished with its counts.
    page.goto(f"{page.base}/")
    run_id = run_url.rstrip("/").split("/")[-1]
    row = page.locator(f"#run-{run_id}")
    expect(row.locator(".badge").first).to_have_text("succeeded")
    shot(page, "dashboard")


def test_search_tree_expand_keyboard_and_search(logged_in):
    page = logged_in
    _upload_and_run(page)
    # Tabs work from the keyboard too: arrows move between sections.
    page.focus("#tab-summary")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#tab-placements")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#panel-placements")).to_be_visible()
    page.keyboard.press("End")
    expect(page.locator("#tab-review")).to_be_focused()
    page.click("#tab-tree")
    expect(page).to_have_url(re.compile(r"#tree$"))
    tree = page.locator("[role=tree]")
    expect(page.locator("[data-search-tree]")).to_have_attribute("data-ready", "true")
    items = tree.locator("[role=treeitem]")
    expect(items.first).to_be_visible()
    # Failed pods are collapsed, with the size of what is below them.
    failed_id = tree.locator("> li.st-failed[aria-expanded=false]").first.get_attribute("data-id")
    collapsed = tree.locator(f"li[data-id='{failed_id}']")
    expect(collapsed.locator(":scope > .row .size")).to_contain_text("below")
    # Keyboard: focus the failed pod, expand it with the right arrow, walk down.
    collapsed.focus()
    page.keyboard.press("ArrowRight")
    expect(collapsed).to_have_attribute("aria-expanded", "true")
    expect(collapsed.locator(":scope > ul > [role=treeitem]").first).to_be_visible()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("canvas.icicle")).to_have_attribute("data-drawn", re.compile(r"\d+"))
    expect(page.locator(".node-detail-body h3").first).not_to_be_empty()
    shot(page, "tree-expanded")

    # Targets refused alike share one node: tpu-job-0's first target stands for four nodes.
    page.fill(".tree-toolbar input[name=q]", "tpu-job-0")
    page.click(".tree-toolbar button[type=submit]")
    expect(page.locator(".tree-status")).to_contain_text("match")
    pod = tree.locator("li.hit").first
    pod.locator(":scope > .row .twisty").click()
    expect(pod.locator(":scope > ul .alike").first).to_have_text("+3 alike")

    # Search a device: the match is revealed, highlighted and detailed.
    page.fill(".tree-toolbar input[name=q]", "gpu-0")
    page.click(".tree-toolbar button[type=submit]")
    expect(page.locator(".tree-status")).to_contain_text("match")
    expect(tree.locator(".hit").first).to_be_visible()
    expect(page.locator(".node-detail-body")).to_contain_text("gpu-0")
    shot(page, "tree-search")

    # Filter by reason.
    reason = page.locator(".tree-toolbar select[name=reason] option").nth(1)
    value = reason.get_attribute("value")
    page.select_option(".tree-toolbar select[name=reason]", value)
    expect(page.locator(".search-results li").first).to_contain_text(value)
    first_hit = page.locator(".search-results li button").first.get_attribute("data-id")
    expect(tree.locator(f"li[data-id='{first_hit}']")).to_have_attribute("aria-selected", "true")

    # The icicle overview is drawn and jumps to a node.
    canvas = page.locator("canvas.icicle")
    box = canvas.bounding_box()
    assert box and box["width"] > 600
    before = tree.locator("[aria-selected=true]").get_attribute("data-id")
    page.evaluate("window.scrollTo(0, 0)")
    canvas.click(position={"x": box["width"] * 0.5, "y": 5})
    # The top row of the icicle is the pods: the jump selects a pod, not the search hit.
    selected = tree.locator("[aria-selected=true]")
    expect(selected).to_have_count(1)
    expect(selected).to_have_attribute("data-kind", "pod")
    assert selected.get_attribute("data-id") != before
    expect(page.locator(".node-detail-body h3").first).to_be_visible()
    shot(page, "tree-overview-jump")


def test_review_a_failed_pod(logged_in):
    page = logged_in
    run_url = _upload_and_run(page)
    page.click("#tab-review")
    page.locator("#panel-review a", has_text="Open review").first.click()
    page.wait_for_url(re.compile(r"/pods/[^/]+/[^/]+/review/$"))
    review_url = page.url
    expect(page.locator("#why-h")).to_have_text("Why it failed")
    page.fill("#id_body", "No instance type in this NodePool has enough GPUs; ask for capacity.")
    page.select_option("#id_verdict", "needs-capacity")
    page.click("#thread button[type=submit]")
    thread = page.locator(".thread li")
    expect(thread.first.locator(".meta")).to_contain_text("maria set the verdict to needs capacity")
    expect(thread.first).to_contain_text("ask for capacity")
    expect(page.locator("h1 + .sub")).to_contain_text("needs capacity")
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "review")
    # The link is stable: reload it and the thread is there.
    page.goto(review_url)
    expect(page.locator(".thread li")).to_have_count(1)
    # The dashboard filters by open review.
    page.goto(f"{page.base}/?review=open")
    expect(page.locator("#open-reviews table")).to_contain_text("needs capacity")
    run_id = run_url.rstrip("/").split("/")[-1]
    expect(page.locator(f"#run-{run_id} .badge.open")).to_be_visible()
    shot(page, "dashboard-open-reviews")


def test_diff_two_runs(logged_in):
    page = logged_in
    first = _upload_and_run(page)
    # A second run of the same snapshot on 1.36's gates with device taints switched off and a
    # node disrupted.
    page.go_back()
    page.select_option("form.run-form select[name=kubernetes_version]", "1.36")
    page.select_option("form.run-form select[name=gate-DRADeviceTaints]", "off")
    disrupt = page.locator("form.run-form input[name=disrupt_nodes]")
    if disrupt.count():
        disrupt.first.check()
    page.click("form.run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("[data-run-gates]")).to_contain_text("Kubernetes 1.36 defaults")
    expect(page.locator("[data-run-gates]")).to_contain_text("DRADeviceTaints=false")
    second_id = page.url.rstrip("/").split("/")[-1]
    page.goto(first)
    page.select_option("#diff-other", second_id)
    page.click("form[aria-label='Compare with another run'] button")
    page.wait_for_url(re.compile(r"/runs/\d+/diff/\d+/$"))
    expect(page.locator("h1")).to_contain_text(f"#{second_id}")
    expect(page.locator("#tree-h")).to_have_text("Where the search trees differ, by cause")
    expect(page.locator("#placements-h")).to_be_visible()
    shot(page, "diff")


def test_dashboard_progress_updates_live(logged_in, maria):
    from dra_web.runs.models import Run
    from dra_web.snapshots.services import create_snapshot

    page = logged_in
    snap = create_snapshot(maria, [(FALLBACK.name, FALLBACK.read_bytes())], "gpu-training")
    run = Run.objects.create(
        snapshot=snap, owner=maria, status="running", progress_done=1, progress_total=4
    )
    page.goto(f"{page.base}/")
    row = page.locator(f"#run-{run.pk}")
    expect(row.locator(".progress-label")).to_have_text("1/4 pods")
    Run.objects.filter(pk=run.pk).update(progress_done=3)
    expect(page.locator(f"#run-{run.pk} .progress-label")).to_have_text("3/4 pods")
    shot(page, "dashboard-running")
    Run.objects.filter(pk=run.pk).update(
        status="succeeded", pods_total=4, pods_scheduled=2, pods_failed=2
    )
    expect(page.locator(f"#run-{run.pk} .badge").first).to_have_text("succeeded")


def test_drag_and_drop_several_files(logged_in):
    page = logged_in
    text = FALLBACK.read_text()
    docs = text.split("\n---\n")
    parts = {"nodes.yaml": "\n---\n".join(docs[:8]), "workloads.yaml": "\n---\n".join(docs[8:])}
    page.evaluate(
        """(parts) => {
            const zone = document.querySelector('[data-dropzone]');
            const dt = new DataTransfer();
            for (const [name, text] of Object.entries(parts)) {
                dt.items.add(new File([text], name, {type: 'application/yaml'}));
            }
            zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true}));
            zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true}));
        }""",
        parts,
    )
    expect(page.locator("[data-dropzone] .files")).to_contain_text("nodes.yaml")
    expect(page.locator("[data-dropzone] .files")).to_contain_text("workloads.yaml")
    shot(page, "dashboard-dropped-files")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/snapshots/\d+/$"))
    expect(page.locator(".page-head .sub")).to_contain_text("nodes.yaml, workloads.yaml")
    expect(page.locator(".cel").first).to_contain_text("device.driver")
    shot(page, "snapshot")


def test_pages_fit_a_small_laptop_screen(logged_in):
    """At 1024 px the two-column layouts stack and nothing scrolls sideways."""
    page = logged_in
    run_url = _upload_and_run(page)
    page.set_viewport_size({"width": 1024, "height": 768})
    for name, url in (("laptop-dashboard", f"{page.base}/"), ("laptop-run", run_url)):
        page.goto(url)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px"
        shot(page, name)
    page.click("#tab-tree")
    expect(page.locator("[data-search-tree]")).to_have_attribute("data-ready", "true")
    shot(page, "laptop-tree")


def test_failed_pods_past_the_first_load_their_explanation_when_shown(logged_in, maria):
    """A run where many pods fail: the page holds the first three explanations; the others
    (and the failed pods of Placements) load as they scroll into view."""
    from tests.pages.builders import make_big_run

    page = logged_in
    run = make_big_run(maria, nodes=40, failed=12)
    page.goto(f"{page.base}/runs/{run.pk}/")
    failures = page.locator("#panel-summary .failure")
    expect(failures).to_have_count(12)
    expect(failures.nth(0).locator(".funnels")).to_be_visible()
    tenth = failures.nth(9)
    tenth.scroll_into_view_if_needed()
    expect(tenth.locator(".funnels")).to_be_visible()
    expect(tenth.locator("[data-failure-explanation]")).to_have_count(0)
    expect(tenth.locator(".funnels")).to_contain_text("on 8 devices")
    shot(page, "run-summary-lazy-explanation")

    page.click("#tab-placements")
    failed = page.locator("#panel-placements details.placement[open]").first
    expect(failed.locator(".failure-body")).to_be_visible()
    expect(failed.locator(".funnels")).to_contain_text("on 8 devices")
    expect(failed.locator("[data-failure-explanation]")).to_have_count(0)
