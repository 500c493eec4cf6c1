"""Karpenter's topology over the snapshot (allocator/scheduling/topology.py and its groups):
which domains a pod may use under spread, affinity and anti-affinity, counted from the
snapshot's pods and from the placements of the run."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    NodePool,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from allocator.requirements import Requirement, Requirements
from allocator.scheduling.topology import (
    PreferencePolicy,
    Topology,
    TopologyError,
    TopologyType,
    ignored_for_topology,
)
from allocator.scheduling.topologydomaingroup import TopologyDomainGroup, build_domain_groups
from allocator.scheduling.topologynodefilter import make_node_filter

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
GPU_TAINT = Taint("nvidia.com/gpu", None, "NoSchedule")
TOLERATE_GPU = Toleration(key="nvidia.com/gpu", operator="Exists")


def select(**labels: str) -> LabelSelector:
    return LabelSelector(tuple(labels.items()))


def pod(
    name: str,
    ns: str = "inference",
    labels: dict[str, str] | None = None,
    node: str | None = None,
    **fields,
) -> Pod:
    return Pod(ns, name, f"uid-{ns}-{name}", node_name=node, labels=labels or {}, **fields)


def spread(key: str = ZONE, skew: int = 1, **fields) -> TopologySpreadConstraint:
    fields.setdefault("when_unsatisfiable", "DoNotSchedule")
    fields.setdefault("label_selector", select(app="vllm"))
    return TopologySpreadConstraint(skew, key, **fields)


def term(key: str = HOSTNAME, selector: LabelSelector | None = None, **fields) -> PodAffinityTerm:
    return PodAffinityTerm(key, selector if selector is not None else select(app="vllm"), **fields)


def node(name: str, zone: str, taints: tuple[Taint, ...] = (), **labels: str) -> Node:
    return Node(
        name,
        labels={HOSTNAME: name, ZONE: zone, "node.kubernetes.io/instance-type": "p5.48xlarge"}
        | labels,
        taints=list(taints),
    )


def gpu_pool(
    name: str = "gpu", zones: list[str] = ZONES, taints: tuple[Taint, ...] = ()
) -> NodePool:
    return NodePool(
        name,
        requirements=[{"key": ZONE, "operator": "In", "values": list(zones)}],
        taints=list(taints),
    )


def it_requirements(zones: list[str] = ZONES, name: str = "p5.48xlarge") -> Requirements:
    return Requirements.from_node_selector_requirements(
        [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [name]},
            {"key": ZONE, "operator": "In", "values": zones},
            {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]},
        ]
    )


def build(
    pods: list[Pod],
    *,
    running: list[Pod] = (),
    nodes: list[Node] = (),
    pools: list[NodePool] | None = None,
    namespaces: dict[str, Namespace] | None = None,
    policy: PreferencePolicy = PreferencePolicy.RESPECT,
) -> Topology:
    pools = [gpu_pool()] if pools is None else pools
    return Topology.build(
        pods=pods,
        cluster_pods=[*running, *pods],
        nodes={n.name: n for n in nodes},
        existing_nodes=list(nodes),
        domain_groups=build_domain_groups((p, [it_requirements()]) for p in pools),
        namespaces=namespaces or {},
        policy=policy,
    )


def hostname_placeholder(n: int) -> str:
    """A new NodeClaim's name, its hostname while the run decides."""
    return f"gpu-{n}"


def new_nodeclaim(n: int, zones: list[str] = ZONES, **labels: str) -> Requirements:
    """A new NodeClaim's requirements as the scheduler has them: the NodePool's zones and
    its hostname placeholder (its name)."""
    reqs = Requirements.from_node_selector_requirements(
        [
            {"key": ZONE, "operator": "In", "values": zones},
            {"key": HOSTNAME, "operator": "In", "values": [hostname_placeholder(n)]},
        ]
    )
    reqs.add(Requirements.from_labels(labels))
    return reqs


def on(n: Node) -> Requirements:
    """An existing node's requirements: its labels."""
    return Requirements.from_labels(n.labels)


def strict(p: Pod) -> Requirements:
    return Requirements.from_labels(p.node_selector)


def place(topology: Topology, p: Pod, node_requirements: Requirements, taints=()) -> Requirements:
    """What a target's CanAdd then Add do with topology: narrow, then record."""
    narrowed = topology.add_requirements(p, list(taints), strict(p), node_requirements)
    final = node_requirements.copy()
    if narrowed is not None:
        assert final.compatible(narrowed) is None
        final.add(narrowed)
    topology.record(p, list(taints), final)
    return final


def zone_of(reqs: Requirements) -> list[str]:
    return sorted(reqs.get(ZONE).values())


