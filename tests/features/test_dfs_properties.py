"""The DFS with shared counters and compatibility groups is exhaustive and never overbooks.

For random partitions of one GPU (a memory counter set, partitions consuming slices of it, in
MIG, vGPU or ungrouped mode) and a claim for k partitions: when the allocator succeeds, the
chosen set fits the counters and the group rule; when it fails, brute force finds no set.
"""

from __future__ import annotations

from itertools import combinations, product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.allocator import AllocationError, Allocator
from allocator.bindings import AttributeBindings
from allocator.featuregates import ALL_ON
from allocator.model import (
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceSlice,
)
from allocator.nodeclaim import SimpleNodeClaim
from allocator.pipeline import build_pipeline
from allocator.quantity import Quantity
from allocator.requirements import Requirements

DRIVER = "gpu.nvidia.com"
GROUPS = {"mig": ("mig",), "vgpu": ("vgpu",), "none": (), "both": ("mig", "vgpu")}
CLASS = DeviceClass("mig.nvidia.com", [DeviceSelector(f'device.driver == "{DRIVER}"')])


def slices(total_gi: int, parts: list[tuple[int, str]]) -> list[ResourceSlice]:
    counters = ResourceSlice(
        "worker-1-gpu-0-counters",
        DRIVER,
        "worker-1",
        1,
        2,
        node_name="worker-1",
        shared_counters=[CounterSet("gpu-0", {"memory": Quantity.parse(f"{total_gi}Gi")})],
    )
    devices = [
        Device(
            f"gpu-0-part-{i}",
            consumes_counters=[
                CounterConsumption("gpu-0", {"memory": Quantity.parse(f"{gi}Gi")}, GROUPS[mode])
            ],
        )
        for i, (gi, mode) in enumerate(parts)
    ]
    partitions = ResourceSlice(
        "worker-1-gpu-0-partitions",
        DRIVER,
        "worker-1",
        1,
        2,
        node_name="worker-1",
        devices=devices,
    )
    return [counters, partitions]


def feasible(total_gi: int, parts: list[tuple[int, str]], chosen: tuple[int, ...]) -> bool:
    if sum(parts[i][0] for i in chosen) > total_gi:
        return False
    groups = [set(GROUPS[parts[i][1]]) for i in chosen]
    if any(not g for g in groups):
        return all(not g for g in groups)
    return bool(set.intersection(*groups)) if groups else True


@settings(max_examples=70, deadline=None)
@given(
    total=st.integers(min_value=4, max_value=16),
    parts=st.lists(
        st.tuples(st.integers(min_value=1, max_value=8), st.sampled_from(list(GROUPS))),
        min_size=1,
        max_size=6,
    ),
    k=st.integers(min_value=1, max_value=3),
)
def test_allocation_respects_counters_and_groups_and_is_complete(total, parts, k) -> None:
    allocator = Allocator(
        slices(total, parts),
        [],
        AttributeBindings.build({}),
        {CLASS.name: CLASS},
        pipeline=build_pipeline(ALL_ON),
    )
    node = SimpleNodeClaim(
        "node/worker-1",
        Requirements.from_labels({"kubernetes.io/hostname": "worker-1"}),
        ["p4d.24xlarge"],
        node_name="worker-1",
    )
    claim = ResourceClaim(
        "ml-training",
        "partitions",
        ResourceClaimSpec([DeviceRequest("parts", ExactDeviceRequest(CLASS.name, count=k))]),
    )
    possible = any(feasible(total, parts, c) for c in combinations(range(len(parts)), k))
    try:
        result = allocator.allocate(node, [claim])
    except AllocationError as e:
        assert not possible, f"allocator failed ({e}) although a feasible set exists"
        return
    chosen = tuple(sorted(int(d.device.rsplit("-", 1)[1]) for d in result.claims[0].devices))
    assert len(chosen) == k
    assert feasible(total, parts, chosen)


@pytest.mark.parametrize("committed", [True, False])
def test_committed_partitions_shrink_the_next_allocation(committed: bool) -> None:
    parts = [(6, "none"), (6, "none")]
    allocator = Allocator(
        slices(8, parts),
        [],
        AttributeBindings.build({}),
        {CLASS.name: CLASS},
        pipeline=build_pipeline(ALL_ON),
    )
    node = SimpleNodeClaim(
        "node/worker-1",
        Requirements.from_labels({"kubernetes.io/hostname": "worker-1"}),
        ["p4d.24xlarge"],
        node_name="worker-1",
    )

    def claim(name: str) -> ResourceClaim:
        spec = ResourceClaimSpec([DeviceRequest("parts", ExactDeviceRequest(CLASS.name))])
        return ResourceClaim("ml-training", name, spec)

    first = allocator.allocate(node, [claim("a")])
    if committed:
        first.allocation.commit()
        # part-0 is held, part-1 would overflow the 8Gi counter set with part-0's 6Gi.
        with pytest.raises(AllocationError, match="no instance type can satisfy"):
            allocator.allocate(node, [claim("b")])
    else:
        assert allocator.allocate(node, [claim("b")]).claims[0].devices


NIC = "nic.example.com"
NIC_CLASS = DeviceClass("nic.example.com", [DeviceSelector(f'device.driver == "{NIC}"')])


def nic_slice(nics: int) -> ResourceSlice:
    from allocator.model import DeviceCapacity, RequestPolicy

    policy = RequestPolicy(
        default=Quantity.parse("1G"),
        valid_range_min=Quantity.parse("1G"),
        valid_range_step=Quantity.parse("1G"),
    )
    return ResourceSlice(
        "worker-1-nics",
        NIC,
        "worker-1-nics",
        1,
        1,
        node_name="worker-1",
        devices=[
            Device(
                f"eth{i}",
                capacity={"bandwidth": DeviceCapacity(Quantity.parse("10G"), policy)},
                allow_multiple_allocations=True,
            )
            for i in range(nics)
        ],
    )


@settings(max_examples=60, deadline=None)
@given(
    nics=st.integers(min_value=1, max_value=2),
    shares=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
)
def test_shares_pack_into_nic_bandwidth_exactly_when_possible(nics, shares) -> None:
    """Each request asks one share of ``g`` G; several shares may land on one NIC."""
    from allocator.model import CapacityRequirements

    allocator = Allocator(
        [nic_slice(nics)],
        [],
        AttributeBindings.build({}),
        {NIC: NIC_CLASS},
        pipeline=build_pipeline(ALL_ON),
    )
    node = SimpleNodeClaim(
        "node/worker-1",
        Requirements.from_labels({"kubernetes.io/hostname": "worker-1"}),
        ["c6in.8xlarge"],
        node_name="worker-1",
    )
    requests = [
        DeviceRequest(
            f"net-{i}",
            ExactDeviceRequest(
                NIC,
                capacity=CapacityRequirements({"bandwidth": Quantity.parse(f"{g}G")}),
            ),
        )
        for i, g in enumerate(shares)
    ]
    claim = ResourceClaim("default", "router", ResourceClaimSpec(requests))
    possible = any(
        all(
            sum(g for g, nic in zip(shares, choice, strict=True) if nic == n) <= 10
            for n in range(nics)
        )
        for choice in product(range(nics), repeat=len(shares))
    )
    try:
        result = allocator.allocate(node, [claim])
    except AllocationError:
        assert not possible
        return
    assert possible
    used: dict[str, int] = {}
    for d in result.claims[0].devices:
        used[d.device] = used.get(d.device, 0) + int(d.extra["consumedCapacity"]["bandwidth"][:-1])
    assert all(v <= 10 for v in used.values())
    assert sum(used.values()) == sum(shares)
