"""A new NodeClaim's instance type filter over DaemonSet overhead groups (nodeclaim._filter).

One group that holds every candidate takes the plain filter (the common case: no DaemonSet
depends on the instance type); the property checks that the per-group path, given the same
instance types split into groups of the same overhead, keeps the same instance types in the
same order and says the same when none is left: the shortcut changes no decision.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.model import InstanceType, Offering
from allocator.quantity import Quantity
from allocator.requirements import Requirements
from allocator.scheduling.daemonsets import DaemonOverheadGroup
from allocator.scheduling.fit import instance_type_info
from allocator.scheduling.hostports import HostPortUsage
from allocator.scheduling.nodeclaim import _filter, least_overhead

ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
FAMILIES = ("m7i", "c7i", "g6e")


def _info(i: int, cpu: int, memory_gib: int, zones: tuple[str, ...], price: float):
    family = FAMILIES[i % len(FAMILIES)]
    it = InstanceType(
        name=f"{family}.{cpu}x-{i}",
        capacity={"cpu": Quantity.parse(str(cpu)), "memory": Quantity.parse(f"{memory_gib}Gi")},
        requirements=[
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]}
        ],
        offerings=[Offering(zone=z, capacity_type="on-demand", price=price) for z in zones],
    )
    return instance_type_info(it)


catalogs = st.lists(
    st.tuples(
        st.integers(1, 64),
        st.integers(1, 256),
        st.sets(st.sampled_from(ZONES), min_size=1).map(lambda s: tuple(sorted(s))),
        st.sampled_from((0.1, 0.2016, 0.4032, 1.861, 3.5)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    catalog=catalogs,
    cpu=st.integers(0, 70),
    memory_gib=st.integers(0, 300),
    overhead_cpu=st.integers(0, 4000),
    zone=st.sampled_from((None, *ZONES)),
    parts=st.integers(2, 4),
)
def test_groups_of_one_overhead_decide_as_the_plain_filter(
    catalog, cpu, memory_gib, overhead_cpu, zone, parts
):
    infos = [_info(i, *spec) for i, spec in enumerate(catalog)]
    reqs = Requirements()
    if zone is not None:
        reqs = Requirements.from_labels({"topology.kubernetes.io/zone": zone})
    requests = {"cpu": cpu * 1000, "memory": memory_gib * 2**30 * 1000}
    overhead = {"cpu": overhead_cpu, "pods": 1000}
    names = [i.name for i in infos]

    def group(members) -> DaemonOverheadGroup:
        return DaemonOverheadGroup(frozenset(members), (), overhead, HostPortUsage())

    one = (group(names),)
    split = tuple(group(names[k::parts]) for k in range(parts) if names[k::parts])
    plain = _filter(infos, reqs, requests, one, None, [], whole=True)
    grouped = _filter(infos, reqs, requests, split, None, [])
    assert [i.name for i in grouped.remaining] == [i.name for i in plain.remaining]
    assert grouped.failure_reason() == plain.failure_reason()


def test_each_group_is_filtered_with_its_own_overhead():
    small = _info(0, 4, 16, ("us-west-2a",), 0.2016)
    gpu = _info(2, 4, 32, ("us-west-2a",), 1.861)
    groups = (
        DaemonOverheadGroup(frozenset({small.name}), (), {"cpu": 100}, HostPortUsage()),
        DaemonOverheadGroup(frozenset({gpu.name}), (), {"cpu": 1100}, HostPortUsage()),
    )
    stages: list[tuple] = []
    found = _filter([small, gpu], Requirements(), {"cpu": 3500}, groups, None, stages)
    # 3.5 CPU with 100m fits a 4 CPU type; with the GPU group's 1.1 CPU it does not.
    assert [i.name for i in found.remaining] == [small.name]
    assert [stage[3] for stage in stages] == [{"cpu": 3600}, {"cpu": 4600}]
    assert least_overhead(groups, [small.name, gpu.name]) == {"cpu": 100}
