"""Conformance of the allocator core to the design (seeds/dra-scheduling.md), section by section.

Each class is named for the design section whose rules it pins down; the other test modules
cover the rest.
"""

from __future__ import annotations

import pytest

from allocator.claims import ALLOCATED_IN_CLUSTER, ALLOCATED_IN_MEMORY, UNALLOCATED
from allocator.constraints import MatchAttributeConstraint
from allocator.errors import AllocationError, AllocationTimeout, ValidationError
from allocator.model import DeviceID
from allocator.pools import IN_CLUSTER, DeviceWithID, SliceUniverse
from allocator.requirements import Requirements
from allocator.trace import Trace
from tests.allocator.builders import (
    GPU,
    HOSTNAME,
    NIC,
    NIC_CLASS,
    P4D,
    P5,
    PCIE_ROOT,
    ZONE,
    allocate_in_cluster,
    claim,
    device_class,
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

BARE = instance_type("m7i.48xlarge")  # no template devices
TWO_ZONES = {ZONE: ["us-west-2a", "us-west-2b"]}
RACK_LABEL = "example.com/rack"


def _dataset_nic_held_in_zone_a():
    """The pod's first claim, already allocated in-cluster to an EFA NIC reachable in zone a."""
    return allocate_in_cluster(
        claim("dataset", exact("nic", NIC_CLASS.name)),
        [("nic", DeviceID(NIC, "efa-a", "efa-0"))],
        node_selector=zone_selector("us-west-2a"),
        reserved_for_pods=["train-0"],
    )


def rack_selector(zone: str, rack: str) -> dict:
    return {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": [zone]},
                    {"key": RACK_LABEL, "operator": "In", "values": [rack]},
                ]
            }
        ]
    }


class TestDeviceSources:
    def test_template_devices_carry_no_topology(self):
        a = make_allocator(instance_types=[P5])
        nc = in_flight("gpu-pool-1", [P5], requirements=TWO_ZONES)
        r = a.allocate(nc, [claim("train", exact("gpu", count=2))])
        assert picked(r) == [f"{GPU}/p5-gpus/gpu-0", f"{GPU}/p5-gpus/gpu-1"]
        assert r.requirements.get(ZONE).values() == {"us-west-2a", "us-west-2b"}
        assert r.requirements == nc.requirements
        assert r.claims[0].node_selector is None

    def test_node_name_pinned_slice_never_serves_an_in_flight_node_claim(self):
        # Even a NodeClaim that asks for that hostname has no node name yet.
        a = make_allocator(
            [resource_slice("ip-10-0-1-17-gpus", gpus(1), node_name="ip-10-0-1-17")],
            instance_types=[P5],
        )
        nc = in_flight("gpu-pool-1", [P5], requirements={HOSTNAME: ["ip-10-0-1-17"]})
        r = a.allocate(nc, [claim("c", exact("gpu"))])
        assert picked(r) == [f"{GPU}/p5-gpus/gpu-0"]

    def test_node_selector_slice_serves_both_existing_nodes_and_in_flight_node_claims(self):
        slices = [resource_slice("rack-a", gpus(1), node_selector=zone_selector("us-west-2a"))]
        a = make_allocator(slices, instance_types=[BARE])
        r1 = a.allocate(existing_node("ip-10-0-1-17"), [claim("c1", exact("gpu"))])
        r2 = a.allocate(in_flight("gpu-pool-1", [BARE]), [claim("c2", exact("gpu"))])
        assert picked(r1) == picked(r2) == [f"{GPU}/rack-a/gpu-0"]
        assert r2.requirements.get(ZONE).values() == {"us-west-2a"}


