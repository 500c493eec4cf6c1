"""The snapshot page: objects by kind with counts, YAML, DeviceClass selectors as CEL."""

from __future__ import annotations

from django.urls import reverse


def test_objects_by_kind_with_counts_and_yaml(browser_client, snapshot):
    html = browser_client.get(reverse("pages:snapshot", args=[snapshot.pk])).content.decode()
    assert '<div class="value">5</div><div class="label">Pod</div>' in html
    assert '<div class="value">2</div><div class="label">InstanceType</div>' in html
    # The kind with most objects is shown first, each object as YAML.
    assert "ml/train-0" in html
    assert "resourceClaimTemplateName: one-h100" in html


def test_other_kind_and_pagination_keep_to_that_kind(browser_client, snapshot):
    url = reverse("pages:snapshot", args=[snapshot.pk])
    html = browser_client.get(url, {"kind": "InstanceType"}).content.decode()
    assert "p5.48xlarge" in html and "price: 98.32" in html
    assert "ml/train-0</summary>" not in html
    assert browser_client.get(url, {"kind": "Secret"}).status_code == 404


def test_device_class_selectors_are_shown_as_cel(browser_client, snapshot):
    html = browser_client.get(reverse("pages:snapshot", args=[snapshot.pk])).content.decode()
    assert '<pre class="code cel" aria-label="CEL selector of gpu.nvidia.com">' in html
    # Highlighted, and wrapping only between the parts of a path (after a dot).
    assert (
        '<span class="kw">device</span>.<wbr>driver == '
        '<span class="str">&quot;gpu.<wbr>nvidia.<wbr>com&quot;</span>'
    ) in html


def test_snapshot_page_starts_a_run_with_its_nodes_as_disruption_candidates(
    browser_client, snapshot
):
    html = browser_client.get(reverse("pages:snapshot", args=[snapshot.pk])).content.decode()
    assert f'<input type="hidden" name="snapshot" value="{snapshot.pk}">' in html
    assert 'name="disrupt_nodes" value="ip-10-0-1-7.us-west-2.compute.internal"' in html


def test_warnings_are_listed(browser_client, maria):
    from dra_web.snapshots.services import create_snapshot

    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpu-operator-config, namespace: ml}\n"
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: nic.example.com}\n"
        "spec:\n  selectors:\n  - cel: {expression: 'device.driver == \"nic.example.com\"'}\n"
    )
    snap = create_snapshot(maria, [("mixed.yaml", text)], "with warnings")
    html = browser_client.get(reverse("pages:snapshot", args=[snap.pk])).content.decode()
    assert "Warnings" in html and "ConfigMap" in html
