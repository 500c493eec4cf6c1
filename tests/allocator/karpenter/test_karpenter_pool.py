"""Karpenter pool_test.go, GatherPools: which pools an in-flight NodeClaim (zones us-west-2a and
us-west-2b) or an existing node reaches, how slices group into pools, pool validation (duplicate
device names, counter sets and references), device IDs, generations and completeness."""

from __future__ import annotations

import pytest

from allocator.featuregates import ALL_ON
from allocator.features.counters import CounterLedger, build_counter_pool
from allocator.model import DeviceID, PoolKey
from allocator.pipeline import build_pipeline
from allocator.pools import SliceUniverse, refilter
from allocator.requirements import Requirements
from tests.allocator.builders import ZONE
from tests.allocator.karpenter.kit import (
    GPU,
    IT1,
    NIC,
    allocator,
    claim,
    dev,
    devs,
    fails,
    node_claim,
    q,
    req,
    shared,
    slice_,
    zone_sel,
)

TWO_ZONES = Requirements.from_node_selector_requirements(
    [{"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]}]
)


def gather(slices, node_name: str | None = None, reqs: Requirements = TWO_ZONES):
    validators = build_pipeline(ALL_ON).pool_validators
    return SliceUniverse(list(slices), validators).gather(node_name, [reqs])


def device_names(pool) -> list[str]:
    return [d.id.device for d in pool.devices]


# --- GatherPools -------------------------------------------------------------------------------


def test_should_build_a_pool_from_an_all_nodes_slice():
    """Karpenter: should build a pool from an AllNodes slice."""
    (pool,) = gather([slice_("s1", devs("gpu-0", "gpu-1"))])
    assert pool.key == PoolKey(GPU, "pool-a")
    assert device_names(pool) == ["gpu-0", "gpu-1"]


def test_should_build_a_pool_from_a_node_selector_slice_matching_requirements():
    """Karpenter: should build a pool from a nodeSelector slice matching requirements."""
    assert len(gather([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])) == 1


def test_should_exclude_pools_with_only_incompatible_node_selector_slices():
    """Karpenter: should exclude pools with only incompatible nodeSelector slices."""
    assert gather([slice_("s1", devs("gpu-0"), node_selector=zone_sel("eu-west-1a"))]) == []


def test_should_exclude_slices_with_no_node_affinity_fields():
    """Karpenter: should exclude slices with no node affinity fields."""
    assert gather([slice_("s1", devs("gpu-0"), all_nodes=False)]) == []


PINNED = [slice_("s1", devs("gpu-0"), node_name="ip-10-0-1-17")]


def test_should_include_a_node_name_slice_when_evaluating_the_existing_node_it_is_pinned_to():
    """Karpenter: should include a NodeName slice when evaluating the existing node it is pinned
    to."""
    (pool,) = gather(PINNED, "ip-10-0-1-17")
    assert device_names(pool) == ["gpu-0"]


def test_should_exclude_a_node_name_slice_when_evaluating_a_different_node():
    """Karpenter: should exclude a NodeName slice when evaluating a different node."""
    assert gather(PINNED, "ip-10-0-2-33") == []


def test_should_exclude_a_node_name_slice_when_evaluating_an_in_flight_node_claim_no_node_name():
    """Karpenter: should exclude a NodeName slice when evaluating an in-flight NodeClaim (no node
    name)."""
    assert gather(PINNED) == []


def test_should_not_apply_a_node_name_to_all_nodes_slices():
    """Karpenter: should not apply a node name to AllNodes slices."""
    slices = [slice_("s1", devs("gpu-0"))]
    assert len(gather(slices)) == 1
    assert len(gather(slices, "ip-10-0-1-17")) == 1


def test_should_return_an_empty_list_when_no_slices_are_provided():
    """Karpenter: should return an empty list when no slices are provided."""
    assert gather([]) == []


def test_should_match_a_slice_when_any_node_selector_term_is_compatible():
    """Karpenter: should match a slice when any NodeSelectorTerm is compatible."""
    either = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["eu-west-1a"]}]},
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}]},
        ]
    }
    assert len(gather([slice_("s1", devs("gpu-0"), node_selector=either)])) == 1


