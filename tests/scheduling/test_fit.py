"""Fit besides devices: resources, tolerations, instance type filtering, limits, options."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.featuregates import FeatureGates
from allocator.features.taints import toleration_matches as tolerates
from allocator.model import InstanceType, Offering, Pod, Taint, Toleration
from allocator.quantity import Quantity
from allocator.requirements import Requirements
from allocator.scheduling.fit import (
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    FilterMemo,
    filter_instance_types,
    fits,
    format_resources,
    instance_type_info,
    is_ephemeral,
    pod_requests,
    untolerated_taint,
    within_limits,
)
from allocator.scheduling.queue import queue_key
from allocator.simulation import SimulationOptions

EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]


def test_pod_requests_count_one_pod_slot_and_print_like_karpenter():
    pod = Pod(
        "default",
        "train",
        "u",
        requests={"cpu": Quantity.parse("1500m"), "memory": Quantity.parse("3Gi")},
    )
    requests = pod_requests(pod)
    assert requests == {"cpu": 1500, "memory": 3 * 1024**3 * 1000, "pods": 1000}
    assert format_resources(requests) == '{"cpu":"1500m","memory":"3Gi","pods":"1"}'
    assert fits(requests, {"cpu": 2000, "memory": 4 * 1024**3 * 1000, "pods": 110_000})
    assert not fits(requests, {"cpu": 1000, "memory": 4 * 1024**3 * 1000, "pods": 110_000})


@given(
    key=st.sampled_from(["nvidia.com/gpu", "dedicated", "spot"]),
    value=st.sampled_from([None, "present", "h100"]),
    effect=st.sampled_from(EFFECTS),
)
def test_exists_without_key_tolerates_everything_and_equal_needs_the_value(key, value, effect):
    taint = Taint(key, value, effect)
    assert tolerates(Toleration(operator="Exists"), taint)
    assert tolerates(Toleration(key=key, operator="Equal", value=value, effect=effect), taint)
    other = "other" if value != "other" else "x"
    assert not tolerates(Toleration(key=key, operator="Equal", value=other), taint)
    wrong_effect = next(e for e in EFFECTS if e != effect)
    assert not tolerates(Toleration(key=key, operator="Exists", effect=wrong_effect), taint)
    # Kubernetes' ToleratesTaint: an operator it does not know tolerates nothing.
    assert not tolerates(Toleration(key=key, operator="Gt", value=value), taint)


def test_prefer_no_schedule_blocks_like_any_taint_except_for_daemon_overhead():
    """Karpenter's Taints.Tolerates holds every taint; only relaxation (or a DaemonSet pod,
    whose overhead ignores them) gets past a PreferNoSchedule taint."""
    taints = [
        Taint("dedicated", "inference", "PreferNoSchedule"),
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
    ]
    assert untolerated_taint([], taints) == taints[0]
    assert untolerated_taint([], taints, prefer_no_schedule=False) == taints[1]
    tolerations = [
        Toleration(key="nvidia.com/gpu", operator="Exists"),
        Toleration(operator="Exists", effect="PreferNoSchedule"),
    ]
    assert untolerated_taint(tolerations, taints) is None


@pytest.mark.parametrize(
    ("taint", "ephemeral"),
    [
        (Taint("node.kubernetes.io/not-ready", None, "NoSchedule"), True),
        (Taint("node.kubernetes.io/not-ready", None, "NoExecute"), True),
        (Taint("node.kubernetes.io/unreachable", None, "NoSchedule"), True),
        (Taint("node.kubernetes.io/unreachable", None, "NoExecute"), False),
        (Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule"), True),
        (Taint("karpenter.sh/unregistered", None, "NoExecute"), True),
        (Taint("readiness.k8s.io/gpu-driver-ready", None, "NoSchedule"), True),
        (Taint("readiness.k8s.io/network", "pending", "NoExecute"), True),
        (Taint("nvidia.com/gpu", "present", "NoSchedule"), False),
    ],
)
def test_known_ephemeral_taints_match_by_key_and_effect_or_readiness_prefix(taint, ephemeral):
    assert is_ephemeral(taint) is ephemeral


def test_startup_taints_are_ephemeral_by_key_and_effect():
    startup = [Taint("nvidia.com/gpu-driver", "installing", "NoSchedule")]
    assert is_ephemeral(Taint("nvidia.com/gpu-driver", "other", "NoSchedule"), startup)
    assert not is_ephemeral(Taint("nvidia.com/gpu-driver", "installing", "NoExecute"), startup)


def _it(name: str, cpu: str, offerings: list[Offering]) -> InstanceType:
    return InstanceType(
        name,
        capacity={"cpu": Quantity.parse(cpu), "pods": Quantity.parse("110")},
        offerings=offerings,
    )


@given(
    prices=st.lists(
        st.floats(min_value=0.01, max_value=100, allow_nan=False), min_size=1, max_size=6
    ),
    zone=st.sampled_from(["us-west-2a", "us-west-2b"]),
)
def test_filter_orders_by_cheapest_allowed_offering_then_name(prices, zone):
    infos = []
    for i, price in enumerate(prices):
        offerings = [
            Offering("us-west-2a", "on-demand", price),
            # The other zone is cheaper but only counts when the requirements allow it.
            Offering("us-west-2b", "on-demand", price / 2),
        ]
        infos.append(instance_type_info(_it(f"it-{i}", "8", offerings)))
    reqs = Requirements.from_labels({ZONE: zone})
    outcome = filter_instance_types(infos, reqs, {"cpu": 1000, "pods": 1000})
    factor = 1 if zone == "us-west-2a" else 0.5
    expected = sorted(((p * factor, f"it-{i}") for i, p in enumerate(prices)))
    assert [info.name for info in outcome.remaining] == [name for _, name in expected]


def test_filter_failure_reasons_name_each_cause():
    offered = [Offering("us-west-2a", "on-demand", 1.0)]
    infos = [
        instance_type_info(_it("small", "2", offered)),
        instance_type_info(
            _it("unavailable", "8", [Offering("us-west-2a", "spot", 1.0, available=False)])
        ),
        instance_type_info(_it("elsewhere", "8", [Offering("us-west-2c", "on-demand", 1.0)])),
    ]
    outcome = filter_instance_types(
        infos, Requirements.from_labels({ZONE: "us-west-2a"}), {"cpu": 4000}
    )
    assert outcome.remaining == []
    assert outcome.failure_reason() == (
        "no instance type met the scheduling requirements or no instance type had enough "
        "resources or no instance type had a required offering"
    )


_ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]


@st.composite
def _catalog(draw):
    """Up to 8 instance types of the p5/g6e families and a sequence of filters asked of one
    run's memo."""
    infos = []
    for i in range(draw(st.integers(1, 8))):
        offerings = [
            Offering(
                zone,
                capacity_type,
                draw(st.sampled_from([1.0, 2.5, 12.29])),
                available=draw(st.booleans()),
            )
            for zone in draw(st.sets(st.sampled_from(_ZONES), min_size=1))
            for capacity_type in draw(st.sets(st.sampled_from(["spot", "on-demand"]), min_size=1))
        ]
        name = f"{draw(st.sampled_from(['p5', 'g6e']))}.{i}xlarge"
        infos.append(
            instance_type_info(_it(name, draw(st.sampled_from(["4", "8", "16"])), offerings))
        )
    asks = draw(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(range(len(infos))), unique=True),
                st.dictionaries(
                    st.sampled_from([ZONE, CAPACITY_TYPE, HOSTNAME]),
                    st.sampled_from([*_ZONES, "spot", "on-demand", "default-1", "default-2"]),
                ),
                st.sampled_from([1000, 6000, 12000, 20000]),
            ),
            min_size=1,
            max_size=6,
        )
    )
    return infos, asks


