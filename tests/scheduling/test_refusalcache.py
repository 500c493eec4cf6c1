"""The refusal cache's device-count bound of a NodeClaim: the most template devices one of its
instance types has left, read at C speed, answers as the plain count over each of them."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.claims import AllocatedDevice
from allocator.model import PoolKey
from allocator.scheduling.refusalcache import RefusalCache


def instance_type(name: str, gpus: int, shared: bool = False) -> SimpleNamespace:
    devices = [
        SimpleNamespace(name=f"gpu-{i}", allow_multiple_allocations=shared) for i in range(gpus)
    ]
    template = SimpleNamespace(devices=devices)
    return SimpleNamespace(name=name, it=SimpleNamespace(resource_slice_templates=[template]))


def plain(candidates, held) -> int | None:
    most = -1
    for info in candidates:
        devices = [d for t in info.it.resource_slice_templates for d in t.devices]
        if any(d.allow_multiple_allocations for d in devices):
            return None
        most = max(most, len(devices) - len(held.get(info.name, ())))
    return most


def test_the_most_left_is_of_the_instance_type_holding_fewest_of_its_own():
    cache = RefusalCache()
    its = [instance_type("g6.xlarge", 1), instance_type("g6.12xlarge", 4)]
    held = {"g6.12xlarge": {"gpu-0", "gpu-1", "gpu-2"}}
    assert cache.templates_left(its, held) == 1
    assert cache.templates_left(its, {}) == 4
    assert cache.templates_left([], held) == -1


def test_a_shared_device_leaves_no_bound_also_once_its_total_is_known():
    cache = RefusalCache()
    its = [instance_type("g6.xlarge", 1), instance_type("p5.48xlarge", 8, shared=True)]
    assert cache.templates_left(its, {}) is None
    assert cache.templates_left(its, {}) is None  # totals remembered
    assert cache.templates_left(its[:1], {}) == 1


SIZES = st.lists(st.tuples(st.integers(0, 8), st.booleans(), st.integers(0, 8)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=4))
def test_templates_left_answers_as_the_plain_count(asks):
    cache = RefusalCache()  # one cache over several asks: totals remembered in between
    for sizes in asks:
        its = [
            instance_type(f"it-{gpus}-{shared}", gpus, shared and gpus > 0)
            for gpus, shared, _ in sizes
        ]
        held = {
            f"it-{gpus}-{shared}": {f"gpu-{i}" for i in range(min(taken, gpus))}
            for gpus, shared, taken in sizes
        }
        assert cache.templates_left(its, held) == plain(its, held)


def _committed(node_claim_id: str, *devices: AllocatedDevice) -> SimpleNamespace:
    claim = SimpleNamespace(devices=list(devices))
    return SimpleNamespace(claims=[claim], allocation=SimpleNamespace(node_claim_id=node_claim_id))


def _template_gpu(instance_type: str, device: str) -> AllocatedDevice:
    pool = f"{instance_type}-gpus"
    return AllocatedDevice("gpu", "gpu.nvidia.com", pool, device, "template", instance_type)


def test_a_template_commit_changes_its_own_nodeclaim_and_no_pool_another_target_reaches():
    # Another target's refusal reads the in-cluster pools in its reach, and its own
    # templates: NodeClaims of one instance type share a template pool's name, not devices.
    cache = RefusalCache()
    in_cluster = PoolKey("gpu.nvidia.com", "ip-10-1-0-14.us-west-2.compute.internal")
    named_alike = PoolKey("gpu.nvidia.com", "p5.48xlarge-gpus")
    reach = (in_cluster, named_alike)
    seen = (cache.version("nodeclaim-b", reach), cache.reach_version(reach))
    before = (*seen, cache.reach_version(None))
    own = cache.version("nodeclaim-a", reach)
    cache.committed(_committed("nodeclaim-a", _template_gpu("p5.48xlarge", "gpu-0")))
    seen = (cache.version("nodeclaim-b", reach), cache.reach_version(reach))
    assert (*seen, cache.reach_version(None)) == before
    assert cache.version("nodeclaim-a", reach) > own


def test_an_in_cluster_commit_changes_the_pools_it_took_from():
    cache = RefusalCache()
    in_cluster = PoolKey("gpu.nvidia.com", "ip-10-1-0-14.us-west-2.compute.internal")
    other = PoolKey("gpu.nvidia.com", "ip-10-1-0-15.us-west-2.compute.internal")
    before = cache.version("node-b", (in_cluster,)), cache.reach_version((other,))
    cluster = cache.reach_version(None)  # what NodeClaims reaching any pool read
    held = AllocatedDevice("gpu", "gpu.nvidia.com", in_cluster.pool, "gpu-3", "in-cluster")
    cache.committed(_committed("node-a", held, _template_gpu("p5.48xlarge", "gpu-0")))
    assert cache.version("node-b", (in_cluster,)) > before[0]
    assert cache.reach_version((other,)) == before[1]
    assert cache.reach_version(None) != cluster
