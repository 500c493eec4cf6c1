"""Where Karpenter's own device search would stall (allocator/explanation/karpenter_search.py):
its search has no count check, so a request for more GPUs than an instance type has walks
every ordering of them; the run says so in a warning, and decides as before."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator import cli
from allocator import result as result_module
from allocator.explanation.karpenter_search import (
    STALL_PLACEMENTS,
    _counted,
    longest_search,
    orderings,
    stall_warning,
)
from allocator.funnel import Funnel
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_documents
from bench.workloads import karpenter_benchmark, to_json


@pytest.mark.parametrize(
    "usable, placements", [(0, 1), (1, 2), (2, 5), (3, 16), (4, 65), (8, 109_601)]
)
def test_orderings_of_a_few_gpus(usable, placements):
    assert orderings(usable) == placements


@given(st.integers(0, 60))
def test_orderings_count_every_partial_ordering_up_to_a_bound(usable):
    exact = sum(math.perm(usable, k) for k in range(usable + 1))
    assert orderings(usable) == min(exact, 10**15) == _counted(usable)


def _funnel(instance_type, usable, needed=16, alike=0, whole=None, request="gpus"):
    return Funnel(
        claim="default/train-0-gpus",
        request=request,
        needed=needed,
        instance_type=instance_type,
        candidates=usable,
        usable=usable,
        rejections=(),
        whole=whole,
        alike=tuple(f"{instance_type}-alike-{i}" for i in range(alike)),
    )


def test_the_longest_search_sums_a_targets_instance_types_refused_by_counting():
    log = [
        ("nodepool/gpu", _funnel("g6.48xlarge", 8, alike=4), None),  # 5 x 109,601
        ("nodepool/gpu", _funnel("g6.12xlarge", 4), None),  # 65
        ("nodepool/gpu", _funnel("g6.xlarge", 1), None),  # too few to matter
        # Not walked by Karpenter as orderings: refused as a whole, All mode, enough devices.
        ("nodepool/gpu", _funnel("p5.48xlarge", 8, whole="exceeds the maximum"), None),
        ("nodepool/gpu", _funnel("p4d.24xlarge", 8, request="all-gpus"), None),
        ("nodepool/gpu", _funnel("p4de.24xlarge", 8, needed=8), None),
        ("node/gpu-node-7", _funnel(None, 7), None),  # 13,700
    ]
    found = longest_search(log, all_mode={"all-gpus"})
    assert found is not None
    assert (found.target, found.placements) == ("nodepool/gpu", 5 * 109_601 + 65)
    assert (found.asked, found.usable, found.instance_types) == (16, 8, True)
    assert longest_search(log[-1:], all_mode=set()).placements == 13_700
    assert longest_search(log[2:3], all_mode=set()) is None


@pytest.fixture(scope="module")
def oversized_gpu_pods():
    """Karpenter's benchmark with an L4 GPU per generic pod, every tenth asking for 16 GPUs
    (its instance types have 1 to 8)."""
    docs = karpenter_benchmark(40, topology=False, dra=True, failing_every=10)
    snapshot = load_documents([(d["kind"], d) for d in docs])
    return simulate(snapshot, SimulationOptions(suggestions=False)).result


def test_a_run_says_where_karpenters_search_would_stall(oversized_gpu_pods):
    result = oversized_gpu_pods
    failed = [p["pod"] for p in result["pods"] if not p["scheduled"]]
    assert len(failed) == 4
    warning = result["warnings"][-1]
    assert warning.startswith(
        f"Karpenter's own device search could stall on pod {failed[0]} (and 3 more such pods)"
    )
    assert "asks for 16 devices where an instance type of a new NodeClaim of NodePool default" in (
        warning
    )
    assert "offers at most 8" in warning
    placements = int(warning.split("tries about ")[1].split(" ")[0].replace(",", ""))
    assert placements >= STALL_PLACEMENTS
    # The decisions are the design's: refused by counting, everything else placed.
    assert result["stats"]["scheduled"] == 36


def test_a_run_without_such_pods_has_no_such_warning():
    docs = karpenter_benchmark(40, topology=False, dra=True, failing_every=0)
    snapshot = load_documents([(d["kind"], d) for d in docs])
    result = simulate(snapshot, SimulationOptions(suggestions=False)).result
    assert result["stats"]["failed"] == 0
    assert not any("Karpenter's own device search" in w for w in result["warnings"])


def test_an_estimate_that_fails_never_breaks_the_run(monkeypatch):
    def broken(outcomes):
        raise ZeroDivisionError("no placements")

    monkeypatch.setattr(result_module, "stall_warning", broken)
    docs = karpenter_benchmark(20, topology=False, dra=True, failing_every=10)
    snapshot = load_documents([(d["kind"], d) for d in docs])
    result = simulate(snapshot, SimulationOptions(suggestions=False)).result
    assert result["stats"]["failed"] == 2
    assert any("the estimate of Karpenter's own device search" in w for w in result["warnings"])


def test_the_warning_names_the_first_pod_past_the_threshold_and_counts_the_others():
    log = [("node/gpu-node-7", _funnel(None, 10), None)]  # 9,864,101 on one node
    long = longest_search(log, all_mode=set())
    short = longest_search([("node/gpu-node-8", _funnel(None, 8), None)], all_mode=set())
    assert stall_warning([]) is None
    assert stall_warning([("ml/train-0", short)]) is None
    warning = stall_warning([("ml/train-0", short), ("ml/train-1", long), ("ml/train-2", long)])
    assert warning.startswith(
        "Karpenter's own device search could stall on pod ml/train-1 (and 1 more such pods): "
        "it asks for 16 devices where node gpu-node-7 offers at most 10"
    )
    assert "tries about 9,864,101 device placements" in warning


def test_the_command_line_warns_on_standard_error(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(to_json(karpenter_benchmark(40, topology=False, dra=True, failing_every=10)))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["simulate", str(path), "--json"], out, err) == 0
    assert "warning: Karpenter's own device search could stall on pod default/pod-00019" in (
        err.getvalue()
    )
    assert json.loads(out.getvalue())["warnings"][-1] in err.getvalue()
