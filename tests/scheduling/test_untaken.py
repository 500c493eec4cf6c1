"""The targets a pod's hostname anti-affinities leave it: the kept lists (``UntakenTargets``)
answer as asking every target again (``not_taken``) does, placement after placement."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.scheduling.untaken import UntakenTargets, not_taken


@dataclass(eq=False)
class Target:
    name: str


def host(t: Target) -> str:
    return t.name


# A run: NodeClaims launched, pods recorded on hostnames by three anti-affinities (a count
# only grows; a hostname may be registered with no pod first) and the pod-count order
# shuffled; after every step a pod asks with the counts of each choice of them, in creation
# and in pod-count order.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("launch"), st.integers(0, 12)),
        st.tuples(st.just("record"), st.integers(0, 2), st.integers(0, 12)),
        st.tuples(st.just("register"), st.integers(0, 2), st.integers(0, 12)),
        st.tuples(st.just("reorder"), st.randoms(use_true_random=False)),
    ),
    max_size=40,
)
CHOICES = [[], [0], [1], [2], [0, 1], [1, 2], [0, 2], [2, 0, 1], [1, 1]]


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_the_kept_lists_answer_as_asking_every_target_does(steps):
    created: list[Target] = []
    by_pods: list[Target] = []
    counts: list[dict[str, int]] = [{}, {}, {}]
    untaken = UntakenTargets()
    for step in steps:
        kind = step[0]
        if kind == "launch":
            nc = Target(f"default-{len(created)}")
            created.append(nc)
            by_pods.insert(min(step[1], len(by_pods)), nc)
        elif kind == "record":
            name = f"default-{step[2]}"
            counts[step[1]][name] = counts[step[1]].get(name, 0) + 1
        elif kind == "register":
            counts[step[1]].setdefault(f"default-{step[2]}", 0)
        else:
            step[1].shuffle(by_pods)
        for choice in CHOICES:
            taken = [counts[i] for i in choice]
            for order in (created, by_pods):
                expected = list(not_taken(order, taken, host))
                assert list(untaken.in_order(created, order, taken, host)) == expected


def test_a_nodeclaim_launched_after_the_last_pod_is_asked():
    # Four replicas keep away from each other by hostname: each NodeClaim holds one, so the
    # fifth pod is asked nowhere but on the NodeClaim launched (empty) since.
    created = [Target(f"default-{i}") for i in range(4)]
    spread = {t.name: 1 for t in created}
    untaken = UntakenTargets()
    assert list(untaken.in_order(created, created, [spread], host)) == []
    created.append(Target("default-4"))
    assert [t.name for t in untaken.in_order(created, created, [spread], host)] == ["default-4"]
    spread["default-4"] = 1
    assert list(untaken.in_order(created, created, [spread], host)) == []


def test_without_counts_every_target_is_asked_in_the_given_order():
    created = [Target("a"), Target("b")]
    order = [created[1], created[0]]
    assert UntakenTargets().in_order(created, order, None, host) is order


def test_a_target_is_left_only_where_no_anti_affinity_counts_a_pod():
    # The pod keeps away from the web tier and is kept away by the cache tier: a NodeClaim
    # holding either is refused outright.
    created = [Target(f"default-{i}") for i in range(3)]
    web, cache = {"default-0": 1}, {"default-1": 2}
    untaken = UntakenTargets()
    asked = untaken.in_order(created, created, [web, cache], host)
    assert [t.name for t in asked] == ["default-2"]