def vllm(i: int, **fields) -> Pod:
    return pod(f"vllm-{i}", labels={"app": "vllm"}, **fields)


# --- domain groups (buildDomainGroups) ---------------------------------------------------------


def test_domain_groups_intersect_the_nodepool_with_each_instance_type():
    pool = gpu_pool(zones=["us-west-2a", "us-west-2b"])
    groups = build_domain_groups(
        [(pool, [it_requirements(), it_requirements(["us-west-2c"], "g6e.12xlarge")])]
    )
    # The instance type offers 2c too, but the NodePool cannot launch there.
    assert sorted(groups[ZONE].domains((), "Ignore")) == ["us-west-2a", "us-west-2b"]
    assert sorted(groups[CAPACITY_TYPE].domains((), "Ignore")) == ["on-demand", "spot"]
    assert sorted(groups["node.kubernetes.io/instance-type"].domains((), "Ignore")) == [
        "g6e.12xlarge",
        "p5.48xlarge",
    ]


def test_domain_groups_keep_nodepool_labels_and_in_requirements_without_instance_types():
    pool = NodePool(
        "reserved",
        requirements=[
            {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
            {"key": "example.com/team", "operator": "NotIn", "values": ["red"]},
        ],
        labels={"example.com/rack": "r12"},
    )
    groups = build_domain_groups([(pool, [])])
    assert groups[ZONE].domains((), "Ignore") == ["us-west-2a"]
    assert groups["example.com/rack"].domains((), "Ignore") == ["r12"]
    assert "example.com/team" not in groups  # NotIn alone is not a domain
    # With an instance type, Karpenter reads every value of every key: a NotIn's excluded ones.
    groups = build_domain_groups([(pool, [it_requirements()])])
    assert groups["example.com/team"].domains((), "Ignore") == ["red"]


def test_domain_group_taints_hide_domains_from_pods_that_do_not_tolerate_them():
    groups = build_domain_groups(
        [
            (gpu_pool("gpu", ["us-west-2a", "us-west-2b"], (GPU_TAINT,)), [it_requirements()]),
            (gpu_pool("general", ["us-west-2c"]), [it_requirements()]),
        ]
    )
    zones = groups[ZONE]
    assert sorted(zones.domains((), "Honor")) == ["us-west-2c"]
    assert sorted(zones.domains([TOLERATE_GPU], "Honor")) == ZONES
    assert sorted(zones.domains((), "Ignore")) == ZONES


def test_a_domain_offered_without_taints_is_open_to_every_pod():
    group = TopologyDomainGroup()
    group.insert("us-west-2a", [GPU_TAINT])
    group.insert("us-west-2a", [])
    group.insert("us-west-2a", [Taint("dedicated", "ml", "NoSchedule")])
    assert group.domains((), "Honor") == ["us-west-2a"]


def test_prefer_no_schedule_taints_count_for_domains_as_karpenter_tolerates_them():
    group = TopologyDomainGroup()
    group.insert("us-west-2a", [Taint("spot", None, "PreferNoSchedule")])
    assert group.domains((), "Honor") == []
    assert group.domains([Toleration(operator="Exists", effect="PreferNoSchedule")], "Honor") == [
        "us-west-2a"
    ]


# --- topology spread ----------------------------------------------------------------------------


def test_four_gpu_pods_spread_over_three_zones_by_count_then_zone_name():
    pods = [vllm(i, topology_spread_constraints=(spread(),)) for i in range(4)]
    topology = build(pods)
    chosen = [zone_of(place(topology, p, new_nodeclaim(i))) for i, p in enumerate(pods)]
    assert chosen == [["us-west-2a"], ["us-west-2b"], ["us-west-2c"], ["us-west-2a"]]


def test_spread_counts_running_pods_and_goes_to_the_emptiest_zone():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    running = [
        vllm(10, node="ip-10-0-0"),
        vllm(11, node="ip-10-0-0"),
        vllm(12, node="ip-10-0-1"),
    ]
    p = vllm(0, topology_spread_constraints=(spread(),))
    topology = build([p], running=running, nodes=nodes)
    assert zone_of(place(topology, p, new_nodeclaim(1))) == ["us-west-2c"]


def test_spread_refuses_a_zone_over_max_skew_with_karpenters_words():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    running = [vllm(10, node="ip-10-0-0"), vllm(11, node="ip-10-0-0")]
    p = vllm(0, topology_spread_constraints=(spread(),))
    topology = build([p], running=running, nodes=nodes)
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(p, [], strict(p), on(nodes[0]))
    assert str(err.value) == (
        "unsatisfiable topology constraint for topology spread, key=topology.kubernetes.io/zone "
        "(counts = us-west-2a: 2, us-west-2b: 0, us-west-2c: 0, "
        "podDomains = topology.kubernetes.io/zone Exists, "
        "nodeDomains = topology.kubernetes.io/zone In [us-west-2a]"
    )
    assert err.value.type is TopologyType.SPREAD and not err.value.inverse
    (cause,) = err.value.causes
    assert (cause.domain, cause.count, cause.pods) == (
        "us-west-2a",
        2,
        ("inference/vllm-10", "inference/vllm-11"),
    )
    # The emptiest zone's node takes it.
    assert place(topology, p, on(nodes[1])).get(ZONE).values() == {"us-west-2b"}


def test_max_skew_two_allows_two_more_in_a_zone():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    running = [vllm(10, node="ip-10-0-0")]
    p = vllm(0, topology_spread_constraints=(spread(skew=2),))
    topology = build([p], running=running, nodes=nodes)
    # 1 running + itself = 2, minimum 0: skew 2 allows it.
    assert place(topology, p, on(nodes[0])).get(ZONE).values() == {"us-west-2a"}


def test_min_domains_counts_the_minimum_as_zero_while_too_few_domains_exist():
    nodes = [node("ip-10-0-0", "us-west-2a"), node("ip-10-0-1", "us-west-2b")]
    running = [vllm(10, node="ip-10-0-0"), vllm(11, node="ip-10-0-1")]
    pods = [vllm(0, topology_spread_constraints=(spread(min_domains=3),))]
    # Only two zones are known (no NodePool): with minDomains 3 the minimum is taken as 0, so
    # a third pod in a zone (1 + 1 - 0 > 1) breaks the skew.
    topology = build(pods, running=running, nodes=nodes, pools=[])
    with pytest.raises(TopologyError):
        topology.add_requirements(pods[0], [], strict(pods[0]), on(nodes[0]))
    without = [vllm(0, topology_spread_constraints=(spread(),))]
    topology = build(without, running=running, nodes=nodes, pools=[])
    assert place(topology, without[0], on(nodes[0])).get(ZONE).values() == {"us-west-2a"}


def test_spread_on_hostname_lets_each_new_nodeclaim_take_max_skew_pods():
    workers = [pod(f"ray-worker-{i}", labels={"ray.io/node-type": "worker"}) for i in range(3)]
    tsc = spread(HOSTNAME, label_selector=select(**{"ray.io/node-type": "worker"}))
    workers = [dataclasses.replace(w, topology_spread_constraints=(tsc,)) for w in workers]
    topology = build(workers)
    place(topology, workers[0], new_nodeclaim(1))
    topology.register(HOSTNAME, hostname_placeholder(1))
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(workers[1], [], strict(workers[1]), new_nodeclaim(1))
    assert "key=kubernetes.io/hostname" in str(err.value)
    assert place(topology, workers[1], new_nodeclaim(2)).get(HOSTNAME).values() == {
        hostname_placeholder(2)
    }


def test_an_unknown_topology_key_has_no_domain():
    p = vllm(0, topology_spread_constraints=(spread("example.com/unknown"),))
    topology = build([p])
    with pytest.raises(TopologyError):
        topology.add_requirements(p, [], strict(p), new_nodeclaim(1))


def test_spread_without_label_selector_counts_running_pods_but_not_placed_ones():
    nodes = [node("ip-10-0-0", "us-west-2a"), node("ip-10-0-1", "us-west-2b")]
    running = [vllm(10, node="ip-10-0-0")]
    pods = [vllm(i, topology_spread_constraints=(spread(label_selector=None),)) for i in range(3)]
    topology = build(pods, running=running, nodes=nodes, pools=[])
    (group,) = topology.groups()
    assert group.domains == {"us-west-2a": 1, "us-west-2b": 0}
    # The pod itself is not selected (a nil selector selects nothing): 2b, then 2b again.
    assert [
        zone_of(place(topology, p, new_nodeclaim(i, ["us-west-2a", "us-west-2b"])))
        for i, p in enumerate(pods[:2])
    ] == [["us-west-2b"], ["us-west-2b"]]
    assert group.domains == {"us-west-2a": 1, "us-west-2b": 0}


# --- node filter (nodeAffinityPolicy, nodeTaintsPolicy) ----------------------------------------


def test_node_affinity_policy_honor_counts_only_nodes_the_pod_could_use():
    nodes = [
        node("ip-10-0-0", "us-west-2a", **{CAPACITY_TYPE: "spot"}),
        node("ip-10-0-1", "us-west-2b", **{CAPACITY_TYPE: "on-demand"}),
    ]
    running = [vllm(10, node="ip-10-0-0"), vllm(11, node="ip-10-0-0")]
    honor = vllm(
        0, node_selector={CAPACITY_TYPE: "on-demand"}, topology_spread_constraints=(spread(),)
    )
    topology = build([honor], running=running, nodes=nodes, pools=[])
    (group,) = topology.groups()
    # The spot node is not one the pod could use: neither its pods nor its zone count.
    assert group.domains == {"us-west-2b": 0}
    ignore = vllm(
        1,
        node_selector={CAPACITY_TYPE: "on-demand"},
        topology_spread_constraints=(spread(node_affinity_policy="Ignore"),),
    )
    topology = build([ignore], running=running, nodes=nodes, pools=[])
    (group,) = topology.groups()
    assert group.domains == {"us-west-2a": 2, "us-west-2b": 0}


def test_node_taints_policy_honor_skips_untolerated_nodes_and_nodepools():
    nodes = [
        node("gpu-0", "us-west-2a", (GPU_TAINT,)),
        node("cpu-0", "us-west-2b"),
    ]
    running = [vllm(10, node="gpu-0"), vllm(11, node="gpu-0")]
    pools = [gpu_pool("gpu", ["us-west-2a"], (GPU_TAINT,)), gpu_pool("cpu", ["us-west-2b"])]
    honor = vllm(0, topology_spread_constraints=(spread(node_taints_policy="Honor"),))
    topology = build([honor], running=running, nodes=nodes, pools=pools)
    (group,) = topology.groups()
    assert group.domains == {"us-west-2b": 0}
    default = vllm(1, topology_spread_constraints=(spread(),))  # Ignore
    topology = build([default], running=running, nodes=nodes, pools=pools)
    (group,) = topology.groups()
    assert group.domains == {"us-west-2a": 2, "us-west-2b": 0}


def test_node_filter_terms_are_ored_and_each_carries_the_node_selector():
    p = vllm(
        0,
        node_selector={"kubernetes.io/arch": "amd64"},
        required_node_affinity={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}]},
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2c"]}]},
            ]
        },
    )
    node_filter = make_node_filter(p, "Ignore", "Honor")
    amd64 = {"kubernetes.io/arch": "amd64"}
    assert node_filter.matches([], Requirements.from_labels({ZONE: "us-west-2c"} | amd64))
    assert not node_filter.matches([], Requirements.from_labels({ZONE: "us-west-2b"} | amd64))
    assert not node_filter.matches([], Requirements.from_labels({ZONE: "us-west-2a"}))