class TestResourceClaimStateHandling:
    def test_allocated_claims_topology_filters_pools_before_the_dfs(self):
        # The pod's first claim is allocated in zone a. Zone b's rack is half published
        # (incomplete): it must be gone before validation, or "all GPUs" could not be served.
        held = _dataset_nic_held_in_zone_a()
        slices = [
            resource_slice("rack-a", gpus(2), node_selector=zone_selector("us-west-2a")),
            resource_slice("rack-b", gpus(1), count=2, node_selector=zone_selector("us-west-2b")),
        ]
        a = make_allocator(slices, instance_types=[BARE])
        nc = in_flight("gpu-pool-1", [BARE], requirements=TWO_ZONES)
        every_gpu = claim("train", exact("gpu", mode="All"))
        with pytest.raises(ValidationError, match="incomplete"):
            a.allocate(nc, [every_gpu])
        r = a.allocate(nc, [held, every_gpu])
        assert [c.state for c in r.claims] == [ALLOCATED_IN_CLUSTER, UNALLOCATED]
        assert picked(r, 1) == [f"{GPU}/rack-a/gpu-0", f"{GPU}/rack-a/gpu-1"]
        assert r.requirements.get(ZONE).values() == {"us-west-2a"}

    def test_in_memory_template_claim_on_its_node_claim_adds_nothing(self):
        a = make_allocator(instance_types=[P5])
        nc = in_flight("gpu-pool-1", [P5], requirements=TWO_ZONES)
        shared = claim("shared-gpu", exact("gpu"))
        a.allocate(nc, [shared]).allocation.commit()
        r = a.allocate(nc, [shared])
        assert r.claims[0].state == ALLOCATED_IN_MEMORY
        assert r.allocation.device_ids() == {}  # no DFS, nothing reserved twice
        assert r.requirements == nc.requirements
        assert r.instance_types == ["p5.48xlarge"]

    def test_in_memory_claim_on_a_node_pinned_device_is_not_reused_on_another_node(self):
        # The claim's device lives on ip-10-0-1-17 (nodeName-pinned): a second pod sharing the
        # claim cannot run on ip-10-0-2-33, the node identity is the constraint.
        slices = [
            resource_slice("ip-10-0-1-17-gpus", gpus(1), node_name="ip-10-0-1-17"),
            resource_slice("ip-10-0-2-33-gpus", gpus(1), node_name="ip-10-0-2-33"),
        ]
        a = make_allocator(slices)
        shared = claim("shared-gpu", exact("gpu"))
        a.allocate(existing_node("ip-10-0-1-17"), [shared]).allocation.commit()
        again = a.allocate(existing_node("ip-10-0-1-17"), [shared])
        assert again.claims[0].state == ALLOCATED_IN_MEMORY
        with pytest.raises(AllocationError, match="incompatible"):
            a.allocate(existing_node("ip-10-0-2-33", zone="us-west-2a"), [shared])

    def test_allocation_pinned_to_a_node_name_fits_only_that_node(self):
        held = allocate_in_cluster(
            claim("local", exact("gpu")),
            [("gpu", DeviceID(GPU, "ip-10-0-1-17-gpus", "gpu-0"))],
            node_selector={
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["ip-10-0-1-17"]}
                        ]
                    }
                ]
            },
            reserved_for_pods=["train-0"],
        )
        a = make_allocator(instance_types=[P5])
        assert a.allocate(existing_node("ip-10-0-1-17"), [held]).claims[0].state == (
            ALLOCATED_IN_CLUSTER
        )
        for target in (existing_node("ip-10-0-2-33"), in_flight("gpu-pool-1", [P5])):
            with pytest.raises(AllocationError, match="incompatible"):
                a.allocate(target, [held])


