"""The refusal funnel and the verified suggestions of each failed pod on the run page (summary,
placements), the review page, the search tree and the diff."""

from __future__ import annotations

import json

import yaml
from django.urls import reverse

from dra_web.pages import presenters
from tests.pages.builders import GPU, NODE, gpu_training_trace, make_run


def _html(response) -> str:
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end)]


def _pod_block(html: str, anchor: str) -> str:
    block = html[html.index(f'id="{anchor}"') :]
    return block[: block.index("</details>\n  ") if "</details>\n  " in block else None]


def test_summary_shows_the_funnel_of_each_failed_pod(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    summary = _section(html, 'id="panel-summary"', 'id="panel-placements"')
    a100 = summary[
        summary.index('id="failed-ml-infer-a100"') : summary.index('id="failed-ml-notebook"')
    ]
    # One table per refused request and target kind, the decisive cause first.
    assert a100.count('class="data compact funnel-table"') == 2
    assert "0 of 2 devices usable" in a100 and "0 of 8 devices usable" in a100
    assert "model is &quot;H100&quot; on 8 devices" in a100
    assert "allocated to claim ml/eval-0-gpu (reserved for pod ml/eval-0)" in a100
    # Example in-cluster devices link to their own row in their pool on the Pools tab (wrapped
    # only after a slash); template devices of an instance type have no pool row, plain text.
    seg = '<span class="seg">{}</span>'.format
    shown = "/<wbr>".join(seg(p) for p in (GPU, "ip-10-0-1-7", "gpu-1"))
    assert (
        f'<a href="#pool-gpu-nvidia-com-ip-10-0-1-7.gpu-1" data-device="gpu-1">{shown}</a>' in a100
    )
    assert "<div>" + "/<wbr>".join(seg(p) for p in (GPU, "p5-gpus", "gpu-0")) + "</div>" in a100
    assert 'id="pool-gpu-nvidia-com-ip-10-0-1-7"' in html
    # A request refused as a whole says why, without device rows.
    notebook = summary[summary.index('id="failed-ml-notebook"') :]
    assert "failed to compile" in notebook


def test_suggestions_carry_a_copyable_patch(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    summary = _section(html, 'id="panel-summary"', 'id="panel-placements"')
    a100 = summary[
        summary.index('id="failed-ml-infer-a100"') : summary.index('id="failed-ml-notebook"')
    ]
    assert (
        "relax-selector" in a100
        and "→ a new NodeClaim (gpu-pool-2 in the run with this change)" in a100
    )
    assert "free-device" in a100 and f"→ Node {NODE}" in a100
    assert a100.count("data-copy") >= 2
    # op set: the object's header and the field path set to the value.
    patch = a100[a100.index('data-language="yaml">') + len('data-language="yaml">') :]
    patch = patch[: patch.index("</pre>")].replace("&quot;", '"').replace("&#x27;", "'")
    assert yaml.safe_load(patch) == {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-a100", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"exactly": {"selectors": []}}]}}},
    }
    # op delete: the kubectl lines that remove the holders.
    assert "kubectl delete pod -n ml eval-0" in a100
    # A failed pod for which no single change helps says so.
    notebook = summary[summary.index('id="failed-ml-notebook"') :]
    assert "No single change would place this pod." in notebook


def test_placements_and_review_page_show_funnel_and_suggestions(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    placements = _section(html, 'id="panel-placements"', 'id="panel-nodeclaims"')
    block = placements[placements.index('id="pod-ml-infer-a100"') :]
    block = block[: block.index('id="pod-ml-notebook"')]
    # The explanation loads when the pod scrolls into view: the page links to it ...
    url = reverse("pages:pod-explanation", args=[run.pk, "ml", "infer-a100"])
    assert f'hx-get="{url}?where=placements"' in block
    assert "funnel-table" not in block
    # ... and the partial holds the funnel and the suggestion.
    loaded = _html(browser_client.get(url, {"where": "placements"}))
    assert "funnel-table" in loaded and "relax-selector" in loaded
    review_tab = _section(html, 'id="panel-review"', "</main>")
    assert "selector</span>" in review_tab  # the decisive cause of infer-a100
    review = _html(
        browser_client.get(reverse("pages:pod-review", args=[run.pk, "ml", "infer-a100"]))
    )
    why = review[review.index('id="why-h"') : review.index('id="thread"')]
    assert "funnel-table" in why and "kubectl delete pod -n ml eval-0" in why
    # From the review page the pool links lead back to the run page's Pools tab.
    run_url = reverse("pages:run", args=[run.pk])
    assert f'href="{run_url}?olpage=1#pool-gpu-nvidia-com-ip-10-0-1-7.gpu-' in why


def test_tree_reason_filter_offers_the_funnels_decisive_cause(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    tree = _section(html, 'id="panel-tree"', 'id="panel-pools"')
    assert '<option value="selector">selector (' in tree
    # The node refused by counting carries its funnel in the details.
    from dra_web.runs.models import TraceNode

    node = TraceNode.objects.get(run=run, kind="instanceType", label="p5.48xlarge", status="pruned")
    detail = browser_client.get(reverse("pages:tree-node", args=[run.pk, node.node_id])).json()
    assert detail["reason"] == "selector"
    assert detail["funnel"][0]["rejections"][0]["devices"] == 8
    found = browser_client.get(reverse("pages:tree-search", args=[run.pk]), {"reason": "selector"})
    assert node.node_id in [r["id"] for r in found.json()["results"]]


def test_tree_roots_label_each_retry_pass(browser_client, snapshot, maria):
    from allocator.trace import Trace
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output
    from tests.pages.builders import gpu_training_result

    t = Trace()
    for label in ("ml/train-0", "ml/infer-a100", "ml/infer-a100", "ml/notebook", "ml/infer-a100"):
        t.add(None, "pod", label, "failed" if "infer" in label else "ok")
    run = Run.objects.create(snapshot=snapshot, owner=maria, options={"trace": True})
    store_output(run.pk, gpu_training_result(), t.to_json())
    roots = browser_client.get(reverse("pages:tree-children", args=[run.pk]), {"parent": ""})
    passes = [(n["label"], n.get("pass")) for n in roots.json()["nodes"]]
    assert passes == [
        ("ml/train-0", 1),
        ("ml/infer-a100", 1),
        ("ml/infer-a100", 2),
        ("ml/notebook", 1),
        ("ml/infer-a100", 3),
    ]


def test_a_run_of_one_pass_labels_no_pass(browser_client, run):
    roots = browser_client.get(reverse("pages:tree-children", args=[run.pk]), {"parent": ""})
    assert all("pass" not in n for n in roots.json()["nodes"])


def test_nodeclaim_instance_types_by_price_cheapest_marked_empty_templates_toggled(
    browser_client, snapshot, maria
):
    from dra_web.runs.worker import store_output

    run = make_run(snapshot, maria)
    result = run.result
    # m7i.4xlarge is not in the catalog: no price, no template slice. Stored as the worker
    # stores a result: the page's snapshot facts are derived for the NodeClaims it names.
    result["nodeClaims"][0]["instanceTypes"] = ["p5.48xlarge", "m7i.4xlarge", "g6e.xlarge"]
    store_output(run.pk, result, gpu_training_trace())
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    section = _section(html, 'id="panel-nodeclaims"', 'id="panel-tree"')
    kept = section[section.index("instance-types") :]
    kept = kept[: kept.index("</table>")]
    order = [kept.index(n) for n in ("g6e.xlarge", "p5.48xlarge", "m7i.4xlarge")]
    assert order == sorted(order)
    assert kept.index("cheapest") < kept.index("p5.48xlarge")  # on the g6e row
    toggle = section[section.index('class="no-slices"') :]
    assert "1 instance type with no template slice" in toggle and "m7i.4xlarge" in toggle


def test_diff_compares_funnels_by_cause_and_sets_reworded_errors_apart(
    browser_client, snapshot, maria
):
    from dra_web.runs.models import Run

    a = make_run(snapshot, maria)
    b = make_run(snapshot, maria)
    result = b.result
    a100 = result["pods"][2]
    a100["explanation"][0]["rejections"][1]["reason"] = "taint"
    a100["error"] = a100["error"].replace("cannot allocate all claims", "cannot allocate claims")
    Run.objects.filter(pk=b.pk).update(result=result)
    html = _html(browser_client.get(reverse("pages:diff", args=[a.pk, b.pk])))
    table = html[html.index('class="data compact funnel-diff"') :]
    table = table[: table.index("</table>")]
    rows = table.split("<tr>")[2:]
    assert len(rows) == 2  # allocated went away, taint appeared; selector unchanged
    assert "allocated" in rows[0] and "taint" in rows[1]
    assert "only reads differently" in html


def test_reason_groups_fold_a_thousand_targets_into_one_row():
    reasons = [
        {"target": f"node/n{i}", "reason": "allocating dynamic resources, no free device"}
        for i in range(1000)
    ]
    reasons.append({"target": "node/gpu-pool-1", "reason": "exceeds node resources"})
    reasons.append(
        {
            "target": "nodepool/gpu-pool",
            "reason": "no instance type",
            "targets": 3,
            "exampleTargets": ["nodepool/gpu-pool", "nodepool/cpu", "nodepool/spot"],
        }
    )
    groups = presenters.reason_groups(reasons, {"gpu-pool-1"})
    assert [(g["group"], g["count"]) for g in groups] == [
        ("nodes", 1000),
        ("NodeClaims", 1),
        ("NodePools", 3),
    ]
    assert groups[0]["examples"] == [f"node/n{i}" for i in range(5)] and groups[0]["more"] == 995
    assert groups[1]["examples"] == ["nodeclaim/gpu-pool-1"]  # one naming of the run's NodeClaims
    assert presenters.target_count(reasons) == 1004
    assert presenters.aggregate_groups(groups) == (
        "0/1000 nodes: 1000 no free device; 0/1 NodeClaims: 1 insufficient resources; "
        "0/3 NodePools: 3 no instance type"
    )


def test_funnel_view_tolerates_partial_documents():
    assert presenters.funnel_view(None) == []
    view = presenters.funnel_view([{"claim": "ml/x", "rejections": [{"reason": "counter"}]}, "x"])
    assert view[0]["rows"][0]["reason"] == "counter" and view[0]["decisive"] == "counter"


def test_node_claim_manifest_without_a_nodepool_document():
    nc = {"name": "gpu-pool-3", "nodePool": "gone", "requirements": [], "annotations": {}}
    manifest = presenters.node_claim_manifest(nc, None)
    assert manifest["metadata"]["labels"] == {"karpenter.sh/nodepool": "gone"}
    assert "nodeClassRef" not in manifest["spec"]
    assert json.loads(json.dumps(manifest)) == manifest


def test_repeated_identical_funnel_tables_show_once_with_a_count():
    """29 instance types of a NodePool that reach no device: one table, "×29", the first few
    instance types named; a different table stays apart."""
    empty = [
        {
            "claim": "ml/train-0-gpu",
            "request": "gpu",
            "needed": 1,
            "instanceType": f"m7i.{size}xlarge",
            "targets": 1,
            "exampleTargets": ["nodepool/general"],
            "candidates": 0,
            "usable": 0,
            "rejections": [],
        }
        for size in range(2, 31)
    ]
    held = {
        **empty[0],
        "instanceType": "p5.48xlarge",
        "candidates": 8,
        "rejections": [{"reason": "allocated", "devices": 8, "message": "allocated to ..."}],
    }
    view = presenters.funnel_view([*empty, held])
    assert [(f["instanceType"], f["repeats"]) for f in view] == [
        ("m7i.2xlarge", 29),
        ("p5.48xlarge", 1),
    ]
    assert view[0]["repeatedFor"] == [f"m7i.{size}xlarge" for size in range(3, 8)]


def test_no_nodepool_failures_are_counted_for_the_nodeclaims_panel():
    result = {
        "pods": [
            {
                "pod": "ml/a",
                "scheduled": False,
                "cause": {"reason": "no-nodepool", "message": "x", "noNodePool": True},
            },
            {"pod": "ml/b", "scheduled": False, "cause": {"reason": "selector", "message": "y"}},
            {"pod": "ml/c", "scheduled": True},
        ]
    }
    assert presenters.result_view(result)["no_nodepool_failures"] == 1


def test_a_failed_pods_partials_do_not_read_the_runs_result(browser_client, run):
    # A result is tens of megabytes where many pods fail; a failed pod's explanation, reasons
    # and review page read only what the run keeps of its failed pods.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    urls = [
        reverse("pages:pod-explanation", args=[run.pk, "ml", "infer-a100"]),
        reverse("pages:pod-reasons", args=[run.pk, "ml", "infer-a100"]),
        reverse("pages:pod-review", args=[run.pk, "ml", "infer-a100"]),
    ]
    pages = []
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            response = browser_client.get(url)
        assert response.status_code == 200, url
        pages.append(response.content)
        run_reads = [q["sql"] for q in queries if 'FROM "runs_run"' in q["sql"]]
        assert run_reads, url
        assert not any('"runs_run"."result"' in sql for sql in run_reads), url
    # A run stored before its failed pods were kept apart shows the same from its result.
    type(run).objects.filter(pk=run.pk).update(failures_blob=None)
    again = [_without_tokens(browser_client.get(url).content) for url in urls]
    assert again == [_without_tokens(page) for page in pages]


def _without_tokens(html: bytes) -> bytes:
    """A page without its CSRF tokens (masked afresh on every response)."""
    import re

    return re.sub(rb'(csrfmiddlewaretoken" value=|X-CSRFToken": )"[^"]*"', rb"\1", html)