def test_pods_whose_node_selectors_differ_only_in_values_share_a_group_as_in_karpenter():
    a = vllm(0, node_selector={ZONE: "us-west-2a"}, topology_spread_constraints=(spread(),))
    b = vllm(1, node_selector={ZONE: "us-west-2b"}, topology_spread_constraints=(spread(),))
    c = vllm(2, node_selector={CAPACITY_TYPE: "spot"}, topology_spread_constraints=(spread(),))
    topology = build([a, b, c])
    groups = topology.groups()
    assert len(groups) == 2
    assert groups[0].owners == {a.key, b.key} and groups[1].owners == {c.key}


# --- pod anti-affinity ---------------------------------------------------------------------------


def test_three_vllm_replicas_with_hostname_anti_affinity_need_three_nodeclaims():
    anti = PodAffinity(required=(term(),))
    replicas = [vllm(i, pod_anti_affinity=anti) for i in range(3)]
    topology = build(replicas)
    (group,) = topology.owned(replicas[0])
    assert group.owners == {r.key for r in replicas}
    # Their anti-affinity also keeps them from others (the inverse rule): one more group.
    assert len(topology.groups()) == 2
    place(topology, replicas[0], new_nodeclaim(1))
    topology.register(HOSTNAME, hostname_placeholder(1))
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(replicas[1], [], strict(replicas[1]), new_nodeclaim(1))
    assert str(err.value).startswith(
        "unsatisfiable topology constraint for pod anti-affinity, key=kubernetes.io/hostname "
        "(counts = gpu-1: 1, podDomains = kubernetes.io/hostname Exists, "
        "nodeDomains = kubernetes.io/hostname In [gpu-1]"
    )
    assert err.value.causes[0].pods == ("inference/vllm-0",)
    place(topology, replicas[1], new_nodeclaim(2))
    place(topology, replicas[2], new_nodeclaim(3))
    assert group.domains == {
        hostname_placeholder(1): 1,
        hostname_placeholder(2): 1,
        hostname_placeholder(3): 1,
    }


