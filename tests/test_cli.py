"""The command line (CONTRACT section 2): exit codes, --json, --trace, never a traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from allocator.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "examples" / "demo-snapshot.yaml")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_module_entry_point_runs_without_django():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, sys; sys.argv = ['allocator', 'simulate', "
            f"{DEMO!r}, '--json']; runpy.run_module('allocator', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["schemaVersion"] == "v1"
    assert proc.stderr == ""  # no progress bar: stderr is not a terminal
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import io, sys; from allocator.cli import main; "
            f"code = main(['simulate', {DEMO!r}], stdout=io.StringIO()); "
            "print(code, 'django' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert check.stdout.split() == ["0", "False"]


def test_only_a_one_shot_process_freezes_its_snapshot_for_the_collector():
    # ``python -m allocator`` ends with its command: the snapshot it loaded is frozen, so the
    # collector never walks it again. A library call (the web, tests) must not freeze the
    # caller's objects.
    import gc

    frozen = gc.get_freeze_count()
    assert main(["simulate", DEMO], stdout=io.StringIO()) == 0
    assert gc.get_freeze_count() == frozen
    try:
        assert main(["simulate", DEMO], stdout=io.StringIO(), one_shot=True) == 0
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal():
    err = _Terminal()
    assert main(["simulate", DEMO], stdout=io.StringIO(), stderr=err) == 0
    text = err.getvalue()
    assert "\r[" in text and "pod attempts" in text and text.endswith("\n")
    quiet = io.StringIO()
    assert main(["simulate", DEMO], stdout=io.StringIO(), stderr=quiet) == 0
    assert quiet.getvalue() == ""


def test_human_summary_is_an_aligned_table():
    code, out, err = cli("simulate", DEMO)
    assert code == 0 and err == ""
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("POD"))
    assert header.split() == ["POD", "SCHEDULED", "TARGET", "DEVICES"]
    row = next(line for line in lines if line.startswith("inference/sdxl-l40s-0"))
    assert row.index("Node gpu-node-c") == header.index("TARGET")
    assert "New NodeClaims:" in out and "gpu-h100-1" in out and "$" in out
    assert "Failures:" in out and "exceeding maximum" in out


def test_json_lists_every_pending_pod_in_queue_order_with_gates():
    code, out, _ = cli("simulate", DEMO, "--json", "--feature-gates", "DRADeviceTaints=false")
    assert code == 0
    result = json.loads(out)
    assert result["featureGates"]["DRADeviceTaints"] is False
    assert result["featureGates"]["DRAAdminAccess"] is True
    cpus = [p["pod"] for p in result["pods"]]
    assert cpus[0] == "ml-training/llama-train-0"
    assert result["stats"]["pods"] == len(result["pods"]) >= 26
    assert result["stats"]["dfsNodes"] > 0


def test_trace_file_is_written(tmp_path):
    trace_file = tmp_path / "trace.json"
    code, out, _ = cli("simulate", DEMO, "--trace", str(trace_file), "--timeout", "2")
    assert code == 0 and out
    trace = json.loads(trace_file.read_text())
    kinds = {n["kind"] for n in trace["nodes"]}
    assert {"pod", "target", "instanceType", "claim", "device"} <= kinds
    assert trace["omitted"] == 0


def test_disrupt_reports_consolidation():
    code, out, _ = cli("simulate", DEMO, "--disrupt", "gpu-node-a", "--json")
    assert code == 0
    assert json.loads(out)["disruption"]["candidates"] == ["gpu-node-a"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "missing.yaml"], "missing.yaml: no such file"),
        (["validate", str(ROOT / "examples")], "is a directory"),
        (["simulate", DEMO, "--timeout", "-1"], "must be a number of seconds > 0"),
        (["simulate", DEMO, "--feature-gates", "DRANope=true"], "unknown feature gate"),
        (["simulate", DEMO, "--feature-gates", "DRADeviceTaints=maybe"], "NAME=true|false"),
        (["simulate", DEMO, "--disrupt", "no-such-node"], "node 'no-such-node' not found"),
        (["simulate", DEMO, "--trace", "/nonexistent-dir/trace.json"], "does not exist"),
        (["frobnicate"], "invalid choice"),
        (["simulate"], "required"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(args, message):
    code, out, err = cli(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and out == ""


def test_bad_snapshot_exits_2_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu, namespace: default}\n"
        "spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com, count: 0}\n"
    )
    for command in ("simulate", "validate"):
        code, out, err = cli(command, str(bad))
        assert code == 2
        assert "bad.yaml" in err and "ResourceClaim default/gpu" in err
        assert "count" in err and "Traceback" not in err
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("kind: [unclosed\n")
    code, _, err = cli("simulate", str(garbage))
    assert code == 2 and "garbage.yaml" in err and "Traceback" not in err


def test_validate_ok_prints_counts():
    code, out, err = cli("validate", DEMO)
    assert code == 0 and err == ""
    assert out.startswith("ok: ") and " objects (" in out
    assert "14 InstanceType" in out


def test_skipped_objects_are_warned_about_on_stderr_and_stdout_stays_json(tmp_path):
    """An export from a real cluster holds Deployments, Services and Events: each skipped kind
    is said on standard error (as kubectl warns), a long list cut short."""
    docs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "namespace": "ml"}}
        for i in range(12)
    ]
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "ml"},
            "spec": {"containers": [{"name": "main", "image": "pytorch:2.5"}]},
        }
    )
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    code, out, err = cli("simulate", str(path), "--json")
    assert code == 0
    result = json.loads(out)
    assert len(result["warnings"]) == 12
    lines = err.splitlines()
    assert len(lines) == 11
    assert "Service ml/svc-0: unknown kind Service (v1), skipped" in lines[0]
    assert lines[-1] == "warning: ... and 2 more (see --json: warnings)"


EKS = ROOT / "tests" / "fixtures" / "pages" / "eks-gpu.yaml"


def _row(out: str, pod: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(pod + " "))


def test_summary_names_the_driver_of_every_device():
    code, out, _ = cli("simulate", str(EKS))
    assert code == 0
    node = "ip-192-168-12-34.ec2.internal"
    assert _row(out, "ml-research/finetune-0").endswith(f"gpu.nvidia.com/{node}: gpu-0, gpu-1")
    assert _row(out, "ml-research/train.v2-0").endswith(f"gpu.nvidia.com/{node}: gpu-2")
    # A new NodeClaim's devices come from an instance type's template slices.
    assert _row(out, "ml-research/infer-l4-1").endswith(
        "g6.2xlarge gpu.nvidia.com: gpu-0 (+1 more types)"
    )


def test_summary_gives_each_failed_pod_its_error_on_one_line():
    code, out, _ = cli("simulate", str(EKS))
    result = json.loads(cli("simulate", str(EKS), "--json")[1])
    (failed,) = [p for p in result["pods"] if not p["scheduled"]]
    line = next(x for x in out.splitlines() if x.startswith("ml-research/llm-h100-0: "))
    error = line.removeprefix("ml-research/llm-h100-0: ")
    # Karpenter's opening and the decisive cause at the end, cut between words only.
    assert error.startswith("could not schedule pod, ")
    assert error.endswith('(8 rejected by selector: productName is "NVIDIA A100-SXM4-40GB")')
    assert len(error) <= 200 < len(failed["error"])
    head, _, tail = error.partition(" ... ")
    words = failed["error"].split()
    assert head.split() == words[: len(head.split())]
    assert tail.split() == words[-len(tail.split()) :]


def test_summary_cuts_reasons_between_words():
    _, out, _ = cli("simulate", str(EKS))
    text = json.loads(cli("simulate", str(EKS), "--json")[1])
    said = [r["reason"] for p in text["pods"] for r in p.get("reasons") or []]
    said += [p.get("error") or "" for p in text["pods"]]
    said += [(p.get("cause") or {}).get("message") or "" for p in text["pods"]]
    words = {w.rstrip(",;") for line in said for w in line.split()}
    failures = out[out.index("Failures:") :].split("  why:")[0]
    for line in failures.splitlines()[1:]:
        for word in line.split()[1:]:
            known = {"...", "TARGET", "REASON", "cause:", "alike)"}
            assert word.rstrip(",;") in words or word in known or word.startswith("(+"), line


def test_summary_says_when_the_snapshot_has_no_node_pool(tmp_path):
    import yaml

    docs = [d for d in yaml.safe_load_all(EKS.read_text()) if d["kind"] != "NodePool"]
    path = tmp_path / "no-nodepool.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, out, _ = cli("simulate", str(path))
    assert code == 0
    assert "No NodePool in the snapshot" in out
    assert "No NodePool" not in cli("simulate", str(EKS))[1]


def test_summary_names_the_decisive_cause_of_a_failed_pod():
    """An H100 request on a cluster of A100s and A10Gs: the line under the error says no device
    matches the selector, and what the devices are, before any word about holders."""
    _, out, _ = cli("simulate", str(EKS))
    text = json.loads(cli("simulate", str(EKS), "--json")[1])
    failed = next(p for p in text["pods"] if (p.get("cause") or {}).get("reason") == "selector")
    block = out[out.index(f"{failed['pod']}: ") :]
    cause_line = block.splitlines()[1]
    assert cause_line.startswith("  cause: no device in reach matches the selector")
    assert "NVIDIA A100-SXM4-40GB" in cause_line


def test_a_json_snapshot_runs_without_pyyaml_or_the_catalog(tmp_path):
    # A process pays for what it imports: PyYAML alone costs 10 ms (its reader compiles a
    # large character class), the catalog 8 ms. A JSON snapshot needs no PyYAML, and the
    # help's default region must not load the catalog.
    import yaml

    snapshot = tmp_path / "demo.json"
    snapshot.write_text(json.dumps(list(yaml.safe_load_all(Path(DEMO).read_text()))))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import io, sys; from allocator.cli import main; "
            f"code = main(['simulate', {str(snapshot)!r}, '--json'], stdout=io.StringIO()); "
            "print(code, *sorted({'yaml', 'allocator.catalog.aws'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.stdout.split() == ["0"], proc.stderr
