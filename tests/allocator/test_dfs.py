"""The per-instance-type DFS: order, the eligibility checks, backtracking, pruning, timeout,
trace."""

from __future__ import annotations

import itertools
import time

import pytest

from allocator.dfs import DEVICE_CHECKS, register_device_check
from allocator.errors import AllocationError, AllocationTimeout
from allocator.model import Device, DeviceID
from allocator.trace import Trace
from tests.allocator.builders import (
    GPU,
    NIC,
    NIC_CLASS,
    PCIE_ROOT,
    ZONE,
    claim,
    exact,
    existing_node,
    gpu,
    gpus,
    in_flight,
    instance_type,
    make_allocator,
    match_attribute,
    nic,
    picked,
    resource_slice,
    template,
    zone_selector,
)

NUMA = "gpu.nvidia.com/numaNode"


def dev(name, pci, numa, driver=GPU):
    attrs = {PCIE_ROOT: pci, "numaNode": numa}
    return (
        Device(name, attrs)
        if driver == GPU
        else Device(name, {PCIE_ROOT: pci, "nic.example.com/numaNode": numa})
    )


def test_in_cluster_devices_first_then_templates_in_listed_order():
    slices = [
        resource_slice("rack-b", gpus(1, prefix="b-"), pool="rack-b", all_nodes=True),
        resource_slice("rack-a", gpus(1, prefix="a-"), pool="rack-a", all_nodes=True),
    ]
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    a = make_allocator(slices, instance_types=[p5])
    r = a.allocate(in_flight("gpu-pool-1", [p5]), [claim("c", exact("gpu", count=4))])
    assert picked(r) == [
        f"{GPU}/rack-a/a-0",
        f"{GPU}/rack-b/b-0",
        f"{GPU}/p5-gpus/gpu-0",
        f"{GPU}/p5-gpus/gpu-1",
    ]
    assert [d.source for d in r.claims[0].devices] == ["in-cluster"] * 2 + ["template"] * 2
    assert r.claims[0].devices[2].instance_type == "p5.48xlarge"


