import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.requirements import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    NODE_NAME_KEY,
    WELL_KNOWN_LABELS,
    Requirement,
    RequirementError,
    Requirements,
    node_requirements,
    node_selector_compatible,
    node_selector_matches_labels,
    requirements_from_node_selector,
)

ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]


def reqs(*exprs):
    return Requirements.from_node_selector_requirements(
        [
            {"key": k, "operator": op, **({"values": list(v)} if v is not None else {})}
            for k, op, v in exprs
        ]
    )


def test_operators_map_to_complement_sets():
    zone_in = Requirement.new(LABEL_ZONE, "In", ["us-west-2a", "us-west-2b"])
    assert zone_in.operator() == "In"
    assert zone_in.has("us-west-2a") and not zone_in.has("us-west-2c")
    assert len(zone_in) == 2

    not_in = Requirement.new(LABEL_ZONE, "NotIn", ["us-west-2a"])
    assert not_in.operator() == "NotIn"
    assert not not_in.has("us-west-2a") and not_in.has("us-west-2c")

    exists = Requirement.new(LABEL_ZONE, "Exists")
    assert exists.operator() == "Exists" and exists.has("anything")

    dne = Requirement.new(LABEL_ZONE, "DoesNotExist")
    assert dne.operator() == "DoesNotExist" and not dne.has("us-west-2a") and len(dne) == 0
    assert dne.any() is None