def test_zone_anti_affinity_on_a_multi_zone_nodeclaim_blocks_every_zone_it_may_land_in():
    anti = PodAffinity(required=(term(ZONE),))
    replicas = [vllm(i, pod_anti_affinity=anti) for i in range(2)]
    topology = build(replicas)
    # Anti-affinity narrows a NodeClaim to the empty domains, all three here; once placed,
    # the pod blocks all three, as it may land in any of them.
    assert zone_of(place(topology, replicas[0], new_nodeclaim(1))) == ZONES
    with pytest.raises(TopologyError):
        topology.add_requirements(replicas[1], [], strict(replicas[1]), new_nodeclaim(2))


def test_running_pods_anti_affinity_keeps_selected_pods_out_of_its_domain():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    kv_cache = pod(
        "kv-cache-0",
        labels={"app": "kv-cache"},
        node="ip-10-0-1",
        pod_anti_affinity=PodAffinity(required=(term(ZONE, select(role="decoder")),)),
    )
    decoder = pod("decoder-0", labels={"role": "decoder"})
    topology = build([decoder], running=[kv_cache], nodes=nodes)
    narrowed = topology.add_requirements(decoder, [], strict(decoder), new_nodeclaim(1))
    assert zone_of(narrowed) == ["us-west-2a", "us-west-2c"]
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(decoder, [], strict(decoder), on(nodes[1]))
    assert err.value.inverse and err.value.type is TopologyType.POD_ANTI_AFFINITY
    assert err.value.causes[0].pods == ("inference/kv-cache-0",)
    # A pod the running pod's selector does not pick is free to go there.
    other = pod("prefill-0", labels={"role": "prefill"})
    topology = build([other], running=[kv_cache], nodes=nodes)
    assert topology.add_requirements(other, [], strict(other), on(nodes[1])) is None


