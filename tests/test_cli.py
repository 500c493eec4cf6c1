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
