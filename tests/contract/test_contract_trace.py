"""CONTRACT section 5: the DFS trace written by --trace."""

from __future__ import annotations

import json
import re

import pytest

from tests.contract.conftest import (
    EXAMPLES,
    claim_template,
    cli,
    device_class,
    namespace,
    node,
    pod,
    request,
    resource_slice,
    write_yaml,
)

KINDS = {"pod", "target", "instanceType", "claim", "request", "slot", "device"}
STATUSES = {"ok", "failed", "pruned"}


def _nodes(trace):
    assert isinstance(trace, dict) and isinstance(trace["nodes"], list)
    return trace["nodes"]


def test_flat_list_of_nodes_with_the_contract_fields(demo_trace):
    nodes = _nodes(demo_trace)
    assert nodes
    ids = set()
    for n in nodes:
        assert set(n) >= {"id", "parent", "kind", "label", "status", "reason"}, n
        assert n["kind"] in KINDS, n
        assert n["status"] in STATUSES, n
        assert isinstance(n["label"], str) and n["label"]
        assert n["parent"] is None or n["parent"] in ids, n  # parents come first
        ids.add(n["id"])
        if n["kind"] == "pod":
            assert n["parent"] is None
    assert len(ids) == len(nodes)
    assert {n["kind"] for n in nodes} == KINDS


def test_reason_is_a_short_code_with_a_message(demo_trace):
    for n in _nodes(demo_trace):
        if n["status"] == "ok":
            continue
        assert re.fullmatch(r"[a-z][a-zA-Z-]*", n["reason"] or ""), n
        assert n.get("message"), n
    reasons = {n["reason"] for n in _nodes(demo_trace)}
    assert {"allocated", "selector", "taint"} <= reasons


def test_device_nodes_record_driver_pool_device(demo_trace):
    devices = [n for n in _nodes(demo_trace) if n["kind"] == "device"]
    assert devices
    for n in devices:
        assert n["driver"] and n["pool"] and n["device"], n


def test_every_pending_pod_has_a_root(demo, demo_trace):
    roots = [n["label"] for n in _nodes(demo_trace) if n["parent"] is None]
    assert set(roots) == {p["pod"] for p in demo["pods"]}


def test_cap_is_recorded_with_a_count(demo_trace):
    assert isinstance(demo_trace["omitted"], int) and demo_trace["omitted"] >= 0


def test_constraint_reason_on_a_failed_match_attribute(tmp_path):
    gpus = [{"name": f"gpu-{i}", "attributes": {"numa": {"int": i}}} for i in range(2)]
    tmpl = claim_template("two", requests=[request(allocationMode="ExactCount", count=2)])
    tmpl["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.nvidia.com/numa"}]
    docs = [
        namespace("default"),
        device_class(),
        node("n1", cpu="32", memory="128Gi"),
        resource_slice("n1", gpus),
        tmpl,
        pod("p", claims=[{"name": "g", "resourceClaimTemplateName": "two"}]),
    ]
    path = write_yaml(tmp_path, docs)
    trace = tmp_path / "t.json"
    run = cli("simulate", path, "--json", "--trace", trace)
    assert run.status == 0
    nodes = _nodes(json.loads(trace.read_text()))
    assert run.pod("default/p")["scheduled"] is False
    assert any(n["reason"] == "constraint" for n in nodes), {n["reason"] for n in nodes}


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("features-*.yaml")))
def test_every_failed_or_pruned_node_has_a_reason_code_and_message(tmp_path, example):
    trace = tmp_path / "trace.json"
    run = cli("simulate", EXAMPLES / example, "--trace", trace)
    assert run.status == 0, run.stderr
    nodes = _nodes(json.loads(trace.read_text()))
    for n in nodes:
        assert n["kind"] in KINDS and n["status"] in STATUSES, n
        if n["kind"] == "device":
            assert n["driver"] and n["pool"] and n["device"], n
    bad = [n for n in nodes if n["status"] != "ok" and not (n["reason"] and n.get("message"))]
    assert not bad, bad[:3]
