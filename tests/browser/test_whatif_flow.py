"""A what-if from the run page: a failed pod's suggestion, one click ("Try this fix"), and the
diff against the original run shows the edit, the pod placed and the cost change; the edit box
of the snapshot page does the same for any object."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.screens import shot

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml"
POD = "ml-training/giant-a100-0"


def _upload_and_run(page) -> str:
    page.set_input_files("#id_files", str(DEMO))
    page.fill("#id_name", "demo cluster")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/snapshots/\d+/$"))
    page.click("form.run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    return page.url


def test_try_this_fix_reaches_a_diff_with_the_pod_placed_and_the_cost_change(logged_in):
    page = logged_in
    run_url = _upload_and_run(page)
    original = re.search(r"/runs/(\d+)/$", run_url).group(1)
    failure = page.locator("#panel-summary .failure", has_text=POD).first
    failure.scroll_into_view_if_needed()  # past the first three, its explanation loads when shown
    fix = failure.locator(".suggestion").first
    expect(fix).to_contain_text("reduce request gpus")
    # The patch is shown as kubectl takes it, and the recreate steps name the workload.
    expect(fix.locator(".patch-body")).to_contain_text(
        '"path":"/spec/spec/devices/requests/0/exactly/count"'
    )
    expect(fix.locator("[data-recreate]")).to_contain_text("ReplicaSet ml-training/giant-a100")
    shot(page, "whatif-suggestion")
    fix.locator("[data-try-fix]").click()

    page.wait_for_url(re.compile(rf"/runs/{original}/diff/\d+/$"))
    changes = page.locator("[data-input-changes]")
    expect(changes).to_contain_text("ResourceClaimTemplate ml-training/a100-x40")
    expect(changes).to_contain_text('"path": "/spec/spec/devices/requests/0/exactly/count"')
    placed = page.locator("#panel-placements, section[aria-labelledby=placements-h]").locator(
        "tr", has_text=POD
    )
    expect(placed.first).to_contain_text("placed only in B")
    cost = page.locator("[data-cost]")
    expect(cost).to_contain_text(re.compile(r"\$[\d,.]+/h before → \$[\d,.]+/h after"))
    expect(cost.locator(".badge")).to_contain_text("+$")
    shot(page, "whatif-diff", full_page=True)

    # The same diff asked the other way round reads the same: the fix is no loss.
    derived = re.search(r"/diff/(\d+)/$", page.url).group(1)
    page.goto(f"{page.base}/runs/{derived}/diff/{original}/")
    expect(page.locator("tr", has_text=POD).first).to_contain_text("placed only in B")
    # "Compare with" offers the runs of the same lineage first.
    page.goto(f"{page.base}/runs/{derived}/diff/{original}/")
    first_option = page.locator("#diff-other option").first
    expect(first_option).to_contain_text("demo cluster")

    # The derived snapshot shows its parent and its edit.
    page.click(f"a[href$='/runs/{derived}/']")
    page.click("p.sub a[href*='/snapshots/']")
    expect(page.locator("[data-what-if]")).to_contain_text("derived from")
    expect(page.locator("[data-what-if]")).to_contain_text(
        "ResourceClaimTemplate ml-training/a100-x40"
    )


def test_the_edit_box_runs_any_object_as_a_what_if(logged_in):
    page = logged_in
    _upload_and_run(page)
    page.click("p.sub a[href*='/snapshots/']")
    page.select_option("select[name=kind]", "NodePool")
    page.wait_for_url(re.compile(r"kind=NodePool"))
    pool = page.locator("details.object", has_text="gpu-h100").first
    pool.locator("summary").first.click()
    pool.locator("details.what-if-edit summary").click()
    box = pool.locator("textarea[name=yaml]")
    text = box.input_value()
    assert "nvidia.com/gpu: '16'" in text or 'nvidia.com/gpu: "16"' in text, text
    box.fill(text.replace("nvidia.com/gpu: '16'", "nvidia.com/gpu: '24'"))
    pool.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"/runs/\d+/diff/\d+/$"))
    expect(page.locator("[data-input-changes]")).to_contain_text("NodePool gpu-h100")
    expect(page.locator("[data-input-changes]")).to_contain_text("/spec/limits/nvidia.com~1gpu")
    shot(page, "whatif-edit-box-diff", full_page=True)
