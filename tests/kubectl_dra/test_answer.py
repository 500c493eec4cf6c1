"""The answer's parts on hand-made result documents: prices under a NodeClaim's requirements,
pods that are not pending, pods Karpenter ignores."""

from __future__ import annotations

from dra_web.kubectl_dra.why import Offering, answer, cheapest_types, not_pending, pod_anchor
from tests.scheduling.k8s import pod


def test_cheapest_types_respect_the_nodeclaims_zone_and_capacity_type():
    offerings = {
        "p5.48xlarge": [
            Offering("us-west-2a", "spot", 20.0, True),
            Offering("us-west-2b", "on-demand", 55.04, True),
            Offering("us-west-2c", "on-demand", 50.0, False),
        ],
        "p5.4xlarge": [Offering("us-west-2b", "on-demand", 6.88, True)],
        "p4d.24xlarge": [Offering("us-west-2a", "on-demand", 21.96, True)],
    }
    node_claim = {
        "instanceTypes": ["p4d.24xlarge", "p5.48xlarge", "p5.4xlarge"],
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]},
        ],
    }
    ranked = cheapest_types(node_claim, offerings)
    assert [(name, price) for name, price, _ in ranked] == [
        ("p5.4xlarge", 6.88),
        ("p5.48xlarge", 55.04),
    ]


def test_not_pending_says_where_the_pod_is():
    assert not_pending(pod("train-0", namespace="ml")) is None
    running = pod("serve-0", namespace="ml", node_name="ip-10-0-1-7")
    assert not_pending(running) == (
        "pod ml/serve-0 is not pending: it runs on node ip-10-0-1-7 (phase Running)"
    )
    leaving = pod("old-0", namespace="ml", deleting=True)
    assert "pod ml/old-0 is terminating" in not_pending(leaving)
    done = pod("job-0", namespace="ml", phase="Succeeded")
    assert not_pending(done) == "pod ml/job-0 is not pending: it has finished (phase Succeeded)"


def test_a_pod_karpenter_ignores_gets_the_reason():
    result = {
        "pods": [],
        "nodeClaims": [],
        "ignoredPods": [
            {"pod": "ml/gated-0", "reason": "scheduling gate kueue.x-k8s.io/admission"}
        ],
        "stats": {"pods": 0, "scheduled": 0},
    }
    text = answer(result, "ml/gated-0", {})
    assert text == (
        "Pod ml/gated-0\n"
        "Karpenter would not provision for it: scheduling gate kueue.x-k8s.io/admission\n"
    )


def test_the_run_page_anchor_matches_the_pages():
    assert pod_anchor("ml/train-0") == "pod-ml-train-0"
    assert pod_anchor("team.a/job.1") == "pod-team-a-job-1"
