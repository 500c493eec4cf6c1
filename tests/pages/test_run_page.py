"""The run page: summary, placements, NodeClaims, search tree, pools and review sections."""

from __future__ import annotations

import re

from django.urls import reverse

from tests.pages.builders import NODE, make_run


def _html(response) -> str:
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def _run_html(client, run) -> str:
    return _html(client.get(reverse("pages:run", args=[run.pk])))


def _between(html: str, start: str, end: str | None = None) -> str:
    """The part of the page from ``start`` up to ``end`` (both must be present)."""
    return html[html.index(start) : html.index(end)] if end else html[html.index(start) :]


def test_run_page_requires_login(client, run):
    response = client.get(reverse("pages:run", args=[run.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_summary_lists_failed_pods_first_with_aggregated_reasons(browser_client, run):
    html = _run_html(browser_client, run)
    summary = _between(html, 'id="panel-summary"', 'id="panel-placements"')
    # Failed pods come before anything else, each with the kube-scheduler style count.
    assert summary.index("ml/infer-a100") < summary.index("NodeClaims to launch")
    assert (
        "0/1 nodes: 1 no free device; 0/1 NodePools: 1 no instance type can satisfy the allocation"
        in summary
    )
    assert "0/1 nodes: 1 CEL selector failed to compile" in summary
    # The NodeClaim to launch and its price from the result.
    assert "gpu-pool-1" in summary and "$98.320/h" in summary
    assert "2 × " not in summary or "failed" in summary


def test_placements_show_intent_beside_decision(browser_client, run):
    html = _run_html(browser_client, run)
    placements = _between(html, 'id="panel-placements"', 'id="panel-nodeclaims"')
    # train-1's claim came from the one-h100 template: its CEL selector is the intent ...
    block = placements[placements.index('id="pod-ml-train-1"') :]
    block = block[: block.index("</details>")]
    assert "ResourceClaimTemplate one-h100" in block
    assert "&quot;H100&quot;" in block and 'class="cel' not in block or "H100" in block
    # ... and the decision is the p5.48xlarge template device.
    assert re.search(r"p5-gpus</td><td class=\"mono\">gpu-0</td>", block)
    assert "p5.48xlarge" in block and ">template<" in block
    # Failed pods come first in the list.
    assert placements.index("ml/infer-a100") < placements.index("ml/train-0")


def test_nodeclaims_show_instance_types_pruned_requirements_templates_and_gating(
    browser_client, run
):
    html = _run_html(browser_client, run)
    section = _between(html, 'id="panel-nodeclaims"', 'id="panel-tree"')
    assert "g6e.xlarge" in section and "no device of class gpu.nvidia.com matches" in section
    assert "topology.kubernetes.io/zone In us-west-2a, us-west-2b" in section
    assert "karpenter.sh/requested-dra-drivers" in section
    assert "gated" in section and "gpu.nvidia.com" in section
    # Template ResourceSlices of the kept instance type come from the snapshot's catalog.
    assert "p5-gpus" in section
    assert "gpu.nvidia.com/p5-gpus/gpu-0" in section  # held by ml/train-1


def test_tree_section_is_an_aria_tree_with_reason_filter(browser_client, run):
    html = _run_html(browser_client, run)
    tree = _between(html, 'id="panel-tree"', 'id="panel-pools"')
    assert 'role="tree"' in tree
    assert f'data-children-url="/runs/{run.pk}/tree/children/"' in tree
    assert f'data-api-url="/api/runs/{run.pk}/trace/"' in tree
    assert '<option value="selector">selector (' in tree
    assert '<option value="allocated">allocated (' in tree


def test_pools_section_has_one_row_per_pool_and_its_devices(browser_client, run):
    html = _run_html(browser_client, run)
    pools = _between(html, 'id="panel-pools"', 'id="panel-review"')
    assert f"node {NODE}" in pools
    assert "1/1" in pools  # slices seen / declared
    assert ">valid<" in pools
    # The devices load when the row is opened (an htmx partial): the page stays small.
    assert "model=H100" not in pools
    assert (
        f'hx-get="/runs/{run.pk}/pools/devices/?driver=gpu.nvidia.com&amp;pool=ip-10-0-1-7"'
        in pools
    )
    devices = _html(
        browser_client.get(
            reverse("pages:pool-devices", args=[run.pk]),
            {"driver": "gpu.nvidia.com", "pool": "ip-10-0-1-7"},
        )
    )
    assert "model=H100" in devices and "memory=80Gi" in devices
    assert "gpu-0" in devices and "gpu-1" in devices


def test_running_run_shows_progress_and_polls(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    running = Run.objects.create(
        snapshot=snapshot, owner=maria, status="running", progress_done=1, progress_total=4
    )
    html = _run_html(browser_client, running)
    assert f'hx-get="/runs/{running.pk}/status/"' in html
    assert 'style="width: 25%"' in html
    status = browser_client.get(reverse("pages:run-status", args=[running.pk]))
    assert "HX-Refresh" not in status
    running.status = "failed"
    running.error = "time limit exceeded"
    running.save()
    status = browser_client.get(reverse("pages:run-status", args=[running.pk]))
    assert status["HX-Refresh"] == "true"
    assert "time limit exceeded" in status.content.decode()


def test_diff_page_shows_changed_placements_and_tree_divergences(browser_client, snapshot, maria):
    a = make_run(snapshot, maria)
    b = make_run(
        snapshot,
        maria,
        second_train_placed=False,
        options={"timeout": 5, "disrupt": [], "featureGates": {"DRADeviceTaints": True}},
    )
    html = _html(browser_client.get(reverse("pages:diff", args=[a.pk, b.pk])))
    assert "placed only in A" in html and "ml/train-1" in html
    assert "options changed" in html and "featureGates" not in html
    assert "only in A" in html and "gpu-pool-1" in html
    assert "Where the search trees differ, by cause" in html
    # The device under the p5.48xlarge candidate is where the searches went apart: one
    # cause, a device that was ok in A and refused by a taint in B.
    causes = html[html.index('class="data compact causes"') :]
    assert "gpu.nvidia.com/p5-gpus/gpu-0" in causes
    assert "failed (taint)" in causes
    # Decisions come first, the search trees last.
    assert html.index("Placements that changed") < html.index("Figures")
    assert html.index("Figures") < html.index("Where the search trees differ")
    pick = browser_client.get(reverse("pages:diff-pick", args=[a.pk]), {"other": b.pk})
    assert pick["Location"] == reverse("pages:diff", args=[a.pk, b.pk])


def test_pruned_instance_types_and_requirements_before_dra_without_result_fields(
    browser_client, snapshot, maria
):
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    del result["nodeClaims"][0]["instanceTypesPruned"]
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="panel-nodeclaims"', 'id="panel-tree"')
    # Read from the trace: the candidate the DFS dropped while placing train-1.
    assert "g6e.xlarge" in section
    assert "no device of class gpu.nvidia.com matches" in section
    assert "(placing ml/train-1)" in section
    # Before DRA: the NodePool template still allows both instance types.
    assert "Before DRA (NodePool template)" in section
    assert "node.kubernetes.io/instance-type In g6e.xlarge, p5.48xlarge" in section
    assert "node.kubernetes.io/instance-type In p5.48xlarge" in section


def test_long_lists_are_paginated(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    template = next(p for p in result["pods"] if p["pod"] == "ml/infer-a100")
    result["pods"] = [
        {**template, "pod": f"ml/infer-a100-{i:02d}", "claims": []} for i in range(60)
    ]
    Run.objects.filter(pk=run.pk).update(result=result)
    url = reverse("pages:run", args=[run.pk])
    html = _html(browser_client.get(url))
    placements = _between(html, 'id="panel-placements"', 'id="panel-nodeclaims"')
    assert "ml/infer-a100-24" in placements and "ml/infer-a100-25" not in placements
    assert "Page 1 of 3 (60 in all)" in placements
    assert 'href="?ppage=2#placements"' in placements
    page2 = _html(browser_client.get(url, {"ppage": 2}))
    placements = _between(page2, 'id="panel-placements"', 'id="panel-nodeclaims"')
    assert "ml/infer-a100-25" in placements and "ml/infer-a100-24" not in placements
    review = _between(html, 'id="panel-review"')
    assert "ml/infer-a100-49" in review and "ml/infer-a100-50" not in review
    assert "Page 1 of 2 (60 in all)" in review


def test_device_taints_and_binding_conditions_across_placements(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria, second_train_placed=False)
    result = run.result
    device = result["pods"][0]["claims"][0]["devices"][0]
    device["tolerations"] = [{"key": "nvidia.com/maintenance", "operator": "Exists"}]
    device["bindingConditions"] = ["gpu.nvidia.com/fabric-attached"]
    device["bindingFailureConditions"] = ["gpu.nvidia.com/fabric-failed"]
    device["bindsToNode"] = True
    result["pods"][0]["claims"][0]["bindingTimeoutSeconds"] = 600
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="taint-h"', 'id="panel-tree"')
    # Excluded: train-1's try of the p5 template device (reason "taint" in the trace).
    assert "gpu.nvidia.com/p5-gpus/gpu-0" in section and "ml/train-1" in section
    assert "untolerated taint nvidia.com/maintenance:NoSchedule" in section
    # Tolerated and binding conditions: train-0's in-cluster gpu-1 on the registered node.
    assert "nvidia.com/maintenance Exists" in section
    assert "gpu.nvidia.com/fabric-attached" in section and "gpu.nvidia.com/fabric-failed" in section
    assert f"pinned to Node {NODE}" in section
    assert "600 s" in section


def test_failed_run_shows_its_error_and_no_sections(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    failed = Run.objects.create(
        snapshot=snapshot,
        owner=maria,
        status="failed",
        error="worker lost: no heartbeat for 95 s (last at 2026-12-02 09:14:03 UTC)",
    )
    html = _run_html(browser_client, failed)
    assert "The simulation did not complete." in html
    assert "worker lost: no heartbeat for 95 s" in html
    assert 'role="tablist"' not in html and "hx-trigger" not in html


def test_nodeclaims_show_the_report_fields_of_the_result(browser_client, snapshot, maria):
    """allocator/scheduling/report.py's fields replace what the page used to guess from the
    trace and the catalog: prune stages, requirements before DRA, templates, taints, binding."""
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    nc = result["nodeClaims"][0]
    nc["instanceTypesPruned"] = [
        {
            "name": "p5e.48xlarge",
            "reason": "offerings",
            "message": "no available offering compatible with topology.kubernetes.io/zone "
            "In [us-west-2a]; offerings: us-west-2b/on-demand (incompatible)",
        }
    ]
    nc["requirementsBeforeDRA"] = [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2c"]}
    ]
    nc["templateSlices"] = [
        {
            "instanceType": "p5.48xlarge",
            "slices": [{"driver": "gpu.nvidia.com", "pool": "p5-fabric", "devices": ["gpu-7"]}],
        }
    ]
    # The devices it holds are its pods' (the entry does not list them again).
    holder = next(p for p in result["pods"] if p["pod"] == nc["pods"][0])
    holder["claims"] = [
        {
            "claim": "ml/train-1-gpu",
            "state": "unallocated",
            "nodeSelector": None,
            "devices": [
                {
                    "request": "gpu",
                    "driver": "gpu.nvidia.com",
                    "pool": "p5-fabric",
                    "device": "gpu-7",
                    "source": "template",
                    "instanceType": "p5.48xlarge",
                }
            ],
        }
    ]
    nc["deviceTaints"] = {
        "excluded": [
            {
                "driver": "gpu.nvidia.com",
                "pool": "p5-fabric",
                "device": "gpu-6",
                "instanceType": "p5.48xlarge",
                "taint": "dra.example.com/ecc-errors=high",
                "effect": "NoSchedule",
                "claims": ["ml/train-1-gpu"],
            }
        ],
        "tolerated": [
            {
                "pod": "ml/train-1",
                "claim": "ml/train-1-gpu",
                "request": "gpu",
                "driver": "gpu.nvidia.com",
                "pool": "p5-fabric",
                "device": "gpu-7",
                "taint": "dra.example.com/unhealthy=Broken",
                "effect": "NoExecute",
                "toleration": {"operator": "Exists", "key": "dra.example.com/unhealthy"},
            }
        ],
    }
    nc["bindingConditions"] = [
        {
            "pod": "ml/train-1",
            "claim": "ml/train-1-gpu",
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "p5-fabric",
            "device": "gpu-7",
            "conditions": ["dra.example.com/is-prepared"],
            "failureConditions": ["dra.example.com/preparing-failed"],
            "bindsToNode": True,
            "timeoutSeconds": 900,
        }
    ]
    nc["initializationGating"] = {
        "nodeClaim": "gpu-pool-1",
        "node": None,
        "status": "Unknown",
        "reason": "DRADriverPoolsNotPublished",
        "missingDrivers": ["gpu.nvidia.com"],
    }
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="panel-nodeclaims"', 'id="taint-h"')
    assert '<span class="tag">offerings</span>' in section and "p5e.48xlarge" in section
    assert "us-west-2b/on-demand (incompatible)" in section
    assert "(placing" not in section  # nothing guessed from the trace
    assert "Before DRA (NodePool and pods)" in section
    assert "topology.kubernetes.io/zone In us-west-2c" in section
    assert "p5-fabric" in section and '<span class="tag">gpu-7</span>' in section
    held = _between(section, "Devices held", "Device taints and binding conditions")
    assert "ml/train-1-gpu" in held and "gpu.nvidia.com/p5-fabric/gpu-7" in held
    assert "p5.48xlarge" in held
    assert "excluded by a taint" in section and "gpu.nvidia.com/p5-fabric/gpu-6" in section
    assert "dra.example.com/ecc-errors=high:NoSchedule" in section
    assert "dra.example.com/unhealthy=Broken:NoExecute" in section
    assert (
        "dra.example.com/is-prepared" in section and "dra.example.com/preparing-failed" in section
    )
    assert "pinned to gpu-pool-1" in section and "timeout 900 s" in section
    assert "DRADriverPoolsNotPublished" in section and "Unknown" in section
    assert "Other fields of the result" not in section


def test_taints_section_uses_the_claims_device_taints_of_the_result(
    browser_client, snapshot, maria
):
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria, second_train_placed=False)
    result = run.result
    result["pods"][0]["claims"][0]["deviceTaints"] = {
        "excluded": [
            {
                "driver": "gpu.nvidia.com",
                "pool": NODE,
                "device": "gpu-3",
                "instanceType": None,
                "taint": "dra.example.com/ecc-errors=high",
                "effect": "NoSchedule",
            }
        ],
        "tolerated": [],
    }
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="taint-h"', "<h3>Taints tolerated</h3>")
    assert f"gpu.nvidia.com/{NODE}/gpu-3" in section
    assert "dra.example.com/ecc-errors=high:NoSchedule" in section
    assert f"ml/train-0 on Node {NODE}" in section
    # The result's account replaces the trace search for this list.
    assert "untolerated taint nvidia.com/maintenance:NoSchedule" not in section


def test_demo_run_page_shows_the_allocator_report(browser_client, maria):
    """The demo snapshot simulated for real (no trace stored): the NodeClaims section reads
    the prune stages, the gate and the templates from the result alone."""
    from pathlib import Path

    from allocator.simulation import SimulationOptions, simulate
    from allocator.snapshot import load_paths
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output
    from dra_web.snapshots.services import create_snapshot

    demo = Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml"
    snap = create_snapshot(maria, [(demo.name, demo.read_bytes())], "demo")
    result = simulate(load_paths([str(demo)]), SimulationOptions()).result
    run = Run.objects.create(snapshot=snap, owner=maria, options={"timeout": 5})
    store_output(run.pk, result, None)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="panel-nodeclaims"', 'id="taint-h"')
    general = section[section.index('id="nc-gpu-general-1"') :]
    assert '<span class="tag">devices</span>' in general
    assert "claim inference/whisper-a10g-0-gpu request gpu: 0 of 1 devices available" in general
    assert '<span class="tag">resources</span>' in general and "g5.xlarge" in general
    assert "DRADriverPoolsNotPublished" in general
    assert "Before DRA (NodePool and pods)" in general
    assert "g5.48xlarge-gpus" in general
    assert "Other fields of the result" not in section


def test_placements_list_the_pods_karpenter_ignores(browser_client, snapshot, maria):
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output
    from tests.pages.builders import gpu_training_result, gpu_training_trace

    result = gpu_training_result()
    result["ignoredPods"] = [
        {
            "pod": "ml/llama-finetune-0",
            "reason": "scheduling gate kueue.x-k8s.io/admission",
            "code": "scheduling-gate",
        },
        {
            "pod": "ml/vllm-1",
            "reason": "nominated to node ip-10-0-1-7 (preemption in progress)",
            "code": "preempting",
        },
    ]
    run = Run.objects.create(snapshot=snapshot, owner=maria, options={"trace": True})
    store_output(run.pk, result, gpu_training_trace())
    html = _run_html(browser_client, run)
    placements = _between(html, 'id="panel-placements"', 'id="panel-nodeclaims"')
    ignored = _between(placements, 'id="ignored"')
    # Listed after the placements, each with Karpenter's reason.
    assert placements.index("ml/train-0") < placements.index('id="ignored"')
    assert "Ignored pods" in ignored and ">2<" in ignored
    assert "ml/llama-finetune-0" in ignored
    assert "scheduling gate kueue.x-k8s.io/admission" in ignored
    assert "nominated to node ip-10-0-1-7 (preemption in progress)" in ignored
    # The run figures link to the list.
    assert 'href="#ignored">2</a>' in html


def test_a_run_without_ignored_pods_shows_no_ignored_list(browser_client, run):
    html = _run_html(browser_client, run)
    assert 'id="ignored"' not in html and "ignored by Karpenter" not in html


def test_nodeclaims_name_the_zone_they_launch_in(browser_client, snapshot, maria):
    """A NodeClaim narrowed to one zone (a topology spread, a pod affinity, a zonal device)
    shows it in the launch table and its NodeClaim entry; an unconstrained one says any."""
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    nc = result["nodeClaims"][0]
    others = [r for r in nc["requirements"] if r["key"] != "topology.kubernetes.io/zone"]
    nc["requirements"] = [
        *others,
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]},
    ]
    second = dict(nc, name="gpu-pool-2", pods=[], requirements=others)
    result["nodeClaims"].append(second)
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    launch = _between(html, 'id="launch-h"', "</tfoot>")
    rows = launch.split("<tr>")
    first_row = next(r for r in rows if ">gpu-pool-1<" in r)
    second_row = next(r for r in rows if ">gpu-pool-2<" in r)
    assert '<span class="tag mono">us-west-2b</span>' in first_row
    assert '<span class="muted">any</span>' in second_row
    tab = _between(html, 'id="panel-nodeclaims"', 'id="taint-h"')
    assert '<span class="muted">zone</span> <span class="mono">us-west-2b</span>' in tab
    assert '<span class="muted">any zone</span>' in tab


def test_a_nodeclaim_says_what_pins_its_zone(browser_client, snapshot, maria):
    """The NodeClaims tab lists what narrowed the zone (a pod's volume here), linking the pod."""
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    nc = result["nodeClaims"][0]
    pod = nc["pods"][0]
    nc["zonePinnedBy"] = [
        {
            "source": "volume",
            "pod": pod,
            "detail": "PersistentVolume pv-cache of PersistentVolumeClaim ml/model-cache: "
            "topology.kubernetes.io/zone In [us-west-2b]",
        }
    ]
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    tab = _between(html, 'id="panel-nodeclaims"', 'id="taint-h"')
    pins = _between(tab, "data-zone-pins", "</ul>")
    assert "What pins its zone" in tab
    assert '<span class="tag">volume</span>' in pins
    assert 'href="#pod-' in pins and pod in pins
    assert "PersistentVolume pv-cache of PersistentVolumeClaim ml/model-cache" in pins
    # Not shown among the NodeClaim's other, unrecognised fields.
    assert "zonePinnedBy" not in tab


def test_nodeclaims_are_shown_twenty_to_a_page(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    result = run.result
    first = result["nodeClaims"][0]
    result["nodeClaims"] = [{**first, "name": f"gpu-{i:02d}", "pods": []} for i in range(45)]
    Run.objects.filter(pk=run.pk).update(result=result)
    html = _run_html(browser_client, run)
    section = _between(html, 'id="panel-nodeclaims"', 'id="panel-tree"')
    assert section.count('<details class="placement" id="nc-') == 20
    assert 'id="nc-gpu-19"' in section and 'id="nc-gpu-20"' not in section
    assert "Page 1 of 3 (45 in all)" in section
    assert 'NodeClaims<span class="count">45</span>' in html
    third = _html(browser_client.get(reverse("pages:run", args=[run.pk]), {"ncpage": 3}))
    section = _between(third, 'id="panel-nodeclaims"', 'id="panel-tree"')
    assert section.count('<details class="placement" id="nc-') == 5
    assert 'id="nc-gpu-44"' in section


def _without_csrf(html: str) -> str:
    return re.sub(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+', r"\1", html)


def test_a_run_stored_before_its_page_facts_shows_the_same_page(browser_client, snapshot, maria):
    """Runs stored before the page facts were: derived from the snapshot when first shown, the
    same page (intents, NodeClaim prices and templates, NodePool requirements, pools)."""
    from dra_web.runs.models import Run

    run = make_run(snapshot, maria)
    with_facts = _run_html(browser_client, run)
    assert Run.objects.filter(pk=run.pk).update(page_facts_blob=None)
    before_facts = _run_html(browser_client, Run.objects.get(pk=run.pk))
    assert _without_csrf(before_facts) == _without_csrf(with_facts)
    assert "ResourceClaimTemplate one-h100" in with_facts
    assert "/h" in _between(with_facts, 'id="panel-nodeclaims"', 'id="panel-tree"')
