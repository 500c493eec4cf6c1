"""The cycle collector around a run: tuned while it lasts, as it was after."""

from __future__ import annotations

import gc

import pytest

from allocator.collector import RUN_THRESHOLDS, collector_for_a_run


def test_the_thresholds_hold_for_the_run_and_are_put_back_even_when_it_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collector_for_a_run():
        assert gc.get_threshold() == RUN_THRESHOLDS
        raise RuntimeError("the search failed")
    assert gc.get_threshold() == before


def test_what_is_kept_is_frozen_for_the_run_only():
    frozen = gc.get_freeze_count()
    snapshot = [{"kind": "Node", "metadata": {"name": f"gpu-node-{i}"}} for i in range(100)]
    with collector_for_a_run() as keep:
        assert gc.get_freeze_count() == frozen
        keep()
        assert gc.get_freeze_count() >= frozen + len(snapshot)
    assert gc.get_freeze_count() == 0