def test_a_placed_pods_anti_affinity_keeps_later_pods_away():
    guard = pod(
        "exclusive-0",
        labels={"app": "exclusive"},
        pod_anti_affinity=PodAffinity(required=(term(ZONE, select(app="batch")),)),
    )
    batch = pod("batch-0", labels={"app": "batch"})
    topology = build([guard, batch])
    place(topology, guard, new_nodeclaim(1, ["us-west-2b"]))
    narrowed = topology.add_requirements(batch, [], strict(batch), new_nodeclaim(2))
    assert zone_of(narrowed) == ["us-west-2a", "us-west-2c"]


def test_finished_pods_and_pods_on_missing_nodes_do_not_hold_anti_affinity():
    nodes = [node("ip-10-0-1", "us-west-2b")]
    anti = PodAffinity(required=(term(ZONE, select(role="decoder")),))
    done = pod("kv-cache-0", node="ip-10-0-1", pod_anti_affinity=anti, phase="Succeeded")
    gone = pod("kv-cache-1", node="ip-10-0-9", pod_anti_affinity=anti)
    decoder = pod("decoder-0", labels={"role": "decoder"})
    topology = build([decoder], running=[done, gone], nodes=nodes)
    assert topology.empty
    assert topology.add_requirements(decoder, [], strict(decoder), on(nodes[0])) is None


# --- pod affinity ----------------------------------------------------------------------------


def test_decoder_with_zone_affinity_goes_where_the_kv_cache_runs():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    kv_cache = pod("kv-cache-0", labels={"app": "kv-cache"}, node="ip-10-0-1")
    decoder = pod(
        "decoder-0",
        labels={"role": "decoder"},
        pod_affinity=PodAffinity(required=(term(ZONE, select(app="kv-cache")),)),
    )
    topology = build([decoder], running=[kv_cache], nodes=nodes)
    assert zone_of(place(topology, decoder, new_nodeclaim(1))) == ["us-west-2b"]
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(decoder, [], strict(decoder), on(nodes[0]))
    assert err.value.type is TopologyType.POD_AFFINITY
    (cause,) = err.value.causes  # where it would have had to go
    assert (cause.domain, cause.pods) == ("us-west-2b", ("inference/kv-cache-0",))


def test_affinity_to_a_pod_that_is_nowhere_refuses_unless_the_pod_selects_itself():
    lonely = pod(
        "decoder-0",
        labels={"role": "decoder"},
        pod_affinity=PodAffinity(required=(term(ZONE, select(app="kv-cache")),)),
    )
    topology = build([lonely])
    with pytest.raises(TopologyError):
        topology.add_requirements(lonely, [], strict(lonely), new_nodeclaim(1))
    # A LeaderWorkerSet group with affinity to its own group starts in the first zone (by
    # name) and the rest follow it.
    group_labels = {"leaderworkerset.sigs.k8s.io/group-key": "g0"}
    lws = [
        pod(
            f"llama-0-{i}",
            labels=group_labels,
            pod_affinity=PodAffinity(required=(term(ZONE, select(**group_labels)),)),
        )
        for i in range(2)
    ]
    topology = build(lws)
    assert zone_of(place(topology, lws[0], new_nodeclaim(1))) == ["us-west-2a"]
    assert zone_of(place(topology, lws[1], new_nodeclaim(2))) == ["us-west-2a"]