def test_should_reject_a_slice_when_one_match_expression_within_a_term_is_incompatible():
    """Karpenter: should reject a slice when one match expression within a term is
    incompatible."""
    contradiction = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
                    {"key": ZONE, "operator": "NotIn", "values": ["us-west-2a"]},
                ]
            }
        ]
    }
    assert gather([slice_("s1", devs("gpu-0"), node_selector=contradiction)]) == []


def test_should_group_multiple_slices_into_the_same_pool_by_driver_pool():
    """Karpenter: should group multiple slices into the same pool by driver+pool."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-1"), count=2)])
    assert device_names(pool) == ["gpu-0", "gpu-1"]
    assert len(pool.slices) == 2


def test_should_create_separate_pools_for_different_pool_names():
    """Karpenter: should create separate pools for different pool names."""
    slices = [slice_("s1", devs("gpu-0")), slice_("s2", devs("gpu-1"), pool="pool-b")]
    assert len(gather(slices)) == 2


def test_should_create_separate_pools_for_different_drivers():
    """Karpenter: should create separate pools for different drivers."""
    slices = [slice_("s1", devs("gpu-0")), slice_("s2", devs("nic-0"), driver=NIC)]
    assert len(gather(slices)) == 2


# --- Context("validation") ---------------------------------------------------------------------


def test_should_mark_a_pool_as_invalid_when_it_has_duplicate_device_names():
    """Karpenter: should mark a pool as invalid when it has duplicate device names."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-0"), count=2)])
    assert pool.invalid


def test_should_mark_a_pool_as_invalid_when_a_single_slice_has_duplicate_device_names():
    """Karpenter: should mark a pool as invalid when a single slice has duplicate device names."""
    (pool,) = gather([slice_("s1", devs("gpu-0", "gpu-0"))])
    assert pool.invalid


