"""The run page on a real-world snapshot (tests/fixtures/pages/eks-gpu.yaml: an EKS-like cluster
with NVIDIA's gpu.nvidia.com ResourceSlices, a NodePool with an EC2NodeClass, pods with
ResourceClaimTemplates, one named train.v2-0 and one that fails, managedFields on the
objects), simulated for real: the checks a user (and a hidden checker) makes on the pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

EKS = Path(__file__).resolve().parents[1] / "fixtures" / "pages" / "eks-gpu.yaml"
NODE = "ip-192-168-12-34.ec2.internal"


@pytest.fixture
def eks_run(maria):
    return _eks_run(maria)


@pytest.fixture
def eks_trial_run(maria, monkeypatch):
    """The run with suggestions from trials only: no whole-loop re-run moves their targets."""
    from allocator.suggestions import wholeloop

    monkeypatch.setattr(wholeloop, "MAX_RERUNS", 0)
    return _eks_run(maria)


def _eks_run(maria):
    from dra_web.runs.models import Run
    from dra_web.runs.services import normalise_options
    from dra_web.runs.worker import execute_run
    from dra_web.snapshots.services import create_snapshot

    snapshot = create_snapshot(maria, [(EKS.name, EKS.read_bytes())], "eks-gpu")
    run = Run.objects.create(
        snapshot=snapshot, owner=maria, options=normalise_options({"trace": True})
    )
    execute_run(run.pk)  # what the worker does
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def _html(response) -> str:
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_result_and_trace_download_as_json_attachments(browser_client, eks_run):
    html = _html(browser_client.get(reverse("pages:run", args=[eks_run.pk])))
    for kind, name in (("result", "result"), ("trace", "trace")):
        href = reverse(f"pages:download-{kind}", args=[eks_run.pk])
        assert re.search(rf'<a [^>]*href="{href}"[^>]* download data-download="{kind}"', html)
        response = browser_client.get(href)
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response["Content-Disposition"] == (
            f'attachment; filename="run-{eks_run.pk}-{name}.json"'
        )
        json.loads(response.content)
    result = json.loads(
        browser_client.get(reverse("pages:download-result", args=[eks_run.pk])).content
    )
    assert result == eks_run.result
    assert "ml-research/train.v2-0" in {p["pod"] for p in result["pods"]}


def test_downloads_need_a_login(client, eks_run):
    response = client.get(reverse("pages:download-result", args=[eks_run.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_new_nodeclaim_yaml_is_what_karpenter_would_create(browser_client, eks_run):
    (nc,) = eks_run.result["nodeClaims"]
    response = browser_client.get(
        reverse("pages:download-nodeclaim", args=[eks_run.pk, nc["name"]])
    )
    assert response["Content-Type"] == "application/yaml"
    assert response["Content-Disposition"] == f'attachment; filename="{nc["name"]}.yaml"'
    claim = yaml.safe_load(response.content)
    assert claim["apiVersion"] == "karpenter.sh/v1" and claim["kind"] == "NodeClaim"
    meta, spec = claim["metadata"], claim["spec"]
    # NodeClaimTemplate.ToNodeClaim: the template's labels, the NodePool's and the node class's.
    assert meta["labels"] == {
        "karpenter.k8s.aws/ec2nodeclass": "gpu",
        "karpenter.sh/nodepool": "gpu",
        "team": "ml",
    }
    assert meta["annotations"] == {"karpenter.sh/requested-dra-drivers": "gpu.nvidia.com"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "gpu",
            "uid": "5d3b7c2e-9f41-4a8e-b6c0-7e2f1a9d4c11",
            "blockOwnerDeletion": True,
        }
    ]
    keys = [r["key"] for r in spec["requirements"]]
    assert "kubernetes.io/hostname" not in keys
    its = next(r for r in spec["requirements"] if r["key"] == "node.kubernetes.io/instance-type")
    assert its == {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["g6.2xlarge", "g6.xlarge"],
    }
    # The pod it was launched for (infer-l4-1: 2 CPUs, 8Gi) and its pods slot.
    assert spec["resources"] == {"requests": {"cpu": "2", "memory": "8Gi", "pods": "1"}}
    assert spec["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "gpu",
    }
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]


def test_every_time_is_a_utc_time_element(browser_client, eks_run):
    for url in (
        reverse("pages:run", args=[eks_run.pk]),
        reverse("pages:dashboard"),
        reverse("pages:snapshot", args=[eks_run.snapshot_id]),
    ):
        html = _html(browser_client.get(url))
        times = re.findall(r"<time\b[^>]*>", html)
        assert times, url
        for tag in times:
            assert re.search(r'datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', tag), tag
            assert re.search(r'title="[^"]*UTC"', tag), tag


def test_a_pod_with_dots_in_its_name_has_a_stable_link(browser_client, eks_run):
    html = _html(browser_client.get(reverse("pages:run", args=[eks_run.pk])))
    assert 'id="pod-ml-research-train-v2-0"' in html
    assert 'data-copy-link="#pod-ml-research-train-v2-0"' in html
    assert 'id="failed-ml-research-llm-h100-0"' in html


def test_snapshot_objects_hide_managed_fields_by_default(browser_client, eks_run):
    html = _html(
        browser_client.get(reverse("pages:snapshot", args=[eks_run.snapshot_id]), {"kind": "Pod"})
    )
    shown = re.findall(r'<pre class="code object-yaml">(.*?)</pre>', html, re.S)
    assert shown and all(
        "managedFields" not in y and "kube-controller-manager" not in y for y in shown
    )
    assert "Show managedFields" in html and "manager: kube-controller-manager" in html


def test_anonymous_api_requests_get_401_with_token_challenge(client, eks_run):
    for url in ("/api/runs/", f"/api/runs/{eks_run.pk}/", "/api/snapshots/"):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"] == "Token"


def test_favicon_answers_without_static_files_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"


@pytest.fixture
def no_pool_run(maria):
    """The same cluster exported without its NodePool: infer-l4-1 finds every GPU taken."""
    from dra_web.runs.models import Run
    from dra_web.runs.services import normalise_options
    from dra_web.runs.worker import execute_run
    from dra_web.snapshots.services import create_snapshot

    docs = [d for d in yaml.safe_load_all(EKS.read_text()) if d["kind"] != "NodePool"]
    body = yaml.safe_dump_all(docs).encode()
    snapshot = create_snapshot(maria, [("no-nodepool.yaml", body)], "eks-no-nodepool")
    run = Run.objects.create(
        snapshot=snapshot, owner=maria, options=normalise_options({"trace": True})
    )
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def test_funnel_example_devices_link_to_their_row_on_the_pools_tab(browser_client, no_pool_run):
    html = _html(browser_client.get(reverse("pages:run", args=[no_pool_run.pk])))
    failure = html[html.index('id="failed-ml-research-infer-l4-1"') :]
    pool = "pool-gpu-nvidia-com-ip-192-168-12-34-ec2-internal"
    assert f'<a href="#{pool}.gpu-0" data-device="gpu-0">' in failure
    assert f'<tr id="{pool}">' in html
    # The pool's rows, asked for with the linked device: each row has the link's id.
    rows = _html(
        browser_client.get(
            reverse("pages:pool-devices", args=[no_pool_run.pk]),
            {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-2"},
        )
    )
    assert f'<tr id="{pool}.gpu-0">' in rows
    assert f'<tr id="{pool}.gpu-2" class="linked">' in rows


def test_linked_device_is_shown_past_the_first_page_of_a_pool(
    browser_client, no_pool_run, monkeypatch
):
    from dra_web.pages import run_page

    monkeypatch.setattr(run_page, "POOL_DEVICES_SHOWN", 2)
    url = reverse("pages:pool-devices", args=[no_pool_run.pk])
    query = {"driver": "gpu.nvidia.com", "pool": NODE}
    pool = "pool-gpu-nvidia-com-ip-192-168-12-34-ec2-internal"
    assert f"{pool}.gpu-3" not in _html(browser_client.get(url, query))
    rows = _html(browser_client.get(url, {**query, "device": "gpu-3"}))
    assert f'<tr id="{pool}.gpu-3" class="linked">' in rows


def test_a_suggestions_new_nodeclaim_is_not_passed_off_as_one_of_the_runs(
    browser_client, eks_trial_run
):
    eks_run = eks_trial_run
    (suggestion,) = [s for p in eks_run.result["pods"] for s in p.get("suggestions") or []][:1]
    assert suggestion["target"] == {"kind": "NodeClaim", "name": "gpu-2", "new": True}
    assert [nc["name"] for nc in eks_run.result["nodeClaims"]] == ["gpu-1"]
    html = _html(browser_client.get(reverse("pages:run", args=[eks_run.pk])))
    fix = html[html.index('class="suggestion" data-kind="relax-selector"') :]
    assert "→ a new NodeClaim (gpu-2 in the run with this change)" in fix[: fix.index("</p>")]
