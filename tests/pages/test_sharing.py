"""What a user takes away from the run page (downloads, stable links) and the
polish around it (times with a zone, kubectl-like YAML, a favicon, cancelling a run)."""

from __future__ import annotations

import json
import re

import yaml
from django.urls import reverse

from tests.pages.builders import GPU, NODE, make_run


def _html(response) -> str:
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_run_page_offers_result_trace_and_nodeclaim_downloads(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    for name in ("download-result", "download-trace", "download-nodeclaims"):
        assert f'href="{reverse(f"pages:{name}", args=[run.pk])}"' in html
    assert f'href="{reverse("pages:download-nodeclaim", args=[run.pk, "gpu-pool-1"])}"' in html


def test_result_download_is_the_result_document(browser_client, run):
    response = browser_client.get(reverse("pages:download-result", args=[run.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert f'filename="run-{run.pk}-result.json"' in response["Content-Disposition"]
    assert json.loads(response.content) == run.result


def test_trace_download_is_the_whole_trace(browser_client, run):
    response = browser_client.get(reverse("pages:download-trace", args=[run.pk]))
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    trace = json.loads(response.content)
    assert len(trace["nodes"]) == run.trace_node_count
    assert trace["nodes"][0]["label"] == "ml/train-0"


def test_nodeclaim_download_is_the_object_karpenter_would_create(browser_client, run):
    response = browser_client.get(reverse("pages:download-nodeclaim", args=[run.pk, "gpu-pool-1"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml"
    nc = yaml.safe_load(response.content)
    assert nc["apiVersion"] == "karpenter.sh/v1" and nc["kind"] == "NodeClaim"
    assert nc["metadata"]["name"] == "gpu-pool-1"
    assert nc["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu-pool"
    assert nc["metadata"]["annotations"]["karpenter.sh/requested-dra-drivers"] == GPU
    # The nodeClassRef comes from the NodePool's template, the requirements from the run.
    assert nc["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    zone = next(r for r in nc["spec"]["requirements"] if r["key"] == "topology.kubernetes.io/zone")
    assert zone == {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["us-west-2a", "us-west-2b"],
    }
    every = browser_client.get(reverse("pages:download-nodeclaims", args=[run.pk]))
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(every.content)] == ["gpu-pool-1"]


def test_downloads_of_unknown_nodeclaims_or_unfinished_runs_are_404(
    browser_client, snapshot, maria
):
    run = make_run(snapshot, maria)
    missing = reverse("pages:download-nodeclaim", args=[run.pk, "gpu-pool-9"])
    assert browser_client.get(missing).status_code == 404
    from dra_web.runs.models import Run

    queued = Run.objects.create(snapshot=snapshot, owner=maria, options={})
    assert browser_client.get(reverse("pages:download-result", args=[queued.pk])).status_code == 404


def test_downloads_require_login(client, run):
    response = client.get(reverse("pages:download-result", args=[run.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_stable_links_to_pods_nodeclaims_and_tree_nodes(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    # A pod and a NodeClaim each have an anchor and a copy-link control pointing at it.
    assert 'id="pod-ml-infer-a100"' in html and 'data-copy-link="#pod-ml-infer-a100"' in html
    assert 'id="nc-gpu-pool-1"' in html and 'data-copy-link="#nc-gpu-pool-1"' in html
    # Tree nodes are linked as #node-ID (tree.js reveals them); the NodeClaims the run
    # creates are handed to the tree so it names them the way the pages do.
    assert 'data-node-claims="[&quot;gpu-pool-1&quot;]"' in html


def test_times_are_utc_time_elements(browser_client, run):
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    times = re.findall(r'<time datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)" title="([^"]+)"', html)
    assert len(times) >= 3  # queued, started, finished
    assert all(title.endswith("UTC") for _, title in times)
    dashboard = _html(browser_client.get(reverse("pages:dashboard")))
    assert re.search(r'<time datetime="[^"]+Z"', dashboard)


def test_object_yaml_hides_managed_fields_with_a_toggle(browser_client, snapshot):
    html = _html(
        browser_client.get(reverse("pages:snapshot", args=[snapshot.pk]), {"kind": "Node"})
    )
    default = html[html.index('class="code object-yaml"') :]
    default = default[: default.index("</pre>")]
    assert NODE in default and "managedFields" not in default and "kubelet" not in default
    toggle = html[html.index('class="managed-fields"') :]
    assert "Show managedFields" in toggle and "manager: kubelet" in toggle


def test_favicon_is_linked_and_served(browser_client, client):
    html = _html(browser_client.get(reverse("pages:dashboard")))
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    assert '<link rel="icon" href="/favicon.ico" sizes="16x16 32x32 48x48">' in html
    response = client.get("/favicon.ico")  # no login needed, static files served or not
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    body = response.content
    assert body[:4] == b"\x00\x00\x01\x00" and body.count(b"\x89PNG") == 3  # 16, 32, 48 px


def test_cancel_button_calls_the_runs_service(browser_client, snapshot, maria, monkeypatch):
    from dra_web.runs import services
    from dra_web.runs.models import Run

    run = Run.objects.create(snapshot=snapshot, owner=maria, options={})
    html = _html(browser_client.get(reverse("pages:run", args=[run.pk])))
    assert f'action="{reverse("pages:cancel-run", args=[run.pk])}"' in html
    calls = []
    # The runs service's cancel_run (web engineer) is stood in for by a double recording
    # the call; the page must pass the run and the user, and say what happened.
    monkeypatch.setattr(
        services, "cancel_run", lambda r, u: calls.append((r.pk, u.username)), raising=False
    )
    response = browser_client.post(reverse("pages:cancel-run", args=[run.pk]), follow=True)
    assert calls == [(run.pk, "maria")]
    assert "is being cancelled" in response.content.decode()


def test_cancel_refused_by_the_service_is_a_message_not_a_500(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    run = Run.objects.create(snapshot=snapshot, owner=maria, options={}, status=Run.SUCCEEDED)
    response = browser_client.post(reverse("pages:cancel-run", args=[run.pk]), follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert f"Could not cancel run #{run.pk}: run {run.pk} is succeeded" in page


def test_cancel_needs_a_post(browser_client, run):
    assert browser_client.get(reverse("pages:cancel-run", args=[run.pk])).status_code == 405