class TestPoolGathering:
    def test_newer_generation_in_an_inaccessible_slice_retires_accessible_older_slices(self):
        # Generation tracking is global: the driver republished the pool for zone b only.
        slices = [
            resource_slice(
                "rack-gen1", gpus(2), pool="rack", node_selector=zone_selector("us-west-2a")
            ),
            resource_slice(
                "rack-gen2",
                gpus(2),
                pool="rack",
                generation=2,
                node_selector=zone_selector("us-west-2b"),
            ),
        ]
        a_only = [Requirements.from_labels({ZONE: "us-west-2a"})]
        assert SliceUniverse(slices).gather(None, a_only) == []
        b_only = [Requirements.from_labels({ZONE: "us-west-2b"})]
        (pool,) = SliceUniverse(slices).gather(None, b_only)
        assert [s.name for s in pool.slices] == ["rack-gen2"] and not pool.incomplete

    def test_exact_count_skips_an_incomplete_pool(self):
        # Karpenter's dfsExactCount: "if pool.Incomplete { continue }". One of two declared
        # slices is published: ExactCount takes none of its devices, All mode refuses it.
        short = [resource_slice("rack-0", gpus(2), pool="rack", all_nodes=True, count=2)]
        a = make_allocator(short, instance_types=[BARE])
        with pytest.raises(AllocationError, match="pool-incomplete") as err:
            a.allocate(in_flight("gpu-pool-1", [BARE]), [claim("c", exact("gpu", count=2))])
        assert "pool gpu.nvidia.com/rack is incomplete (missing slices): 1 of 2" in str(err.value)
        (funnel,) = err.value.funnels
        assert (funnel.candidates, funnel.usable) == (2, 0)
        assert [(g.reason, g.devices) for g in funnel.rejections] == [("pool-incomplete", 2)]
        with pytest.raises(ValidationError, match="incomplete"):
            a.allocate(in_flight("gpu-pool-1", [BARE]), [claim("c", exact("gpu", mode="All"))])

    def test_no_gpu_instance_type_does_not_survive_on_a_half_published_pool(self):
        # The cluster-wide rack publishes 1 of its 2 slices. m7i has no GPUs of its own: it
        # could only have used the rack's, so only p5 (eight template GPUs) survives.
        short = [resource_slice("rack-0", gpus(2), pool="rack", all_nodes=True, count=2)]
        a = make_allocator(short, instance_types=[BARE, P5])
        r = a.allocate(in_flight("gpu-pool-1", [BARE, P5]), [claim("c", exact("gpu"))])
        assert r.instance_types == ["p5.48xlarge"]
        assert picked(r, instance_type="p5.48xlarge") == [f"{GPU}/p5-gpus/gpu-0"]

    def test_half_published_zonal_pool_does_not_tighten_the_zone(self):
        # Zone a's rack is complete, zone b's is half published: the GPU comes from zone a
        # although b's rack sorts first, and the NodeClaim is pinned to zone a.
        slices = [
            resource_slice("a-rack", gpus(1), node_selector=zone_selector("us-west-2a")),
            resource_slice(
                "b-half", gpus(1), pool="a-0", count=2, node_selector=zone_selector("us-west-2b")
            ),
        ]
        a = make_allocator(slices, instance_types=[BARE])
        r = a.allocate(
            in_flight("gpu-pool-1", [BARE], requirements=TWO_ZONES), [claim("c", exact("gpu"))]
        )
        assert picked(r) == [f"{GPU}/a-rack/gpu-0"]
        assert r.requirements.get(ZONE).values() == {"us-west-2a"}

    def test_exact_count_takes_nothing_from_an_invalid_pool(self):
        # Two slices of one pool publish gpu-0: "Invalid pools are skipped during allocation"
        # (Karpenter empties their devices), so gpu-1 of that pool is not used either.
        dup = [
            resource_slice(
                "node-gpus-0", gpus(1), pool="node-gpus", node_name="ip-10-0-1-17", count=2
            ),
            resource_slice(
                "node-gpus-1", gpus(2), pool="node-gpus", node_name="ip-10-0-1-17", count=2
            ),
        ]
        a = make_allocator(dup)
        with pytest.raises(AllocationError, match="pool-invalid") as err:
            a.allocate(existing_node("ip-10-0-1-17"), [claim("c", exact("gpu"))])
        assert "duplicate device name 'gpu-0'" in str(err.value)
        (funnel,) = err.value.funnels
        assert [(g.reason, g.devices) for g in funnel.rejections] == [("pool-invalid", 3)]
        assert funnel.rejections[0].detail.get("pool") == f"{GPU}/node-gpus"

    def test_trace_shows_devices_of_incomplete_pools_refused(self):
        short = [
            # Searched in (driver, pool) order: the half-published rack comes first.
            resource_slice("rack-a", gpus(1), pool="rack-a", all_nodes=True, count=2),
            resource_slice("rack-b", gpus(1), pool="rack-b", all_nodes=True),
        ]
        a = make_allocator(short, instance_types=[BARE])
        trace = Trace()
        r = a.allocate(in_flight("gpu-pool-1", [BARE]), [claim("c", exact("gpu"))], trace=trace)
        assert picked(r) == [f"{GPU}/rack-b/gpu-0"]
        devices = [n for n in trace.nodes if n["kind"] == "device"]
        refused = [n for n in devices if n["reason"] == "pool-incomplete"]
        assert [n["label"] for n in refused] == [f"{GPU}/rack-a/gpu-0"]
        assert refused[0]["status"] == "failed"
        assert "is incomplete (missing slices)" in refused[0]["message"]

    def test_in_flight_pool_kept_for_a_candidate_whose_requirements_are_unknown(self):
        # g5g's own requirements are not known to the view: only the NodeClaim's apply to it,
        # so the arm64 rack is accessible through g5g even though p5 (amd64) excludes it.
        arm_rack = resource_slice(
            "arm-rack",
            gpus(1),
            node_selector={
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
                        ]
                    }
                ]
            },
        )
        g5g = instance_type("g5g.16xlarge", arch="arm64")
        a = make_allocator([arm_rack], instance_types=[BARE, g5g])
        nc = in_flight("gpu-pool-1", [BARE, g5g])
        del nc.it_requirements["g5g.16xlarge"]
        r = a.allocate(nc, [claim("c", exact("gpu"))])
        assert r.instance_types == ["g5g.16xlarge"]