def test_self_affinity_starts_in_the_target_zone_the_pod_shares():
    group_labels = {"leaderworkerset.sigs.k8s.io/group-key": "g1"}
    p = pod(
        "llama-1-0",
        labels=group_labels,
        pod_affinity=PodAffinity(required=(term(ZONE, select(**group_labels)),)),
    )
    topology = build([p])
    narrowed = topology.add_requirements(p, [], strict(p), new_nodeclaim(1, ["us-west-2c"]))
    assert zone_of(narrowed) == ["us-west-2c"]


# --- matchLabelKeys, namespaces --------------------------------------------------------------


def test_match_label_keys_count_only_the_pods_of_the_same_revision():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    old = {"app": "vllm", "pod-template-hash": "6d4f9"}
    new = {"app": "vllm", "pod-template-hash": "7c8b2"}
    running = [pod(f"vllm-old-{i}", labels=old, node="ip-10-0-0") for i in range(3)]
    tsc = spread(match_label_keys=("pod-template-hash",))
    p = pod("vllm-new-0", labels=new, topology_spread_constraints=(tsc,))
    topology = build([p], running=running, nodes=nodes)
    (group,) = topology.groups()
    assert group.domains == dict.fromkeys(ZONES, 0)
    assert zone_of(place(topology, p, new_nodeclaim(1))) == ["us-west-2a"]
    without = dataclasses.replace(p, topology_spread_constraints=(spread(),))
    topology = build([without], running=running, nodes=nodes)
    assert zone_of(place(topology, without, new_nodeclaim(1))) == ["us-west-2b"]


def test_affinity_match_and_mismatch_label_keys_merge_as_the_apiserver_does():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    tenant_a = pod("trainer-0", ns="ml", labels={"tenant": "a"}, node="ip-10-0-0")
    tenant_b = pod("trainer-1", ns="ml", labels={"tenant": "b"}, node="ip-10-0-1")
    anti = PodAffinity(required=(term(ZONE, LabelSelector(), mismatch_label_keys=("tenant",)),))
    p = pod("trainer-2", ns="ml", labels={"tenant": "a"}, pod_anti_affinity=anti)
    topology = build([p], running=[tenant_a, tenant_b], nodes=nodes)
    # Away from other tenants' pods only.
    assert zone_of(topology.add_requirements(p, [], strict(p), new_nodeclaim(1))) == [
        "us-west-2a",
        "us-west-2c",
    ]


def test_namespace_selector_counts_pods_of_the_selected_namespaces():
    nodes = [node(f"ip-10-0-{i}", z) for i, z in enumerate(ZONES)]
    running = [
        pod("vllm-a", ns="team-a", labels={"app": "vllm"}, node="ip-10-0-0"),
        pod("vllm-b", ns="team-b", labels={"app": "vllm"}, node="ip-10-0-1"),
        pod("vllm-c", ns="sandbox", labels={"app": "vllm"}, node="ip-10-0-2"),
    ]
    namespaces = {
        "team-a": Namespace("team-a", {"tier": "prod"}),
        "team-b": Namespace("team-b", {"tier": "prod"}),
    }
    prod = term(ZONE, namespace_selector=select(tier="prod"))
    p = vllm(0, ns="serving", pod_anti_affinity=PodAffinity(required=(prod,)))
    topology = build([p], running=running, nodes=nodes, namespaces=namespaces)
    assert zone_of(topology.add_requirements(p, [], strict(p), new_nodeclaim(1))) == ["us-west-2c"]
    # The empty selector picks every namespace, those only known from their pods too.
    everywhere = term(ZONE, namespace_selector=LabelSelector())
    p = vllm(0, ns="serving", pod_anti_affinity=PodAffinity(required=(everywhere,)))
    topology = build([p], running=running, nodes=nodes, namespaces=namespaces)
    with pytest.raises(TopologyError):
        topology.add_requirements(p, [], strict(p), new_nodeclaim(1))
    # Every namespace carries its name as a label.
    by_name = term(ZONE, namespace_selector=select(**{"kubernetes.io/metadata.name": "sandbox"}))
    p = vllm(0, ns="serving", pod_anti_affinity=PodAffinity(required=(by_name,)))
    topology = build([p], running=running, nodes=nodes, namespaces=namespaces)
    assert zone_of(topology.add_requirements(p, [], strict(p), new_nodeclaim(1))) == [
        "us-west-2a",
        "us-west-2b",
    ]


