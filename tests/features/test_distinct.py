"""DistinctAttribute and list-typed attributes, add/remove like MatchAttribute."""

from __future__ import annotations

import time
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.allocator import AllocationError, Allocator
from allocator.bindings import AttributeBindings
from allocator.featuregates import ALL_ON
from allocator.features.distinct import (
    DistinctAttributeConstraint,
    ListMatchAttributeState,
    match_values,
)
from allocator.model import (
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    DeviceSelector,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceSlice,
)
from allocator.nodeclaim import SimpleNodeClaim
from allocator.pipeline import build_pipeline
from allocator.requirements import Requirements
from allocator.simulation import SimulationOptions, simulate
from allocator.trace import Trace
from tests.features.conftest import devices_of, gates_with, load_example, load_yaml

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


# --- feasibility by reasoning ---------------------------------------------------------------
#
# Like MatchAttribute's feasibility check: devices still to choose under a distinctAttribute
# each need a value of their own, so fewer distinct values among the devices that could take
# them than devices needed refuses at once, instead of trying every combination.

GPU = "gpu.nvidia.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
GPU_CLASS = DeviceClass(GPU, [DeviceSelector(f'device.driver == "{GPU}"')])


def gpu_node(roots: list) -> tuple[Allocator, SimpleNodeClaim]:
    """gpu-node-1 with one GPU per entry, its pcieRoot attribute that entry (None: unset)."""
    devices = [
        Device(f"gpu-{i}", attributes={"index": i} | ({PCIE_ROOT: r} if r is not None else {}))
        for i, r in enumerate(roots)
    ]
    slice_ = ResourceSlice(
        "gpu-node-1-gpus", GPU, "gpu-node-1", 1, 1, node_name="gpu-node-1", devices=devices
    )
    allocator = Allocator(
        [slice_], [], AttributeBindings.build({}), {GPU: GPU_CLASS}, pipeline=build_pipeline(ALL_ON)
    )
    node = SimpleNodeClaim(
        "node/gpu-node-1",
        Requirements.from_labels({"kubernetes.io/hostname": "gpu-node-1"}),
        ["p5.48xlarge"],
        node_name="gpu-node-1",
    )
    return allocator, node


def spread_claim(*counts: int, scope: tuple[str, ...] = ()) -> ResourceClaim:
    names = ["gpu", "extra", "more"][: len(counts)]
    requests = [
        DeviceRequest(n, ExactDeviceRequest(GPU, count=c))
        for n, c in zip(names, counts, strict=True)
    ]
    constraint = DeviceConstraint(
        requests=list(scope),
        distinct_attribute=PCIE_ROOT,
        raw={"requests": list(scope), "distinctAttribute": PCIE_ROOT},
    )
    return ResourceClaim("default", "train-0-gpu", ResourceClaimSpec(requests, [constraint]))


def chosen(result) -> list[tuple[str, str]]:
    return [(d.request, d.device) for d in result.claims[0].devices]


def test_forty_gpus_on_five_roots_cannot_give_eight_distinct_roots_refused_at_once() -> None:
    roots = [f"pci0000:{i % 5:02x}" for i in range(40)]
    allocator, node = gpu_node(roots)
    started = time.perf_counter()
    with pytest.raises(AllocationError) as err:
        allocator.allocate(node, [spread_claim(8)], trace=Trace())
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, f"{elapsed:.2f}s: refused by searching, not by reasoning"
    message = str(err.value)
    assert (
        f"request gpu: distinctAttribute {PCIE_ROOT}: 8 devices need a value of {PCIE_ROOT} of "
        "their own, and the devices that could take them have only 5: pci0000:00, pci0000:01, "
        "pci0000:02, pci0000:03, pci0000:04"
    ) in message
    (funnel,) = err.value.funnels
    assert (funnel.needed, funnel.candidates, funnel.usable) == (8, 40, 40)
    assert funnel.whole is not None and "only 5: pci0000:00" in funnel.whole
    assert allocator.dfs_nodes == 0  # no device was tried