class TestPoolCaching:
    def test_cache_holds_the_pre_filter_superset_not_the_dfs_tightened_pools(self):
        # The first pod's device tightens to zone a during its DFS; the NodeClaim itself still
        # spans both zones, so the next pod must still see the zone-b rack from the cache.
        slices = [
            resource_slice("rack-a", gpus(1), node_selector=zone_selector("us-west-2a")),
            resource_slice("rack-b", gpus(1), node_selector=zone_selector("us-west-2b")),
        ]
        a = make_allocator(slices, instance_types=[BARE])
        nc = in_flight("gpu-pool-1", [BARE], requirements=TWO_ZONES)
        first = a.allocate(nc, [claim("c1", exact("gpu"))])
        assert picked(first) == [f"{GPU}/rack-a/gpu-0"]
        first.allocation.commit()
        assert {p.key.pool for p in a.pool_cache["gpu-pool-1"]} == {"rack-a", "rack-b"}
        second = a.allocate(nc, [claim("c2", exact("gpu"))])
        assert picked(second) == [f"{GPU}/rack-b/gpu-0"]


class TestAttributeBindings:
    def test_driver_qualified_lookup_fallback_in_a_match_attribute_constraint(self):
        # The NVIDIA driver publishes "model" unqualified; the claim names gpu.nvidia.com/model.
        slices = [
            resource_slice(
                "node-a-gpus",
                [gpu("gpu-0", model="A100"), gpu("gpu-1"), gpu("gpu-2")],
                node_name="ip-10-0-1-17",
            )
        ]
        a = make_allocator(slices)
        c = claim(
            "pair",
            exact("first"),
            exact("second", selectors=['device.attributes["gpu.nvidia.com"].model == "H100"']),
            constraints=[match_attribute(f"{GPU}/model")],
        )
        r = a.allocate(existing_node("ip-10-0-1-17"), [c])
        # gpu-0 (A100) pins a value the H100-only request cannot match: backtrack to gpu-1.
        assert picked(r) == [f"{GPU}/node-a-gpus/gpu-1", f"{GPU}/node-a-gpus/gpu-2"]

    def test_fallback_applies_only_to_the_devices_own_driver_domain(self):
        # A NIC's unqualified "model" is not gpu.nvidia.com/model: the NIC lacks the attribute.
        c = MatchAttributeConstraint(f"{GPU}/model")
        g = DeviceWithID(DeviceID(GPU, "rack", "gpu-0"), gpu("gpu-0"), IN_CLUSTER)
        n = DeviceWithID(DeviceID(NIC, "efa", "nic-0"), nic("nic-0"), IN_CLUSTER)
        assert c.add("gpu", g) is None and c.value == "H100"
        assert "has no attribute" in c.add("nic", n)


