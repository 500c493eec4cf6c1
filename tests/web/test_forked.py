"""dra_web.forked: a value computed by a forked child, or None and the caller computes it."""

from __future__ import annotations

import os
import time

import pytest

from dra_web import forked


def test_the_child_reads_what_the_parent_held_and_sends_its_value_back():
    nodes = {f"gpu-node-{i}": {"gpus": 8, "zone": "us-west-2a"} for i in range(1000)}
    with forked.fork_aside(lambda: sum(n["gpus"] for n in nodes.values())) as aside:
        nodes.clear()  # the parent's own change: the child forked before it
        assert aside.result(timeout=30) == 8000


def test_a_value_larger_than_a_pipe_holds_arrives_whole():
    blob = os.urandom(3 << 20)
    with forked.fork_aside(lambda: blob[::-1]) as aside:
        assert aside.result(timeout=30) == blob[::-1]


def test_a_child_that_fails_gives_none():
    def refuse():
        raise ValueError("no instance type fits")

    with forked.fork_aside(refuse) as aside:
        assert aside.result(timeout=30) is None


def test_a_child_that_dies_gives_none():
    with forked.fork_aside(lambda: os._exit(0)) as aside:
        assert aside.result(timeout=30) is None


def test_a_late_child_gives_none_and_is_stopped(forks):
    aside = forked.fork_aside(lambda: time.sleep(60))
    started = time.monotonic()
    assert aside.result(timeout=0.2) is None
    assert time.monotonic() - started < 5
    assert forks.pids and forks.reaped()


def test_leaving_the_block_unread_stops_and_reaps_the_child(forks):
    with forked.fork_aside(lambda: time.sleep(60)) as aside:
        assert not forks.reaped()
    assert forks.pids and forks.reaped()
    assert aside.result(timeout=1) is None


def test_no_child_where_forking_fails(monkeypatch):
    def refuse():
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    assert forked.fork_aside(lambda: 1) is None


@pytest.mark.parametrize("value", [0, b"", [], {"kind": "Node"}])
def test_any_picklable_value_comes_back_as_itself(value):
    with forked.fork_aside(lambda: value) as aside:
        assert aside.result(timeout=30) == value
