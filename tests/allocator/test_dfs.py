"""The per-instance-type DFS: order, the eligibility checks, backtracking, pruning, timeout,
trace."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import pytest

from allocator.errors import AllocationError, AllocationTimeout
from allocator.featuregates import ALL_ON
from allocator.model import Device, DeviceID
from allocator.pipeline import DeviceCheckSpec, Pipeline, build_pipeline, core_pipeline
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
    assert all(n["status"] == "pruned" for n in pinned)
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
    (it_node,) = [n for n in t.nodes if n["kind"] == "instanceType"]
    assert it_node["status"] == "failed" and it_node["reason"] == "timeout"
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
    trace = Trace()
    r = a.allocate(
        in_flight("gpu-pool-1", [p6, p5]), [claim("c", exact("gpu", mode="All"))], trace=trace
    )
    assert r.instance_types == ["p5.48xlarge"]
    assert "exceeding maximum" in r.failed_instance_types["p6.96xlarge"]
    (pruned,) = [n for n in trace.nodes if n["kind"] == "instanceType" and n["status"] == "pruned"]
    assert (pruned["label"], pruned["reason"]) == ("p6.96xlarge", "exceeding-maximum")
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
    prefilter_it_independent = False
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


def with_check(pipeline: Pipeline, spec: DeviceCheckSpec, before: str) -> Pipeline:
    """``pipeline`` with one more device check, placed before the check named ``before``."""
    checks = list(pipeline.device_checks)
    at = next(i for i, c in enumerate(checks) if c.name == before)
    return replace(pipeline, device_checks=(*checks[:at], spec, *checks[at:]))


def test_a_pipeline_check_runs_in_order_and_unwinds_in_reverse():
    Recorder.log = []
    pipeline = with_check(build_pipeline(ALL_ON), DeviceCheckSpec("recorder", Recorder), "topology")
    order = pipeline.check_names
    builtins = [
        n for n in order if n in ("allocated", "selector", "constraint", "recorder", "topology")
    ]
    assert builtins == ["allocated", "selector", "constraint", "recorder", "topology"]
    slices = [
        resource_slice("gpus-a", gpus(2, prefix="a-"), node_selector=zone_selector("us-west-2a")),
        resource_slice("gpus-b", gpus(2, prefix="b-"), node_selector=zone_selector("us-west-2b")),
        resource_slice(
            "nics-b", [nic("nic-0")], driver=NIC, node_selector=zone_selector("us-west-2b")
        ),
    ]
    a = make_allocator(slices, pipeline=pipeline)
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


def test_binding_path_excludes_concrete_devices_during_the_search():
    # Template GPUs and NICs learn their PCIe root only at run time; the provider binds
    # gpu-0..3 with nic-0 and gpu-4..7 with nic-1. An in-cluster NIC with a concrete root is
    # tried first (in-cluster before templates) and must be refused once the binding path is
    # established.
    t_gpus = [gpu(f"gpu-{i}") for i in range(8)]
    t_nics = [nic("nic-0"), nic("nic-1")]
    g = [DeviceID(GPU, "p5-gpus", f"gpu-{i}") for i in range(8)]
    n = [DeviceID(NIC, "p5-nics", f"nic-{i}") for i in range(2)]
    p5 = instance_type(
        "p5.48xlarge",
        [template("p5-gpus", t_gpus), template("p5-nics", t_nics, driver=NIC)],
        bindings=[(PCIE_ROOT, [*g[:4], n[0]]), (PCIE_ROOT, [*g[4:], n[1]])],
    )
    shared = resource_slice(
        "efa", [nic("efa-0", pcie_root="pci0000:00")], driver=NIC, all_nodes=True
    )
    a = make_allocator([shared], instance_types=[p5])
    c = claim(
        "c",
        exact("gpu", count=5),
        exact("nic", NIC_CLASS.name),
        constraints=[match_attribute(PCIE_ROOT)],
    )
    with pytest.raises(AllocationError, match="no instance type"):
        a.allocate(in_flight("gpu-pool-1", [p5]), [c])  # 5 GPUs never share one root
    c = claim(
        "c",
        exact("gpu", count=4),
        exact("nic", NIC_CLASS.name),
        constraints=[match_attribute(PCIE_ROOT)],
    )
    t = Trace()
    r = a.allocate(in_flight("gpu-pool-1", [p5]), [c], trace=t)
    assert picked(r) == [f"{GPU}/p5-gpus/gpu-{i}" for i in range(4)] + [f"{NIC}/p5-nics/nic-0"]
    efa = [x for x in t.nodes if x["kind"] == "device" and x["device"] == "efa-0"]
    in_nic_slot = [x for x in efa if t.nodes[x["parent"]]["label"].startswith("nic")]
    assert in_nic_slot and all(x["reason"] == "constraint" for x in in_nic_slot)
    assert "attribute bindings" in in_nic_slot[0]["message"]
    # Bindings are per nodePool: the same instance type in another NodePool has none.
    other = in_flight("spot-1", [p5], node_pool="spot-pool")
    with pytest.raises(AllocationError, match="has no attribute"):
        a.allocate(other, [c])


# --- pruning never changes which solution is found first ---------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOTS = st.sampled_from([None, "pci-0", "pci-1", "pci-2"])


def reference_search(devices, claims_spec):
    """A plain DFS without pruning: every slot tries every device in order."""
    used: set[str] = set()
    out: list[tuple[str, str]] = []

    def value(d):
        return d.attributes.get(PCIE_ROOT)

    def solve(ci, ri, slot, pinned):
        if ci == len(claims_spec):
            return True
        reqs, constrained = claims_spec[ci]
        if ri == len(reqs):
            return solve(ci + 1, 0, 0, None)
        name, driver, count, model = reqs[ri]
        if slot == count:
            return solve(ci, ri + 1, 0, pinned)
        for drv, d in devices:
            key = f"{drv}/{d.name}"
            if key in used or drv != driver or (model and d.attributes.get("model") != model):
                continue
            new_pin = pinned
            if constrained:
                v = value(d)
                if v is None or (pinned is not None and v != pinned):
                    continue
                new_pin = v
            used.add(key)
            out.append((name, key))
            if solve(ci, ri, slot + 1, new_pin):
                return True
            out.pop()
            used.discard(key)
        return False

    return list(out) if solve(0, 0, 0, None) else None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu_roots=st.lists(st.tuples(ROOTS, st.sampled_from(["H100", "A100"])), min_size=1, max_size=7),
    nic_roots=st.lists(ROOTS, max_size=3),
    n_gpus=st.integers(1, 4),
    n_nics=st.integers(0, 2),
    want_h100=st.booleans(),
    constrained=st.booleans(),
    second=st.integers(0, 2),
)
def test_first_solution_matches_a_search_without_pruning(
    gpu_roots, nic_roots, n_gpus, n_nics, want_h100, constrained, second
):
    gpu_devs = [gpu(f"gpu-{i}", model=m, pcie_root=r) for i, (r, m) in enumerate(gpu_roots)]
    nic_devs = [nic(f"nic-{i}", pcie_root=r) for i, r in enumerate(nic_roots)]
    slices = [resource_slice("node-a-gpus", gpu_devs, node_name="node-a")]
    if nic_devs:
        slices.append(resource_slice("node-a-nics", nic_devs, driver=NIC, node_name="node-a"))
    sel = ['device.attributes["gpu.nvidia.com"].model == "H100"'] if want_h100 else []
    reqs = [exact("gpu", count=n_gpus, selectors=sel)]
    spec_reqs = [("gpu", GPU, n_gpus, "H100" if want_h100 else None)]
    if n_nics:
        reqs.append(exact("nic", NIC_CLASS.name, count=n_nics))
        spec_reqs.append(("nic", NIC, n_nics, None))
    claims = [claim("c0", *reqs, constraints=[match_attribute(PCIE_ROOT)] if constrained else [])]
    spec = [(spec_reqs, constrained)]
    if second:
        claims.append(claim("c1", exact("gpu", count=second)))
        spec.append(([("gpu", GPU, second, None)], False))
    devices = [(GPU, d) for d in gpu_devs] + [(NIC, d) for d in nic_devs]
    want = reference_search(devices, spec)
    a = make_allocator(slices)
    try:
        r = a.allocate(existing_node("node-a"), claims)
    except AllocationError:
        assert want is None
        with pytest.raises(AllocationError):
            make_allocator(slices).allocate(existing_node("node-a"), claims, trace=Trace())
        return
    got = [(d.request, f"{d.driver}/{d.device}") for c in r.claims for d in c.devices]
    assert want is not None and got == want
    # A traced run walks every device but must find the same solution.
    traced = make_allocator(slices).allocate(existing_node("node-a"), claims, trace=Trace())
    assert [(d.request, f"{d.driver}/{d.device}") for c in traced.claims for d in c.devices] == want


def test_first_available_alternatives_are_tried_in_order():
    from allocator import validation

    def handler(vctx, req):
        return [
            validation.validate_exact_request(vctx, f"{req.name}/{s.name}", s.request)
            for s in req.first_available
        ]

    pipeline = replace(core_pipeline(ALL_ON), first_available=handler)
    devices = [gpu("gpu-0", model="H100"), gpu("gpu-1", model="L4"), gpu("gpu-2", model="L4")]
    a = make_allocator(
        [resource_slice("node-a-gpus", devices, node_name="node-a")], pipeline=pipeline
    )
    h100 = exact("h100", count=2, selectors=['device.attributes["gpu.nvidia.com"].model == "H100"'])
    l4 = exact("l4", count=2, selectors=['device.attributes["gpu.nvidia.com"].model == "L4"'])
    from tests.allocator.builders import first_available

    c = claim("c", first_available("gpu", ("h100", h100), ("l4", l4)))
    r = a.allocate(existing_node("node-a"), [c])
    assert [(d.request, d.device) for d in r.claims[0].devices] == [
        ("gpu/l4", "gpu-1"),
        ("gpu/l4", "gpu-2"),
    ]


def reference_with_zones(devices, reqs, constrained):
    """Plain DFS over (driver, device, root, zone) with zone pinning and MatchAttribute."""
    out: list[tuple[str, str]] = []
    used: set[str] = set()

    def solve(ri, slot, root, zone):
        if ri == len(reqs):
            return zone
        name, driver, count = reqs[ri]
        if slot == count:
            return solve(ri + 1, 0, root, zone)
        for drv, dname, r, z in devices:
            key = f"{drv}/{dname}"
            if key in used or drv != driver:
                continue
            if z is not None and zone is not None and z != zone:
                continue
            if constrained and (r is None or (root is not None and r != root)):
                continue
            used.add(key)
            out.append((name, key))
            got = solve(ri, slot + 1, r if constrained else root, z if z is not None else zone)
            if got is not False:
                return got
            out.pop()
            used.discard(key)
        return False

    zone = solve(0, 0, None, None)
    return (None, None) if zone is False else (list(out), zone)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu_specs=st.lists(
        st.tuples(ROOTS, st.sampled_from([None, "us-west-2a", "us-west-2b"])),
        min_size=1,
        max_size=6,
    ),
    nic_specs=st.lists(
        st.tuples(ROOTS, st.sampled_from([None, "us-west-2a", "us-west-2b"])), max_size=3
    ),
    n_gpus=st.integers(1, 3),
    n_nics=st.integers(0, 2),
    constrained=st.booleans(),
)
def test_zone_tightening_and_backtracking_match_a_plain_search(
    gpu_specs, nic_specs, n_gpus, n_nics, constrained
):
    slices = []
    devices = []
    for driver, specs, make in ((GPU, gpu_specs, gpu), (NIC, nic_specs, nic)):
        for i, (root, zone) in enumerate(specs):
            name = f"{'gpu' if driver == GPU else 'nic'}-{i}"
            kw = {"node_selector": zone_selector(zone)} if zone else {"all_nodes": True}
            slices.append(
                resource_slice(f"p{i:02d}", [make(name, pcie_root=root)], driver=driver, **kw)
            )
            devices.append((driver, name, root, zone))
    reqs = [exact("gpu", count=n_gpus)]
    spec = [("gpu", GPU, n_gpus)]
    if n_nics:
        reqs.append(exact("nic", NIC_CLASS.name, count=n_nics))
        spec.append(("nic", NIC, n_nics))
    c = claim("c", *reqs, constraints=[match_attribute(PCIE_ROOT)] if constrained else [])
    want, zone = reference_with_zones(devices, spec, constrained)
    p5 = instance_type("p5.48xlarge")
    nc = in_flight("gpu-pool-1", [p5], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    try:
        r = make_allocator(slices, instance_types=[p5]).allocate(nc, [c])
    except AllocationError:
        assert want is None
        return
    got = [(d.request, f"{d.driver}/{d.device}") for d in r.claims[0].devices]
    assert got == want
    expected_zones = {zone} if zone else {"us-west-2a", "us-west-2b"}
    assert r.requirements.get(ZONE).values() == expected_zones


class CountingCheck:
    name = "counting"
    prefilter_it_independent = False  # not declared: asked again on every instance type
    calls = 0

    def __init__(self, ctx):
        pass

    def prefilter(self, ctx, claim, request, cand):
        if cand.source != "template":
            type(self).calls += 1
        return None

    def try_add(self, ctx, step, cand):
        return None

    def remove(self, ctx, step, cand):
        return None


class SharedCountingCheck(CountingCheck):
    prefilter_it_independent = True
    calls = 0


@pytest.mark.parametrize(("check", "per_it"), [(CountingCheck, True), (SharedCountingCheck, False)])
def test_in_cluster_prefilter_shared_across_instance_types_only_when_declared(check, per_it):
    pipeline = with_check(core_pipeline(ALL_ON), DeviceCheckSpec("counting", check), "constraint")
    check.calls = 0
    its = [instance_type(n) for n in ("p5.48xlarge", "p4d.24xlarge", "p5e.48xlarge")]
    slices = [resource_slice("rack", gpus(4, model="L4"), all_nodes=True)]
    a = make_allocator(slices, instance_types=its, pipeline=pipeline)
    sel = 'device.attributes["gpu.nvidia.com"].model == "L4"'
    r = a.allocate(
        in_flight("gpu-pool-1", its), [claim("c", exact("gpu", count=4, selectors=[sel]))]
    )
    assert r.instance_types == [it.name for it in its]
    assert check.calls == (4 * 3 if per_it else 4)


ARCH = "kubernetes.io/arch"


def _arch_zone_selector(arch: str | None, zone: str | None) -> dict:
    exprs = [{"key": ARCH, "operator": "In", "values": [arch]}] if arch else []
    if zone:
        exprs.append({"key": ZONE, "operator": "In", "values": [zone]})
    return {"nodeSelectorTerms": [{"matchExpressions": exprs}]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slice_specs=st.lists(
        st.tuples(
            st.sampled_from([None, "amd64", "arm64"]),
            st.sampled_from([None, "us-west-2a", "us-west-2b"]),
            ROOTS,
        ),
        min_size=1,
        max_size=6,
    ),
    it_specs=st.lists(
        st.tuples(st.sampled_from(["amd64", "arm64"]), st.integers(0, 2)), min_size=1, max_size=5
    ),
    count=st.integers(1, 3),
    constrained=st.booleans(),
)
def test_instance_types_sharing_pool_sets_find_what_separate_searches_find(
    slice_specs, it_specs, count, constrained
):
    # Instance types whose views agree on the selector keys (arch, zone) share one refiltered
    # pool set and its eligible in-cluster devices within an Allocate; a run that recomputes
    # them for every instance type must give the same result, instance type by instance type.
    from allocator.dfs import DFSContext

    slices = [
        resource_slice(
            f"rack-{i}",
            [gpu(f"gpu-{i}", pcie_root=root)],
            **(
                {"node_selector": _arch_zone_selector(arch, zone)}
                if arch or zone
                else {"all_nodes": True}
            ),
        )
        for i, (arch, zone, root) in enumerate(slice_specs)
    ]
    its = [
        instance_type(
            f"m{i}.xlarge",
            [template(f"m{i}-gpus", gpus(n, pcie_root="pci0000:00"))] if n else [],
            arch=arch,
        )
        for i, (arch, n) in enumerate(it_specs)
    ]
    c = claim(
        "c",
        exact("gpu", count=count),
        constraints=[match_attribute(PCIE_ROOT)] if constrained else [],
    )

    def run():
        nc = in_flight("gpu-pool-1", its, requirements={ZONE: ["us-west-2a", "us-west-2b"]})
        try:
            r = make_allocator(slices, instance_types=its).allocate(nc, [c])
        except AllocationError as e:
            return str(e)
        by_it = {
            it: [f"{d.pool}/{d.device}" for d in devs]
            for it, devs in r.claims[0].devices_by_instance_type.items()
        }
        return r.instance_types, by_it, r.requirements, r.failed_instance_types

    shared = run()
    original = DFSContext._prepare_it

    def unshared(self, *args):
        self._pool_cache, self._shared_eligible = {}, {}
        self.explainer._tally_cache = {}
        return original(self, *args)

    DFSContext._prepare_it = unshared
    try:
        assert run() == shared
    finally:
        DFSContext._prepare_it = original


def test_a_finished_search_is_freed_by_reference_counting(monkeypatch):
    # The eligible devices' predicates and the checks refer back to the search; Allocate
    # drops them when done, so a run's thousands of searches never wait for the cycle
    # collector (which walked some 250,000 of their objects on a 1,000-pod run).
    import gc
    import weakref

    from allocator import allocator as allocator_module

    searches: list[weakref.ref] = []

    class Recorded(allocator_module.DFSContext):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            searches.append(weakref.ref(self))

    monkeypatch.setattr(allocator_module, "DFSContext", Recorded)
    slices = [resource_slice("node-a-gpus", gpus(2), node_name="node-a")]
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    a = make_allocator(slices, instance_types=[p5])
    collecting = gc.isenabled()
    gc.disable()
    try:
        a.allocate(existing_node("node-a"), [claim("fits", exact("gpu", count=2))])
        with pytest.raises(AllocationError):
            a.allocate(existing_node("node-a"), [claim("too-big", exact("gpu", count=4))])
        a.allocate(in_flight("gpu-pool-1", [p5]), [claim("new", exact("gpu", count=4))])
        assert len(searches) == 3
        assert [ref() for ref in searches] == [None, None, None]
    finally:
        if collecting:
            gc.enable()


def test_a_result_nothing_will_commit_leaves_counted_refusals_unworded():
    # A fix suggestion's trial asks Allocate without words: the g5 it cannot use (two GPUs
    # for a claim of four) keeps a placeholder, as only a commit's record of the instance
    # types lost reads the words. The decision is the same.
    g5 = instance_type("g5.12xlarge", [template("g5-gpus", gpus(2))])
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    a = make_allocator([], instance_types=[g5, p5])
    ask = [claim("train", exact("gpu", count=4))]
    worded = a.allocate(in_flight("gpu-pool-1", [g5, p5]), ask, explain=False)
    trial = a.allocate(in_flight("gpu-pool-2", [g5, p5]), ask, explain=False, word_refusals=False)
    assert trial.instance_types == worded.instance_types == ["p5.48xlarge"]
    assert picked(trial) == picked(worded)
    assert list(trial.failed_instance_types) == list(worded.failed_instance_types)
    assert "2" in worded.failed_instance_types["g5.12xlarge"]
    assert trial.failed_instance_types["g5.12xlarge"] != worded.failed_instance_types["g5.12xlarge"]