# --- counting the snapshot -------------------------------------------------------------------


def test_only_running_pods_on_known_nodes_count():
    nodes = [node("ip-10-0-0", "us-west-2a")]
    counted = vllm(10, node="ip-10-0-0", phase="Running")
    pending = vllm(11)
    finished = vllm(12, node="ip-10-0-0", phase="Succeeded")
    failed = vllm(13, node="ip-10-0-0", phase="Failed")
    terminating = vllm(14, node="ip-10-0-0", deleting=True)
    orphan = vllm(15, node="ip-10-0-9")
    assert [ignored_for_topology(p) for p in (counted, pending, finished, terminating)] == [
        False,
        True,
        True,
        True,
    ]
    # A pod being rescheduled counts where it goes, not where it is.
    moving = vllm(0, node="ip-10-0-0", topology_spread_constraints=(spread(),))
    topology = build(
        [moving],
        running=[counted, pending, finished, failed, terminating, orphan],
        nodes=nodes,
        pools=[],
    )
    (group,) = topology.groups()
    assert group.domains == {"us-west-2a": 1}


def test_hostname_falls_back_to_the_node_name_when_the_label_is_missing():
    bare = Node("ip-10-0-7.us-west-2.compute.internal", labels={ZONE: "us-west-2a"})
    running = [vllm(10, node=bare.name)]
    p = vllm(0, pod_anti_affinity=PodAffinity(required=(term(),)))
    topology = build([p], running=running, nodes=[bare], pools=[])
    (group,) = topology.owned(p)
    assert group.domains == {bare.name: 1}


def test_existing_nodes_register_their_domains_without_pods():
    nodes = [node("ip-10-0-0", "us-west-2a"), node("ip-10-0-1", "us-west-2d")]
    p = vllm(0, topology_spread_constraints=(spread(),))
    topology = build([p], nodes=nodes)
    (group,) = topology.groups()
    assert sorted(group.domains) == [*ZONES, "us-west-2d"]


# --- relaxation and policy --------------------------------------------------------------------


def test_update_after_relaxing_a_preferred_anti_affinity_releases_the_pod():
    preferred = PodAffinity(preferred=(WeightedPodAffinityTerm(100, term()),))
    replicas = [vllm(i, pod_anti_affinity=preferred) for i in range(2)]
    topology = build(replicas)
    place(topology, replicas[0], new_nodeclaim(1))
    topology.register(HOSTNAME, hostname_placeholder(1))
    # Respected as required first.
    with pytest.raises(TopologyError):
        topology.add_requirements(replicas[1], [], strict(replicas[1]), new_nodeclaim(1))
    relaxed = dataclasses.replace(replicas[1], pod_anti_affinity=PodAffinity())
    topology.update(relaxed)
    assert topology.owned(relaxed) == []
    assert topology.add_requirements(relaxed, [], strict(relaxed), new_nodeclaim(1)) is None


def test_ignore_policy_drops_preferences_and_schedule_anyway_spread():
    p = vllm(
        0,
        pod_anti_affinity=PodAffinity(preferred=(WeightedPodAffinityTerm(100, term()),)),
        topology_spread_constraints=(spread(when_unsatisfiable="ScheduleAnyway"),),
    )
    assert len(build([p]).groups()) == 2
    assert build([p], policy=PreferencePolicy.IGNORE).empty


def test_a_cluster_without_topology_builds_no_group():
    nodes = [node("ip-10-0-0", "us-west-2a")]
    pods = [pod(f"train-{i}", ns="ml", labels={"job-name": "train"}) for i in range(50)]
    topology = build(pods, running=[vllm(10, node="ip-10-0-0")], nodes=nodes)
    assert topology.empty
    assert topology.add_requirements(pods[0], [], strict(pods[0]), on(nodes[0])) is None


def test_unregister_forgets_a_domain():
    p = vllm(0, pod_anti_affinity=PodAffinity(required=(term(ZONE),)))
    topology = build([p])
    topology.unregister(ZONE, "us-west-2a")
    narrowed = topology.add_requirements(p, [], strict(p), new_nodeclaim(1))
    assert zone_of(narrowed) == ["us-west-2b", "us-west-2c"]