class TestRequestValidation:
    def test_class_and_request_selectors_both_apply(self):
        # Class: H100s only; request: 80Gi memory. An A100 with 80Gi and an H100 with less both
        # miss; AND semantics leave gpu-2.
        h100 = device_class(
            "h100.nvidia.com",
            f'device.driver == "{GPU}"',
            'device.attributes["gpu.nvidia.com"].model == "H100"',
        )
        slices = [
            resource_slice(
                "node-a-gpus",
                [gpu("gpu-0", model="A100"), gpu("gpu-1", memory="40Gi"), gpu("gpu-2")],
                node_name="ip-10-0-1-17",
            )
        ]
        a = make_allocator(slices, classes={h100.name: h100})
        c = claim(
            "c",
            exact(
                "gpu",
                h100.name,
                selectors=[
                    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'
                ],
            ),
        )
        assert picked(a.allocate(existing_node("ip-10-0-1-17"), [c])) == [
            f"{GPU}/node-a-gpus/gpu-2"
        ]

    def test_compile_errors_surface_before_any_device_is_seen(self):
        a = make_allocator(instance_types=[BARE])  # no devices anywhere
        bad = claim("c", exact("gpu", selectors=['device.attributes["gpu.nvidia.com"].model ==']))
        with pytest.raises(ValidationError, match="failed to compile"):
            a.allocate(in_flight("gpu-pool-1", [BARE]), [bad])

    def test_max_size_counts_all_mode_template_devices_per_instance_type(self):
        # 24 in-cluster GPUs for "all" plus p5's 8 templates is exactly 32: kept;
        # one ExactCount NIC more makes p5 exceed, the NIC-less c7gn stays.
        rack = [resource_slice("rack", gpus(24), all_nodes=True)]
        c7gn = instance_type("c7gn.16xlarge", [template("c7-nics", [nic("nic-0")], driver=NIC)])
        a = make_allocator(
            rack + [resource_slice("efa", [nic("efa-0")], driver=NIC, all_nodes=True)],
            instance_types=[P5, c7gn],
        )
        nc = in_flight("gpu-pool-1", [P5, c7gn])
        r = a.allocate(nc, [claim("c", exact("gpu", mode="All"))])
        assert r.instance_types == ["p5.48xlarge", "c7gn.16xlarge"]
        assert len(r.allocation.device_ids()["p5.48xlarge"]) == 32
        r = a.allocate(nc, [claim("c", exact("gpu", mode="All"), exact("nic", NIC_CLASS.name))])
        assert r.instance_types == ["c7gn.16xlarge"]
        assert "exceeding maximum" in r.failed_instance_types["p5.48xlarge"]


class TestConstraints:
    def test_failed_constraint_rolls_back_the_constraints_applied_before_it(self):
        # gpu-0 passes the model constraint (pinning A100) but has no PCIe root: the model pin
        # must be undone, or the H100 gpu-1 would be refused.
        slices = [
            resource_slice(
                "node-a-gpus",
                [gpu("gpu-0", model="A100"), gpu("gpu-1", pcie_root="pci0000:00")],
                node_name="ip-10-0-1-17",
            )
        ]
        a = make_allocator(slices)
        c = claim(
            "c",
            exact("gpu"),
            constraints=[match_attribute(f"{GPU}/model"), match_attribute(PCIE_ROOT)],
        )
        assert picked(a.allocate(existing_node("ip-10-0-1-17"), [c])) == [
            f"{GPU}/node-a-gpus/gpu-1"
        ]

    def test_concrete_and_binding_paths_coexist_on_different_attributes(self):
        # Template GPUs publish their model but learn the PCIe root only at run time.
        t_gpus = [gpu(f"gpu-{i}", model="H100" if i % 2 else "A100") for i in range(4)]
        ids = [DeviceID(GPU, "p5-gpus", f"gpu-{i}") for i in range(4)]
        p5 = instance_type(
            "p5.48xlarge",
            [template("p5-gpus", t_gpus)],
            bindings=[(PCIE_ROOT, ids[:2]), (PCIE_ROOT, ids[2:])],
        )
        a = make_allocator(instance_types=[p5])
        c = claim(
            "c",
            exact("gpu", count=2),
            constraints=[match_attribute(f"{GPU}/model"), match_attribute(PCIE_ROOT)],
        )
        # Same model: {0, 2} or {1, 3}; same root: {0, 1} or {2, 3}. Nothing satisfies both.
        with pytest.raises(AllocationError, match="no instance type can satisfy"):
            a.allocate(in_flight("gpu-pool-1", [p5]), [c])
        c1 = claim("c", exact("gpu", count=2), constraints=[match_attribute(PCIE_ROOT)])
        r = a.allocate(in_flight("gpu-pool-1", [p5]), [c1])
        assert picked(r) == [f"{GPU}/p5-gpus/gpu-0", f"{GPU}/p5-gpus/gpu-1"]

    def test_remove_reverses_exactly_one_add(self):
        c = MatchAttributeConstraint(PCIE_ROOT)
        d = [
            DeviceWithID(DeviceID(GPU, "rack", f"gpu-{i}"), gpu(f"gpu-{i}", pcie_root="pci0"))
            for i in range(3)
        ]
        for x in d:
            assert c.add("gpu", x) is None
        c.remove("gpu", d[2])
        c.remove("gpu", d[1])
        assert c.pinned and c.value == "pci0"  # gpu-0 still pins it
        c.remove("gpu", d[0])
        assert not c.pinned
        other = DeviceWithID(DeviceID(GPU, "rack", "gpu-9"), gpu("gpu-9", pcie_root="pci1"))
        assert c.add("gpu", other) is None and c.value == "pci1"