@pytest.mark.parametrize("indexed", [True, False], ids=["capacity-index", "loop"])
@given(catalog=_catalog(), gpus=st.sampled_from([0, 1000, 8000]), narrow=st.booleans())
def test_the_memo_filters_as_the_full_filter(indexed, catalog, gpus, narrow):
    # One run's memo asked again and again (NodeClaims named default-1, default-2 differ only
    # by hostname, which no instance type defines): the same instance types remain, in the
    # same order, and an empty answer counts the same causes. ``narrow``: each ask after the
    # first starts from what the previous one kept, as a NodeClaim does (the index knows that
    # list already); nvidia.com/gpu is a resource no instance type here offers.
    infos, asks = catalog
    memo = FilterMemo(infos, indexed=indexed)
    kept = None
    for chosen, labels, cpu in asks:
        candidates = kept if narrow and kept else [infos[i] for i in chosen]
        reqs = Requirements.from_labels(labels)
        requests = {"cpu": cpu, "pods": 1000, "nvidia.com/gpu": gpus, "memory": 0}
        fast = filter_instance_types(candidates, reqs, requests, memo)
        plain = filter_instance_types(candidates, reqs, requests)
        assert [i.name for i in fast.remaining] == [i.name for i in plain.remaining]
        if fast.dropped is not None:  # what the index knew it dropped, in the candidates' order
            kept = set(map(id, fast.remaining))
            assert fast.dropped == [i for i in candidates if id(i) not in kept]
        if not plain.remaining:
            assert fast == plain
        kept = fast.remaining
        if not narrow:
            # The list is the caller's: reordering it changes no later answer of the memo.
            fast.remaining.reverse()