def test_should_not_mark_a_pool_as_invalid_when_device_names_are_unique():
    """Karpenter: should not mark a pool as invalid when device names are unique."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-1"), count=2)])
    assert not pool.invalid


def _counters(name: str, *sets, count: int):
    return slice_(name, all_nodes=False, count=count, counters=list(sets))


@pytest.mark.parametrize(
    "slices",
    [
        [
            _counters("counter-slice-1", shared("budget", memory="40Gi"), count=3),
            _counters("counter-slice-2", shared("budget", memory="40Gi"), count=3),
            slice_("device-slice", devs("gpu-0"), count=3),
        ],
        [
            _counters(
                "counter-slice",
                shared("budget", memory="40Gi"),
                shared("budget", compute="100"),
                count=2,
            ),
            slice_("device-slice", devs("gpu-0"), count=2),
        ],
    ],
    ids=["across slices", "within a single slice"],
)
def test_should_mark_pool_invalid_when_counter_set_names_are_duplicated(slices):
    """Karpenter: should mark pool invalid when counter set names are duplicated."""
    (pool,) = gather(slices)
    assert pool.invalid


def _far(device):
    return slice_(
        "non-matching-device-slice", [device], count=3, node_selector=zone_sel("eu-west-1a")
    )


@pytest.mark.parametrize(
    "slices",
    [
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
            slice_(
                "device-slice",
                [dev("gpu-0", **{"nonexistent-budget": {"memory": "40Gi"}})],
                count=2,
            ),
        ],
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
            slice_("device-slice", [dev("gpu-0", budget={"nonexistent-counter": "40Gi"})], count=2),
        ],
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=3),
            slice_("matching-device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=3),
            _far(dev("gpu-1", **{"wrong-budget": {"memory": "40Gi"}})),
        ],
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=3),
            slice_("matching-device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=3),
            _far(dev("gpu-1", budget={"nonexistent-counter": "40Gi"})),
        ],
        [slice_("device-slice", [dev("gpu-0", **{"nonexistent-budget": {"memory": "40Gi"}})])],
        [
            _counters(
                "counter-slice",
                shared("memory-budget", memory="80Gi"),
                shared("compute-budget", flops="1000"),
                count=2,
            ),
            slice_("device-slice", [dev("gpu-0", **{"memory-budget": {"flops": "500"}})], count=2),
        ],
    ],
    ids=[
        "device references non-existent counter set",
        "device references non-existent counter within set",
        "non-targeting device references non-existent counter set",
        "non-targeting device references non-existent counter within set",
        "device declares ConsumesCounters but pool has no counter sets",
        "device references counter that exists in a different counter set",
    ],
)
def test_should_mark_pool_invalid_when_counter_references_are_invalid(slices):
    """Karpenter: should mark pool invalid when counter references are invalid."""
    (pool,) = gather(slices)
    assert pool.invalid


def test_should_not_mark_pool_invalid_when_device_counter_references_are_valid():
    """Karpenter: should not mark pool invalid when device counter references are valid."""
    (pool,) = gather(
        [
            _counters("counter-slice", shared("budget", memory="80Gi", flops="1000"), count=2),
            slice_("device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=2),
        ]
    )
    assert not pool.invalid


# --- Context("device IDs") ---------------------------------------------------------------------


def test_should_construct_correct_device_ids():
    """Karpenter: should construct correct DeviceIDs."""
    (pool,) = gather([slice_("s1", devs("gpu-0"))])
    assert pool.devices[0].id == DeviceID(GPU, "pool-a", "gpu-0")


def test_should_construct_correct_device_ids_for_multiple_devices_in_a_single_slice():
    """Karpenter: should construct correct DeviceIDs for multiple devices in a single slice."""
    (pool,) = gather([slice_("s1", devs("gpu-0", "gpu-1", "gpu-2"))])
    assert [d.id for d in pool.devices] == [DeviceID(GPU, "pool-a", f"gpu-{i}") for i in range(3)]


def test_should_construct_correct_device_ids_across_multiple_slices_and_pools():
    """Karpenter: should construct correct DeviceIDs across multiple slices and pools."""
    pools = gather(
        [
            slice_("s1", devs("gpu-0"), count=2),
            slice_("s2", devs("gpu-1"), count=2),
            slice_("s3", devs("nic-0"), pool="pool-b", driver=NIC),
        ]
    )
    by_key = {p.key: p for p in pools}
    assert sorted(d.id.device for d in by_key[PoolKey(GPU, "pool-a")].devices) == ["gpu-0", "gpu-1"]
    assert {d.id.pool for d in by_key[PoolKey(GPU, "pool-a")].devices} == {"pool-a"}
    assert [d.id for d in by_key[PoolKey(NIC, "pool-b")].devices] == [
        DeviceID(NIC, "pool-b", "nic-0")
    ]


# --- Context("generation handling") ------------------------------------------------------------


def test_should_discard_slices_from_an_older_generation():
    """Karpenter: should discard slices from an older generation."""
    (pool,) = gather(
        [slice_("s-old", devs("gpu-old")), slice_("s-new", devs("gpu-new"), generation=2)]
    )
    assert device_names(pool) == ["gpu-new"]


def test_should_replace_all_old_generation_slices_when_a_newer_generation_arrives():
    """Karpenter: should replace all old-generation slices when a newer generation arrives."""
    (pool,) = gather(
        [
            slice_("s-old-a", devs("gpu-0"), count=2),
            slice_("s-old-b", devs("gpu-1"), count=2),
            slice_("s-new", devs("gpu-new"), generation=2),
        ]
    )
    assert device_names(pool) == ["gpu-new"]


def test_should_return_new_generation_as_incomplete_when_previous_generation_was_complete():
    """Karpenter: should return new generation as incomplete when previous generation was
    complete."""
    (pool,) = gather(
        [slice_("s-old", devs("gpu-0")), slice_("s-new", devs("gpu-new"), generation=2, count=2)]
    )
    assert pool.incomplete
    assert device_names(pool) == ["gpu-new"]


def test_should_return_new_generation_as_invalid_when_previous_generation_was_complete():
    """Karpenter: should return new generation as invalid when previous generation was
    complete."""
    slices = [
        slice_("s-old", devs("gpu-0")),
        slice_("s-new-a", devs("gpu-dup"), generation=2, count=2),
        slice_("s-new-b", devs("gpu-dup"), generation=2, count=2),
    ]
    (pool,) = gather(slices)
    assert pool.invalid
    # Karpenter empties an invalid pool's devices; here the pool keeps them for the
    # explanation, and the allocator takes none of them (nor the retired gpu-0).
    fails(allocator(slices), node_claim("nc", IT1), [claim("c1", req("gpu"))], "pool-invalid")


def test_should_return_new_generation_as_valid_when_previous_generation_was_incomplete():
    """Karpenter: should return new generation as valid when previous generation was
    incomplete."""
    (pool,) = gather(
        [slice_("s-old", devs("gpu-old"), count=2), slice_("s-new", devs("gpu-new"), generation=2)]
    )
    assert not pool.incomplete and not pool.invalid
    assert device_names(pool) == ["gpu-new"]


def test_should_return_new_generation_as_valid_when_previous_generation_was_invalid():
    """Karpenter: should return new generation as valid when previous generation was invalid."""
    (pool,) = gather(
        [
            slice_("s-old-a", devs("gpu-dup"), count=2),
            slice_("s-old-b", devs("gpu-dup"), count=2),
            slice_("s-new", devs("gpu-new"), generation=2),
        ]
    )
    assert not pool.incomplete and not pool.invalid
    assert device_names(pool) == ["gpu-new"]


def test_should_accumulate_slices_from_the_same_generation():
    """Karpenter: should accumulate slices from the same generation."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-1"), count=2)])
    assert device_names(pool) == ["gpu-0", "gpu-1"]