class TestPerInstanceTypeDFS:
    def test_binding_fallback_follows_the_instance_type_being_searched(self):
        # Only p5 declares which GPU/NIC pairs share a PCIe root; p4d declares nothing, so a
        # runtime-only root cannot be matched there.
        def it(name: str, bind: bool):
            g = [DeviceID(GPU, f"{name}-gpus", "gpu-0")]
            n = [DeviceID(NIC, f"{name}-nics", "nic-0")]
            return instance_type(
                name,
                [
                    template(f"{name}-gpus", [gpu("gpu-0")]),
                    template(f"{name}-nics", [nic("nic-0")], driver=NIC),
                ],
                bindings=[(PCIE_ROOT, g + n)] if bind else [],
            )

        p4d, p5 = it("p4d.24xlarge", False), it("p5.48xlarge", True)
        a = make_allocator(instance_types=[p4d, p5])
        c = claim(
            "c",
            exact("gpu"),
            exact("nic", NIC_CLASS.name),
            constraints=[match_attribute(PCIE_ROOT)],
        )
        r = a.allocate(in_flight("gpu-pool-1", [p4d, p5]), [c])
        assert r.instance_types == ["p5.48xlarge"]
        assert "has no attribute" in r.failed_instance_types["p4d.24xlarge"]

    def test_constraint_state_is_reset_between_instance_types(self):
        # p5's GPUs share root pci0000:00, p4d's share pci0000:80: each instance type pins its
        # own value; a pin left over from p5 would prune p4d.
        p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(2, pcie_root="pci0000:00"))])
        p4d = instance_type(
            "p4d.24xlarge", [template("p4d-gpus", gpus(2, model="A100", pcie_root="pci0000:80"))]
        )
        a = make_allocator(instance_types=[p5, p4d])
        c = claim("c", exact("gpu", count=2), constraints=[match_attribute(PCIE_ROOT)])
        r = a.allocate(in_flight("gpu-pool-1", [p5, p4d]), [c])
        assert r.instance_types == ["p5.48xlarge", "p4d.24xlarge"]

    def test_failed_instance_type_leaves_no_tightening_behind(self):
        # g5g (arm64, tried first) reaches rack-b (zone b) and rack-d (arm64, zone a) only: it
        # tightens to zone b, cannot pair the two, and fails. p5 must start again from both
        # zones and pair amd64 rack-a with a template GPU in zone a.
        def sel(zone: str, arch: str | None = None) -> dict:
            exprs = [{"key": ZONE, "operator": "In", "values": [zone]}]
            if arch:
                exprs.append({"key": "kubernetes.io/arch", "operator": "In", "values": [arch]})
            return {"nodeSelectorTerms": [{"matchExpressions": exprs}]}

        slices = [
            resource_slice("rack-a", gpus(1), node_selector=sel("us-west-2a", "amd64")),
            resource_slice("rack-b", gpus(1), node_selector=sel("us-west-2b")),
            resource_slice("rack-d", gpus(1), node_selector=sel("us-west-2a", "arm64")),
        ]
        g5g = instance_type("g5g.16xlarge", arch="arm64")
        a = make_allocator(slices, instance_types=[g5g, P5])
        nc = in_flight("gpu-pool-1", [g5g, P5], requirements=TWO_ZONES)
        r = a.allocate(nc, [claim("c", exact("gpu", count=2))])
        assert r.instance_types == ["p5.48xlarge"]
        assert "g5g.16xlarge" in r.failed_instance_types
        assert picked(r) == [f"{GPU}/rack-a/gpu-0", f"{GPU}/p5-gpus/gpu-0"]
        assert r.requirements.get(ZONE).values() == {"us-west-2a"}