def test_gt_lt_bounds():
    gpus = Requirement.new("karpenter.k8s.aws/instance-gpu-count", "Gt", ["4"])
    assert gpus.operator() == "Exists"
    assert gpus.has("8") and not gpus.has("4") and not gpus.has("eight")
    both = gpus.intersection(Requirement.new("karpenter.k8s.aws/instance-gpu-count", "Lt", ["9"]))
    assert both.has("8") and not both.has("9")
    assert both.any() == "5"
    # Bounds filter concrete sets and are dropped once applied.
    counts = Requirement.new("karpenter.k8s.aws/instance-gpu-count", "In", ["1", "4", "8", "x"])
    narrowed = counts.intersection(gpus)
    assert narrowed.operator() == "In" and narrowed.values() == {"8"}
    assert narrowed.greater_than is None
    # Empty range: DoesNotExist.
    empty = gpus.intersection(Requirement.new("karpenter.k8s.aws/instance-gpu-count", "Lt", ["5"]))
    assert empty.operator() == "DoesNotExist"
    assert both.to_node_selector_requirements() == [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["4"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Lt", "values": ["9"]},
    ]


def test_bad_requirements_raise():
    with pytest.raises(RequirementError, match="unknown operator 'Equals'"):
        Requirement.new(LABEL_ZONE, "Equals", ["us-west-2a"])
    with pytest.raises(RequirementError, match="one integer value"):
        Requirement.new("gpu-count", "Gt", ["four"])
    with pytest.raises(RequirementError, match="only metadata.name"):
        Requirements.from_node_selector_term(
            {"matchFields": [{"key": "spec.nodeName", "operator": "In", "values": ["n"]}]}
        )


def test_intersection_cases():
    a = Requirement.new(LABEL_ZONE, "In", ["us-west-2a", "us-west-2b"])
    b = Requirement.new(LABEL_ZONE, "NotIn", ["us-west-2a"])
    assert a.intersection(b).values() == {"us-west-2b"}
    assert b.intersection(a).values() == {"us-west-2b"}
    c = Requirement.new(LABEL_ZONE, "NotIn", ["us-west-2c"])
    assert b.intersection(c).operator() == "NotIn"
    assert b.intersection(c).values() == {"us-west-2a", "us-west-2c"}
    assert a.intersection(Requirement.new(LABEL_ZONE, "In", ["us-west-2c"])).operator() == (
        "DoesNotExist"
    )


def test_deprecated_labels_are_normalised():
    r = reqs(("failure-domain.beta.kubernetes.io/zone", "In", ["us-west-2a"]))
    assert r.has(LABEL_ZONE)
    assert r.labels() == {LABEL_ZONE: "us-west-2a"}


def test_add_intersects_in_place_and_copy_is_independent():
    nodepool = reqs(
        (LABEL_ZONE, "In", ZONES),
        (LABEL_CAPACITY_TYPE, "In", ["on-demand", "spot"]),
        (LABEL_ARCH, "In", ["amd64"]),
    )
    snapshot = nodepool.copy()
    nodepool.add(reqs((LABEL_ZONE, "In", ["us-west-2b"])))
    assert nodepool.get(LABEL_ZONE).values() == {"us-west-2b"}
    assert snapshot.get(LABEL_ZONE).values() == set(ZONES)
    merged = snapshot.intersect(reqs((LABEL_CAPACITY_TYPE, "NotIn", ["spot"])))
    assert merged.get(LABEL_CAPACITY_TYPE).values() == {"on-demand"}
    assert snapshot.get(LABEL_CAPACITY_TYPE).values() == {"on-demand", "spot"}
    assert merged != snapshot and snapshot.copy() == snapshot


def test_compatible_well_known_and_custom_labels():
    nodeclaim = reqs(
        (LABEL_ZONE, "In", ZONES),
        (LABEL_INSTANCE_TYPE, "In", ["p5.48xlarge", "p4d.24xlarge"]),
        (LABEL_ARCH, "In", ["amd64"]),
    )
    # Well-known key undefined on the NodeClaim: allowed.
    assert nodeclaim.compatible(reqs((LABEL_CAPACITY_TYPE, "In", ["spot"]))) is None
    # Custom key undefined on the NodeClaim: denied unless it only excludes.
    reason = nodeclaim.compatible(reqs(("example.com/team", "In", ["ml"])))
    assert reason == 'label "example.com/team" does not have known values'
    assert nodeclaim.compatible(reqs(("example.com/team", "NotIn", ["ml"]))) is None
    assert nodeclaim.compatible(reqs(("example.com/team", "DoesNotExist", None))) is None
    assert nodeclaim.is_compatible(
        reqs(("example.com/team", "In", ["ml"])), allow_undefined={"example.com/team"}
    )
    # Defined keys must intersect; the message names the key like Karpenter's.
    reason = nodeclaim.compatible(reqs((LABEL_ARCH, "In", ["arm64"])))
    assert reason == (
        "key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in kubernetes.io/arch In [amd64]"
    )
    # NotIn against NotIn never conflicts.
    a = reqs((LABEL_ZONE, "NotIn", ["us-west-2a"]))
    assert a.intersects(reqs((LABEL_ZONE, "DoesNotExist", None))) is None
    assert reqs((LABEL_ZONE, "In", ["us-west-2a"])).intersects(
        reqs((LABEL_ZONE, "NotIn", ["us-west-2a"]))
    ) == (
        "key topology.kubernetes.io/zone, topology.kubernetes.io/zone NotIn [us-west-2a] "
        "not in topology.kubernetes.io/zone In [us-west-2a]"
    )
    assert LABEL_ZONE in WELL_KNOWN_LABELS


def test_labels_and_node_selector_requirements_sorted():
    r = reqs(
        (LABEL_ZONE, "In", ["us-west-2b", "us-west-2a"]),
        (LABEL_CAPACITY_TYPE, "In", ["on-demand"]),
        (LABEL_ARCH, "Exists", None),
        ("example.com/legacy", "DoesNotExist", None),
        ("example.com/pool", "NotIn", ["b", "a"]),
    )
    assert r.labels() == {LABEL_CAPACITY_TYPE: "on-demand"}
    assert r.to_node_selector_requirements() == [
        {"key": "example.com/legacy", "operator": "DoesNotExist"},
        {"key": "example.com/pool", "operator": "NotIn", "values": ["a", "b"]},
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": LABEL_ARCH, "operator": "Exists"},
        {"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
    ]
    with_min = Requirements.from_node_selector_requirements(
        [{"key": LABEL_INSTANCE_TYPE, "operator": "Exists", "minValues": 2}]
    )
    assert with_min.get(LABEL_INSTANCE_TYPE).min_values == 2
    assert with_min.to_node_selector_requirements() == [
        {"key": LABEL_INSTANCE_TYPE, "operator": "Exists", "minValues": 2}
    ]
    assert Requirements.from_labels({LABEL_ZONE: "us-west-2a"}).to_node_selector_requirements() == [
        {"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2a"]}
    ]


ZONE_SELECTOR = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2a"]}]},
        {"matchExpressions": [{"key": LABEL_ZONE, "operator": "In", "values": ["us-west-2c"]}]},
    ]
}


