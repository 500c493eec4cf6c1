"""Karpenter's ``pkg/utils/nodepool/suite_test.go``, "OrderByWeight", ported title by title
(2 of 2 titles; the file has no others). Go shuffles ten random NodePools; here hypothesis
draws the weights, names and order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allocator.model import NodePool
from allocator.scheduling.nodeclaimtemplate import order_by_weight

_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=12)


@given(
    st.lists(st.tuples(_NAMES, st.integers(min_value=1, max_value=100)), max_size=10), st.randoms()
)
def test_should_order_the_nodepools_by_weight(pools, random):
    nps = [NodePool(name=f"{name}-{i}", weight=weight) for i, (name, weight) in enumerate(pools)]
    random.shuffle(nps)
    last_weight = 101  # above the allowed weight values
    for np in order_by_weight(nps):
        assert np.weight <= last_weight
        last_weight = np.weight


@given(st.lists(_NAMES, unique=True, max_size=10), st.randoms())
def test_should_order_the_nodepools_by_name_when_the_weights_are_the_same(names, random):
    nps = [NodePool(name=name, weight=10) for name in names]
    random.shuffle(nps)
    last_name = "zzzzzzzzzzzzzzzzzzzzzzzz"  # large string value
    for np in order_by_weight(nps):
        assert np.name < last_name
        last_name = np.name
