"""The trace's target label of a new NodeClaim's attempt: made by the scheduling
loop, read by the pages and the diff, in one place."""

from __future__ import annotations

import pytest

from allocator.trace import new_nodeclaim_label, parse_new_nodeclaim_label


def test_a_new_nodeclaim_label_reads_back_its_nodepool_and_name():
    label = new_nodeclaim_label("gpu-h100", "gpu-h100-2")
    assert label == "nodepool/gpu-h100 (new gpu-h100-2)"
    assert parse_new_nodeclaim_label(label) == ("gpu-h100", "gpu-h100-2")


@pytest.mark.parametrize(
    "label",
    ["node/ip-10-0-1-7.us-west-2.compute.internal", "nodeclaim/gpu-1", "nodepool/gpu", "", None],
)
def test_other_targets_are_not_new_nodeclaims(label):
    assert parse_new_nodeclaim_label(label) is None
