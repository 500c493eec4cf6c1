"""DistinctAttribute and list-typed attributes, add/remove like MatchAttribute."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.features.distinct import (
    DistinctAttributeConstraint,
    ListMatchAttributeState,
    match_values,
)
from allocator.model import Device, DeviceID
from tests.features.conftest import devices_of, gates_with, load_example

NIC = "nic.example.com"


def nic(name: str, iface: str) -> tuple[DeviceID, Device]:
    return DeviceID(NIC, "worker-1-nics", name), Device(name, attributes={"name": iface})


def test_distinct_rejects_the_same_value_and_backtracks() -> None:
    c = DistinctAttributeConstraint(f"{NIC}/name", ("nic",))
    eth1_id, eth1 = nic("eth1", "eth1")
    eth2_id, eth2 = nic("eth2", "eth2")
    assert c.add("nic", None, eth1, eth1_id)
    # The same multi-allocatable device a second time: same name, rejected.
    assert not c.add("nic", None, eth1, eth1_id)
    assert "not distinct" in c.last_failure
    assert c.add("nic", None, eth2, eth2_id)
    c.remove("nic", None, eth2, eth2_id)
    c.remove("nic", None, eth1, eth1_id)
    assert c.size == 0 and c.add("nic", None, eth1, eth1_id)


def test_distinct_ignores_requests_out_of_scope_and_needs_the_attribute() -> None:
    c = DistinctAttributeConstraint(f"{NIC}/name", ("nic",))
    eth1_id, eth1 = nic("eth1", "eth1")
    assert c.add("gpu", None, eth1, eth1_id) and c.size == 0
    bare_id, bare = DeviceID(NIC, "p", "eth9"), Device("eth9")
    assert not c.add("nic", None, bare, bare_id)
    assert "has no attribute" in c.last_failure


def test_list_values_must_be_disjoint() -> None:
    snapshot = load_example("features-distinct-attribute.yaml")
    devices = devices_of(snapshot)
    cores = {d.device: (d, devices[d]) for d in devices if d.driver == "cpu.example.com"}
    c = DistinctAttributeConstraint("cpu.example.com/l3Caches")
    g0_id, g0 = cores["core-group-0"]
    g1_id, g1 = cores["core-group-1"]
    g2_id, g2 = cores["core-group-2"]
    assert c.add("cores", None, g0, g0_id)
    assert not c.add("cores", None, g1, g1_id)  # shares l3-1
    assert c.add("cores", None, g2, g2_id)
    # Without the list gate a list value is an unknown type: nothing matches.
    off = DistinctAttributeConstraint.from_api(
        snapshot.resource_claims["default/cores-sharing-numa"].spec.constraints[1],
        gates_with(DRAListTypeAttributes=False),
    )
    assert not off.add("cores", None, g2, g2_id)


def test_list_match_keeps_a_non_empty_intersection() -> None:
    state = ListMatchAttributeState("cpu.example.com/numaNodes")
    assert state.try_add((0, 1))
    assert state.try_add((1,))
    assert not state.try_add((0,))  # {0,1} & {1} & {0} is empty
    state.remove()
    assert state.try_add((0,))
    assert match_values((0, 1), 1, gates_with())
    assert not match_values((0, 1), 1, gates_with(DRAListTypeAttributes=False))
    assert not match_values(True, 1, gates_with())  # bool and int never match


@settings(max_examples=60, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 5), min_size=1, max_size=3), max_size=6))
def test_distinct_accepts_exactly_pairwise_disjoint_sets(sets) -> None:
    c = DistinctAttributeConstraint("example.com/numa")
    accepted: list[frozenset[int]] = []
    for i, values in enumerate(sets):
        device_id = DeviceID("cpu.example.com", "p", f"d{i}")
        device = Device(f"d{i}", attributes={"example.com/numa": tuple(sorted(values))})
        expected = all(not (values & other) for other in accepted)
        assert c.add("r", None, device, device_id) == expected
        if expected:
            accepted.append(values)
    assert c.size == len(accepted)


def _cand(name: str, **attributes) -> object:
    from allocator.pools import DeviceWithID

    return DeviceWithID(
        DeviceID("cpu.example.com", "worker-1-cpus", name), Device(name, attributes=attributes)
    )


def test_list_aware_match_attribute_constraint_pins_and_unwinds() -> None:
    from allocator.features.attributes import ListMatchAttributeConstraint

    c = ListMatchAttributeConstraint("cpu.example.com/numaNodes", frozenset(), lists=True)
    both = _cand("g1", numaNodes=(0, 1))
    one = _cand("g2", numaNodes=(1,))
    zero = _cand("g0", numaNodes=(0,))
    assert c.add("cores", both) is None and c.value == "[0, 1]"
    assert c.add("cores", one) is None and c.value == 1
    assert "not 1" in c.add("cores", zero)
    c.remove("cores", one)
    assert c.value == "[0, 1]" and c.add("cores", zero) is None
    c.remove("cores", zero)
    c.remove("cores", both)
    assert not c.pinned and c.stack == []


def test_scalar_match_is_type_aware_and_lists_need_the_gate() -> None:
    from allocator.features.attributes import ListMatchAttributeConstraint

    c = ListMatchAttributeConstraint("cpu.example.com/flag", frozenset(), lists=True)
    assert c.add("r", _cand("a", flag=True)) is None
    assert c.add("r", _cand("b", flag=1)) is not None  # 1 is not true
    assert c.add("r", _cand("c", flag=True)) is None
    off = ListMatchAttributeConstraint("cpu.example.com/numa", frozenset(), lists=False)
    assert "DRAListTypeAttributes" in off.add("r", _cand("d", numa=(0,)))
    assert off.add("r", _cand("e", numa=0)) is None
