"""Which pods, in Karpenter's queue order, retried pass after pass (CONTRACT section 3)."""

from __future__ import annotations

from tests.scheduling.k8s import (
    ZONE,
    families,
    instance_type,
    node,
    node_pool,
    offering,
    pod,
    pod_result,
    run,
)


def _cpu_cluster() -> list[dict]:
    return [
        node_pool("general", requirements=[]),
        instance_type("m7i.4xlarge", cpu="16", memory="64Gi"),
    ]


def test_queue_order_is_cpu_then_memory_desc_then_creation_uid_and_name():
    docs = _cpu_cluster() + [
        pod("small", cpu="1", memory="1Gi"),
        pod("big-mem", cpu="4", memory="32Gi"),
        pod("big-cpu", cpu="8", memory="1Gi"),
        pod("older", cpu="4", memory="8Gi", created="2026-12-01T09:00:00Z"),
        pod("newer", cpu="4", memory="8Gi", created="2026-12-01T11:00:00Z"),
        pod("uid-b", cpu="2", memory="2Gi", uid="b"),
        pod("uid-a", cpu="2", memory="2Gi", uid="a"),
        pod("same-z", cpu="500m", memory="1Gi", uid="u"),
        pod("same-a", cpu="500m", memory="1Gi", uid="u"),
    ]
    order = [p["pod"] for p in run(docs)["pods"]]
    assert order == [
        "default/big-cpu",
        "default/big-mem",
        "default/older",
        "default/newer",
        "default/uid-a",
        "default/uid-b",
        "default/small",
        "default/same-a",
        "default/same-z",
    ]


def test_pending_pods_exclude_bound_terminating_and_daemonset_pods():
    docs = _cpu_cluster() + [
        node("cpu-a", instance_type="m7i.4xlarge", cpu="16", memory="64Gi"),
        node("cpu-draining", instance_type="m7i.4xlarge", cpu="16", memory="64Gi", deleting=True),
        pod("pending"),
        pod("running", node_name="cpu-a"),
        pod("terminating", deleting=True),
        pod("evicted-from-draining", node_name="cpu-draining"),
        pod("ds-on-draining", node_name="cpu-draining", owner_kind="DaemonSet"),
        pod("ds-pending", owner_kind="DaemonSet"),
        pod("done-on-draining", node_name="cpu-draining", phase="Succeeded"),
    ]
    result = run(docs)
    assert [p["pod"] for p in result["pods"]] == [
        "default/evicted-from-draining",
        "default/pending",
    ]
    # The draining node is not a target; the displaced pod lands on the live node.
    assert pod_result(result, "default/evicted-from-draining")["target"] == {
        "kind": "Node",
        "name": "cpu-a",
        "new": False,
    }


def test_limits_charge_a_nodeclaim_at_its_largest_type_when_created_never_refunded():
    """Karpenter's subtractMax: ``anchor``'s NodeClaim is charged at its largest candidate
    (16 of the 18 cpu) when created; ``narrow`` later pins it to the small type, but the
    charge stays, so ``wide`` (its retry included) finds every type over the limit."""
    docs = [
        node_pool(
            "general",
            requirements=families("m7i"),
            limits={"cpu": "18"},
        ),
        instance_type(
            "m7i.xlarge",
            cpu="4",
            memory="16Gi",
            offerings=[offering("us-west-2a", 0.2), offering("us-west-2b", 0.2)],
        ),
        instance_type(
            "m7i.4xlarge",
            cpu="16",
            memory="64Gi",
            offerings=[offering("us-west-2a", 0.8), offering("us-west-2b", 0.8)],
        ),
        pod("anchor", cpu="3", node_selector={ZONE: "us-west-2a"}),
        pod("wide", cpu="2500m", node_selector={ZONE: "us-west-2b"}),
        pod(
            "narrow",
            cpu="500m",
            node_selector={ZONE: "us-west-2a", "node.kubernetes.io/instance-type": "m7i.xlarge"},
        ),
    ]
    result = run(docs)
    wide = pod_result(result, "default/wide")
    assert wide["scheduled"] is False
    assert 'all available instance types exceed limits for nodepool: "general"' in wide["error"]
    claims = {nc["name"]: nc for nc in result["nodeClaims"]}
    assert claims["general-1"]["instanceTypes"] == ["m7i.xlarge"]
    assert claims["general-1"]["pods"] == ["default/anchor", "default/narrow"]


def test_pod_that_never_fits_reports_the_reason_of_its_last_attempt():
    docs = _cpu_cluster() + [pod("huge", cpu="64"), pod("ok", cpu="1")]
    result = run(docs)
    huge = pod_result(result, "default/huge")
    assert huge["scheduled"] is False
    assert huge["target"] is None
    assert 'incompatible with nodepool "general"' in huge["error"]
    assert "no instance type satisfied resources" in huge["error"]
    assert huge["reasons"][-1]["target"] == "nodepool/general"
    assert result["stats"] == {**result["stats"], "pods": 2, "scheduled": 1, "failed": 1}


def test_daemonset_overhead_is_charged_to_new_nodeclaims_of_compatible_pools():
    docs = [
        node_pool("general", requirements=[]),
        node_pool(
            "tainted",
            weight=10,
            taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
            requirements=[],
        ),
        instance_type("m7i.xlarge", cpu="4", memory="16Gi"),
        node("cpu-a", instance_type="m7i.xlarge", cpu="4", memory="16Gi"),
        # Runs on every node of "general"; does not tolerate "tainted"'s taint.
        pod(
            "node-exporter-x8k2q",
            cpu="500m",
            memory="128Mi",
            node_name="cpu-a",
            owner_kind="DaemonSet",
        ),
        pod(
            "fits-alone",
            cpu="3700m",
            memory="1Gi",
            node_selector={"karpenter.sh/nodepool": "general"},
        ),
    ]
    entry = pod_result(run(docs), "default/fits-alone")
    assert entry["scheduled"] is False
    general = entry["reasons"][-1]["reason"]
    assert general.startswith(
        'incompatible with nodepool "general", daemonset overhead={"cpu":"500m","memory":"128Mi","pods":"1"}, '
        'no instance type satisfied resources {"cpu":"4200m","memory":"1152Mi","pods":"2"}'
    )
    tainted = entry["reasons"][-2]["reason"]
    assert tainted.startswith('incompatible with nodepool "tainted", daemonset overhead={}, ')
