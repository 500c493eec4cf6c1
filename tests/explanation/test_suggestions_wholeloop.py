"""The whole-loop check of a suggestion (``wholeloop.WholeLoop``): the snapshot's documents
with the change applied, loaded again and simulated from the start."""

from __future__ import annotations

from allocator.explanation.suggestions.wholeloop import MAX_RERUNS, MAX_RUN_SIZE, WholeLoop
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
