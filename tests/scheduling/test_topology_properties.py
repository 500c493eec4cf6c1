"""Topology decisions do not depend on the scheduler's shortcuts: the refusal caches and the
replay of a pod shape's attempt skip work, never change where a pod goes (a refusal a topology
may have decided depends on every placement, so it is never reused).

Random GPU clusters (those of test_nodeclaim_cache_properties) whose pods carry an app label
and one of: nothing, a zone spread over their app, a hostname or zone anti-affinity to their
app, a zone affinity to another app. The result with every shortcut on is the one with them
off, apart from clock readings.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from tests.contract.conftest import namespace, node, pod
from tests.scheduling.test_nodeclaim_cache_properties import cluster, it_spec, node_spec, pod_spec

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
APPS = ("vllm", "ray-worker")
RULES = ("none", "zone-spread", "hostname-anti", "zone-anti", "zone-affinity")


def with_topology(doc: dict, app: str, rule: str) -> dict:
    doc["metadata"]["labels"] = {"app": app}
    selector = {"matchLabels": {"app": app}}
    spec = doc["spec"]
    if rule == "zone-spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
    elif rule in ("hostname-anti", "zone-anti"):
        key = HOSTNAME if rule == "hostname-anti" else ZONE
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": key, "labelSelector": selector}
                ]
            }
        }
    elif rule == "zone-affinity":
        other = APPS[1] if app == APPS[0] else APPS[0]
        spec["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": other}}}
                ]
            }
        }
    return doc


def run(docs: list[dict], shortcuts: bool) -> dict:
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    options = SimulationOptions(suggestions=False)
    tuning = Tuning(funnel_refusal=shortcuts, nodeclaim_caches=shortcuts)
    result = simulate(snapshot, options, tuning=tuning).result
    result["stats"].pop("seconds")
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node_spec, max_size=3),
    its=st.lists(it_spec, min_size=1, max_size=3),
    pods=st.lists(
        st.tuples(pod_spec, st.sampled_from(APPS), st.sampled_from(RULES)),
        min_size=1,
        max_size=10,
    ),
)
def test_topology_decisions_do_not_depend_on_the_shortcuts(nodes, its, pods) -> None:
    docs = cluster(nodes, its, [spec for spec, _, _ in pods], 0, False)
    pod_docs = [d for d in docs if d["kind"] == "Pod" and not d["spec"].get("nodeName")]
    for doc, (_, app, rule) in zip(pod_docs, pods, strict=True):
        with_topology(doc, app, rule)
    assert run(docs, True) == run(docs, False)


def test_a_pod_alike_but_for_its_labels_is_not_given_anothers_refusal() -> None:
    """Two pending pods with the same spec (no claims), one labelled app=vllm: a running pod's
    zone anti-affinity against vllm pods keeps the first out of the only zone, not the second
    (an attempt replayed by shape would have refused both)."""
    its = [("H100", 4, 16, ("us-west-2a",))]
    first = pod("train-0", cpu="2", created="2026-12-01T10:00:00Z")
    second = pod("train-1", cpu="2", created="2026-12-01T10:00:01Z")
    docs = [*cluster([], its, [], 0, False), first, second]
    first["metadata"]["labels"] = {"app": "vllm"}
    second["metadata"]["labels"] = {"app": "ray-worker"}
    docs += [
        node("kv-node-a", cpu="8", memory="64Gi", labels={ZONE: "us-west-2a"}),
        pod("kv-cache-0", node_name="kv-node-a", created="2026-12-01T09:00:00Z"),
    ]
    guard = docs[-1]
    guard["metadata"]["labels"] = {"app": "kv-cache"}
    guard["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "vllm"}}}
            ]
        }
    }
    result = run(docs, True)
    assert result == run(docs, False)
    placed = {p["pod"]: p["scheduled"] for p in result["pods"]}
    assert placed == {"default/train-0": False, "default/train-1": True}
    (refused,) = [p for p in result["pods"] if not p["scheduled"]]
    assert "unsatisfiable topology constraint for pod anti-affinity" in refused["error"]


# --- NodeClaims passed over by a hostname anti-affinity ---------------------------------------

CPU_RULES = ("none", "hostname-anti", "preferred-hostname-anti", "zone-anti")


def cpu_pod(index: int, app: str, rule: str, cpu: str) -> dict:
    """A pending pod without device claims: the scheduler passes over NodeClaims whose
    hostname already counts a pod its anti-affinity selects, and words them only if the pod
    fails everywhere."""
    doc = pod(f"web-{index}", cpu=cpu, created=f"2026-12-01T10:00:{index:02d}Z")
    if rule == "preferred-hostname-anti":
        doc["metadata"]["labels"] = {"app": app}
        term = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}
        doc["spec"]["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": term}
                ]
            }
        }
        return doc
    return with_topology(doc, app, rule)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    its=st.lists(it_spec, min_size=1, max_size=3),
    pods=st.lists(
        st.tuples(
            st.sampled_from(APPS),
            st.sampled_from(CPU_RULES),
            st.sampled_from(["500m", "2", "6", "200"]),  # 200 CPUs: no instance type has them
        ),
        min_size=1,
        max_size=14,
    ),
    guard=st.booleans(),
    running=st.lists(st.sampled_from((None, *APPS)), max_size=4),
)
def test_targets_passed_over_by_hostname_anti_affinity_change_nothing(
    its, pods, guard, running
) -> None:
    """Pods without claims, some with a hostname anti-affinity (required or preferred), some
    too big for any instance type, nodes running a replica of an app or nothing, and maybe a
    running pod whose anti-affinity selects vllm pods: placements, reasons and explanations
    with the shortcuts on are those with them off (a failed pod's reasons name every node and
    NodeClaim, in order, with a full attempt's words)."""
    docs = [*cluster([], its, [], 0, False)]
    for i, app in enumerate(running):
        name = f"ip-10-0-4-{i}.us-west-2.compute.internal"
        docs.append(node(name, cpu="8", memory="32Gi"))
        if app is not None:
            replica = pod(f"{app}-{i}", node_name=name, created="2026-12-01T09:00:00Z")
            replica["metadata"]["labels"] = {"app": app}
            docs.append(replica)
    docs += [cpu_pod(i, app, rule, cpu) for i, (app, rule, cpu) in enumerate(pods)]
    if guard:
        docs.append(node("kv-node-a", cpu="8", memory="64Gi", labels={ZONE: "us-west-2a"}))
        running = pod("kv-cache-0", node_name="kv-node-a", created="2026-12-01T09:00:00Z")
        running["metadata"]["labels"] = {"app": "kv-cache"}
        term = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "vllm"}}}
        running["spec"]["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
        docs.append(running)
    assert run(docs, True) == run(docs, False)


def last_replica_failing_after(placed: int) -> dict:
    """``placed`` vllm replicas (4 CPUs, hostname anti-affinity), one NodeClaim each, then one
    more too big for any instance type: its entry (the same with the shortcuts on and off)."""
    its = [("L4", 1, 16, ("us-west-2a",))]
    docs = [*cluster([], its, [], 0, False)]
    docs += [cpu_pod(i, "vllm", "hostname-anti", "4") for i in range(placed)]
    docs.append(cpu_pod(placed, "vllm", "hostname-anti", "200"))
    result = run(docs, True)
    assert result == run(docs, False)
    (last,) = [p for p in result["pods"] if not p["scheduled"]]
    return last


def test_a_pod_refused_by_every_nodeclaims_hostname_is_explained_target_by_target() -> None:
    """Three vllm pods, each alone on a NodeClaim of its own (hostname anti-affinity), then a
    fourth too big for any instance type: its reasons name the three NodeClaims (passed over
    while it was tried) with the anti-affinity's words, then the NodePool's."""
    last = last_replica_failing_after(3)
    assert last["pod"] == "default/web-3"
    assert [r["target"] for r in last["reasons"][:3]] == [f"node/gpu-pool-{i}" for i in (1, 2, 3)]
    for r, host in zip(last["reasons"], ("gpu-pool-1", "gpu-pool-2", "gpu-pool-3"), strict=False):
        assert r["reason"].startswith("unsatisfiable topology constraint for pod anti-affinity")
        assert f"nodeDomains = kubernetes.io/hostname In [{host}]" in r["reason"]
    assert last["reasons"][3]["target"].startswith("nodepool/")


def test_nodeclaims_refused_by_one_anti_affinity_share_one_reason() -> None:
    """Twelve vllm replicas, one NodeClaim each (hostname anti-affinity), then a thirteenth
    too big for any instance type: each NodeClaim's words name its own hostname and the
    replica there, but the cause is one, so the reasons hold one entry for the twelve and
    the error names three of them and counts the rest."""
    last = last_replica_failing_after(12)
    nodes, pool = last["reasons"]
    assert nodes["targets"] == 12
    assert nodes["exampleTargets"] == [f"node/gpu-pool-{i}" for i in range(1, 6)]
    assert "nodeDomains = kubernetes.io/hostname In [gpu-pool-1]" in nodes["reason"]
    assert pool["target"] == "nodepool/gpu-pool"
    assert (
        "node/gpu-pool-1, node/gpu-pool-2, node/gpu-pool-3 and 9 more: unsatisfiable"
        in (last["error"])
    )


def test_nodes_refused_by_one_anti_affinity_share_one_reason() -> None:
    """Ten nodes each running a vllm replica, no NodePool: a pending replica with a hostname
    anti-affinity is refused by every node for one cause, in words naming each node."""
    docs = [namespace("default")]
    for i in range(10):
        name = f"ip-10-0-3-{i}.us-west-2.compute.internal"
        docs.append(node(name, cpu="32", memory="128Gi"))
        running = pod(f"vllm-{i}", node_name=name, created="2026-12-01T09:00:00Z")
        running["metadata"]["labels"] = {"app": "vllm"}
        docs.append(running)
    docs.append(cpu_pod(10, "vllm", "hostname-anti", "2"))
    result = run(docs, True)
    assert result == run(docs, False)
    (last,) = [p for p in result["pods"] if not p["scheduled"]]
    (nodes,) = last["reasons"]
    assert nodes["targets"] == 10
    assert "unsatisfiable topology constraint for pod anti-affinity" in nodes["reason"]
    assert "and 7 more: unsatisfiable topology constraint" in last["error"]
