"""Adding the AWS GPU catalog to an upload, as a user does it on the dashboard, then running
the snapshot: the pending pod gets a NodeClaim of a catalog instance type."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.screens import shot

CLUSTER = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g6e]}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: four-l40s, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, count: 4}
---
apiVersion: v1
kind: Pod
metadata: {name: finetune-0, namespace: ml, uid: 3c1f4b2a-0d7e-4e8a-9b1c-5f6a7b8c9d01}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.08-py3
    resources: {requests: {cpu: "8", memory: 64Gi}}
  resourceClaims:
  - {name: gpus, resourceClaimTemplateName: four-l40s}
"""


def test_upload_with_the_catalog_and_run(logged_in, tmp_path: Path):
    page = logged_in
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    page.set_input_files("#id_files", str(cluster))
    page.click("details.catalog-pick > summary")
    page.select_option("#id_catalog_region", "us-west-2")
    page.check("input[name=catalog_families][value=g6e]")
    shot(page, "dashboard-catalog")
    page.fill("#id_name", "finetune with catalog")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/snapshots/\d+/$"))
    expect(page.locator(".stats")).to_contain_text("InstanceType")
    page.click("form.run-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("body")).to_contain_text("g6e.12xlarge", timeout=30_000)
    shot(page, "run-with-catalog")
