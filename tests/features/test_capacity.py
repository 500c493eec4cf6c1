"""Consumable capacity on the docs' eth1: a 10G NIC shared by claims, step policy from 1M."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.featuregates import ALL_ON
from allocator.features.capacity import (
    CapacityError,
    CapacityLedger,
    capacity_result_fields,
    check_capacity_gate,
    consumption,
    round_up,
    share_id,
    shared_devices_in_cluster,
)
from allocator.model import CapacityRequirements, DeviceID
from allocator.quantity import Quantity
from tests.features.conftest import (
    consumable_capacity_allocator,
    devices_of,
    gates_with,
    load_example,
)

ETH1 = DeviceID("dra.example.com", "pool", "eth1")
ETH2 = DeviceID("dra.example.com", "pool", "eth2")
Q = Quantity.parse


def example():
    snapshot = load_example("features-consumable-capacity.yaml")
    return snapshot, devices_of(snapshot)


def bandwidth(amount: str) -> CapacityRequirements:
    return CapacityRequirements({"bandwidth": Q(amount)})


def test_docs_request_of_1g_consumes_1g() -> None:
    _, devices = example()
    assert consumption(devices[ETH1], "dra.example.com", bandwidth("1G")) == {"bandwidth": Q("1G")}


def test_step_rounds_up_from_min() -> None:
    _, devices = example()
    capacity = devices[ETH1].capacity["bandwidth"]
    # 1M + 8k: 1000005 is not on the grid, the next step is 1000008.
    assert round_up(Q("1000005"), capacity) == Q("1000008")
    assert round_up(Q("10k"), capacity) == Q("1M")  # below min -> min
    assert round_up(None, capacity) == Q("1M")  # nothing requested -> default


def test_valid_values_round_up_to_the_next_listed_value() -> None:
    _, devices = example()
    assert consumption(devices[ETH2], "dra.example.com", bandwidth("2G")) == {"bandwidth": Q("5G")}
    # Above every listed value: no fit on this device.
    assert consumption(devices[ETH2], "dra.example.com", bandwidth("11G")) is None


def test_unknown_capacity_name_does_not_match() -> None:
    _, devices = example()
    rdma = CapacityRequirements({"rdma": Q("1")})
    assert consumption(devices[ETH1], "dra.example.com", rdma) is None
    # The driver-qualified spelling names the same capacity.
    assert consumption(
        devices[ETH1],
        "dra.example.com",
        CapacityRequirements({"dra.example.com/bandwidth": Q("2G")}),
    ) == {"bandwidth": Q("2G")}


def test_deleting_pods_free_only_their_share() -> None:
    snapshot, devices = example()
    freed = ["default/web-old-bandwidth"]  # reserved only by the deleting pod web-old
    ledger = CapacityLedger(snapshot.resource_claims.values(), freed_claims=freed, gates=ALL_ON)
    assert ledger.seed == {ETH1: {"bandwidth": Q("1G")}}
    view = ledger.view("node/worker-1", "c6in.8xlarge")
    amounts, reason = view.try_take(ETH1, devices[ETH1], bandwidth("9G"))
    assert reason is None and amounts == {"bandwidth": Q("9G")}
    amounts, reason = view.try_take(ETH1, devices[ETH1], bandwidth("1G"))
    assert amounts is None and "0 of 10G left" in reason
    view.give_back(ETH1, {"bandwidth": Q("9G")})
    assert view.consumed(ETH1) == {"bandwidth": Q("1G")}


def test_without_freeing_both_shares_count() -> None:
    snapshot, devices = example()
    ledger = CapacityLedger(snapshot.resource_claims.values(), gates=ALL_ON)
    view = ledger.view("node/worker-1", "c6in.8xlarge")
    assert view.try_take(ETH1, devices[ETH1], bandwidth("9G"))[0] is None
    assert view.try_take(ETH1, devices[ETH1], bandwidth("8G"))[1] is None


def test_shares_committed_by_other_nodeclaims_count() -> None:
    snapshot, devices = example()
    ledger = CapacityLedger(snapshot.resource_claims.values(), gates=ALL_ON)
    ledger.commit("web-pool-1", "c6in.8xlarge", [(ETH1, {"bandwidth": Q("7G")}, False)])
    assert (
        ledger.view("web-pool-2", "c6in.8xlarge").try_take(ETH1, devices[ETH1], bandwidth("2G"))[0]
        is None
    )
    # Same NodeClaim, another instance type: that share belongs to a node that won't launch.
    assert (
        ledger.view("web-pool-1", "m6in.8xlarge").try_take(ETH1, devices[ETH1], bandwidth("2G"))[1]
        is None
    )
    assert ledger.consumed_after_run()[ETH1] == {"bandwidth": Q("9G")}
    ledger.release_instance_type("web-pool-1", "c6in.8xlarge")
    assert ledger.consumed_after_run()[ETH1] == {"bandwidth": Q("2G")}


def test_share_ids_are_deterministic_and_distinct_per_slot() -> None:
    a = share_id("default/web-new-0-net", "req-0", ETH1)
    assert a == share_id("default/web-new-0-net", "req-0", ETH1)
    assert a != share_id("default/web-new-0-net", "req-0", ETH1, slot=1)
    fields = capacity_result_fields(a, {"bandwidth": Q("1G")})
    assert fields == {"shareID": a, "consumedCapacity": {"bandwidth": "1G"}}
    assert capacity_result_fields(None, {}) == {}


def test_gate_off_refuses_capacity_requests_and_sharing() -> None:
    snapshot, devices = example()
    template = snapshot.resource_claim_templates["default/bandwidth-claim-template"]
    request = template.spec.requests[0].exactly
    with pytest.raises(CapacityError, match="DRAConsumableCapacity feature is disabled"):
        check_capacity_gate(
            request, "default/web-new-0-net", "req-0", gates_with(DRAConsumableCapacity=False)
        )
    check_capacity_gate(request, "default/web-new-0-net", "req-0", gates_with())
    assert shared_devices_in_cluster(snapshot.resource_claims.values()) == {ETH1}


def test_device_taken_whole_must_still_hold_the_request() -> None:
    _, devices = example()
    eth1 = devices[ETH1]
    eth1.allow_multiple_allocations = False
    view = CapacityLedger(gates=ALL_ON).view("node/worker-1", "c6in.8xlarge")
    assert view.try_take(ETH1, eth1, bandwidth("10G")) == ({}, None)
    assert view.try_take(ETH1, eth1, bandwidth("11G"))[0] is None


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=1, max_value=10**10))
def test_step_rounding_lands_on_the_grid_and_never_below(requested: int) -> None:
    _, devices = example()
    capacity = devices[ETH1].capacity["bandwidth"]
    amount = round_up(Q(requested), capacity)
    assert amount >= Q(requested)
    assert amount >= Q("1M")
    assert (amount.value - Q("1M").value) % 8 == 0
    assert amount.value - max(Q(requested).value, Q("1M").value) < 8


def test_shares_across_claims_fill_eth1_then_eth2() -> None:
    from allocator.allocator import AllocationError
    from allocator.model import ResourceClaim

    snapshot, _ = example()
    allocator, node = consumable_capacity_allocator(snapshot)
    spec = snapshot.resource_claim_templates["default/bandwidth-claim-template"].spec
    spec.requests[0].exactly.capacity.requests["bandwidth"] = Q("4G")
    chosen = []
    for i in range(4):
        result = allocator.allocate(node, [ResourceClaim("default", f"batch-{i}-net", spec)])
        (device,) = result.claims[0].devices
        chosen.append((device.device, device.extra["consumedCapacity"]["bandwidth"]))
        result.allocation.commit()
    # eth1 has 9G left (web-old's share is freed): two 4G shares; eth2 rounds 4G up to 5G.
    assert chosen == [("eth1", "4G"), ("eth1", "4G"), ("eth2", "5G"), ("eth2", "5G")]
    with pytest.raises(AllocationError, match="capacity"):
        allocator.allocate(node, [ResourceClaim("default", "batch-4-net", spec)])
