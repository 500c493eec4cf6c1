"""The whole-loop check of a suggestion (``wholeloop.WholeLoop``): the snapshot's documents
with the change applied, loaded again and simulated from the start."""

from __future__ import annotations

from allocator.scheduling.initialization import PodClaims
from allocator.scheduling.poddata import PodOutcome
from allocator.suggestions.wholeloop import (
    MAX_RERUN_WORK,
    MAX_RERUNS,
    MAX_RUN_SIZE,
    WholeLoop,
    loop_work,
)
from tests.scheduling.k8s import families, instance_type, node_pool, pod, snapshot

LIMIT = {"object": "NodePool general", "field": "spec.limits", "op": "set", "value": {"cpu": "64"}}


def cluster() -> list[dict]:
    return [
        node_pool("general", requirements=families("m7i"), limits={"cpu": "8"}),
        instance_type("m7i.4xlarge", cpu="16", memory="64Gi"),
        pod("web-0", cpu="12", memory="8Gi"),
    ]


def test_a_re_run_that_raises_leaves_the_suggestion_unconfirmed_not_the_run_failed():
    def broken(_changed):
        raise RuntimeError("a bug in the loop")

    loop = WholeLoop(broken, size=3)
    assert loop.check(snapshot(cluster()), "default/web-0", [LIMIT]) is None
    assert loop.runs == 1


def test_changed_documents_that_no_longer_load_are_not_re_run():
    calls = []
    loop = WholeLoop(lambda changed: calls.append(changed) or [], size=3)
    bad = {"object": "NodePool general", "field": "spec.limits", "op": "set", "value": "lots"}
    assert loop.check(snapshot(cluster()), "default/web-0", [bad]) is None
    assert calls == []


def test_no_re_run_past_the_budget_or_for_a_large_run():
    calls = []
    large = WholeLoop(lambda changed: calls.append(changed) or [], size=MAX_RUN_SIZE + 1)
    assert large.check(snapshot(cluster()), "default/web-0", [LIMIT]) is None
    spent = WholeLoop(lambda changed: calls.append(changed) or [], size=3)
    spent.runs = MAX_RERUNS
    assert spent.check(snapshot(cluster()), "default/web-0", [LIMIT]) is None
    assert calls == []


def test_a_run_too_large_to_re_run_writes_no_edit_as_a_key(monkeypatch):
    # 4,000 failed replicas each carry a workload-wide edit listing all of them: nothing is
    # re-run for a run that large, so none of those lists is written.
    from allocator.suggestions import wholeloop

    def written(changes):
        raise AssertionError("no key is needed")

    monkeypatch.setattr(wholeloop, "_content_key", written)
    large = WholeLoop(lambda changed: [], size=MAX_RUN_SIZE + 1)
    for replica in range(3):
        assert large.check(snapshot(cluster()), f"default/web-{replica}", [LIMIT]) is None


def test_no_re_run_once_the_re_runs_would_outweigh_the_work_budget():
    calls = []
    heavy = WholeLoop(lambda changed: calls.append(changed) or [], size=3, work=MAX_RERUN_WORK)
    assert heavy.check(snapshot(cluster()), "default/web-0", [LIMIT]) is not None
    raised = {**LIMIT, "value": {"cpu": "128"}}
    assert heavy.check(snapshot(cluster()), "default/web-0", [raised]) is None
    assert len(calls) == 1


def test_suggestions_with_the_same_edit_share_one_re_run_each_pod_read_off_it():
    docs = [*cluster(), pod("web-1", cpu="12", memory="8Gi")]
    calls = []

    def solve(changed):
        calls.append(changed)
        return [PodOutcome(p, PodClaims([])) for p in changed.pods]

    loop = WholeLoop(solve, size=4)
    first = loop.check(snapshot(docs), "default/web-0", [LIMIT])
    second = loop.check(snapshot(docs), "default/web-1", [LIMIT])
    assert len(calls) == 1 and loop.runs == 1
    assert first is not None and second is not None
    assert not first.placed and not second.placed


def test_the_work_of_a_loop_is_its_attempts_times_its_targets_plus_its_dfs_nodes():
    outcomes = [PodOutcome(p, PodClaims([])) for p in snapshot(cluster()).pods]
    outcomes[0].attempts = 3
    assert loop_work(outcomes, targets=40, dfs_nodes=250) == 3 * 40 + 250