def test_node_selector_terms_are_ored():
    terms = requirements_from_node_selector(ZONE_SELECTOR)
    assert [t.get(LABEL_ZONE).values() for t in terms] == [{"us-west-2a"}, {"us-west-2c"}]
    assert requirements_from_node_selector(None) == []
    assert node_selector_compatible(ZONE_SELECTOR, reqs((LABEL_ZONE, "In", ["us-west-2c"])))
    assert not node_selector_compatible(ZONE_SELECTOR, reqs((LABEL_ZONE, "In", ["us-west-2b"])))
    assert node_selector_compatible(None, reqs((LABEL_ZONE, "In", ["us-west-2b"])))
    # An empty term matches nothing.
    assert not node_selector_compatible({"nodeSelectorTerms": [{}]}, Requirements())


def test_node_name_pins_only_match_existing_nodes():
    pinned = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["ip-10-0-1-7"]}]}
        ]
    }
    existing = node_requirements({LABEL_ZONE: "us-west-2a"}, "ip-10-0-1-7")
    other = node_requirements({LABEL_ZONE: "us-west-2a"}, "ip-10-0-1-8")
    inflight = reqs((LABEL_ZONE, "In", ["us-west-2a"]))
    assert node_selector_compatible(pinned, existing)
    assert not node_selector_compatible(pinned, other)
    assert not node_selector_compatible(pinned, inflight)
    assert NODE_NAME_KEY not in {r["key"] for r in existing.to_node_selector_requirements()}
    assert NODE_NAME_KEY not in existing.labels()


def test_node_selector_matches_labels():
    labels = {LABEL_ZONE: "us-west-2c", LABEL_ARCH: "amd64", "gpu-count": "8"}
    assert node_selector_matches_labels(ZONE_SELECTOR, labels)
    assert not node_selector_matches_labels(ZONE_SELECTOR, {LABEL_ZONE: "us-west-2b"})
    assert node_selector_matches_labels(None, {})
    gt = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "gpu-count", "operator": "Gt", "values": ["4"]},
                    {"key": LABEL_ARCH, "operator": "Exists"},
                    {"key": "example.com/legacy", "operator": "DoesNotExist"},
                    {"key": LABEL_ZONE, "operator": "NotIn", "values": ["us-west-2a"]},
                ]
            }
        ]
    }
    assert node_selector_matches_labels(gt, labels)
    assert not node_selector_matches_labels(gt, {**labels, "gpu-count": "4"})
    assert not node_selector_matches_labels(gt, {**labels, "example.com/legacy": "x"})
    fields = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
        ]
    }
    assert node_selector_matches_labels(fields, labels, node_name="node-a")
    assert not node_selector_matches_labels(fields, labels, node_name="node-b")
    assert not node_selector_matches_labels(fields, labels)
    assert not node_selector_matches_labels({"nodeSelectorTerms": [{}]}, labels)


values_st = st.frozensets(st.sampled_from(ZONES + ["1", "5", "9"]), max_size=4)
requirement_st = st.one_of(
    st.builds(lambda v: Requirement.new(LABEL_ZONE, "In", v), values_st),
    st.builds(lambda v: Requirement.new(LABEL_ZONE, "NotIn", v), values_st),
    st.just(Requirement.new(LABEL_ZONE, "Exists")),
    st.just(Requirement.new(LABEL_ZONE, "DoesNotExist")),
    st.builds(lambda n: Requirement.new(LABEL_ZONE, "Gt", [str(n)]), st.integers(0, 10)),
    st.builds(lambda n: Requirement.new(LABEL_ZONE, "Lt", [str(n)]), st.integers(0, 10)),
)
probe_values = ZONES + ["0", "1", "5", "6", "9", "11", "us-east-1a"]