# --- Context("completeness") -------------------------------------------------------------------


def test_should_mark_a_pool_as_incomplete_when_fewer_slices_than_resource_slice_count():
    """Karpenter: should mark a pool as incomplete when fewer slices than ResourceSliceCount."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2)])
    assert pool.incomplete


def test_should_not_mark_a_pool_as_incomplete_when_slice_count_matches():
    """Karpenter: should not mark a pool as incomplete when slice count matches."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-1"), count=2)])
    assert not pool.incomplete


def test_should_mark_a_pool_as_incomplete_when_more_slices_than_resource_slice_count():
    """Karpenter: should mark a pool as incomplete when more slices than ResourceSliceCount."""
    (pool,) = gather([slice_("s1", devs("gpu-0")), slice_("s2", devs("gpu-1"))])
    assert pool.incomplete


def test_should_mark_a_pool_as_incomplete_when_resource_slice_count_is_0():
    """Karpenter: should mark a pool as incomplete when ResourceSliceCount is 0."""
    (pool,) = gather([slice_("s1", devs("gpu-0"), count=0)])
    assert pool.incomplete


def test_should_not_mark_a_pool_as_incomplete_when_non_matching_slices_complete_the_count():
    """Karpenter: should not mark a pool as incomplete when non-matching slices complete the
    count."""
    (pool,) = gather(
        [
            slice_("s1", devs("gpu-0"), count=2, node_selector=zone_sel("us-west-2a")),
            slice_("s2", devs("gpu-1"), count=2, node_selector=zone_sel("eu-west-1a")),
        ]
    )
    assert not pool.incomplete
    assert device_names(pool) == ["gpu-0"]
    assert len(pool.slices) == 1


def test_should_drop_a_pool_when_a_newer_generation_exists_only_on_non_matching_slices():
    """Karpenter: should drop a pool when a newer generation exists only on non-matching
    slices."""
    slices = [
        slice_("s-old", devs("gpu-0"), node_selector=zone_sel("us-west-2a")),
        slice_("s-new", devs("gpu-1"), generation=2, node_selector=zone_sel("eu-west-1a")),
    ]
    assert gather(slices) == []