def test_the_whole_run_refuses_it_by_reasoning_well_under_a_second() -> None:
    devices = "".join(
        f"  - name: gpu-{i}\n    attributes:\n      {PCIE_ROOT}: {{string: pci0000:{i % 5:02x}}}\n"
        for i in range(40)
    )
    text = f"""apiVersion: v1
kind: Node
metadata:
  name: gpu-node-1
  labels: {{kubernetes.io/hostname: gpu-node-1, node.kubernetes.io/instance-type: p5.48xlarge}}
status:
  allocatable: {{cpu: "192", memory: 2048Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu.nvidia.com}}
spec:
  selectors:
  - cel: {{expression: device.driver == "gpu.nvidia.com"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: gpu-node-1-gpus}}
spec:
  driver: gpu.nvidia.com
  nodeName: gpu-node-1
  pool: {{name: gpu-node-1, generation: 1, resourceSliceCount: 1}}
  devices:
{devices}---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: eight-roots, namespace: default}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu.nvidia.com, count: 8}}
    constraints:
    - distinctAttribute: {PCIE_ROOT}
---
apiVersion: v1
kind: Pod
metadata: {{name: train-0, namespace: default, uid: 7f1c9a52-0d4b-4c8e-9a61-3b2d5e8f0a17}}
spec:
  containers:
  - name: train
    image: registry.example.com/train:1.0
    resources:
      requests: {{cpu: "8"}}
  resourceClaims:
  - name: gpu
    resourceClaimName: eight-roots
"""
    snapshot = load_yaml(text)
    started = time.perf_counter()
    out = simulate(snapshot, SimulationOptions.from_json({"timeout": 5, "trace": True}))
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"{elapsed:.2f}s"
    (pod,) = out.result["pods"]
    assert not pod["scheduled"]
    assert f"distinctAttribute {PCIE_ROOT}: 8 devices need" in pod["error"]
    (funnel,) = pod["explanation"]
    assert "have only 5: pci0000:00, pci0000:01" in funnel["message"]
    pruned = [n for n in out.trace["nodes"] if n["kind"] == "instanceType"]
    assert [(n["status"], n["reason"]) for n in pruned] == [("pruned", "distinct")]


def test_enough_distinct_roots_still_allocates_the_first_spread() -> None:
    roots = [f"pci0000:{i % 8:02x}" for i in range(40)]
    allocator, node = gpu_node(roots)
    result = allocator.allocate(node, [spread_claim(8)])
    assert chosen(result) == [("gpu", f"gpu-{i}") for i in range(8)]


def test_devices_without_the_attribute_offer_no_value() -> None:
    allocator, node = gpu_node(["pci0000:00", None, None, "pci0000:01"])
    with pytest.raises(AllocationError, match="have only 2: pci0000:00, pci0000:01"):
        allocator.allocate(node, [spread_claim(3)])


def test_reasoning_during_the_search_keeps_the_first_solution() -> None:
    # gpu and extra share the constraint. gpu's first choices (roots 0, 1, 2) would leave
    # extra, whose GPUs sit on roots 0-2 only, nothing: the search moves on to roots 3-5.
    roots = ["r0", "r1", "r2", "r3", "r4", "r5"]
    devices = [
        Device(f"gpu-{i}", attributes={PCIE_ROOT: r, "slot": "a"}) for i, r in enumerate(roots)
    ] + [
        Device(f"gpu-{6 + i}", attributes={PCIE_ROOT: r, "slot": "b"})
        for i, r in enumerate(roots[:3])
    ]
    slice_ = ResourceSlice(
        "gpu-node-1-gpus", GPU, "gpu-node-1", 1, 1, node_name="gpu-node-1", devices=devices
    )
    allocator = Allocator(
        [slice_], [], AttributeBindings.build({}), {GPU: GPU_CLASS}, pipeline=build_pipeline(ALL_ON)
    )
    _, node = gpu_node([])
    claim = spread_claim(3, 3)
    claim.spec.requests[0].exactly.selectors = [
        DeviceSelector(f'device.attributes["{GPU}"].slot == "a"')
    ]
    claim.spec.requests[1].exactly.selectors = [
        DeviceSelector(f'device.attributes["{GPU}"].slot == "b"')
    ]
    result = allocator.allocate(node, [claim])
    assert chosen(result) == [
        ("gpu", "gpu-3"),
        ("gpu", "gpu-4"),
        ("gpu", "gpu-5"),
        ("extra", "gpu-6"),
        ("extra", "gpu-7"),
        ("extra", "gpu-8"),
    ]
    # Without the reasoning the search tries 68 devices; with it, extra's slots are not
    # entered while gpu holds roots extra needs.
    assert allocator.dfs_nodes <= 34


def first_spread(roots: list, counts: tuple[int, ...]) -> list[tuple[str, str]] | None:
    """Brute force in the DFS's order: each request's devices in increasing order, requests
    in order; a device serves one slot; every device's root is set and differs."""
    names = ["gpu", "extra", "more"]

    def solve(ri: int, used: frozenset, seen: frozenset):
        if ri == len(counts):
            return []
        free = [i for i in range(len(roots)) if i not in used]
        for combo in combinations(free, counts[ri]):
            values = [roots[i] for i in combo]
            if None in values or len(set(values)) < len(values) or set(values) & seen:
                continue
            rest = solve(ri + 1, used | set(combo), seen | set(values))
            if rest is not None:
                return [(names[ri], f"gpu-{i}") for i in combo] + rest
        return None

    return solve(0, frozenset(), frozenset())


@settings(max_examples=80, deadline=None)
@given(
    roots=st.lists(st.one_of(st.none(), st.sampled_from(["r0", "r1", "r2", "r3"])), max_size=7),
    counts=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=3),
)
def test_distinct_pruning_never_changes_the_outcome(roots, counts) -> None:
    allocator, node = gpu_node(roots)
    want = first_spread(roots, tuple(counts))
    try:
        result = allocator.allocate(node, [spread_claim(*counts)])
    except AllocationError:
        assert want is None
        return
    assert chosen(result) == want