@given(requirement_st, requirement_st)
def test_intersection_commutative_and_exact(a, b):
    ab, ba = a.intersection(b), b.intersection(a)
    for v in probe_values:
        assert ab.has(v) == ba.has(v) == (a.has(v) and b.has(v))
    assert ab.operator() == ba.operator()


@given(requirement_st)
def test_intersection_idempotent(a):
    aa = a.intersection(a)
    for v in probe_values:
        assert aa.has(v) == a.has(v)
    assert aa.operator() == a.operator()


@given(requirement_st, requirement_st, requirement_st)
def test_intersection_associative(a, b, c):
    left = a.intersection(b).intersection(c)
    right = a.intersection(b.intersection(c))
    for v in probe_values:
        assert left.has(v) == right.has(v)


@given(requirement_st)
def test_any_is_allowed(a):
    value = a.any()
    if value is None:
        assert a.operator() == "DoesNotExist" or a.less_than is not None
    else:
        assert a.has(value)


@given(requirement_st)
def test_round_trip_through_node_selector_requirements(a):
    again = Requirements.from_node_selector_requirements(a.to_node_selector_requirements())
    for v in probe_values:
        assert again.get(LABEL_ZONE).has(v) == a.has(v)


# --- the intersection memo (the loop intersects the same requirements for every pod) ------

zone_requirement = st.builds(
    lambda op, values, bound: Requirement.new(
        LABEL_ZONE if op not in ("Gt", "Lt") else "example.com/gpu-count",
        op,
        [str(bound)] if op in ("Gt", "Lt") else values,
    ),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(ZONES + ["1", "2", "4", "8"]), max_size=3),
    st.integers(0, 9),
)


def _fields(r: Requirement) -> tuple:
    return (r.key, r.complement, r.values(), r.greater_than, r.less_than, r.min_values)


@given(st.lists(zone_requirement, min_size=2, max_size=6), st.data())
def test_a_remembered_intersection_is_the_one_computed_afresh(pool, data):
    """Whatever order a NodeClaim's and an instance type's requirements meet in, and however
    often, each intersection is exactly the fresh computation's, also for an equal but
    distinct requirement (remembered per object, never per content)."""
    for _ in range(10):
        a = data.draw(st.sampled_from(pool))
        b = data.draw(st.sampled_from(pool))
        twin = Requirement(b.key, b.complement, b._values, b.greater_than, b.less_than)
        assert _fields(a.intersection(b)) == _fields(a._intersection(b))
        assert _fields(a.intersection(twin)) == _fields(a._intersection(twin))
        assert _fields(a.intersection(b)) == _fields(a._intersection(b))


def test_a_zone_pin_met_again_narrows_the_nodeclaim_the_same_way():
    nodeclaim = reqs((LABEL_ZONE, "In", ["us-west-2a", "us-west-2b"]))
    instance_type = reqs((LABEL_ZONE, "In", ["us-west-2b", "us-west-2c"]))
    first = nodeclaim.intersect(instance_type)
    again = nodeclaim.intersect(instance_type)
    assert first == again
    assert first.get(LABEL_ZONE).values() == {"us-west-2b"}
    assert nodeclaim.get(LABEL_ZONE).values() == {"us-west-2a", "us-west-2b"}  # unchanged


def test_a_requirement_remembers_a_bounded_number_of_intersections() -> None:
    """A NodeClaim's zone requirement meets a fresh pod term on every attempt: it remembers
    at most 64 of them (4,000 pods onto 4,000 NodeClaims kept 14 GB), and every answer is
    still the one computed afresh."""
    nodeclaim_zone = Requirement.new(LABEL_ZONE, "In", ["us-west-2a", "us-west-2b"])
    for attempt in range(300):
        term = Requirement.new(LABEL_ZONE, "In", ["us-west-2a"] if attempt % 2 else ["us-west-2c"])
        met = nodeclaim_zone.intersection(term)
        assert sorted(met.values()) == (["us-west-2a"] if attempt % 2 else [])
        assert len(nodeclaim_zone._met) <= 64