class TestDeviceEligibilityChecks:
    def _reasons(self, t: Trace, device: str) -> list[str]:
        return [n["reason"] for n in t.nodes if n["kind"] == "device" and n["device"] == device]

    def test_allocated_is_checked_before_the_selector(self):
        slices = [
            resource_slice(
                "node-a-gpus", [gpu("gpu-0", model="A100"), gpu("gpu-1")], node_name="ip-10-0-1-17"
            )
        ]
        a = make_allocator(slices, allocated=[DeviceID(GPU, "node-a-gpus", "gpu-0")])
        c = claim(
            "c", exact("gpu", selectors=['device.attributes["gpu.nvidia.com"].model == "H100"'])
        )
        t = Trace()
        r = a.allocate(existing_node("ip-10-0-1-17"), [c], trace=t)
        assert picked(r) == [f"{GPU}/node-a-gpus/gpu-1"]
        assert self._reasons(t, "gpu-0") == ["allocated"]

    def test_selector_is_checked_before_constraints(self):
        # The NIC pins root pci0000:00; gpu-0 is an A100 on another root, failing both the
        # H100 selector and the constraint: the selector is named.
        slices = [
            resource_slice(
                "node-a-gpus",
                [
                    gpu("gpu-0", model="A100", pcie_root="pci0000:80"),
                    gpu("gpu-1", pcie_root="pci0000:00"),
                ],
                node_name="ip-10-0-1-17",
            ),
            resource_slice(
                "node-a-nics",
                [nic("nic-0", pcie_root="pci0000:00")],
                driver=NIC,
                node_name="ip-10-0-1-17",
            ),
        ]
        a = make_allocator(slices)
        c = claim(
            "c",
            exact("nic", NIC_CLASS.name),
            exact("gpu", selectors=['device.attributes["gpu.nvidia.com"].model == "H100"']),
            constraints=[match_attribute(PCIE_ROOT)],
        )
        t = Trace()
        assert picked(a.allocate(existing_node("ip-10-0-1-17"), [c], trace=t)) == [
            f"{NIC}/node-a-nics/nic-0",
            f"{GPU}/node-a-gpus/gpu-1",
        ]
        gpu0 = [
            n["reason"]
            for n in t.nodes
            if n["kind"] == "device"
            and n["device"] == "gpu-0"
            and t.nodes[n["parent"]]["label"].startswith("gpu")
        ]
        assert gpu0 == ["selector"]

    def test_constraints_are_checked_before_topology(self):
        # rack-a pins zone a and root pci0000:00; rack-b/gpu-0 then fails both the root and the
        # zone: the constraint is named. rack-c completes the pair.
        slices = [
            resource_slice(
                "rack-a", gpus(1, pcie_root="pci0000:00"), node_selector=zone_selector("us-west-2a")
            ),
            resource_slice(
                "rack-b", gpus(1, pcie_root="pci0000:80"), node_selector=zone_selector("us-west-2b")
            ),
            resource_slice(
                "rack-c", gpus(1, pcie_root="pci0000:00"), node_selector=zone_selector("us-west-2a")
            ),
        ]
        a = make_allocator(slices, instance_types=[BARE])
        c = claim("c", exact("gpu", count=2), constraints=[match_attribute(PCIE_ROOT)])
        t = Trace()
        r = a.allocate(in_flight("gpu-pool-1", [BARE], requirements=TWO_ZONES), [c], trace=t)
        assert picked(r) == [f"{GPU}/rack-a/gpu-0", f"{GPU}/rack-c/gpu-0"]
        tried = [n for n in t.nodes if n["kind"] == "device" and n["pool"] == "rack-b"]
        assert [n["reason"] for n in tried if n["status"] != "ok"] == ["constraint"]

    def test_selector_results_are_memoised_per_device_claim_and_request(self):
        calls: list[tuple[str, str]] = []
        a = make_allocator(
            [resource_slice("node-a-gpus", gpus(5), node_name="ip-10-0-1-17")],
        )
        real = a.engine.matches

        def counting(sel, device, driver):
            calls.append((device.name, driver))
            return real(sel, device, driver)

        a.engine.matches = counting
        # 6 devices wanted from 5: the (traced) search backtracks through every set and
        # re-checks each device many times; CEL runs once per (device, claim, request).
        c = claim("c", exact("gpu", count=3), exact("more", count=3))
        with pytest.raises(AllocationError):
            a.allocate(existing_node("ip-10-0-1-17"), [c], trace=Trace())
        assert len(calls) == 5 * 2  # one class selector, five devices, two requests


class TestTimeout:
    def test_default_budget_is_five_seconds_checked_between_instance_types(self):
        now = [0.0]

        def clock() -> float:
            return now[0]

        a = make_allocator(instance_types=[P5, P4D], clock=clock)
        assert a.timeout == 5.0
        nc = in_flight("gpu-pool-1", [P5, P4D])
        real = a.engine.matches

        def slow(sel, device, driver):
            now[0] += 0.3  # 8 template GPUs per IT, a few evaluations each
            return real(sel, device, driver)

        a.engine.matches = slow
        r = a.allocate(nc, [claim("c", exact("gpu"))])  # well under 5 s of fake time
        assert r.instance_types == ["p5.48xlarge", "p4d.24xlarge"]
        now[0] = 0.0

        def very_slow(sel, device, driver):
            now[0] += 6.0
            return real(sel, device, driver)

        a.engine.matches = very_slow
        with pytest.raises(AllocationTimeout, match="timed out after 5s"):
            a.allocate(in_flight("gpu-pool-2", [P5, P4D]), [claim("c2", exact("gpu"))])