@given(
    count=st.integers(1, 150),
    seed=st.randoms(use_true_random=False),
    drops=st.integers(0, 40),
)
def test_a_narrower_mask_lists_as_if_read_anew(count, seed, drops):
    # A NodeClaim filling up drops a few instance types per pod: the index lists the new
    # mask from the list of the one it came from. The list must be the one reading the bits
    # gives (which instance types, in try order), across 64-bit word edges (up to 150 types).
    offered = [Offering("us-west-2a", "on-demand", 1.0)]
    infos = [
        instance_type_info(
            _it(f"c7i.{i}xlarge", str(1 + i % 7), [replace(offered[0], price=1.0 + i % 5)])
        )
        for i in range(count)
    ]
    index, _ = FilterMemo(infos).indexed(Requirements(), infos)
    priced = [i for i in range(len(index.infos)) if index.priced >> i & 1]
    within = sum(1 << i for i in priced if seed.random() < 0.8)
    mask = within
    for i in seed.sample(priced, min(drops, len(priced))):
        mask &= ~(1 << i)
    index.listed(within)
    fresh, _ = FilterMemo(infos).indexed(Requirements(), infos)
    assert index.listed(mask, within) == fresh.listed(mask)
    assert index.listed(mask, within) == fresh.listed(mask)  # and again, from its own list


@given(cpus=st.lists(st.integers(1, 64), min_size=1, max_size=12), seed=st.randoms())
def test_a_nodeclaim_filling_up_is_told_which_instance_types_it_lost(cpus, seed):
    # A NodeClaim's candidates are the list its last filter gave; each pod asks for more
    # CPU. The filter says which candidates it dropped (the report logs them, Add releases
    # them) without reading the 400 others: exactly those missing, in the candidates' order.
    offered = [Offering("us-west-2a", "on-demand", 1.0)]
    infos = [
        instance_type_info(_it(f"m7i.{i}xlarge", str(cpu), [replace(offered[0], price=cpu)]))
        for i, cpu in enumerate(cpus)
    ]
    memo = FilterMemo(infos)
    reqs = Requirements()
    candidates = infos
    asked = 0
    for _ in range(6):
        asked += seed.choice([0, 500, 1000, 4000])
        outcome = filter_instance_types(candidates, reqs, {"cpu": asked, "pods": 1000}, memo)
        kept = set(map(id, outcome.remaining))
        lost = [i for i in candidates if id(i) not in kept]
        if candidates is infos:
            assert outcome.dropped is None  # the NodePool's own list: not the index's order
        elif outcome.remaining:
            assert outcome.dropped == lost
        if not outcome.remaining:
            break
        candidates = outcome.remaining