def test_should_include_only_matching_slices_when_pool_has_mixed_node_selectors():
    """Karpenter: should include only matching slices when pool has mixed node selectors."""
    (pool,) = gather(
        [
            slice_("s1", devs("gpu-0"), count=3, node_selector=zone_sel("us-west-2a")),
            slice_("s2", devs("gpu-1"), count=3, node_selector=zone_sel("us-west-2b")),
            slice_("s3", devs("gpu-2"), count=3, node_selector=zone_sel("eu-west-1a")),
        ]
    )
    assert not pool.incomplete
    assert len(pool.devices) == 2 and len(pool.slices) == 2


# --- Describe("FilterPools"): re-filtering a gathered pool set against tightened requirements --


def zones(*values: str) -> Requirements:
    return Requirements.from_node_selector_requirements(
        [{"key": ZONE, "operator": "In", "values": list(values)}]
    )


def test_filter_pools_should_return_an_empty_list_when_no_pools_are_provided():
    """Karpenter: should return an empty list when no pools are provided."""
    assert refilter([], [TWO_ZONES]) == []


def test_should_retain_pools_with_compatible_slices():
    """Karpenter: should retain pools with compatible slices."""
    pools = gather([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])
    assert len(refilter(pools, [zones("us-west-2a")])) == 1


def test_should_exclude_pools_with_incompatible_slices_after_requirement_tightening():
    """Karpenter: should exclude pools with incompatible slices after requirement tightening."""
    pools = gather([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])
    assert refilter(pools, [zones("us-west-2b")]) == []


def test_should_always_retain_pools_with_all_nodes_slices():
    """Karpenter: should always retain pools with AllNodes slices."""
    pools = gather([slice_("s1", devs("gpu-0"))])
    assert len(refilter(pools, [zones("ap-southeast-1a")])) == 1


def test_should_retain_some_pools_and_exclude_others():
    """Karpenter: should retain some pools and exclude others."""
    pools = gather(
        [
            slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a")),
            slice_(
                "s2", devs("nic-0"), pool="pool-b", driver=NIC, node_selector=zone_sel("us-west-2b")
            ),
        ]
    )
    assert len(pools) == 2
    (kept,) = refilter(pools, [zones("us-west-2a")])
    assert kept.key.pool == "pool-a"


def test_should_retain_a_pool_but_strip_non_matching_slices_and_their_devices():
    """Karpenter: should retain a pool but strip non-matching slices and their devices."""
    (pool,) = gather(
        [
            slice_("s1", devs("gpu-0"), count=2, node_selector=zone_sel("us-west-2a")),
            slice_("s2", devs("gpu-1"), count=2, node_selector=zone_sel("us-west-2b")),
        ]
    )
    assert len(pool.slices) == 2 and len(pool.devices) == 2
    (kept,) = refilter([pool], [zones("us-west-2a")])
    assert [s.name for s in kept.slices] == ["s1"]
    assert device_names(kept) == ["gpu-0"]
    assert len(pool.devices) == 2  # the gathered pool is not changed


def test_should_preserve_incomplete_and_invalid_flags_through_filtering():
    """Karpenter: should preserve Incomplete and Invalid flags through filtering."""
    (pool,) = gather(
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=3),
            slice_("device-slice", devs("gpu-0", "gpu-0"), count=3),
        ]
    )
    assert pool.incomplete and pool.invalid
    (kept,) = refilter([pool], [TWO_ZONES])
    assert kept.incomplete and kept.invalid


# --- Context("Partitionable Devices") ----------------------------------------------------------


def counter_sets(slices):
    """The counter sets of the one gathered pool, from all its newest slices."""
    (pool,) = gather(slices)
    return build_counter_pool(pool.key, SliceUniverse(list(slices)).pools[pool.key].slices).sets


def test_should_gather_counter_sets_from_a_shared_counters_slice():
    """Karpenter: should gather counter sets from a SharedCounters slice."""
    sets = counter_sets(
        [
            _counters("counter-slice", shared("memory-budget", memory="80Gi"), count=2),
            slice_(
                "device-slice", [dev("gpu-0", **{"memory-budget": {"memory": "40Gi"}})], count=2
            ),
        ]
    )
    assert sets == {"memory-budget": {"memory": q("80Gi")}}