class TestResults:
    def test_requirements_merge_allocated_claims_and_picked_devices(self):
        held = _dataset_nic_held_in_zone_a()
        slices = [
            resource_slice("rack-r1", gpus(1), node_selector=rack_selector("us-west-2a", "r1"))
        ]
        a = make_allocator(slices, instance_types=[BARE])
        nc = in_flight("gpu-pool-1", [BARE], requirements={**TWO_ZONES, RACK_LABEL: ["r1", "r2"]})
        r = a.allocate(nc, [held, claim("train", exact("gpu"))])
        assert r.requirements.get(ZONE).values() == {"us-west-2a"}
        assert r.requirements.get(RACK_LABEL).values() == {"r1"}
        assert nc.requirements.get(ZONE).values() == {"us-west-2a", "us-west-2b"}  # untouched

    def test_instance_types_are_the_succeeding_subset_in_candidate_order(self):
        c7gn = instance_type("c7gn.16xlarge", [template("c7-nics", [nic("nic-0")], driver=NIC)])
        a = make_allocator(instance_types=[P4D, c7gn, P5])
        r = a.allocate(in_flight("gpu-pool-1", [P4D, c7gn, P5]), [claim("c", exact("gpu"))])
        assert r.instance_types == ["p4d.24xlarge", "p5.48xlarge"]
        assert set(r.failed_instance_types) == {"c7gn.16xlarge"}


class TestCommitProtocol:
    def test_commit_records_devices_per_instance_type_and_claim_metadata(self):
        slices = [resource_slice("rack-a", gpus(1), node_selector=zone_selector("us-west-2a"))]
        a = make_allocator(slices, instance_types=[P5, P4D])
        nc = in_flight("gpu-pool-1", [P5, P4D], requirements=TWO_ZONES)
        r = a.allocate(nc, [claim("dataset", exact("gpu")), claim("train", exact("gpu", count=2))])
        assert a.tracker.cluster == {} and a.claim_metadata == {}  # nothing before Commit
        r.allocation.commit()
        rack_gpu = DeviceID(GPU, "rack-a", "gpu-0")
        assert a.tracker.holders(rack_gpu) == {"gpu-pool-1": {"p5.48xlarge", "p4d.24xlarge"}}
        assert a.tracker.cluster_by_node_claim["gpu-pool-1"]["p4d.24xlarge"] == {rack_gpu}
        assert a.tracker.templates["gpu-pool-1"]["p5.48xlarge"] == {
            DeviceID(GPU, "p5-gpus", "gpu-0"),
            DeviceID(GPU, "p5-gpus", "gpu-1"),
        }
        dataset, train = a.claim_metadata["default/dataset"], a.claim_metadata["default/train"]
        assert dataset.node_claim_id == train.node_claim_id == "gpu-pool-1"
        assert not dataset.used_templates and train.used_templates
        assert dataset.requirements.get(ZONE).values() == {"us-west-2a"}
        assert len(train.requirements) == 0
        assert {p.key.pool for p in a.pool_cache["gpu-pool-1"]} == {"rack-a"}


class TestInstanceTypeRelease:
    def test_release_frees_the_instance_types_template_reservations(self):
        a = make_allocator(instance_types=[P5, P4D])
        nc = in_flight("gpu-pool-1", [P5, P4D])
        a.allocate(nc, [claim("train", exact("gpu"))]).allocation.commit()
        taken = a.allocate(nc, [claim("eval", exact("gpu"))])
        assert picked(taken, instance_type="p5.48xlarge") == [f"{GPU}/p5-gpus/gpu-1"]
        a.release_instance_type("gpu-pool-1", "p5.48xlarge")
        freed = a.allocate(nc, [claim("eval", exact("gpu"))])
        assert picked(freed, instance_type="p5.48xlarge") == [f"{GPU}/p5-gpus/gpu-0"]
        assert picked(freed, instance_type="p4d.24xlarge") == [f"{GPU}/p4d-gpus/gpu-1"]
