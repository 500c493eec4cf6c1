"""Device Sources and Pool Management."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.model import Device, PoolKey
from allocator.pools import (
    IN_CLUSTER,
    TEMPLATE,
    SliceUniverse,
    device_accessible,
    refilter,
    template_devices,
)
from allocator.requirements import Requirements
from tests.allocator.builders import (
    GPU,
    NIC,
    ZONE,
    existing_node,
    gpu,
    gpus,
    hostname_selector,
    in_flight,
    instance_type,
    it_requirements,
    nic,
    resource_slice,
    selector_in,
    template,
    zone_selector,
)


def names(pools):
    return {p.key.pool: [d.id.device for d in p.devices] for p in pools}


def test_newer_generation_discards_older_slices():
    old = resource_slice("gpus-gen1", gpus(4), pool="rack-1", all_nodes=True, generation=1)
    new = resource_slice(
        "gpus-gen2", gpus(2, prefix="new-"), pool="rack-1", all_nodes=True, generation=2
    )
    # Order of arrival must not matter: the newest generation wins either way.
    for order in ([old, new], [new, old]):
        pools = SliceUniverse(order).gather(None, [Requirements()])
        assert names(pools) == {"rack-1": ["new-0", "new-1"]}
        assert pools[0].generation == 2
        assert not pools[0].incomplete


def test_completeness_counts_slices_that_do_not_match_the_node_claim():
    # Two slices of one pool, declared count 2: one for zone a, one for zone b.
    a = resource_slice(
        "rack-a", gpus(2), pool="rack", node_selector=zone_selector("us-west-2a"), count=2
    )
    b = resource_slice(
        "rack-b",
        gpus(2, prefix="b-"),
        pool="rack",
        node_selector=zone_selector("us-west-2b"),
        count=2,
    )
    nc = in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2a"]})
    pools = SliceUniverse([a, b]).gather(None, [nc.requirements])
    assert names(pools) == {"rack": ["gpu-0", "gpu-1"]}
    assert pools[0].incomplete is False  # rack-b counted although inaccessible
    # Without rack-b the pool is one slice short of its declared count.
    pools = SliceUniverse([a]).gather(None, [nc.requirements])
    assert pools[0].incomplete is True


def test_older_generation_slices_do_not_count_towards_completeness():
    s1 = resource_slice("rack-1", gpus(1), pool="rack", all_nodes=True, generation=3, count=2)
    s0 = resource_slice(
        "rack-0", gpus(1, prefix="x"), pool="rack", all_nodes=True, generation=2, count=2
    )
    pools = SliceUniverse([s0, s1]).gather(None, [Requirements()])
    assert pools[0].incomplete is True


def test_node_name_pinned_slice_only_for_that_existing_node():
    pinned = resource_slice("node-a-gpus", gpus(8), node_name="ip-10-0-1-17")
    universe = SliceUniverse([pinned])
    node = existing_node("ip-10-0-1-17")
    assert names(universe.gather(node.node_name, [node.requirements])) == {
        "node-a-gpus": [f"gpu-{i}" for i in range(8)]
    }
    other = existing_node("ip-10-0-1-18")
    assert universe.gather(other.node_name, [other.requirements]) == []
    # An in-flight NodeClaim has no node name, whatever its requirements say.
    nc = in_flight("gpu-pool-1", [], requirements={"kubernetes.io/hostname": ["ip-10-0-1-17"]})
    assert universe.gather(None, [nc.requirements]) == []


def test_selector_slices_follow_requirements_and_all_nodes_always_match():
    shared = resource_slice("nics", [nic("nic-0")], driver=NIC, all_nodes=True)
    zone_b = resource_slice("zb", gpus(1), node_selector=zone_selector("us-west-2b"))
    universe = SliceUniverse([shared, zone_b])
    a = in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2a"]})
    assert [p.key for p in universe.gather(None, [a.requirements])] == [PoolKey(NIC, "nics")]
    ab = in_flight("gpu-pool-2", [], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    assert [p.key for p in universe.gather(None, [ab.requirements])] == [
        PoolKey(GPU, "zb"),
        PoolKey(NIC, "nics"),
    ]


def test_in_flight_pool_included_when_any_candidate_instance_type_fits():
    arm = resource_slice("grace", gpus(1), node_selector=selector_in("kubernetes.io/arch", "arm64"))
    x86 = instance_type("p5.48xlarge", arch="amd64")
    graviton = instance_type("g5g.16xlarge", arch="arm64")
    universe = SliceUniverse([arm])
    nc = in_flight("gpu-pool-1", [x86])
    variants = [nc.requirements.intersect(it_requirements(x86))]
    assert universe.gather(None, variants) == []
    nc2 = in_flight("gpu-pool-2", [x86, graviton])
    variants = [nc2.requirements.intersect(it_requirements(it)) for it in (x86, graviton)]
    assert names(universe.gather(None, variants)) == {"grace": ["gpu-0"]}


def test_pools_sorted_by_driver_and_pool_and_slices_by_name():
    s = [
        resource_slice("z-slice", [gpu("gpu-9")], pool="b", all_nodes=True, count=2),
        resource_slice("a-slice", [gpu("gpu-1")], pool="b", all_nodes=True, count=2),
        resource_slice("n", [nic("nic-0")], driver=NIC, pool="a", all_nodes=True),
        resource_slice("g", [gpu("gpu-0")], pool="c", all_nodes=True),
    ]
    pools = SliceUniverse(s).gather(None, [Requirements()])
    assert [(p.key.driver, p.key.pool) for p in pools] == [(GPU, "b"), (GPU, "c"), (NIC, "a")]
    assert [d.id.device for d in pools[0].devices] == ["gpu-1", "gpu-9"]


def test_duplicate_device_names_make_the_pool_invalid():
    s = [
        resource_slice("rack-0", gpus(2), pool="rack", all_nodes=True, count=2),
        resource_slice("rack-1", gpus(1), pool="rack", all_nodes=True, count=2),
    ]
    (pool,) = SliceUniverse(s).gather(None, [Requirements()])
    assert pool.invalid and "gpu-0" in pool.invalid_reason
    (ok,) = SliceUniverse(s[:1]).gather(None, [Requirements()])
    assert not ok.invalid


def test_per_device_node_selection():
    devices = [
        Device("gpu-0", {"model": "H100"}, node_name="ip-10-0-1-17"),
        Device("gpu-1", {"model": "H100"}, node_selector=zone_selector("us-west-2a")),
        Device("gpu-2", {"model": "H100"}, all_nodes=True),
        Device("gpu-3", {"model": "H100"}, node_selector=zone_selector("us-west-2b")),
    ]
    s = resource_slice("partitioned", devices, per_device=True)
    universe = SliceUniverse([s])
    node = existing_node("ip-10-0-1-17", zone="us-west-2a")
    assert names(universe.gather(node.node_name, [node.requirements])) == {
        "partitioned": ["gpu-0", "gpu-1", "gpu-2"]
    }
    nc = in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2b"]})
    assert names(universe.gather(None, [nc.requirements])) == {"partitioned": ["gpu-2", "gpu-3"]}


def test_refilter_drops_pools_without_matching_slices_and_keeps_others():
    s = [
        resource_slice("za", gpus(1), pool="za", node_selector=zone_selector("us-west-2a")),
        resource_slice("zb", gpus(1), pool="zb", node_selector=zone_selector("us-west-2b")),
        resource_slice("nics", [nic("nic-0")], driver=NIC, all_nodes=True),
    ]
    nc = in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    superset = SliceUniverse(s).gather(None, [nc.requirements])
    assert len(superset) == 3
    tightened = nc.requirements.intersect(Requirements.from_labels({ZONE: "us-west-2b"}))
    kept = refilter(superset, [tightened])
    assert [p.key.pool for p in kept] == ["zb", "nics"]
    assert kept[1] is superset[2]  # untouched pools are shared, not copied
    assert len(superset) == 3  # the superset itself is not mutated


def test_template_devices_per_instance_type():
    p5 = instance_type(
        "p5.48xlarge",
        [template("p5-gpus", gpus(8)), template("p5-nics", [nic("nic-0")], driver=NIC)],
    )
    out = template_devices({p5.name: p5.resource_slice_templates})
    devs = out["p5.48xlarge"]
    assert len(devs) == 9
    assert all(d.source == TEMPLATE and d.instance_type == "p5.48xlarge" for d in devs)
    assert devs[-1].id == (NIC, "p5-nics", "nic-0")


def test_device_accessible_rules():
    terms = (Requirements.from_labels({ZONE: "us-west-2a"}),)
    reqs = [Requirements.from_labels({ZONE: "us-west-2a"})]
    assert device_accessible(None, None, True, None, reqs)
    assert not device_accessible(None, "node-a", False, None, reqs)
    assert device_accessible(None, "node-a", False, "node-a", reqs)
    assert device_accessible(terms, None, False, None, reqs)
    assert not device_accessible(
        terms, None, False, None, [Requirements.from_labels({ZONE: "us-west-2b"})]
    )


# The index (by node name, AllNodes, selector label) must give exactly what a full scan gives.
@settings(max_examples=60, deadline=None)
@given(
    hosts=st.lists(st.sampled_from(["n1", "n2", "n3", "n4"]), min_size=1, max_size=8),
    kinds=st.lists(
        st.sampled_from(["host", "zone", "name", "all", "multi", "perdev"]), min_size=8, max_size=8
    ),
    nc_host=st.sampled_from([None, "n1", "n2", "n5"]),
    nc_zones=st.lists(st.sampled_from(["us-west-2a", "us-west-2b"]), max_size=2, unique=True),
)
def test_index_equals_full_scan(hosts, kinds, nc_host, nc_zones):
    slices = []
    for i, (host, kind) in enumerate(zip(hosts, kinds, strict=False)):
        kw = {}
        if kind == "host":
            kw["node_selector"] = hostname_selector(host)
        elif kind == "zone":
            kw["node_selector"] = zone_selector("us-west-2a" if i % 2 else "us-west-2b")
        elif kind == "name":
            kw["node_name"] = host
        elif kind == "all":
            kw["all_nodes"] = True
        else:
            kw["node_selector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                        ]
                    },
                    {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "NotIn", "values": ["us-west-2a"]}
                        ]
                    },
                ]
            }
        if kind == "perdev":
            devs = [
                Device("gpu-0", node_name=host),
                Device("gpu-1", node_selector=zone_selector("us-west-2b")),
            ]
            slices.append(resource_slice(f"s{i}", devs, pool=f"p{i}", per_device=True))
            continue
        slices.append(resource_slice(f"s{i}", gpus(1), pool=f"p{i}", **kw))
    req = {}
    if nc_host:
        req["kubernetes.io/hostname"] = [nc_host]
    if nc_zones:
        req[ZONE] = nc_zones
    nc = in_flight("gpu-pool-1", [], requirements=req)
    node_name = nc_host if nc_host == "n1" else None
    got = {
        (p.key.pool, d.id.device)
        for p in SliceUniverse(slices).gather(node_name, [nc.requirements])
        for d in p.devices
    }
    want = {
        (s.pool, d.name)
        for s in slices
        for d in s.devices
        if s.per_device_node_selection
        and device_accessible(
            None if d.node_selector is None else (Requirements.from_labels({ZONE: "us-west-2b"}),),
            d.node_name,
            False,
            node_name,
            [nc.requirements],
        )
    } | {
        (s.pool, s.devices[0].name)
        for s in slices
        if not s.per_device_node_selection
        and device_accessible(
            None
            if s.all_nodes or s.node_name
            else tuple(
                Requirements.from_node_selector_requirements(t["matchExpressions"])
                for t in s.node_selector["nodeSelectorTerms"]
            ),
            s.node_name,
            s.all_nodes,
            node_name,
            [nc.requirements],
        )
    }
    assert got == want
    assert all(
        d.source == IN_CLUSTER
        for p in SliceUniverse(slices).gather(node_name, [nc.requirements])
        for d in p.devices
    )
    # A node without a name and without requirements reaches whatever any NodeClaim may: the
    # universe's verdict that NodeClaims reach nothing is exact.
    universe = SliceUniverse(slices)
    assert universe.reaches_unnamed_nodes == bool(universe.gather(None, [Requirements()]))


def test_node_local_slices_are_out_of_every_node_claims_reach():
    pinned = resource_slice("node-a-gpus", gpus(8), node_name="ip-10-0-1-17")
    assert not SliceUniverse([pinned]).reaches_unnamed_nodes
    per_device = resource_slice(
        "partitioned", [Device("gpu-0", node_name="ip-10-0-1-17")], per_device=True
    )
    assert not SliceUniverse([pinned, per_device]).reaches_unnamed_nodes
    shared = resource_slice("nics", [nic("nic-0")], driver=NIC, all_nodes=True)
    assert SliceUniverse([pinned, shared]).reaches_unnamed_nodes
    zonal = resource_slice("zb", gpus(1), node_selector=zone_selector("us-west-2b"))
    assert SliceUniverse([pinned, zonal]).reaches_unnamed_nodes
