"""The scheduler's seams (scheduler.go, existingnode.go, nodeclaim.go): each target decides
whether it can take a pod without changing anything (``can_add``), and only committing the
decision (``add``) places it; a fix suggestion's trial is a decision that is never committed."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.pipeline import build_pipeline
from allocator.scheduling.decision import ExistingNodeDecision, NodeClaimDecision, Refusal
from allocator.scheduling.setup import build_run
from allocator.scheduling.trialtargets import TrialTargets
from allocator.trace import NULL_TRACE
from tests.scheduling.k8s import (
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_pool,
    pod,
    request,
    resource_slice,
    snapshot,
    template,
)


def _docs(pods: int = 1) -> list[dict]:
    return [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool("gpu", requirements=families("p5")),
        instance_type("p5.48xlarge", gpus=8),
        node("gpu-node-a", pool="gpu"),
        resource_slice(
            "gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0), gpu(1)]
        ),
    ] + [pod(f"train-{i}", templates={"gpu": "one-gpu"}) for i in range(pods)]


def _run(docs):
    return build_run(snapshot(docs), build_pipeline(ALL_ON), NULL_TRACE, timeout=5.0)


def _allocated(run) -> set:
    return set(run.allocator.allocated_cluster_devices())


def test_can_add_on_an_existing_node_decides_and_changes_nothing():
    run = _run(_docs())
    scheduler = run.scheduler
    (target,) = scheduler.existing
    available = dict(target.available)
    (train,) = run.pods.pending
    data = scheduler.pod_data(train, run.pod_claims[train.key])
    decision = target.can_add(data, scheduler.state, None)
    assert isinstance(decision, ExistingNodeDecision)
    assert decision.target is target
    assert [d.device for c in decision.result.claims for d in c.devices] == ["gpu-0"]
    # Asking twice gives the same answer: nothing was committed by the first.
    again = target.can_add(data, scheduler.state, None)
    assert [d.device for c in again.result.claims for d in c.devices] == ["gpu-0"]
    assert target.available == available and target.pods == []
    assert _allocated(run) == set()

    target.add(data, decision, scheduler.state)
    assert [p.name for p in target.pods] == ["train-0"]
    assert target.available["pods"] == available["pods"] - 1000
    assert {d.device for d in _allocated(run)} == {"gpu-0"}


def test_a_full_node_refuses_with_karpenters_words_and_a_new_nodeclaim_is_decided_unnamed():
    run = _run(_docs(pods=3))
    scheduler = run.scheduler
    outcomes = scheduler.solve(run.pods.pending[:2], run.pod_claims)
    assert [o.target.name for o in outcomes] == ["gpu-node-a", "gpu-node-a"]
    third = run.pods.pending[2]
    data = scheduler.pod_data(third, run.pod_claims[third.key])
    refusal = scheduler.existing[0].can_add(data, scheduler.state, None)
    assert isinstance(refusal, Refusal)
    assert refusal.reason.startswith("allocating dynamic resources, no instance type can satisfy")
    (template_,) = scheduler.templates
    decision = template_.can_add(data, scheduler.state, scheduler.names)
    assert isinstance(decision, NodeClaimDecision) and decision.new
    assert decision.target.name == "gpu-1"
    assert decision.target.instance_types == ["p5.48xlarge"]
    # Made, not launched: the name is still free and the run has no NodeClaim.
    assert scheduler.names.peek("gpu") == "gpu-1"
    assert scheduler.node_claims == [] and template_.charged == {}


def test_trial_is_a_decision_without_a_commit():
    run = _run(_docs(pods=3))
    scheduler = run.scheduler
    scheduler.solve(run.pods.pending[:2], run.pod_claims)
    dfs_nodes = run.allocator.dfs_nodes
    allocated = _allocated(run)
    third = run.pods.pending[2]
    decision = scheduler.trial(third, run.pod_claims[third.key])
    assert isinstance(decision, NodeClaimDecision)
    assert decision.target.target_json() == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    assert decision.result.instance_types == ["p5.48xlarge"]
    assert decision.requirements.get("node.kubernetes.io/instance-type").has("p5.48xlarge")
    assert scheduler.node_claims == []
    assert run.allocator.dfs_nodes == dfs_nodes
    assert _allocated(run) == allocated
    assert run.allocator.tracker.templates.get("gpu-1", {}) == {}
    # The loop itself then makes that very NodeClaim.
    (outcome,) = scheduler.solve([third], run.pod_claims)
    assert outcome.target.target_json() == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    assert [nc.name for nc in scheduler.node_claims] == ["gpu-1"]


def test_a_trial_asks_allocate_for_none_of_the_words_only_a_commit_reads(monkeypatch):
    # The words of instance types a success was refused by counting go to the record of what
    # a NodeClaim lost when a placement commits: a trial commits nothing.
    run = _run(_docs(pods=3))
    scheduler = run.scheduler
    scheduler.solve(run.pods.pending[:2], run.pod_claims)
    quiet: list[bool] = []
    allocate = run.allocator.allocate

    def recording(*args, **kwargs):
        if kwargs.get("explain") is False:
            quiet.append(kwargs.get("word_refusals", True))
        return allocate(*args, **kwargs)

    monkeypatch.setattr(run.allocator, "allocate", recording)
    third = run.pods.pending[2]
    assert isinstance(scheduler.trial(third, run.pod_claims[third.key]), NodeClaimDecision)
    assert quiet and not any(quiet)
    assert scheduler.state.committing
    quiet.clear()
    (outcome,) = scheduler.solve([third], run.pod_claims)
    assert outcome.target.name == "gpu-1"
    assert quiet and all(quiet)


def test_trial_of_a_pod_nothing_can_take_is_none_and_commits_nothing():
    docs = _docs(pods=0) + [pod("huge", cpu="512", templates={"gpu": "one-gpu"})]
    run = _run(docs)
    (huge,) = run.pods.pending
    assert run.scheduler.trial(huge, run.pod_claims[huge.key]) is None
    assert run.scheduler.node_claims == [] and _allocated(run) == set()
    assert run.scheduler.existing[0].pods == []


def test_a_trial_narrowed_to_some_targets_asks_only_those_in_the_loops_order():
    run = _run(_docs(pods=1))
    scheduler = run.scheduler
    (train,) = run.pods.pending
    claims = run.pod_claims[train.key]
    on_node = scheduler.trial(train, claims, targets=TrialTargets(nodes=frozenset({"gpu-node-a"})))
    assert on_node.target.target_json() == {"kind": "Node", "name": "gpu-node-a", "new": False}
    # The node would take it first; without it the NodePool's new NodeClaim is asked.
    new = scheduler.trial(train, claims, targets=TrialTargets(node_pools=frozenset({"gpu"})))
    assert new.target.target_json() == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    assert scheduler.trial(train, claims, targets=TrialTargets()) is None
    # The scheduler's own targets are back as they were.
    assert [n.name for n in scheduler.existing] == ["gpu-node-a"]
    assert [t.name for t in scheduler.templates] == ["gpu"]
