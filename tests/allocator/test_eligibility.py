"""The design's device eligibility checks (allocator/eligibility.py) as the search and the
refusal funnel see them: what each refuses, with which reason code, and what a refusal says
beyond its words (a device taken earlier on the same search path)."""

from __future__ import annotations

import pytest

from allocator.checks import ALLOCATED, POOL_INCOMPLETE, POOL_INVALID, SELECTOR
from allocator.eligibility import pool_refusal, taken_on_path
from allocator.errors import AllocationError
from allocator.featuregates import ALL_ON
from allocator.model import DeviceID, PoolKey
from allocator.pipeline import build_pipeline, core_pipeline
from allocator.pools import DeviceWithID, Pool
from tests.allocator.builders import (
    GPU,
    claim,
    exact,
    existing_node,
    gpu,
    in_flight,
    instance_type,
    make_allocator,
    resource_slice,
)

H100 = 'device.attributes["gpu.nvidia.com"].model == "H100"'
PIPELINES = {
    "core": lambda: core_pipeline(ALL_ON),  # AllocatedCheck
    "features": lambda: build_pipeline(ALL_ON),  # FeatureAllocatedCheck (admin access, shares)
}


def _pool(**kw) -> Pool:
    return Pool(PoolKey(GPU, "rack-a"), [], [], **kw)


def test_an_incomplete_pool_names_the_slices_published_and_declared():
    rejection = pool_refusal(
        _pool(incomplete=True, published_slices=1, declared_slices=2, generation=3)
    )
    assert rejection is not None and rejection.reason == POOL_INCOMPLETE
    assert rejection.message == (
        "pool gpu.nvidia.com/rack-a is incomplete (missing slices): 1 of 2 ResourceSlices "
        "published at generation 3"
    )
    assert pool_refusal(_pool()) is None


def test_an_invalid_pool_names_why():
    rejection = pool_refusal(_pool(invalid=True, invalid_reason="duplicate device name 'gpu-0'"))
    assert rejection is not None and rejection.reason == POOL_INVALID
    assert "duplicate device name 'gpu-0'" in rejection.message


def test_a_device_taken_on_the_path_says_so_by_a_flag_not_by_its_words():
    cand = DeviceWithID(DeviceID(GPU, "rack-a", "gpu-0"), gpu("gpu-0"))
    rejection = taken_on_path(cand)
    assert rejection.reason == ALLOCATED and rejection.on_path
    assert (
        rejection.message
        == "device gpu.nvidia.com/rack-a/gpu-0 is already allocated in this search"
    )


@pytest.mark.parametrize("pipeline", PIPELINES.values(), ids=PIPELINES.keys())
def test_two_requests_for_the_one_h100_fail_on_the_device_the_first_took(pipeline):
    # Each request alone has its H100 (the count stage passes); together the second finds it
    # taken by the first, and the L4 does not match: the funnel of the slot the search got
    # stuck on says the H100 was taken by this very pod.
    node = [gpu("gpu-0", model="H100"), gpu("gpu-1", model="L4")]
    a = make_allocator(
        [resource_slice("node-a-gpus", node, node_name="node-a")], pipeline=pipeline()
    )
    c = claim(
        "train",
        exact("first", selectors=[H100]),
        exact("second", selectors=[H100]),
        namespace="ml-training",
    )
    with pytest.raises(AllocationError) as err:
        a.allocate(existing_node("node-a"), [c])
    (funnel,) = err.value.funnels
    assert (funnel.request, funnel.needed, funnel.candidates, funnel.usable) == ("second", 1, 2, 0)
    by_reason = {g.reason: g for g in funnel.rejections}
    assert by_reason[ALLOCATED].message == (
        "taken by an earlier request or slot of this pod on 1 device"
    )
    assert by_reason[ALLOCATED].example_devices == ("gpu.nvidia.com/node-a-gpus/gpu-0",)
    assert by_reason[SELECTOR].example_devices == ("gpu.nvidia.com/node-a-gpus/gpu-1",)
    assert "no combination fits" in (funnel.whole or "")


def test_a_device_held_by_another_claim_is_not_worded_as_taken_on_the_path():
    # The same shape, but the H100 is held by another NodeClaim's claim: the count stage
    # refuses, and the funnel words the holder, not this pod.
    node = [gpu("gpu-0", model="H100"), gpu("gpu-1", model="L4")]
    a = make_allocator([resource_slice("rack", node, all_nodes=True)])
    held = a.allocate(
        in_flight("gpu-pool-1", [instance_type("p5.48xlarge")]),
        [claim("holder", exact("gpu", selectors=[H100]))],
    )
    held.allocation.commit()
    with pytest.raises(AllocationError) as err:
        a.allocate(existing_node("node-a"), [claim("train", exact("gpu", selectors=[H100]))])
    (funnel,) = err.value.funnels
    (allocated,) = [g for g in funnel.rejections if g.reason == ALLOCATED]
    assert "this pod" not in allocated.message and allocated.message.startswith("already allocated")
