"""``kubectl dra why POD`` against recorded clusters (the fake API server the import tests use):
the right cause, the holder, the fixes and what Karpenter would launch; exit codes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dra_web.kubectl_dra.cli import main
from tests.web.fake_apiserver import FakeApiServer

from .clusters import NODE, held_gpus, karpenter_gpu_pool, routes


def kubectl_dra(*args: str, environ: dict | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err, environ=environ or {})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def kubeconfig_for(tmp_path):
    def write(server: FakeApiServer, namespace: str | None = None) -> str:
        text = server.kubeconfig()
        if namespace:
            text = text.replace(
                "    user: admin\n", f"    user: admin\n    namespace: {namespace}\n"
            )
        path = tmp_path / "config"
        path.write_text(text)
        return str(path)

    return write


@pytest.fixture
def held(kubeconfig_for):
    with FakeApiServer(routes(held_gpus())) as server:
        yield kubeconfig_for(server)


@pytest.fixture
def karpenter(kubeconfig_for):
    with FakeApiServer(routes(karpenter_gpu_pool())) as server:
        yield kubeconfig_for(server)


def test_a_pod_waiting_for_held_gpus_names_the_holders_and_the_fix(held):
    code, out, err = kubectl_dra("why", "-n", "ml", "train-0", "--kubeconfig", held)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Pod ml/train-0 (context kind-gpu)"
    assert lines[1] == "Placed: no"
    # The result's decisive cause: the devices are the right model, held by named claims.
    assert lines[2].startswith("Cause: claim ml/train-0-gpu request gpu: 2 devices refused by")
    assert "allocated to claim ml/serve-0-gpu" in lines[2]
    assert lines[3] == (
        "Held by: claim ml/serve-0-gpu, reserved for ml/serve-0; "
        "claim ml/serve-1-gpu, reserved for ml/serve-1"
    )
    assert "  1. [free-device] free 1 devices held by claim ml/serve-0-gpu" in out
    assert "       kubectl delete pod -n ml serve-0" in out
    assert "Karpenter would launch:\n  nothing for this pod" in out
    # No NodePool: no catalog, and the plugin says so on standard error.
    assert "catalog: no Karpenter NodePool" in err


def test_a_pod_that_fits_a_new_nodeclaim_says_what_karpenter_would_launch(karpenter):
    code, out, err = kubectl_dra("why", "pod/train-0", "-n", "ml", "--kubeconfig", karpenter)
    assert code == 0, err
    assert "Placed: yes, on new NodeClaim gpu-1" in out
    assert "Devices: p5.48xlarge gpu.nvidia.com: gpu-0, gpu-1" in out
    assert "  NodeClaim gpu-1 from NodePool gpu" in out
    assert "    instance types, cheapest first: p5.48xlarge $55.04/h" in out
    assert "    cheapest offering: us-west-2a, on-demand" in out
    assert "In all: 1 of 2 pending pods placed, 1 new NodeClaim." in out
    assert "catalog: 2 instance types from the dra-web AWS catalog for us-west-2 (p5" in err


def test_a_selector_no_instance_type_meets_is_the_decisive_cause(karpenter):
    code, out, _ = kubectl_dra("why", "legacy-0", "-n", "ml", "--kubeconfig", karpenter)
    assert code == 0
    cause = next(line for line in out.splitlines() if line.startswith("Cause:"))
    assert cause.startswith("Cause: no device in reach matches the selector of claim ml/legacy-0")
    assert 'productName is "NVIDIA H100 80GB HBM3"' in cause
    assert "[relax-selector]" in out
    # The fix as a JSON patch of the template, which is recreated (its spec is immutable).
    assert "# ResourceClaimTemplate a100: patch of its saved manifest (it is recreated)" in out
    assert '"path":"/spec/spec/devices/requests/0/exactly/selectors' in out
    assert "kubectl delete resourceclaimtemplate -n ml a100" in out


def test_the_contexts_namespace_is_the_default(held, kubeconfig_for):
    with FakeApiServer(routes(held_gpus())) as server:
        config = kubeconfig_for(server, namespace="ml")
        code, out, _ = kubectl_dra("why", "train-0", "--kubeconfig", config)
    assert code == 0 and out.startswith("Pod ml/train-0")


def test_kubeconfig_from_the_environment(held):
    code, out, _ = kubectl_dra("why", "-n", "ml", "train-0", environ={"KUBECONFIG": held})
    assert code == 0 and "Placed: no" in out


def test_a_running_pod_is_not_pending_and_says_where_it_runs(held):
    code, out, _ = kubectl_dra("why", "-n", "ml", "serve-1", "--kubeconfig", held)
    assert code == 0
    assert out == f"pod ml/serve-1 is not pending: it runs on node {NODE} (phase Running)\n"


def test_an_unknown_pod_exits_2_and_names_the_namespace_it_is_in(held):
    code, out, err = kubectl_dra("why", "train-0", "--kubeconfig", held)
    assert code == 2 and out == ""
    assert "pod default/train-0 not found in context kind-gpu" in err
    assert "(a pod of that name is in namespace ml)" in err


def test_an_unreachable_cluster_exits_2_without_a_traceback(tmp_path):
    dead = FakeApiServer({})
    path = tmp_path / "config"
    path.write_text(dead.kubeconfig())
    dead.server.server_close()
    code, _, err = kubectl_dra("why", "train-0", "--kubeconfig", str(path))
    assert code == 2
    assert "cannot reach the cluster" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["why", "x", "--kubeconfig", "/nonexistent/config"], "/nonexistent/config: no such file"),
        (["why", "ns/pod", "--kubeconfig", "/dev/null"], "is not a pod name"),
        (["why", "x", "--open", "ftp://dra.example.com"], "is not an http(s) URL"),
        (["why", "x", "--open", "https://dra.example.com"], "a dra-web API token is needed"),
        (["why", "x", "--timeout", "0"], "--timeout: options.timeout"),
        (["why"], "the following arguments are required: POD"),
        (["explain", "x"], "invalid choice: 'explain'"),
    ],
)
def test_bad_input_exits_2_with_the_reason(args, message):
    code, _, err = kubectl_dra(*args)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_no_kubeconfig_at_all_is_a_clear_error(tmp_path):
    code, _, err = kubectl_dra("why", "x", environ={"HOME": str(tmp_path)})
    assert code == 2
    assert f"no kubeconfig found (tried {Path(tmp_path) / '.kube' / 'config'})" in err


def test_a_context_the_kubeconfig_lacks_is_a_clear_error(held):
    code, _, err = kubectl_dra("why", "x", "--kubeconfig", held, "--context", "prod")
    assert code == 2 and "prod" in err


def test_no_catalog_and_an_explicit_region(karpenter):
    code, out, err = kubectl_dra(
        "why", "-n", "ml", "train-0", "--kubeconfig", karpenter, "--no-catalog"
    )
    assert code == 0 and "Placed: no" in out and "catalog:" not in err
    code, out, err = kubectl_dra(
        "why", "-n", "ml", "train-0", "--kubeconfig", karpenter, "--region", "eu-central-1"
    )
    assert code == 0
    assert "cheapest offering: eu-central-1a, on-demand" in out


def test_the_package_installs_the_plugin_as_kubectl_dra():
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).resolve().parents[2]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-dra"] == "dra_web.kubectl_dra.cli:entry_point"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dra_web.kubectl_dra.cli import entry_point; entry_point()",
            "why",
            "a/b/c",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert done.returncode == 2
    assert "is not a pod name" in done.stderr and "Traceback" not in done.stderr


def test_the_clusters_release_sets_the_feature_gates_unless_a_version_is_given():
    from dra_web.kubectl_dra.cli import _options, build_parser

    # An EKS 1.34 control plane says v1.34.2-eks-...: its release's gate defaults apply.
    options, raw = _options(build_parser().parse_args(["why", "p"]), "v1.34.2-eks-113cf36")
    assert raw["kubernetesVersion"] == "1.34"
    assert options.kubernetes_version == "1.34"
    assert not options.gates.enabled("DRADeviceBindingConditions")
    # An explicit --kubernetes-version wins over the cluster's.
    _, raw = _options(
        build_parser().parse_args(["why", "p", "--kubernetes-version", "1.36"]), "v1.34.2"
    )
    assert raw["kubernetesVersion"] == "1.36"
    # A release without a preset leaves every gate on (the debugger's default).
    options, raw = _options(build_parser().parse_args(["why", "p"]), "v1.29.0")
    assert "kubernetesVersion" not in raw and options.gates.enabled("DRADeviceBindingConditions")
