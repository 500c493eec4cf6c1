"""CONTRACT section 2: the command line (flags, exit statuses, messages on stderr)."""

from __future__ import annotations

import json

import pytest

from tests.contract.conftest import (
    ALL_GATES,
    DEMO,
    EXAMPLES,
    claim_template,
    cli,
    gpu_cluster,
    pod,
    simulate,
    subprocess_cli,
    write_yaml,
)


def test_simulate_json_runs_as_a_module_without_django():
    run = subprocess_cli("simulate", EXAMPLES / "features-taints.yaml", "--json")
    assert run.status == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["schemaVersion"] == "v1"
    assert "Traceback" not in run.stderr


def test_simulate_without_json_prints_a_human_summary(demo):
    run = cli("simulate", DEMO)
    assert run.status == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(run.stdout)
    # Every pending pod appears in the summary.
    for entry in demo["pods"]:
        assert entry["pod"] in run.stdout


def test_validate_prints_ok_and_exits_0():
    run = subprocess_cli("validate", DEMO)
    assert run.status == 0 and run.stdout.strip()


@pytest.mark.parametrize(
    "case",
    [
        "missing-file",
        "bad-yaml",
        "bad-json",
        "bad-timeout",
        "zero-timeout",
        "unknown-gate",
        "bad-gate-value",
        "unknown-disrupt-node",
        "no-command",
        "malformed-object",
    ],
)
def test_bad_input_exits_2_with_message_and_no_traceback(tmp_path, case):
    good = EXAMPLES / "features-taints.yaml"
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"apiVersion": "v1", "kind": "Pod",')
    malformed = write_yaml(
        tmp_path,
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "lots"}},
            }
        ],
        "m.yaml",
    )
    argv = {
        "missing-file": ["simulate", tmp_path / "nope.yaml"],
        "bad-yaml": ["simulate", bad_yaml],
        "bad-json": ["validate", bad_json],
        "bad-timeout": ["simulate", good, "--timeout", "soon"],
        "zero-timeout": ["simulate", good, "--timeout", "0"],
        "unknown-gate": ["simulate", good, "--feature-gates", "DRAFancyThing=true"],
        "bad-gate-value": ["simulate", good, "--feature-gates", "DRAAdminAccess=maybe"],
        "unknown-disrupt-node": ["simulate", good, "--disrupt", "no-such-node"],
        "no-command": [],
        "malformed-object": ["simulate", malformed, "--json"],
    }[case]
    run = subprocess_cli(*argv)
    assert run.status == 2, (run.status, run.stderr)
    assert run.stderr.strip(), "message on standard error"
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    if case in ("missing-file",):
        assert "nope.yaml" in run.stderr
    if case == "unknown-gate":
        assert "DRAFancyThing" in run.stderr
    if case == "unknown-disrupt-node":
        assert "no-such-node" in run.stderr
    if case == "malformed-object":
        assert "m.yaml doc 1 Node n1: status.allocatable" in run.stderr


def test_unplaceable_pods_still_exit_0(demo):
    assert demo["stats"]["failed"] > 0  # the demo has pods that cannot be placed
    run = cli("simulate", DEMO, "--json")
    assert run.status == 0


def test_feature_gates_default_all_on_and_listed(demo):
    assert demo["featureGates"] == {name: True for name in ALL_GATES}


def test_feature_gates_flag_sets_effective_values(tmp_path):
    run = cli(
        "simulate",
        EXAMPLES / "features-admin-access.yaml",
        "--json",
        "--feature-gates",
        "DRAAdminAccess=false,DRADeviceTaints=false",
    )
    assert run.status == 0, run.stderr
    gates = run.doc["featureGates"]
    assert set(gates) == set(ALL_GATES)
    assert gates["DRAAdminAccess"] is False and gates["DRADeviceTaints"] is False
    assert all(
        v is True for k, v in gates.items() if k not in ("DRAAdminAccess", "DRADeviceTaints")
    )


def test_gate_off_behaves_as_kube_scheduler(feature_results):
    on = {p["pod"]: p for p in feature_results["admin-access"]["pods"]}
    assert on["monitoring/dcgm-exporter"]["scheduled"] is True
    off = cli(
        "simulate",
        EXAMPLES / "features-admin-access.yaml",
        "--json",
        "--feature-gates",
        "DRAAdminAccess=false",
    )
    pods = {p["pod"]: p for p in off.doc["pods"]}
    assert pods["monitoring/dcgm-exporter"]["scheduled"] is False


def test_trace_flag_writes_the_dfs_trace(tmp_path):
    trace = tmp_path / "t.json"
    run = cli("simulate", EXAMPLES / "features-taints.yaml", "--trace", trace)
    assert run.status == 0
    data = json.loads(trace.read_text())
    nodes = data["nodes"] if isinstance(data, dict) else data
    assert nodes and nodes[0]["kind"] == "pod"


