"""Refusing by the funnel changes how a refusal is found, never a decision.

Random GPU clusters (nodes of H100s and Tesla T4s, some GPUs already taken, a device taint,
a NodePool whose instance type has A10Gs) and pending pods asking for some model and count:
the result document with funnel refusal switched on is the one with it switched off, apart
from the time taken. Every funnel, in the result and in the trace, counts each candidate once.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from allocator.pipeline import build_pipeline
from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.contract.conftest import (
    claim_template,
    device_class,
    held_device,
    instance_type,
    namespace,
    node,
    nodepool,
    pod,
    request,
    resource_slice,
    template_slice,
)

MODELS = {"H100": "NVIDIA H100 80GB HBM3", "T4": "Tesla T4", "A10G": "NVIDIA A10G"}


def gpus(node_name: str, model: str, count: int, tainted: bool) -> list[dict]:
    out = []
    for i in range(count):
        d = {
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": MODELS[model]},
                "index": {"int": i},
            },
            "capacity": {"memory": {"value": "16Gi" if model == "T4" else "80Gi"}},
        }
        if tainted and i == 0:
            d["taints"] = [
                {"key": "nvidia.com/gpu-unhealthy", "value": "xid-79", "effect": "NoSchedule"}
            ]
        out.append(d)
    return out


def selector(model: str) -> list[dict]:
    return [
        {
            "cel": {
                "expression": f'device.attributes["gpu.nvidia.com"].productName == "{MODELS[model]}"'
            }
        }
    ]


node_spec = st.tuples(
    st.sampled_from(["H100", "T4"]), st.integers(1, 4), st.integers(0, 2), st.booleans()
)
pod_spec = st.tuples(
    st.sampled_from(["H100", "T4", "A10G"]),
    st.integers(1, 3),
    st.integers(1, 4),
    st.none() | st.sampled_from(["H100", "T4", "A10G"]),  # a second claim, of this model
)


def cluster(nodes: list[tuple], pods: list[tuple], nodepool_on: bool) -> list[dict]:
    docs = [namespace("default"), device_class()]
    for i, (model, count, taken, tainted) in enumerate(nodes):
        name = f"ip-10-0-1-{i}.us-west-2.compute.internal"
        docs.append(node(name, cpu="32", memory="256Gi"))
        docs.append(resource_slice(name, gpus(name, model, count, tainted)))
        for t in range(min(taken, count)):
            held = f"serve-{i}-{t}"
            docs.extend(held_device(held, name, f"gpu-{t}"))
    for m in MODELS:
        for count in (1, 2, 3):
            docs.append(
                claim_template(
                    f"{m.lower()}-x{count}", requests=[request(count=count, selectors=selector(m))]
                )
            )
    for j, (model, count, cpu, second) in enumerate(pods):
        claims = [{"name": "gpu", "resourceClaimTemplateName": f"{model.lower()}-x{count}"}]
        if second is not None:
            claims.append({"name": "extra", "resourceClaimTemplateName": f"{second.lower()}-x1"})
        docs.append(
            pod(f"train-{j}", cpu=str(cpu), created=f"2026-12-01T10:00:{j:02d}Z", claims=claims)
        )
    if nodepool_on:
        docs.append(nodepool("gpu-pool", limits={"cpu": "100"}))
        for it, model in (("g5.12xlarge", "A10G"), ("p5.4xlarge", "H100")):
            docs.append(
                instance_type(
                    it,
                    cpu="48",
                    memory="192Gi",
                    slices=[template_slice(f"{it}-gpus", gpus("t", model, 2, False))],
                )
            )
    return docs


def run(docs: list[dict], funnel_refusal: bool, trace: bool = False):
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    options = SimulationOptions(trace=trace)
    return simulate(snapshot, options, tuning=Tuning(funnel_refusal=funnel_refusal))


def drop_clocks(result: dict) -> None:
    """Clock readings differ from run to run; everything else must not."""
    result["stats"].pop("seconds")
    result["stats"].pop("suggestionSeconds", None)


def check_counts(funnel: dict) -> None:
    assert (
        funnel["usable"] + sum(r["devices"] for r in funnel["rejections"]) == funnel["candidates"]
    )
    assert all(r["devices"] >= 1 and r["message"] for r in funnel["rejections"])
    if not funnel["rejections"] and not funnel["candidates"]:
        assert funnel.get("message") or funnel["needed"] >= 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_spec, min_size=1, max_size=4),
    pods=st.lists(pod_spec, min_size=1, max_size=7),
    nodepool_on=st.booleans(),
)
# Two 2-GPU pods failing on a node with one free untainted H100 after a placement: the
# second asks it again by a search (a DFS node), which the first one's refusal must not spare.
@example(
    nodes=[("H100", 3, 0, True)],
    pods=[("H100", 1, 1, None), ("H100", 2, 1, None), ("H100", 2, 1, None)],
    nodepool_on=False,
)
def test_funnel_refusal_changes_no_decision(nodes, pods, nodepool_on) -> None:
    docs = cluster(nodes, pods, nodepool_on)
    on = run(docs, True).result
    off = run(docs, False).result
    drop_clocks(on)
    drop_clocks(off)
    assert on == off
    for entry in on["pods"]:
        if entry["scheduled"]:
            assert "explanation" not in entry
            continue
        assert entry["explanation"], entry["pod"]
        for funnel in entry["explanation"]:
            check_counts(funnel)
            assert 1 <= len(funnel["exampleTargets"]) <= min(5, funnel["targets"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_spec, min_size=1, max_size=3),
    pods=st.lists(pod_spec, min_size=1, max_size=4),
    nodepool_on=st.booleans(),
)
def test_trace_funnels_count_every_candidate_once(nodes, pods, nodepool_on) -> None:
    out = run(cluster(nodes, pods, nodepool_on), True, trace=True)
    untraced = run(cluster(nodes, pods, nodepool_on), True).result
    drop_clocks(out.result)
    drop_clocks(untraced)
    assert out.result == untraced  # tracing changes no decision either
    for n in out.trace["nodes"]:
        for funnel in n.get("funnel", ()):
            check_counts(funnel)
            if n["status"] == "pruned" and funnel["rejections"]:
                # Refused by counting: the reason is the decisive (largest) cause's code.
                assert n["reason"] == funnel["rejections"][0]["reason"]


def test_pods_of_one_shape_failing_in_one_state_are_replayed_with_their_own_claims() -> None:
    from allocator.scheduling.setup import build_run
    from allocator.trace import NULL_TRACE

    docs = cluster([("T4", 2, 0, False)] * 3, [("H100", 1, 2, None)] * 4, False)
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    options = SimulationOptions()
    built = build_run(snapshot, build_pipeline(options.gates), NULL_TRACE, timeout=options.timeout)
    outcomes = built.scheduler.solve(built.pods.pending, built.pod_claims)
    # The first pod's attempt validates the template's spec (the device-count pre-check then
    # applies: a change of state); the second's attempt stands for the last two.
    assert built.scheduler.state.cache.replayed == 2
    for outcome in outcomes:
        claim = outcome.pod_claims.claims[0].key
        assert all(f"claim {claim} request gpu" in r for _, r in outcome.reasons)
        assert {f.claim for _, f in outcome.funnels} == {claim}
    on = run(docs, True).result
    off = run(docs, False).result
    drop_clocks(on)
    drop_clocks(off)
    assert on == off
