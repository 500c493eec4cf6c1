"""The run page of the dra-example-driver's extended resource demo (DRAExtendedResource)."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "features-extended-resources.yaml"


def _simulated_run(owner):
    from allocator.simulation import SimulationOptions, simulate
    from allocator.snapshot import load_paths
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output
    from dra_web.snapshots.services import create_snapshot

    snapshot = create_snapshot(owner, [(EXAMPLE.name, EXAMPLE.read_bytes())], "extended")
    out = simulate(load_paths([str(EXAMPLE)]), SimulationOptions(trace=True))
    run = Run.objects.create(snapshot=snapshot, owner=owner, options={"trace": True})
    store_output(run.pk, out.result, out.trace)
    run.refresh_from_db()
    return snapshot, run


def test_the_run_page_shows_the_schedulers_claim_and_what_it_asks_for(browser_client, maria):
    snapshot, run = _simulated_run(maria)
    page = browser_client.get(f"/runs/{run.id}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "gpu-test-ext/gpu-test-0-extended-resources" in text
    assert "the pod&#x27;s extended resources (made by the scheduler)" in text
    assert "container-0-request-1" in text
    assert "The claim&#x27;s spec is not in the snapshot." not in text
    snap_page = browser_client.get(f"/snapshots/{snapshot.id}/")
    assert snap_page.status_code == 200
    assert "example.com/gpu" in snap_page.content.decode()


def test_the_intent_follows_the_device_class_that_names_the_resource() -> None:
    from allocator.features.extendedresources import intent_devices

    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "2"}}}]},
    }
    cls = {
        "metadata": {"name": "gpu.example.com"},
        "spec": {"extendedResourceName": "example.com/gpu"},
    }
    assert intent_devices(pod, [cls]) == {
        "requests": [
            {
                "name": "container-0-request-0",
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "allocationMode": "ExactCount",
                    "count": 2,
                },
            }
        ]
    }
    assert intent_devices(pod, []) is None
