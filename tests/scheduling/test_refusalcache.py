"""The refusal cache's device-count bound of a NodeClaim: the most template devices one of its
instance types has left, read at C speed, answers as the plain count over each of them."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

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
