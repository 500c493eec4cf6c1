"""``kubectl dra why --open URL``: the snapshot is uploaded to a running dra-web (a Django live
server, over HTTP), a run is started and the link to the pod on it is printed."""

from __future__ import annotations

import io

import pytest

from dra_web.accounts.services import token_for
from dra_web.kubectl_dra.cli import main
from dra_web.kubectl_dra.server import ServerError, open_on_server
from dra_web.runs.models import Run
from dra_web.snapshots.models import Snapshot
from tests.web.fake_apiserver import FakeApiServer

from .clusters import karpenter_gpu_pool, routes


@pytest.fixture
def server_user(transactional_db, django_user_model, settings):
    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 0  # eager runs: no heartbeat thread
    return django_user_model.objects.create_user("kai", password="kai-password-1")


@pytest.fixture
def karpenter_config(tmp_path):
    with FakeApiServer(routes(karpenter_gpu_pool())) as server:
        path = tmp_path / "config"
        path.write_text(server.kubeconfig())
        yield str(path)


def test_open_uploads_starts_a_run_and_links_the_pod(live_server, server_user, karpenter_config):
    token = token_for(server_user).key
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["why", "-n", "ml", "train-0", "--kubeconfig", karpenter_config, "--open", live_server.url],
        stdout=out,
        stderr=err,
        environ={"DRA_WEB_TOKEN": token},
    )
    assert code == 0, err.getvalue()
    run = Run.objects.get()
    link = f"{live_server.url}/runs/{run.pk}/#pod-ml-train-0"
    assert f"Opened: {link}  (snapshot #{run.snapshot_id}, run #{run.pk})" in out.getvalue()
    snapshot = Snapshot.objects.get(pk=run.snapshot_id)
    assert snapshot.owner == server_user
    assert snapshot.file_names == ["cluster-kind-gpu.json", "catalog-aws-us-west-2.yaml"]
    assert snapshot.name == "kubectl dra why ml/train-0 (kind-gpu)"
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED, run.error
    # The server's run answers as the plugin did.
    entry = next(p for p in run.result["pods"] if p["pod"] == "ml/train-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}


def test_a_wrong_token_is_a_clear_error_and_nothing_is_stored(
    live_server, server_user, karpenter_config
):
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["why", "-n", "ml", "train-0", "--kubeconfig", karpenter_config],
        stdout=out,
        stderr=err,
        environ={},
    )
    assert code == 0  # without --open nothing goes to a server
    code = main(
        [
            "why",
            "-n",
            "ml",
            "train-0",
            "--kubeconfig",
            karpenter_config,
            "--open",
            live_server.url,
            "--token",
            "not-a-token",
        ],
        stdout=io.StringIO(),
        stderr=err,
        environ={},
    )
    assert code == 2
    assert "upload refused (HTTP 401" in err.getvalue()
    assert "check --token / DRA_WEB_TOKEN" in err.getvalue()
    assert not Snapshot.objects.exists()


def test_a_server_that_does_not_answer_is_a_clear_error():
    dead = FakeApiServer({})
    url = dead.url
    dead.server.server_close()
    with pytest.raises(ServerError, match="cannot reach the dra-web server"):
        open_on_server(url, "t", [("a.yaml", b"x")], "n", {}, "ml/p")


def test_a_refused_run_keeps_the_snapshot_and_says_so():
    answers = iter([(201, b'{"id": 7}'), (400, b'{"detail": "options.timeout: must be > 0"}')])
    with pytest.raises(ServerError, match=r"snapshot #7 stored, but the run was refused: HTTP 400"):
        open_on_server(
            "http://dra.example.com/",
            "t",
            [("a.yaml", b"x")],
            "n",
            {"timeout": 0},
            "ml/p",
            transport=lambda *_: next(answers),
        )
