"""A finished run's failed pods, kept apart from its result (dra_web/runs/failures.py)."""

from __future__ import annotations

from dra_web.runs.failures import Failures, derive

RESULT = {
    "pods": [
        {"pod": "ml/train-0", "scheduled": True, "target": {"kind": "NodeClaim", "name": "gpu-1"}},
        {"pod": "ml/infer-a100", "scheduled": False, "error": "no A100 anywhere", "reasons": []},
        {"pod": "ml/notebook", "scheduled": False, "error": "taint"},
    ],
    "nodeClaims": [{"name": "gpu-1"}, {"name": "gpu-2"}],
    "pools": [
        {"driver": "gpu.nvidia.com", "pool": "ip-10-0-1-7", "devices": 8},
        {"driver": "nic.example.com", "pool": "rack-1"},
    ],
}


def test_only_the_failed_pods_are_kept_with_the_names_their_pages_link_to():
    kept = derive(RESULT)
    assert sorted(kept.pods) == ["ml/infer-a100", "ml/notebook"]
    assert kept.pods["ml/infer-a100"] is RESULT["pods"][1]  # the result's own entry
    assert kept.node_claim_names == {"gpu-1", "gpu-2"}
    assert kept.pools() == [
        {"driver": "gpu.nvidia.com", "pool": "ip-10-0-1-7"},
        {"driver": "nic.example.com", "pool": "rack-1"},
    ]
    assert Failures.from_json(kept.to_json()) == kept


def test_partial_documents_keep_what_they_can():
    kept = derive({"pods": [{"scheduled": False}, "junk"], "nodeClaims": [{}], "pools": [{}]})
    assert kept.pods == {} and kept.node_claim_names == frozenset()
    assert kept.pool_keys == (("", ""),)