def test_limits_refuse_instance_types_larger_than_what_remains():
    assert within_limits({"cpu": 16000}, None)
    assert within_limits({"cpu": 16000}, {"cpu": 16000})
    assert not within_limits({"cpu": 16000}, {"cpu": 15999})
    assert within_limits({"cpu": 16000}, {"nvidia.com/gpu": 0})  # no GPUs, not limited


@given(
    cpus=st.lists(st.sampled_from(["4", "8", "16", "48", "192"]), min_size=1, max_size=6),
    charged=st.sampled_from([0, 100_000, 170_000, 200_000]),
)
def test_a_nodepool_offers_the_instance_types_its_cpu_limit_leaves_room_for(cpus, charged):
    # A NodePool limited to 200 vCPUs with ``charged`` milli-CPUs already charged: the types
    # a new NodeClaim may become are those that do not cross the limit, in the pool's order;
    # while even the largest fits, the pool's own list (which the filter's index knows).
    from allocator.model import NodePool
    from allocator.scheduling.nodeclaimtemplate import NodeClaimTemplate

    offered = [Offering("us-west-2a", "on-demand", 1.0)]
    infos = [instance_type_info(_it(f"m7i.{i}xlarge", cpu, offered)) for i, cpu in enumerate(cpus)]
    template = NodeClaimTemplate(
        pool=NodePool("general"),
        requirements=Requirements(),
        instance_types=infos,
        taints=[],
        limits={"cpu": 200_000},
        charged={"cpu": charged},
    )
    remaining = template.remaining()
    kept = template._within_limits(remaining)
    assert kept == [i for i in infos if within_limits(i.capacity, remaining)]
    if len(kept) == len(infos):
        assert kept is infos
    assert template._within_limits(None) is infos


@given(
    pods=st.lists(
        st.tuples(
            st.integers(0, 8),
            st.integers(0, 4),
            st.sampled_from(["09:00", "10:00"]),
            st.sampled_from("abc"),
        ),
        min_size=2,
        max_size=12,
    ),
    seed=st.randoms(use_true_random=False),
)
def test_queue_order_does_not_depend_on_snapshot_order(pods, seed):
    objs = [
        Pod(
            "default",
            f"p{i}",
            uid,
            creation_timestamp=f"2026-12-01T{ts}:00Z",
            requests={"cpu": Quantity.parse(str(cpu)), "memory": Quantity.parse(f"{mem}Gi")},
        )
        for i, (cpu, mem, ts, uid) in enumerate(pods)
    ]
    shuffled = list(objs)
    seed.shuffle(shuffled)
    ordered = sorted(shuffled, key=queue_key)
    assert [p.name for p in ordered] == [p.name for p in sorted(objs, key=queue_key)]
    cpus = [p.requests["cpu"] for p in ordered]
    assert cpus == sorted(cpus, reverse=True)


def test_options_from_json_round_trip_and_name_bad_fields():
    opts = SimulationOptions.from_json(
        {
            "timeout": 2,
            "featureGates": {"DRADeviceTaints": False},
            "disrupt": ["gpu-node-a"],
            "trace": True,
            "traceMaxNodes": 1000,
            "bindingTimeoutSeconds": 300,
        }
    )
    assert opts.gates == FeatureGates.from_mapping({"DRADeviceTaints": False})
    assert SimulationOptions.from_json(opts.to_json()).to_json() == opts.to_json()
    for bad, field in [
        ({"timeout": 0}, "options.timeout"),
        ({"timeout": True}, "options.timeout"),
        ({"featureGates": {"Nope": True}}, "options.featureGates"),
        ({"disrupt": "gpu-node-a"}, "options.disrupt"),
        ({"trace": "yes"}, "options.trace"),
        ({"traceMaxNodes": 0}, "options.traceMaxNodes"),
        ({"colour": "blue"}, "options.colour"),
    ]:
        with pytest.raises(ValueError, match=field.replace(".", r"\.")):
            SimulationOptions.from_json(bad)