def _pathological_snapshot(tmp_path):
    # Each constraint alone is satisfiable for every pin; jointly by nothing: the DFS has to
    # walk C(20,5)-ish GPU subsets per NIC before giving up.
    from tests.contract.conftest import device_class, namespace, node, request, resource_slice

    gpus = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "resource.kubernetes.io/pcieRoot": {"string": f"pci-{i % 2}"},
                "numaNode": {"int": i % 2},
            },
        }
        for i in range(24)
    ]
    nics = [
        {
            "name": f"nic-{i}",
            "attributes": {
                "resource.kubernetes.io/pcieRoot": {"string": f"pci-{i}"},
                "numaNode": {"int": 1 - i},
            },
        }
        for i in range(2)
    ]
    tmpl = claim_template(
        "pair",
        requests=[
            request("gpu", allocationMode="ExactCount", count=5),
            request("nic", "nic.example.com"),
        ],
    )
    tmpl["spec"]["spec"]["devices"]["constraints"] = [
        {"matchAttribute": "resource.kubernetes.io/pcieRoot"},
        {"matchAttribute": "numaNode"},
    ]
    docs = [
        namespace("default"),
        device_class(),
        device_class("nic.example.com"),
        node("n1", cpu="64", memory="512Gi"),
        resource_slice("n1", gpus, name="n1-gpus"),
        resource_slice("n1", nics, driver="nic.example.com", pool="n1-nics"),
        tmpl,
        pod("p", claims=[{"name": "c", "resourceClaimTemplateName": "pair"}]),
    ]
    return write_yaml(tmp_path, docs)


def test_timeout_flag_is_the_per_allocate_budget(tmp_path):
    path = _pathological_snapshot(tmp_path)
    quick = cli("simulate", path, "--json", "--timeout", "0.05")
    assert quick.status == 0, quick.stderr
    entry = quick.pod("default/p")
    assert entry["scheduled"] is False
    assert "timed out" in entry["error"], entry["error"]


def test_disrupt_flag_reschedules_the_nodes_pods(tmp_path):
    docs = gpu_cluster(
        [pod("bound-0", cpu="2", node_name="gpu-node-1"), pod("pending-0", cpu="1")],
        extra=[claim_template("one-gpu")],
    )
    plain = simulate(tmp_path, docs)
    assert [p["pod"] for p in plain.doc["pods"]] == ["default/pending-0"]
    disrupted = simulate(tmp_path, docs, "--disrupt", "gpu-node-1")
    pods = {p["pod"]: p for p in disrupted.doc["pods"]}
    assert set(pods) == {"default/bound-0", "default/pending-0"}
    # The disrupted node is no target: both go to a new NodeClaim.
    assert all(p["target"]["kind"] == "NodeClaim" for p in pods.values()), pods


def _without_clock(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["stats"].pop("seconds")
    doc["stats"].pop("suggestionSeconds", None)  # a clock reading too
    return doc


def test_trace_flag_does_not_change_the_result(demo_paths):
    # "--trace FILE *also* writes the DFS trace": the result document stays the same.
    with_trace = demo_paths[0].doc
    without = cli("simulate", DEMO, "--json")
    assert without.status == 0
    assert _without_clock(without.doc) == _without_clock(with_trace)


def test_two_runs_give_the_same_result():
    first = cli("simulate", EXAMPLES / "features-taints.yaml", "--json")
    second = cli("simulate", EXAMPLES / "features-taints.yaml", "--json")
    assert _without_clock(first.doc) == _without_clock(second.doc)


def test_disrupt_is_repeatable(tmp_path):
    from tests.contract.conftest import instance_type, namespace, node, nodepool

    docs = [
        namespace("default"),
        node("n1"),
        node("n2"),
        node("n3"),
        nodepool("general"),
        instance_type("m5.4xlarge", cpu="16", memory="64Gi"),
        pod("a", node_name="n1", owner="ReplicaSet"),
        pod("b", node_name="n2", owner="ReplicaSet"),
    ]
    run = simulate(tmp_path, docs, "--disrupt", "n1", "--disrupt", "n2")
    assert {p["pod"] for p in run.doc["pods"]} == {"default/a", "default/b"}
    assert {p["target"]["name"] for p in run.doc["pods"]} == {"n3"}


def test_allocator_needs_neither_django_nor_a_database(tmp_path):
    import subprocess
    import sys

    from tests.contract.conftest import ROOT

    code = (
        "import runpy, sys\n"
        "for name in ('django', 'rest_framework', 'celery', 'psycopg', 'redis'):\n"
        "    sys.modules[name] = None  # any import of them fails\n"
        "sys.argv = ['allocator', 'simulate', sys.argv[1], '--json']\n"
        "runpy.run_module('allocator', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "features-prioritized-list.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schemaVersion"] == "v1"


@pytest.mark.parametrize(
    "example, gate, text",
    [
        ("prioritized-list", "DRAPrioritizedList", "DRAPrioritizedList"),
        ("consumable-capacity", "DRAConsumableCapacity", "DRAConsumableCapacity"),
        ("partitionable", "DRAPartitionableDevices", "DRAPartitionableDevices"),
    ],
)
def test_a_gate_switched_off_fails_the_pods_that_need_it(feature_results, example, gate, text):
    on = feature_results[example]
    off = cli(
        "simulate",
        EXAMPLES / f"features-{example}.yaml",
        "--json",
        "--feature-gates",
        f"{gate}=false",
    )
    assert off.status == 0, off.stderr
    assert off.doc["featureGates"][gate] is False
    failed = [p for p in off.doc["pods"] if not p["scheduled"]]
    assert failed and all(text in p["error"] for p in failed)
    assert len(failed) >= sum(not p["scheduled"] for p in on["pods"])