def test_match_attribute_backtracks_to_a_consistent_set():
    # Each constraint alone looks feasible for every first GPU; only together do they fail
    # for pci-0 GPUs, so the DFS must backtrack to the pci-1 GPUs.
    gpus_ = [dev(f"gpu-{i}", f"pci-{i // 2}", str(i // 2)) for i in range(4)]
    nics = [
        Device("nic-0", {PCIE_ROOT: "pci-0", "nic.example.com/numaNode": "1"}),
        Device("nic-1", {PCIE_ROOT: "pci-1", "nic.example.com/numaNode": "0"}),
        Device("nic-2", {PCIE_ROOT: "pci-1", "nic.example.com/numaNode": "1"}),
    ]
    slices = [
        resource_slice("node-a-gpus", gpus_, node_name="node-a"),
        resource_slice("node-a-nics", nics, driver=NIC, node_name="node-a"),
    ]
    a = make_allocator(slices)
    c = claim(
        "c",
        exact("gpu", count=2),
        exact("nic", NIC_CLASS.name),
        constraints=[match_attribute(PCIE_ROOT), match_attribute("numaNode")],
    )
    from allocator.constraints import CONSTRAINT_PARSERS  # noqa: F401  (table in use)

    # numaNode unqualified: looked up as "<driver>/numaNode" on each device.
    t = Trace()
    r = a.allocate(existing_node("node-a"), [c], trace=t)
    assert picked(r) == [
        f"{GPU}/node-a-gpus/gpu-2",
        f"{GPU}/node-a-gpus/gpu-3",
        f"{NIC}/node-a-nics/nic-2",
    ]
    assert any(n["kind"] == "device" and n["reason"] == "backtrack" for n in t.nodes)
    assert any(n["kind"] == "device" and n["reason"] == "constraint" for n in t.nodes)


def test_zone_tightening_backtracks_to_the_other_zone():
    slices = [
        resource_slice("gpus-a", gpus(1, prefix="a-"), node_selector=zone_selector("us-west-2a")),
        resource_slice("gpus-b", gpus(1, prefix="b-"), node_selector=zone_selector("us-west-2b")),
        resource_slice(
            "nics-b", [nic("nic-0")], driver=NIC, node_selector=zone_selector("us-west-2b")
        ),
    ]
    p5 = instance_type("p5.48xlarge")
    a = make_allocator(slices, instance_types=[p5])
    nc = in_flight("gpu-pool-1", [p5], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    t = Trace()
    r = a.allocate(nc, [claim("c", exact("gpu"), exact("nic", NIC_CLASS.name))], trace=t)
    assert picked(r) == [f"{GPU}/gpus-b/b-0", f"{NIC}/nics-b/nic-0"]
    assert r.requirements.get(ZONE).values() == {"us-west-2b"}
    assert r.claims[0].node_selector == zone_selector("us-west-2b")
    tried_a = [n for n in t.nodes if n["kind"] == "device" and n["device"] == "a-0"]
    assert tried_a[0]["status"] == "failed" and tried_a[0]["reason"] == "backtrack"
    # nics-b was filtered out while zone a was pinned: the NIC slot saw a topology rejection.
    assert any(
        n["device"] == "nic-0" and n["reason"] == "topology"
        for n in t.nodes
        if n["kind"] == "device"
    )


def test_topology_rejects_device_incompatible_with_node_claim_zone():
    slices = [resource_slice("gpus-b", gpus(1), node_selector=zone_selector("us-west-2b"))]
    a = make_allocator(slices)
    with pytest.raises(AllocationError, match="no instance type can satisfy"):
        a.allocate(existing_node("node-a", zone="us-west-2a"), [claim("c", exact("gpu"))])


def test_impossible_match_attribute_refused_in_milliseconds():
    # 20 GPUs on one PCIe root, a NIC on a root no GPU shares: C(20,8) GPU sets exist, none
    # can take the NIC. Pruning ends it at the first pin of each GPU.
    slices = [
        resource_slice("node-a-gpus", gpus(20, pcie_root="pci0000:00"), node_name="node-a"),
        resource_slice(
            "node-a-nics", [nic("nic-0", pcie_root="pci0000:80")], driver=NIC, node_name="node-a"
        ),
    ]
    a = make_allocator(slices)
    c = claim(
        "c",
        exact("gpu", count=8),
        exact("nic", NIC_CLASS.name),
        constraints=[match_attribute(PCIE_ROOT)],
    )
    start = time.perf_counter()
    with pytest.raises(AllocationError) as e:
        a.allocate(existing_node("node-a"), [c])
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5
    assert "matchAttribute resource.kubernetes.io/pcieRoot" in str(e.value)
    assert "request nic has 0 of 1 devices left" in str(e.value)


def test_pruning_rejects_values_that_cannot_fill_the_request():
    # Roots: 3 GPUs on pci-0, 8 on pci-1. Asking 4: pci-0 GPUs are skipped by reasoning.
    devices = [gpu(f"gpu-{i}", pcie_root="pci-0" if i < 3 else "pci-1") for i in range(11)]
    a = make_allocator([resource_slice("node-a-gpus", devices, node_name="node-a")])
    t = Trace()
    r = a.allocate(
        existing_node("node-a"),
        [claim("c", exact("gpu", count=4), constraints=[match_attribute(PCIE_ROOT)])],
        trace=t,
    )
    assert picked(r) == [f"{GPU}/node-a-gpus/gpu-{i}" for i in (3, 4, 5, 6)]
    pinned = [
        n for n in t.nodes if n["kind"] == "device" and n["device"] in ("gpu-0", "gpu-1", "gpu-2")
    ]
    assert pinned and all(n["reason"] == "constraint" for n in pinned)
    assert not any(n["reason"] == "backtrack" for n in t.nodes if n["kind"] == "device")


def pathological():
    # Each constraint alone is satisfiable for every pin; jointly only by nothing.
    gpus_ = [dev(f"gpu-{i}", f"pci-{i % 2}", str(i % 2)) for i in range(20)]
    nics = [
        Device("nic-0", {PCIE_ROOT: "pci-0", "nic.example.com/numaNode": "1"}),
        Device("nic-1", {PCIE_ROOT: "pci-1", "nic.example.com/numaNode": "0"}),
    ]
    slices = [
        resource_slice("node-a-gpus", gpus_, node_name="node-a"),
        resource_slice("node-a-nics", nics, driver=NIC, node_name="node-a"),
    ]
    c = claim(
        "c",
        exact("gpu", count=5),
        exact("nic", NIC_CLASS.name),
        constraints=[match_attribute(PCIE_ROOT), match_attribute("numaNode")],
    )
    return slices, c


def test_timeout_on_a_pathological_search_with_a_fake_clock():
    slices, c = pathological()
    ticks = itertools.count()
    a = make_allocator(slices, clock=lambda: float(next(ticks)), timeout=5.0)
    t = Trace()
    with pytest.raises(AllocationTimeout, match="timed out"):
        a.allocate(existing_node("node-a"), [c], trace=t)
    assert t.nodes[-1]["reason"] == "timeout"
    # With time standing still the same search runs to its real answer.
    b = make_allocator(slices, clock=lambda: 0.0, timeout=5.0)
    with pytest.raises(AllocationError, match="no instance type can satisfy") as e:
        b.allocate(existing_node("node-a"), [c])
    assert not isinstance(e.value, AllocationTimeout)
    assert b.dfs_nodes > 256 * 6  # the fake clock above was read, and past the deadline


def test_all_mode_uses_predetermined_slots_and_fails_on_an_allocated_device():
    slices = [resource_slice("node-a-gpus", gpus(4), node_name="node-a")]
    a = make_allocator(slices)
    r = a.allocate(existing_node("node-a"), [claim("c", exact("gpu", mode="All"))])
    assert len(picked(r)) == 4
    held = make_allocator(slices, allocated=[DeviceID(GPU, "node-a-gpus", "gpu-2")])
    with pytest.raises(AllocationError, match="allocation mode All"):
        held.allocate(existing_node("node-a"), [claim("c", exact("gpu", mode="All"))])


def test_all_mode_with_no_device_fails():
    a = make_allocator(
        [resource_slice("node-a-nics", [nic("nic-0")], driver=NIC, node_name="node-a")]
    )
    with pytest.raises(AllocationError, match="no device matches"):
        a.allocate(existing_node("node-a"), [claim("c", exact("gpu", mode="All"))])


def test_all_mode_template_instance_type_pruned_by_the_limit_is_refused():
    slices = [resource_slice("rack", gpus(16, prefix="r-"), all_nodes=True)]
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    p6 = instance_type("p6.96xlarge", [template("p6-gpus", gpus(20))])
    a = make_allocator(slices, instance_types=[p5, p6])
    r = a.allocate(in_flight("gpu-pool-1", [p6, p5]), [claim("c", exact("gpu", mode="All"))])
    assert r.instance_types == ["p5.48xlarge"]
    assert "exceeding maximum" in r.failed_instance_types["p6.96xlarge"]
    assert len(r.claims[0].devices_by_instance_type["p5.48xlarge"]) == 24


def test_cel_runtime_error_makes_the_device_not_match_and_is_traced():
    slices = [
        resource_slice("node-a-gpus", [Device("gpu-0", {}), gpu("gpu-1")], node_name="node-a")
    ]
    a = make_allocator(slices)
    t = Trace()
    sel = 'device.attributes["gpu.nvidia.com"].model == "H100"'
    r = a.allocate(existing_node("node-a"), [claim("c", exact("gpu", selectors=[sel]))], trace=t)
    assert picked(r) == [f"{GPU}/node-a-gpus/gpu-1"]
    (bad,) = [n for n in t.nodes if n["kind"] == "device" and n["device"] == "gpu-0"]
    assert bad["reason"] == "cel-error" and bad["message"]


def test_trace_nodes_and_untraced_runs_agree():
    devices = [gpu("gpu-0", model="L4"), gpu("gpu-1"), gpu("gpu-2")]
    a = make_allocator([resource_slice("node-a-gpus", devices, node_name="node-a")])
    sel = 'device.attributes["gpu.nvidia.com"].model == "H100"'
    c = claim("c", exact("gpu", count=2, selectors=[sel]))
    t = Trace()
    traced = a.allocate(existing_node("node-a"), [c], trace=t, trace_parent=None)
    plain = a.allocate(existing_node("node-a"), [c])
    assert (
        picked(traced) == picked(plain) == [f"{GPU}/node-a-gpus/gpu-1", f"{GPU}/node-a-gpus/gpu-2"]
    )
    kinds = [n["kind"] for n in t.nodes]
    assert kinds[:4] == ["instanceType", "claim", "request", "slot"]
    tried = [n for n in t.nodes if n["kind"] == "device"]
    assert [(n["device"], n["status"], n["reason"]) for n in tried] == [
        ("gpu-0", "failed", "selector"),
        ("gpu-1", "ok", None),
        ("gpu-2", "ok", None),
    ]
    assert tried[0]["driver"] == GPU and tried[0]["pool"] == "node-a-gpus"
    assert all(n["status"] in ("ok", "failed", "pruned") for n in t.nodes)
    # The slot under gpu-1 is its child: the tree is the search.
    slot1 = next(n for n in t.nodes if n["kind"] == "slot" and n["label"] == "gpu[1]")
    assert slot1["parent"] == tried[1]["id"]


class Recorder:
    """A stateful check: logs accepted adds and removes (to test exact reverse unwinding)."""

    name = "recorder"
    log: list[tuple[str, str]] = []

    def __init__(self, ctx):
        self.stack = []

    def prefilter(self, ctx, claim, request, cand):
        return None

    def try_add(self, ctx, step, cand):
        self.stack.append(cand.id.device)
        Recorder.log.append(("add", cand.id.device))
        ctx.extra["recorded"] = True
        return None

    def remove(self, ctx, step, cand):
        assert self.stack.pop() == cand.id.device  # exact reverse order
        Recorder.log.append(("remove", cand.id.device))


def test_registered_check_runs_in_order_and_unwinds_in_reverse():
    saved = list(DEVICE_CHECKS)
    Recorder.log = []
    register_device_check(350, "recorder", Recorder)
    try:
        assert [n for _, n, _ in DEVICE_CHECKS] == [
            "allocated",
            "selector",
            "constraint",
            "recorder",
            "topology",
        ]
        slices = [
            resource_slice(
                "gpus-a", gpus(2, prefix="a-"), node_selector=zone_selector("us-west-2a")
            ),
            resource_slice(
                "gpus-b", gpus(2, prefix="b-"), node_selector=zone_selector("us-west-2b")
            ),
            resource_slice(
                "nics-b", [nic("nic-0")], driver=NIC, node_selector=zone_selector("us-west-2b")
            ),
        ]
        a = make_allocator(slices)
        nc = in_flight(
            "gpu-pool-1",
            [instance_type("p5.48xlarge")],
            requirements={ZONE: ["us-west-2a", "us-west-2b"]},
        )
        r = a.allocate(nc, [claim("c", exact("gpu", count=2), exact("nic", NIC_CLASS.name))])
        assert picked(r) == [f"{GPU}/gpus-b/b-0", f"{GPU}/gpus-b/b-1", f"{NIC}/nics-b/nic-0"]
        assert r.claims[0].devices[0].extra == {"recorded": True}
        adds = [d for op, d in Recorder.log if op == "add"]
        removes = [d for op, d in Recorder.log if op == "remove"]
        assert "a-0" in removes and len(adds) - len(removes) == 3
    finally:
        DEVICE_CHECKS[:] = saved


def test_requests_take_devices_in_increasing_order_no_permutations():
    slices = [resource_slice("node-a-gpus", gpus(6), node_name="node-a")]
    a = make_allocator(slices)
    c = claim("c", exact("gpu", count=3), exact("g2", count=4))  # 7 > 6: infeasible
    t = Trace()
    with pytest.raises(AllocationError):
        a.allocate(existing_node("node-a"), [c], trace=t)
    # Sets, not permutations: C(6,3) = 20 first-request sets at most.
    leaves = [n for n in t.nodes if n["kind"] == "slot" and n["label"] == "gpu[2]"]
    assert len(leaves) <= 20
