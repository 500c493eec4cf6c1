"""A failed pod's entry within its byte budget (allocator/resultbudget.py): however long the
names of the nodes, pools and devices, what the command line writes of one failed pod stays
under 20 kB; the fixes and the decisive cause are kept whole, the targets still counted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.resultbudget import MAX_ENTRY_BYTES, size, within_budget


def node_name(i: int, length: int) -> str:
    # Kubernetes allows 253 characters (a DNS subdomain): long generated names exist.
    base = f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal"
    return (base + "." + "x" * length)[: max(length, len(base))]


def failed_entry(nodes: int, length: int, funnels: int, groups: int, reasons: int) -> dict:
    names = [node_name(i, length) for i in range(nodes)]
    device = "gpu.nvidia.com/{}/gpu-{}"
    return {
        "pod": "ml-training/train-7",
        "scheduled": False,
        "target": None,
        "claims": [{"claim": "ml-training/train-7-gpu", "state": "unallocated", "devices": []}],
        "error": "could not schedule pod, "
        + "; ".join(f"{n}: exceeds node resources" for n in names),
        "reasons": [
            {
                "target": names[r % nodes],
                "reason": f"allocating dynamic resources, kind {r}: " + "words " * 100,
                "targets": 50,
                "exampleTargets": names[:5],
            }
            for r in range(reasons)
        ]
        + [{"target": "nodepool/gpu", "reason": 'incompatible with nodepool "gpu"'}],
        "explanation": [
            {
                "claim": "ml-training/train-7-gpu",
                "request": "gpu",
                "needed": 16,
                "instanceType": None,
                "targets": nodes,
                "exampleTargets": names[:5],
                "candidates": 8 * groups,
                "usable": 0,
                "rejections": [
                    {
                        "reason": "allocated",
                        "devices": 8,
                        "message": "allocated to claim ml-training/serve-1-gpu " * 4,
                        "exampleDevices": [device.format(n, g) for g, n in enumerate(names[:5])],
                        "also": [],
                        "detail": {},
                    }
                    for _ in range(groups)
                ],
            }
            for _ in range(funnels)
        ],
        "cause": {"reason": "count", "message": "no node or instance type has 16 matching devices"},
        "suggestions": [{"kind": "claim-count", "patch": [{"op": "replace", "value": 8}]}],
    }


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(5, 40),
    length=st.integers(20, 253),
    funnels=st.integers(1, 6),
    groups=st.integers(1, 40),  # a counter set each: 40 partitions of 8 GPUs
    reasons=st.integers(1, 10),
)
def test_an_entry_of_long_names_fits_and_keeps_its_fixes(nodes, length, funnels, groups, reasons):
    entry = failed_entry(nodes, length, funnels, groups, reasons)
    fixes, cause = list(entry["suggestions"]), dict(entry["cause"])
    counted = sum(r.get("targets", 1) for r in entry["reasons"])
    within_budget(entry)
    assert size(entry) <= MAX_ENTRY_BYTES
    assert entry["suggestions"] == fixes and entry["cause"] == cause
    assert entry["explanation"]  # at least the first kind of refusal
    for funnel in entry["explanation"]:  # every device still counted once
        assert (
            funnel["usable"] + sum(g["devices"] for g in funnel["rejections"])
            == (funnel["candidates"])
        )
    assert len(entry["explanation"]) + entry.get("explanationOmitted", 0) == funnels
    assert sum(r.get("targets", 1) for r in entry["reasons"]) == counted
    assert entry["reasons"][-1]["target"] == "nodepool/gpu"


def test_an_entry_within_the_budget_is_left_as_it_is():
    entry = failed_entry(nodes=5, length=20, funnels=2, groups=1, reasons=2)
    before = size(entry)
    assert before < MAX_ENTRY_BYTES
    kept = repr(entry)
    within_budget(entry)
    assert repr(entry) == kept


def test_many_groups_of_one_reason_are_merged_before_a_kind_of_refusal_is_dropped():
    # One funnel refused by 40 counter sets, beside a shorter one: both kinds stay.
    entry = failed_entry(nodes=5, length=60, funnels=2, groups=40, reasons=2)
    error = entry["error"]
    assert size(entry) > MAX_ENTRY_BYTES
    within_budget(entry)
    assert entry["error"] == error  # Karpenter's words, read first, clipped last of all
    assert size(entry) <= MAX_ENTRY_BYTES
    assert len(entry["explanation"]) == 2 and "explanationOmitted" not in entry
    groups = entry["explanation"][0]["rejections"]
    assert len(groups) == 9
    assert groups[-1]["devices"] == 8 * 32
    assert groups[-1]["message"].startswith("32 more groups of devices refused by allocated")


def test_the_longest_names_lose_examples_before_kinds_of_refusal():
    entry = failed_entry(nodes=40, length=253, funnels=6, groups=3, reasons=10)
    assert size(entry) > 3 * MAX_ENTRY_BYTES
    within_budget(entry)
    assert size(entry) <= MAX_ENTRY_BYTES
    assert all(len(f["exampleTargets"]) <= 2 for f in entry["explanation"])


def test_a_trimming_that_fails_breaks_no_run(monkeypatch):
    # The budget only shapes words: should it fail, the run still ends with its result and
    # says so among the warnings.
    import allocator.result as result_module
    from allocator.simulation import SimulationOptions, simulate
    from allocator.snapshot import load_files
    from bench.workloads import existing_nodes, to_json

    def broken(entry):
        raise ValueError("no room")

    monkeypatch.setattr(result_module, "within_budget", broken)
    docs = existing_nodes(nodes=3, pods=10, missing_every=5)
    result = simulate(load_files([("cluster.json", to_json(docs))]), SimulationOptions()).result
    failed = [p for p in result["pods"] if not p["scheduled"]]
    assert failed and all(p["explanation"] for p in failed)
    assert any("could not be worded (ValueError: no room)" in w for w in result["warnings"])


def test_a_workload_fix_moving_every_replica_keeps_the_first_few_moves_and_counts_the_rest():
    """A relax-topology fix that repacks 400 replicas: before any word of the explanation is
    clipped, its ``affects`` keeps 5 moves (those losing their placement first) and counts
    the others; the fix itself is kept."""
    moves = [
        {
            "pod": f"inference/vllm-{i:03d}",
            "from": {"kind": "NodeClaim", "name": f"gpu-{i}", "new": True},
            "to": None if i in (250, 300) else {"kind": "NodeClaim", "name": f"gpu-{i + 1}"},
        }
        for i in range(400)
    ]
    entry = {
        "pod": "inference/vllm-400",
        "scheduled": False,
        "error": "could not schedule pod, " + "x" * 500,
        "reasons": [{"target": "nodepool/gpu", "reason": "y" * 500}],
        "suggestions": [
            {"kind": "relax-topology", "message": "make it preferred", "affects": moves}
        ],
    }
    within_budget(entry)
    (fix,) = entry["suggestions"]
    assert [a["pod"] for a in fix["affects"]] == [
        "inference/vllm-000",
        "inference/vllm-001",
        "inference/vllm-002",
        "inference/vllm-250",
        "inference/vllm-300",
    ]
    assert fix["affectsOmitted"] == 395
    assert entry["error"] == "could not schedule pod, " + "x" * 500
    assert entry["reasons"][0]["reason"] == "y" * 500
