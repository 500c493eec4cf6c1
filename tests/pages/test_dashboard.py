"""The dashboard: snapshots and runs with live status, upload, start a run, review filter."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from allocator.featuregates import GATE_NAMES, preset
from dra_web.reviews import services as review_services
from tests.pages.builders import FIXTURE, make_run


def test_login_page_is_styled_and_logs_in(client, maria):
    page = client.get(reverse("login"))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="login-card"' in html and 'name="username"' in html and 'name="password"' in html
    response = client.post(
        reverse("login"), {"username": "maria", "password": "maria-password-1", "next": "/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    bad = client.post(reverse("login"), {"username": "maria", "password": "wrong"})
    assert "didn't match" in bad.content.decode()


def test_dashboard_requires_login(client, db):
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_dashboard_lists_runs_snapshots_and_gate_switches(browser_client, run):
    html = browser_client.get("/").content.decode()
    assert f"Run #{run.pk}" in html and "gpu-training" in html
    assert '<span class="badge succeeded">succeeded</span>' in html
    # Each gate: the chosen version's default unless set on or off for this run.
    for gate in GATE_NAMES:
        assert (
            f'<select id="gate-{gate}" name="gate-{gate}"><option value="" selected>default' in html
        )
    assert '<option value="auto" selected>the snapshot' in html
    assert 'type="file" name="files" id="id_files" multiple' in html
    assert "data-dropzone" in html


def test_running_runs_poll_and_show_progress(browser_client, snapshot, maria):
    from dra_web.runs.models import Run

    queued = Run.objects.create(
        snapshot=snapshot, owner=maria, status="running", progress_done=3, progress_total=4
    )
    html = browser_client.get("/").content.decode()
    assert f'hx-get="/runs/{queued.pk}/row/" hx-trigger="every 1s"' in html
    row = browser_client.get(reverse("pages:run-row", args=[queued.pk])).content.decode()
    assert 'style="width: 75%"' in row and "3/4 pods" in row
    queued.status = "succeeded"
    queued.save()
    row = browser_client.get(reverse("pages:run-row", args=[queued.pk])).content.decode()
    assert "hx-trigger" not in row


def test_upload_several_files_through_the_form(browser_client, maria):
    text = FIXTURE.read_text()
    docs = text.split("\n---\n")
    first, second = "\n---\n".join(docs[:8]), "\n---\n".join(docs[8:])
    response = browser_client.post(
        reverse("pages:upload"),
        {
            "files": [
                SimpleUploadedFile("nodes.yaml", first.encode(), "application/yaml"),
                SimpleUploadedFile("workloads.yaml", second.encode(), "application/yaml"),
            ],
            "name": "split upload",
        },
    )
    assert response.status_code == 302
    page = browser_client.get(response["Location"]).content.decode()
    assert "split upload" in page
    assert "nodes.yaml, workloads.yaml" in page
    assert "16 objects" in page


def test_a_bad_upload_shows_the_loaders_problems_and_stores_nothing(browser_client, maria):
    from dra_web.snapshots.models import Snapshot

    bad = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu, namespace: ml}\n"
        "spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: g, count: 0}\n"
    )
    response = browser_client.post(
        reverse("pages:upload"), {"files": [SimpleUploadedFile("claims.yaml", bad.encode())]}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "The snapshot was not stored" in html
    assert "claims.yaml doc" in html and "count" in html
    assert not Snapshot.objects.exists()


def test_start_run_with_options(
    browser_client, snapshot, settings, django_capture_on_commit_callbacks
):
    from dra_web.runs.models import Run

    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 0
    response = browser_client.post(
        reverse("pages:start-run"),
        {
            "snapshot": snapshot.pk,
            "timeout": "2.5",
            "kubernetes_version": "1.36",
            "gate-DRADeviceTaints": "off",
            "gate-DRAListTypeAttributes": "on",
            "disrupt_nodes": ["ip-10-0-1-7.us-west-2.compute.internal"],
            "trace": "on",
        },
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.options["timeout"] == 2.5
    assert run.options["kubernetesVersion"] == "1.36"
    assert run.options["featureGates"] == {
        **preset("1.36"),
        "DRADeviceTaints": False,
        "DRAListTypeAttributes": True,
    }
    assert run.options["disrupt"] == ["ip-10-0-1-7.us-west-2.compute.internal"]


def test_bad_run_options_come_back_as_a_message(browser_client, snapshot):
    from dra_web.runs.models import Run

    response = browser_client.post(
        reverse("pages:start-run"), {"snapshot": snapshot.pk, "timeout": "-1"}, follow=True
    )
    assert "timeout" in response.content.decode()
    assert not Run.objects.exists()


def test_filter_runs_and_pods_by_open_review(browser_client, snapshot, maria):
    reviewed = make_run(snapshot, maria)
    quiet = make_run(snapshot, maria)
    review_services.add_comment(reviewed, "ml/infer-a100", maria, "No A100 in any instance type?")
    html = browser_client.get("/?review=open").content.decode()
    assert f"Run #{reviewed.pk}</a>" in html
    assert f"Run #{quiet.pk}</a>" not in html
    assert f'href="/runs/{reviewed.pk}/pods/ml/infer-a100/review/"' in html
    everything = browser_client.get("/").content.decode()
    assert f"Run #{quiet.pk}</a>" in everything
