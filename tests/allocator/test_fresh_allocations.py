"""Allocate on fresh NodeClaims alike (``Allocator.fresh_allocations``): a NodeClaim that holds
nothing and reaches no in-cluster pool takes the search of an earlier one with the same claim
specs, NodePool, requirements and instance types, with its own claims named."""

from __future__ import annotations

from unittest import mock

from allocator import allocator as allocator_module
from allocator.dfs import DFSContext
from allocator.model import DeviceID
from tests.allocator.builders import (
    P4D,
    P5,
    ZONE,
    claim,
    exact,
    in_flight,
    instance_type,
    make_allocator,
    picked,
    template,
)
from tests.allocator.karpenter.kit import allocator as kit_allocator
from tests.allocator.karpenter.kit import capacity_device
from tests.allocator.karpenter.test_karpenter_capacity import wants

A100 = 'device.attributes["gpu.nvidia.com"].model == "A100"'


def sharing_allocator():
    a = make_allocator(instance_types=[P5, P4D])
    a.share_shapes = True  # as the scheduler switches it on (Tuning.shape_memo)
    return a


def searches(a, node_claim, claims):
    """The result and the instance types searched for it."""
    run = DFSContext.run_instance_type
    searched = []

    def counting(self, instance_type, *args, **kwargs):
        searched.append(instance_type)
        return run(self, instance_type, *args, **kwargs)

    with mock.patch.object(DFSContext, "run_instance_type", counting):
        return a.allocate(node_claim, claims), searched


def test_a_fresh_nodeclaim_alike_takes_the_search_of_the_first():
    a = sharing_allocator()
    first, searched = searches(
        a, in_flight("gpu-pool-1", [P5, P4D]), [claim("train-0-gpu", exact("gpu"))]
    )
    assert searched  # the first NodeClaim is searched
    nodes = a.dfs_nodes
    second, searched = searches(
        a, in_flight("gpu-pool-2", [P5, P4D]), [claim("train-1-gpu", exact("gpu"))]
    )
    assert searched == []
    assert a.dfs_nodes == 2 * nodes  # counted as the search would count them
    assert second.instance_types == first.instance_types == ["p5.48xlarge", "p4d.24xlarge"]
    for it in second.instance_types:
        assert picked(second, 0, it) == picked(first, 0, it)
    assert second.claims[0].key == "default/train-1-gpu"
    assert second.allocation.node_claim_id == "gpu-pool-2"
    second.allocation.commit()
    assert a.tracker.templates["gpu-pool-2"]["p5.48xlarge"] == {
        DeviceID("gpu.nvidia.com", "p5-gpus", "gpu-0")
    }
    assert "gpu-pool-1" not in a.tracker.templates  # the first was never committed


def test_the_words_of_refused_instance_types_name_this_pods_claim():
    a = sharing_allocator()
    a100 = exact("gpu", selectors=[A100])
    first = a.allocate(in_flight("gpu-pool-1", [P5, P4D]), [claim("train-0-gpu", a100)])
    second = a.allocate(in_flight("gpu-pool-2", [P5, P4D]), [claim("train-1-gpu", a100)])
    assert first.instance_types == second.instance_types == ["p4d.24xlarge"]
    assert "claim default/train-0-gpu request gpu" in first.failed_instance_types["p5.48xlarge"]
    assert second.failed_instance_types["p5.48xlarge"] == first.failed_instance_types[
        "p5.48xlarge"
    ].replace("default/train-0-gpu", "default/train-1-gpu")


def test_a_nodeclaim_holding_devices_or_unlike_is_searched():
    a = sharing_allocator()
    gpu = exact("gpu")
    held = a.allocate(in_flight("gpu-pool-1", [P5, P4D]), [claim("train-0-gpu", gpu)])
    held.allocation.commit()  # gpu-pool-1 now holds gpu-0 on each instance type
    again, searched = searches(a, in_flight("gpu-pool-1", [P5, P4D]), [claim("train-1-gpu", gpu)])
    assert searched and picked(again, 0, "p5.48xlarge") == ["gpu.nvidia.com/p5-gpus/gpu-1"]
    # Another zone, other instance types, another spec: each its own search.
    for node_claim, claims in [
        (
            in_flight("gpu-pool-2", [P5, P4D], requirements={ZONE: ["us-west-2b"]}),
            [claim("c", gpu)],
        ),
        (in_flight("gpu-pool-3", [P5]), [claim("c", gpu)]),
        (in_flight("gpu-pool-4", [P5, P4D]), [claim("c", exact("gpu", count=2))]),
    ]:
        _, searched = searches(a, node_claim, claims)
        assert searched, node_claim.id


def test_without_shape_sharing_every_nodeclaim_is_searched():
    a = make_allocator(instance_types=[P5, P4D])
    a.allocate(in_flight("gpu-pool-1", [P5, P4D]), [claim("train-0-gpu", exact("gpu"))])
    _, searched = searches(
        a, in_flight("gpu-pool-2", [P5, P4D]), [claim("train-1-gpu", exact("gpu"))]
    )
    assert searched
    assert a.fresh_allocations == {}


def test_a_capacity_share_naming_its_claim_is_not_another_claims():
    # An H100 shared by pods: each share's ID names its claim.
    shared = instance_type(
        "p5.48xlarge", [template("p5-gpus", [capacity_device("nvidia0", vram="40Gi")])]
    )
    a = kit_allocator(instance_types=[shared])
    a.share_shapes = True
    first = a.allocate(in_flight("gpu-pool-1", [shared]), [wants("c1", "20Gi")])
    second, searched = searches(a, in_flight("gpu-pool-2", [shared]), [wants("c2", "20Gi")])
    assert searched  # the share of c1 is not c2's
    [one] = first.claims[0].devices
    [two] = second.claims[0].devices
    assert one.extra["shareID"] != two.extra["shareID"]


def test_nodeclaims_alike_commit_the_rows_worked_out_once():
    a = sharing_allocator()
    first = a.allocate(in_flight("gpu-pool-1", [P5, P4D]), [claim("train-0-gpu", exact("gpu"))])
    second = a.allocate(in_flight("gpu-pool-2", [P5, P4D]), [claim("train-1-gpu", exact("gpu"))])
    rows = allocator_module._commit_rows
    worked_out = []

    def counting(*args):
        worked_out.append(args)
        return rows(*args)

    with mock.patch.object(allocator_module, "_commit_rows", counting):
        first.allocation.commit()
        second.allocation.commit()
    assert len(worked_out) == 1
    gpu0 = {DeviceID("gpu.nvidia.com", "p5-gpus", "gpu-0")}
    for nc in ("gpu-pool-1", "gpu-pool-2"):
        assert a.tracker.templates[nc]["p5.48xlarge"] == gpu0
    for key, nc in (("default/train-0-gpu", "gpu-pool-1"), ("default/train-1-gpu", "gpu-pool-2")):
        meta = a.claim_metadata[key]
        assert meta.node_claim_id == nc and meta.used_templates
        assert sorted(meta.devices_by_instance_type) == ["p4d.24xlarge", "p5.48xlarge"]