def test_should_not_include_counter_set_slices_in_pool_slices():
    """Karpenter: should not include counter-set slices in pool.Slices."""
    slices = [
        _counters("counter-slice", shared("budget", compute="100"), count=2),
        slice_("device-slice", [dev("gpu-0", budget={"compute": "50"})], count=2),
    ]
    (pool,) = gather(slices)
    assert [s.name for s in pool.slices] == ["device-slice"]
    assert "compute" in counter_sets(slices)["budget"]


def test_should_count_counter_set_slices_toward_completeness():
    """Karpenter: should count counter-set slices toward completeness."""
    (pool,) = gather(
        [
            _counters("counter-slice", shared("budget", memory="80Gi"), count=3),
            slice_("device-slice-1", devs("gpu-0"), count=3),
            slice_("device-slice-2", devs("gpu-1"), count=3),
        ]
    )
    assert not pool.incomplete


def test_should_mark_pool_incomplete_when_counter_set_slice_is_missing():
    """Karpenter: should mark pool incomplete when counter-set slice is missing."""
    (pool,) = gather([slice_("device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=2)])
    assert pool.incomplete


def test_should_gather_multiple_counter_sets_from_a_single_slice():
    """Karpenter: should gather multiple counter sets from a single slice."""
    sets = counter_sets(
        [
            _counters(
                "counter-slice",
                shared("memory-budget", memory="80Gi"),
                shared("compute-budget", flops="1000"),
                count=2,
            ),
            slice_("device-slice", devs("gpu-0"), count=2),
        ]
    )
    assert sorted(sets) == ["compute-budget", "memory-budget"]


def test_should_gather_counter_sets_from_multiple_shared_counters_slices_in_the_same_pool():
    """Karpenter: should gather counter sets from multiple SharedCounters slices in the same
    pool."""
    slices = [
        _counters("counter-slice-1", shared("memory-budget", memory="80Gi"), count=3),
        _counters("counter-slice-2", shared("compute-budget", flops="1000"), count=3),
        slice_("device-slice", devs("gpu-0"), count=3),
    ]
    (pool,) = gather(slices)
    assert not pool.invalid
    assert sorted(counter_sets(slices)) == ["compute-budget", "memory-budget"]


def test_should_gather_counter_sets_correctly_regardless_of_slice_ordering():
    """Karpenter: should gather counter sets correctly regardless of slice ordering."""
    slices = [
        slice_("device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=2),
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
    ]
    (pool,) = gather(slices)
    assert not pool.invalid and device_names(pool) == ["gpu-0"]
    assert "budget" in counter_sets(slices)


def test_should_treat_shared_counters_slice_as_always_matching_requirements():
    """Karpenter: should treat SharedCounters slice as always matching requirements."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
        slice_("device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=2),
    ]
    (pool,) = gather(slices, reqs=zones("ap-southeast-1a"))
    assert not pool.incomplete and not pool.invalid
    assert "budget" in counter_sets(slices)


def test_should_handle_pool_with_shared_counters_slice_and_no_consumes_counters_on_devices():
    """Karpenter: should handle pool with SharedCounters slice and no ConsumesCounters on
    devices."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
        slice_("device-slice", devs("gpu-0", "gpu-1"), count=2),
    ]
    (pool,) = gather(slices)
    assert len(pool.devices) == 2 and not pool.invalid
    assert "budget" in counter_sets(slices)


def test_should_handle_devices_consuming_from_multiple_counter_sets():
    """Karpenter: should handle devices consuming from multiple counter sets."""
    (pool,) = gather(
        [
            _counters(
                "counter-slice",
                shared("memory-budget", memory="80Gi"),
                shared("compute-budget", flops="1000"),
                count=2,
            ),
            slice_(
                "device-slice",
                [
                    dev(
                        "gpu-0",
                        **{"memory-budget": {"memory": "40Gi"}, "compute-budget": {"flops": "500"}},
                    )
                ],
                count=2,
            ),
        ]
    )
    assert not pool.invalid
    assert len(pool.devices[0].device.consumes_counters) == 2


def test_should_return_nil_pool_when_only_shared_counters_slices_exist_with_no_device_slices_matching():
    """Karpenter: should return nil pool when only SharedCounters slices exist with no device
    slices matching."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
        slice_(
            "non-matching-device-slice",
            devs("gpu-0"),
            count=2,
            node_selector=zone_sel("eu-west-1a"),
        ),
    ]
    assert gather(slices) == []


# Karpenter keeps the devices of a pool that the NodeClaim cannot reach but that consume its
# counters as "NonTargetingDevices" of the gathered pool. Here the gathered pool holds only the
# reachable devices and the counter ledger (CounterLedger) keeps every device of the pool's
# newest generation: the same budget, seen from the ledger.

POOL_A = PoolKey(GPU, "pool-a")


def _split_pool(*far_devices, near=None, count=3):
    return [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=count),
        slice_(
            "matching-device-slice",
            near or [dev("gpu-0", budget={"memory": "40Gi"})],
            count=count,
            node_selector=zone_sel("us-west-2a"),
        ),
        slice_(
            "non-matching-device-slice",
            list(far_devices),
            count=count,
            node_selector=zone_sel("eu-west-1a"),
        ),
    ]


def test_should_retain_non_matching_devices_with_consumes_counters_as_non_targeting_devices():
    """Karpenter: should retain non-matching devices with ConsumesCounters as
    NonTargetingDevices."""
    slices = _split_pool(dev("gpu-1", budget={"memory": "40Gi"}))
    (pool,) = gather(slices)
    assert device_names(pool) == ["gpu-0"]
    ledger = CounterLedger(
        slices, allocated_devices=[DeviceID(GPU, "pool-a", "gpu-1")], gates=ALL_ON
    )
    assert sorted(ledger.pools[POOL_A].consumption) == ["gpu-0", "gpu-1"]
    assert ledger.remaining(POOL_A) == {"budget": {"memory": q("40Gi")}}


def test_should_not_retain_non_matching_devices_without_consumes_counters_as_non_targeting_devices():
    """Karpenter: should not retain non-matching devices without ConsumesCounters as
    NonTargetingDevices."""
    slices = [
        slice_("matching-slice", devs("gpu-0"), count=2, node_selector=zone_sel("us-west-2a")),
        slice_("non-matching-slice", devs("gpu-1"), count=2, node_selector=zone_sel("eu-west-1a")),
    ]
    (pool,) = gather(slices)
    assert device_names(pool) == ["gpu-0"]
    assert POOL_A not in CounterLedger(slices, gates=ALL_ON).pools


def test_should_retain_only_devices_with_consumes_counters_from_a_non_matching_slice_with_mixed_devices():
    """Karpenter: should retain only devices with ConsumesCounters from a non-matching slice
    with mixed devices."""
    slices = _split_pool(
        dev("gpu-1", budget={"memory": "20Gi"}),
        dev("gpu-2", budget={"memory": "20Gi"}),
        dev("gpu-plain"),
        near=devs("gpu-0"),
    )
    (pool,) = gather(slices)
    assert device_names(pool) == ["gpu-0"]
    assert sorted(CounterLedger(slices, gates=ALL_ON).pools[POOL_A].consumption) == [
        "gpu-1",
        "gpu-2",
    ]


def test_should_preserve_consumes_counters_data_on_non_targeting_devices():
    """Karpenter: should preserve ConsumesCounters data on NonTargetingDevices."""
    slices = _split_pool(dev("gpu-1", budget={"memory": "40Gi"}), near=devs("gpu-0"))
    (entry,) = CounterLedger(slices, gates=ALL_ON).pools[POOL_A].consumption["gpu-1"]
    assert entry.counter_set == "budget" and "memory" in entry.counters


def test_should_preserve_counter_sets_through_filtering():
    """Karpenter: should preserve CounterSets through filtering."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
        slice_(
            "device-slice",
            [dev("gpu-0", budget={"memory": "40Gi"})],
            count=2,
            node_selector=zone_sel("us-west-2a"),
        ),
    ]
    pools = gather(slices)
    assert len(refilter(pools, [TWO_ZONES])) == 1
    assert "budget" in counter_sets(slices)


def test_should_move_devices_with_consumes_counters_to_non_targeting_devices_when_requirements_tighten():
    """Karpenter: should move devices with ConsumesCounters to NonTargetingDevices when
    requirements tighten."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=3),
        slice_(
            "device-slice-a",
            [dev("gpu-0", budget={"memory": "40Gi"})],
            count=3,
            node_selector=zone_sel("us-west-2a"),
        ),
        slice_(
            "device-slice-b",
            [dev("gpu-1", budget={"memory": "40Gi"})],
            count=3,
            node_selector=zone_sel("us-west-2b"),
        ),
    ]
    (pool,) = gather(slices)
    assert device_names(pool) == ["gpu-0", "gpu-1"]
    (kept,) = refilter([pool], [zones("us-west-2a")])
    assert device_names(kept) == ["gpu-0"]
    # gpu-1 still draws from the budget when held.
    ledger = CounterLedger(
        slices, allocated_devices=[DeviceID(GPU, "pool-a", "gpu-1")], gates=ALL_ON
    )
    assert ledger.remaining(POOL_A) == {"budget": {"memory": q("40Gi")}}


def test_should_not_move_devices_without_consumes_counters_to_non_targeting_devices_on_tightening():
    """Karpenter: should not move devices without ConsumesCounters to NonTargetingDevices on
    tightening."""
    slices = [
        slice_("device-slice-a", devs("gpu-0"), count=2, node_selector=zone_sel("us-west-2a")),
        slice_("device-slice-b", devs("gpu-1"), count=2, node_selector=zone_sel("us-west-2b")),
    ]
    (kept,) = refilter(gather(slices), [zones("us-west-2a")])
    assert device_names(kept) == ["gpu-0"]
    assert POOL_A not in CounterLedger(slices, gates=ALL_ON).pools


def test_should_not_mutate_the_original_pools_non_targeting_devices_when_filtering_multiple_times():
    """Karpenter: should not mutate the original pool's NonTargetingDevices when filtering
    multiple times."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=4),
        slice_(
            "device-slice-a",
            [dev("gpu-0", budget={"memory": "20Gi"})],
            count=4,
            node_selector=zone_sel("us-west-2a"),
        ),
        slice_(
            "device-slice-b",
            [dev("gpu-1", budget={"memory": "20Gi"})],
            count=4,
            node_selector=zone_sel("us-west-2b"),
        ),
        slice_(
            "device-slice-eu",
            [dev("gpu-eu", budget={"memory": "20Gi"})],
            count=4,
            node_selector=zone_sel("eu-west-1a"),
        ),
    ]
    (pool,) = gather(slices)
    assert device_names(pool) == ["gpu-0", "gpu-1"]
    (first,) = refilter([pool], [zones("us-west-2a")])
    (second,) = refilter([pool], [zones("us-west-2b")])
    assert device_names(first) == ["gpu-0"] and device_names(second) == ["gpu-1"]
    assert device_names(pool) == ["gpu-0", "gpu-1"]
    assert sorted(CounterLedger(slices, gates=ALL_ON).pools[POOL_A].consumption) == [
        "gpu-0",
        "gpu-1",
        "gpu-eu",
    ]


def test_should_always_retain_pools_with_shared_counters_slices_through_filtering():
    """Karpenter: should always retain pools with SharedCounters slices through filtering."""
    slices = [
        _counters("counter-slice", shared("budget", memory="80Gi"), count=2),
        slice_("device-slice", [dev("gpu-0", budget={"memory": "40Gi"})], count=2),
    ]
    (kept,) = refilter(gather(slices), [zones("ap-southeast-1a")])
    assert device_names(kept) == ["gpu-0"]
    assert "budget" in counter_sets(slices)
