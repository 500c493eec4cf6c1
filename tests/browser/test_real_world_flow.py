"""The pages in the browser on a real-world snapshot (tests/fixtures/pages/eks-gpu.yaml: an
EKS-like cluster, NVIDIA's gpu.nvidia.com ResourceSlices, a NodePool with an EC2NodeClass,
pods with ResourceClaimTemplates, one named train.v2-0, one that fails, managedFields),
simulated for real. Each test checks one item as a user would and saves screenshots at 1280
and 1920 px under test-output/screenshots/ (``eks-*``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD
from tests.browser.screens import shots

EKS = Path(__file__).resolve().parents[1] / "fixtures" / "pages" / "eks-gpu.yaml"
NODE = "ip-192-168-12-34.ec2.internal"
GPU = "gpu.nvidia.com"


def _simulate(owner, name: str, body: bytes, options: dict | None = None):
    from dra_web.runs.models import Run
    from dra_web.runs.services import normalise_options
    from dra_web.runs.worker import execute_run
    from dra_web.snapshots.services import create_snapshot

    snapshot = create_snapshot(owner, [(f"{name}.yaml", body)], name)
    run = Run.objects.create(
        snapshot=snapshot,
        owner=owner,
        options=normalise_options({"trace": True, **(options or {})}),
    )
    execute_run(run.pk)  # what the worker does
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


@pytest.fixture
def eks_run(maria):
    return _simulate(maria, "eks-gpu", EKS.read_bytes())


@pytest.fixture
def no_pool_run(maria):
    docs = [d for d in yaml.safe_load_all(EKS.read_text()) if d["kind"] != "NodePool"]
    return _simulate(maria, "eks-no-nodepool", yaml.safe_dump_all(docs).encode())


def _context(chromium, live_server, **kwargs):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, **kwargs)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.base = live_server.url
    page.js_errors = []
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
    page.goto(f"{page.base}/accounts/login/")
    page.fill("#id_username", "maria")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{page.base}/")
    return context, page


@pytest.fixture
def user(chromium, live_server, web_settings, maria):
    context, page = _context(chromium, live_server, accept_downloads=True)
    yield page
    context.close()
    assert not page.js_errors, page.js_errors


def _tree_node(run, **filters) -> int:
    from dra_web.runs.models import TraceNode

    return TraceNode.objects.filter(run=run, **filters).order_by("node_id").first().node_id


def test_downloads_are_real_files_with_their_names(user, eks_run):
    page = user
    page.goto(f"{page.base}/runs/{eks_run.pk}/")
    bar = page.locator("nav.downloads")
    with page.expect_download() as got:
        bar.locator("a[data-download=result]").click()
    assert got.value.suggested_filename == f"run-{eks_run.pk}-result.json"
    result = json.loads(Path(got.value.path()).read_text())
    assert result["pods"] == eks_run.result["pods"]
    with page.expect_download() as got:
        bar.locator("a[data-download=trace]").click()
    assert got.value.suggested_filename == f"run-{eks_run.pk}-trace.json"
    trace = json.loads(Path(got.value.path()).read_text())
    assert len(trace["nodes"]) == eks_run.trace_node_count
    shots(page, "eks-downloads")
    # Each new NodeClaim as Karpenter would create it, from the NodeClaims tab.
    page.click("#tab-nodeclaims")
    with page.expect_download() as got:
        page.locator("#nc-gpu-1 a[data-download=nodeclaim]").click()
    assert got.value.suggested_filename == "gpu-1.yaml"
    claim = yaml.safe_load(Path(got.value.path()).read_text())
    assert (claim["apiVersion"], claim["kind"]) == ("karpenter.sh/v1", "NodeClaim")
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
    assert claim["spec"]["resources"]["requests"] == {"cpu": "2", "memory": "8Gi", "pods": "1"}
    assert {"key": "node.kubernetes.io/instance-type", "operator": "In"}.items() <= next(
        r for r in claim["spec"]["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
    ).items()
    # Instance types by price, the cheapest marked; none without template slices here.
    rows = page.locator("#nc-gpu-1 .instance-types tbody tr")
    expect(rows.first).to_contain_text("g6.xlarge")
    expect(rows.first).to_contain_text("cheapest")
    expect(rows.nth(1)).not_to_contain_text("cheapest")
    shots(page, "eks-nodeclaims")


def test_links_to_a_pod_a_nodeclaim_and_a_tree_node_reveal_them(user, eks_run):
    page = user
    run_url = f"{page.base}/runs/{eks_run.pk}/"
    # A pod with dots in its name.
    page.goto(f"{run_url}#pod-ml-research-train-v2-0")
    expect(page.locator("#tab-placements")).to_have_attribute("aria-selected", "true")
    pod = page.locator("#pod-ml-research-train-v2-0")
    expect(pod).to_have_attribute("open", "")
    expect(pod).to_be_in_viewport()
    expect(pod.locator("tr", has_text="in-cluster").locator("td")).to_have_text(
        ["gpu", GPU, NODE, "gpu-2", "in-cluster", "—"]
    )
    shots(page, "eks-link-pod")
    page.goto(f"{page.base}/")
    page.goto(f"{run_url}#nc-gpu-1")
    expect(page.locator("#tab-nodeclaims")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#nc-gpu-1")).to_have_attribute("open", "")
    # A device node of the search tree: the tree opens at it, its details name the device.
    device = _tree_node(eks_run, kind="device", label=f"{GPU}/{NODE}/gpu-2", status="ok")
    page.goto(f"{page.base}/")
    page.goto(f"{run_url}#node-{device}")
    expect(page.locator("#tab-tree")).to_have_attribute("aria-selected", "true")
    item = page.locator(f"[role=tree] li[data-id='{device}']")
    expect(item).to_have_attribute("aria-selected", "true")
    detail = page.locator(".node-detail-body")
    expect(detail.locator("h3", has_text="Device ")).to_have_text(f"Device {GPU}/{NODE}/gpu-2")
    expect(detail).not_to_contain_text("undefined")
    expect(detail.locator("dl.kv")).not_to_contain_text("null")
    expect(detail.locator("a.node-link")).to_have_attribute("href", f"#node-{device}")
    shots(page, "eks-link-tree-node")


def test_search_tree_passes_instance_types_and_nodeclaim_names(user, eks_run):
    page = user
    page.goto(f"{page.base}/runs/{eks_run.pk}/#tree")
    tree = page.locator("[role=tree]")
    expect(page.locator("[data-search-tree]")).to_have_attribute("data-ready", "true")
    # The pod that failed is shown once per retry pass, each pass labelled.
    failed = tree.locator("li[data-kind=pod]", has_text="ml-research/llm-h100-0")
    expect(failed).to_have_count(2)
    expect(failed.nth(0).locator(":scope > .row .pass")).to_have_text("pass 1")
    expect(failed.nth(1).locator(":scope > .row .pass")).to_have_text("pass 2")
    # Under an existing node the instance-type level is named, never "#6".
    it = _tree_node(eks_run, kind="instanceType", label="g5.12xlarge", status="ok")
    expect(tree.locator(f"li[data-id='{it}'] > .row .label")).to_have_text("g5.12xlarge")
    expect(tree.locator(".label", has_text=re.compile(r"^#\d+$"))).to_have_count(0)
    # Pass 1 of llm-h100-0 tried a new NodeClaim that was never created (the name gpu-1 went
    # to infer-l4-1's NodeClaim later): no NodeClaim name for it.
    phantom = _tree_node(eks_run, kind="target", label="nodepool/gpu (new gpu-1)", status="failed")
    created = _tree_node(eks_run, kind="target", label="nodepool/gpu (new gpu-1)", status="ok")
    page.goto(f"{page.base}/runs/{eks_run.pk}/#node-{phantom}")
    page.reload()
    row = tree.locator(f"li[data-id='{phantom}'] > .row .label")
    expect(row).to_have_text("nodepool/gpu (a new NodeClaim, not launched)")
    detail = page.locator(".node-detail-body")
    expect(detail.locator("h3").first).to_have_text("nodepool/gpu (a new NodeClaim, not launched)")
    shots(page, "eks-tree-phantom")
    page.goto(f"{page.base}/runs/{eks_run.pk}/#node-{created}")
    page.reload()
    expect(tree.locator(f"li[data-id='{created}'] > .row .label")).to_have_text(
        "nodeclaim/gpu-1 (new, nodepool/gpu)"
    )
    # The path of a node below it uses the same name.
    below = _tree_node(eks_run, kind="instanceType", label="g6.xlarge", parent=created)
    page.goto(f"{page.base}/runs/{eks_run.pk}/#node-{below}")
    page.reload()
    expect(detail.locator("ol.reasons")).to_contain_text("nodeclaim/gpu-1 (new, nodepool/gpu)")
    expect(detail).not_to_contain_text("(new gpu-2)")
    shots(page, "eks-tree-nodeclaim")


def test_times_in_the_browsers_zone_with_utc_on_hover(chromium, live_server, web_settings, eks_run):
    context, page = _context(chromium, live_server, timezone_id="America/New_York")
    try:
        page.goto(f"{page.base}/runs/{eks_run.pk}/")
        times = page.locator("time[datetime]")
        assert times.count() >= 4
        for i in range(times.count()):
            t = times.nth(i)
            assert t.get_attribute("datetime").endswith("Z")
            assert "UTC" in t.get_attribute("title")
            expect(t).to_have_attribute("data-local", "America/New_York")
            expect(t).not_to_contain_text("UTC")
            expect(t).to_contain_text(re.compile(r" E[SD]T$"))  # the zone shown is named
        utc = eks_run.queued_at
        shown = page.locator("dl.kv time").first.text_content()
        assert f" {(utc.hour - 5) % 24:02d}:{utc.minute:02d}" in shown  # EST in December
        shots(page, "eks-times")
    finally:
        context.close()


def test_object_yaml_is_kubectls_and_cel_wraps(user, eks_run):
    page = user
    page.goto(f"{page.base}/snapshots/{eks_run.snapshot_id}/?kind=Pod#objects")
    obj = page.locator("details.object", has_text="train.v2-0").first
    obj.locator(":scope > summary").click()
    body = obj.locator("pre.object-yaml")
    expect(body).to_contain_text("name: train.v2-0")
    expect(body).not_to_contain_text("managedFields")
    toggle = obj.locator("details.managed-fields")
    expect(toggle.locator("pre")).to_be_hidden()
    toggle.locator("summary").click()
    expect(toggle.locator("pre")).to_contain_text("manager: kube-controller-manager")
    shots(page, "eks-object-yaml")
    # A long CEL expression (the L4 template's) wraps inside its box instead of being clipped.
    page.goto(f"{page.base}/snapshots/{eks_run.snapshot_id}/?kind=ResourceClaimTemplate#objects")
    for width in (1280, 1920, 800):
        page.set_viewport_size({"width": width, "height": 900})
        for cel in page.locator("pre.cel, code.cel").all():
            if not cel.is_visible():
                continue
            fits = cel.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
            assert fits, cel.text_content()
    page.set_viewport_size({"width": 1280, "height": 900})
    shots(page, "eks-cel")


def test_funnel_example_device_opens_the_pools_tab_at_that_device(user, no_pool_run):
    page = user
    page.goto(f"{page.base}/runs/{no_pool_run.pk}/")
    failure = page.locator("#failed-ml-research-infer-l4-1")
    decisive = failure.locator(".funnel-table tr.decisive").first
    # The node's A10Gs are all held, but an L4 request is refused for what they are.
    expect(decisive.locator(".reason-code")).to_have_text("selector")
    link = decisive.locator("a[data-device=gpu-2]")
    expect(link).to_have_text(f"{GPU}/{NODE}/gpu-2")
    link.click()
    expect(page.locator("#tab-pools")).to_have_attribute("aria-selected", "true")
    row = page.locator("#pool-gpu-nvidia-com-ip-192-168-12-34-ec2-internal\\.gpu-2")
    expect(row).to_have_class(re.compile(r"\blinked\b"))
    expect(row).to_be_in_viewport()
    shots(page, "eks-pool-device")
    # The same link opened afresh (copied, shared) lands there too.
    href = link.get_attribute("href")
    page.goto(f"{page.base}/")
    page.goto(f"{page.base}/runs/{no_pool_run.pk}/{href}")
    expect(page.locator("#tab-pools")).to_have_attribute("aria-selected", "true")
    expect(row).to_have_class(re.compile(r"\blinked\b"))
    # The review page's funnel links back to the run page's Pools tab at the device.
    page.goto(f"{page.base}/runs/{no_pool_run.pk}/pods/ml-research/infer-l4-1/review/")
    page.locator(".funnel-table a[data-device=gpu-0]").first.click()
    expect(page.locator("#tab-pools")).to_have_attribute("aria-selected", "true")
    expect(
        page.locator("#pool-gpu-nvidia-com-ip-192-168-12-34-ec2-internal\\.gpu-0")
    ).to_have_class(re.compile(r"\blinked\b"))


def test_wide_screen_uses_its_width_in_dark_mode(chromium, live_server, web_settings, eks_run):
    context, page = _context(chromium, live_server, color_scheme="dark")
    try:
        page.set_viewport_size({"width": 1920, "height": 1080})
        page.goto(f"{page.base}/runs/{eks_run.pk}/")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert max(int(x) for x in re.findall(r"\d+", background)[:3]) < 60, background
        box = page.locator(".summary-main").bounding_box()
        side = page.locator(".summary-side").bounding_box()
        assert box["width"] > 1250, box  # the failed pods take most of the width
        assert side["x"] > box["x"] + box["width"]
        # Inside the failed pod, the funnel and the fix sit side by side.
        why = page.locator("#failed-ml-research-llm-h100-0 .failure-why").bounding_box()
        fix = page.locator("#failed-ml-research-llm-h100-0 .failure-fix").bounding_box()
        assert fix["x"] >= why["x"] + why["width"] and abs(fix["y"] - why["y"]) < 5
        icons = page.locator("link[rel=icon]")
        assert icons.count() == 2
        for i in range(icons.count()):
            response = page.request.get(page.base + icons.nth(i).get_attribute("href"))
            assert response.ok and response.headers["content-type"].startswith("image/")
        shots(page, "eks-dark-summary", full_page=True)  # leaves the viewport at 1280 px
        # At 1280 px the failed pods still get most of the width, the fix below the funnel.
        main = page.locator(".summary-main").bounding_box()
        assert main["width"] > 1.6 * page.locator(".summary-side").bounding_box()["width"]
        why = page.locator("#failed-ml-research-llm-h100-0 .failure-why").bounding_box()
        fix = page.locator("#failed-ml-research-llm-h100-0 .failure-fix").bounding_box()
        assert fix["y"] >= why["y"] + why["height"] - 1
    finally:
        context.close()


def test_cancel_a_stuck_run_from_its_page(user, eks_run):
    from dra_web.runs.models import Run

    page = user
    run = Run.objects.create(
        snapshot=eks_run.snapshot, owner=eks_run.owner, options=eks_run.options, status="running"
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    expect(page.locator("#run-status")).to_contain_text("this page updates by itself")
    shots(page, "eks-run-running")
    page.click("[data-cancel-run]")  # the runs service's cancel_run, for real
    expect(page.locator(".messages")).to_contain_text(f"Run #{run.pk} is being cancelled.")
    status = page.locator("#run-status")
    expect(status.locator("[data-cancelled]")).to_have_text("cancelled")
    expect(status).to_contain_text("cancelled by maria")
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("cancelled by maria")
    shots(page, "eks-run-cancelled")


def test_nodeclaim_instance_types_by_price_and_slice_less_ones_behind_a_toggle(user, maria):
    # A CPU-only batch pod that asks for spot g5 capacity: its NodeClaim may be a g5.2xlarge
    # (no GPU, no template slice) or a g5.12xlarge (4 x A10G).
    docs = list(yaml.safe_load_all(EKS.read_text()))
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batch-0", "namespace": "ml-research"},
            "spec": {
                "nodeSelector": {
                    "karpenter.sh/capacity-type": "spot",
                    "karpenter.k8s.aws/instance-family": "g5",
                },
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.12",
                        "resources": {"requests": {"cpu": "6", "memory": "24Gi"}},
                    }
                ],
            },
        }
    )
    run = _simulate(maria, "eks-batch", yaml.safe_dump_all(docs).encode())
    (nc,) = [n for n in run.result["nodeClaims"] if "ml-research/batch-0" in n["pods"]]
    page = user
    page.goto(f"{page.base}/runs/{run.pk}/#nc-{nc['name']}")
    card = page.locator(f"#nc-{nc['name']}")
    expect(card).to_have_attribute("open", "")
    rows = card.locator(".instance-types tbody tr")
    expect(rows.locator("td:first-child")).to_have_text(["g5.2xlarge cheapest", "g5.12xlarge"])
    expect(rows.locator("td.num")).to_have_text(["$0.500/h", "$2.100/h"])
    expect(rows.first).to_have_class("cheapest")
    toggle = card.locator("details.no-slices")
    expect(toggle.locator("summary")).to_have_text("1 instance type with no template slice")
    expect(toggle.locator("p")).to_be_hidden()
    toggle.locator("summary").click()
    expect(toggle.locator("p .tag")).to_have_text(["g5.2xlarge"])
    expect(card.locator("details:not(.no-slices) > summary.mono")).to_have_text(
        ["g5.12xlarge — 1 slice"]
    )
    card.scroll_into_view_if_needed()
    shots(page, "eks-nodeclaim-instance-types")


def test_diff_puts_decisions_first_and_groups_the_tree_by_cause(user, maria, eks_run):
    # Consolidating the A10G node: its pods move to a new g5.12xlarge NodeClaim.
    disrupted = _simulate(maria, "eks-gpu", EKS.read_bytes(), {"disrupt": [NODE]})
    page = user
    page.goto(f"{page.base}/runs/{eks_run.pk}/diff/{disrupted.pk}/")
    headings = page.locator("main h2").all_text_contents()
    decisions = headings.index("Placements that changed")
    assert decisions < headings.index("Where the search trees differ, by cause")
    assert headings.index("NodeClaims that changed") < headings.index(
        "Where the search trees differ, by cause"
    )
    placements = page.locator("section[aria-labelledby=placements-h]")
    expect(placements.locator("tr", has_text="ml-research/train.v2-0").first).to_contain_text(
        f"Node {NODE}"
    )
    # Tree differences come as causes with counts, each expandable to its points.
    causes = page.locator("table.causes tr.cause-group")
    assert 0 < causes.count() <= 12
    counts = [
        int(c)
        for c in page.locator("table.causes tr.cause-group td.num:nth-child(4)").all_text_contents()
    ]
    sizes = [
        int(c)
        for c in page.locator("table.causes tr.cause-group td.num:nth-child(5)").all_text_contents()
    ]
    assert sizes == sorted(sizes, reverse=True)  # the causes that moved most of the search first
    summary = page.locator("section[aria-labelledby=tree-h] p.muted").first.text_content()
    assert re.search(rf"{sum(counts)} divergence points? in {causes.count()} causes?", summary)
    shots(page, "eks-diff", full_page=True)