# --- incremental counts equal a recount ----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    placements=st.lists(
        st.tuples(
            st.sampled_from(["vllm", "ray", "kv-cache"]),
            st.sampled_from(ZONES),
            st.integers(0, 3),
        ),
        max_size=12,
    )
)
def test_recorded_placements_count_as_a_fresh_topology_counts_them_running(placements):
    """Counting is incremental: a run's records leave the counts a topology built from the
    same pods running on those nodes would read from the snapshot."""
    constraints = dict(
        topology_spread_constraints=(spread(label_selector=select(app="vllm")),),
        pod_anti_affinity=PodAffinity(required=(term(HOSTNAME, select(app="kv-cache")),)),
    )
    probe = pod("probe-0", labels={"app": "probe"}, **constraints)
    nodes = {f"ip-{z}-{h}": node(f"ip-{z}-{h}", z) for z in ZONES for h in range(4)}
    placed = [pod(f"{app}-{i}", labels={"app": app}) for i, (app, _, _) in enumerate(placements)]
    topology = build([probe, *placed], nodes=list(nodes.values()))
    for p, (_, zone, h) in zip(placed, placements, strict=True):
        topology.record(p, [], on(nodes[f"ip-{zone}-{h}"]))
    running = [
        dataclasses.replace(p, node_name=f"ip-{zone}-{h}")
        for p, (_, zone, h) in zip(placed, placements, strict=True)
    ]
    fresh = build([probe], running=running, nodes=list(nodes.values()))
    assert [g.domains for g in topology.owned(probe)] == [g.domains for g in fresh.owned(probe)]


def test_label_selector_expressions():
    selector = LabelSelector(
        (("app", "vllm"),),
        (
            LabelSelectorRequirement("tier", "In", ("decode", "prefill")),
            LabelSelectorRequirement("canary", "DoesNotExist"),
            LabelSelectorRequirement("gpu", "Exists"),
            LabelSelectorRequirement("zone", "NotIn", ("us-west-2c",)),
        ),
    )
    base = {"app": "vllm", "tier": "decode", "gpu": "h100"}
    assert selector.matches(base)
    assert selector.matches(base | {"zone": "us-west-2a"})
    assert not selector.matches(base | {"zone": "us-west-2c"})
    assert not selector.matches(base | {"canary": "true"})
    assert not selector.matches({k: v for k, v in base.items() if k != "gpu"})
    assert not selector.matches(base | {"tier": "train"})
    assert LabelSelector().matches({})


def test_requirement_from_topology_keeps_karpenters_operators():
    # DoesNotExist when no domain is left: the refusal shows 'In []' as Karpenter avoids.
    p = vllm(0, pod_anti_affinity=PodAffinity(required=(term(ZONE),)))
    topology = build([p])
    (group,) = topology.owned(p)
    assert str(
        group.get(p, Requirement.new(ZONE, "Exists"), Requirement.new(ZONE, "In", ["x"]))
    ) == ("topology.kubernetes.io/zone DoesNotExist")


def test_a_selected_pod_counts_for_spread_only_once_its_zone_is_one_value():
    owner = vllm(0, topology_spread_constraints=(spread(),))
    plain = vllm(1)  # selected by the spread, constrained by nothing
    topology = build([owner, plain])
    (group,) = topology.owned(owner)
    topology.record(plain, [], new_nodeclaim(1))
    assert group.domains == dict.fromkeys(ZONES, 0)
    topology.record(plain, [], new_nodeclaim(2, ["us-west-2b"]))
    assert group.domains == {"us-west-2a": 0, "us-west-2b": 1, "us-west-2c": 0}


def test_a_node_without_the_topology_label_is_refused_by_the_compatibility_check():
    """The topology narrows a node that has no zone label to a zone; as Karpenter checks the
    narrowed requirements against the node's (strictly, for a node), the node is refused."""
    bare = Node("cpu-0", labels={HOSTNAME: "cpu-0"})
    p = vllm(0, topology_spread_constraints=(spread(),))
    topology = build([p], nodes=[bare])
    narrowed = topology.add_requirements(p, [], strict(p), on(bare))
    assert zone_of(narrowed) == ["us-west-2a"]
    assert on(bare).compatible(narrowed, frozenset()) == (
        'label "topology.kubernetes.io/zone" does not have known values'
    )


def test_a_refusal_prints_the_first_25_domains_by_name_and_how_many_others():
    nodes = [node(f"ip-10-0-1-{i:02d}", "us-west-2a") for i in range(30)]
    running = [vllm(10, node="ip-10-0-1-07")]
    p = vllm(0, pod_anti_affinity=PodAffinity(required=(term(),)))
    topology = build([p], running=running, nodes=nodes, pools=[])
    with pytest.raises(TopologyError) as err:
        topology.add_requirements(p, [], strict(p), on(nodes[7]))
    counts = str(err.value).split("(counts = ")[1].split(", podDomains")[0]
    shown = [f"ip-10-0-1-{i:02d}: {1 if i == 7 else 0}" for i in range(25)]
    assert counts == ", ".join(shown) + " and 5 other(s)"
    assert err.value.counts["ip-10-0-1-29"] == 0 and len(err.value.counts) == 30
