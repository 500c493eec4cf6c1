"""A failed pod's funnel log is read once per distinct log (allocator/result.py): replicas
whose claims have one spec fail on the same nodes with the same cached funnels, so the kinds
of refusal per node, the explanation's groups and the requests the decisive cause weighs are
worked out once; each pod's entry still names its own claim, and says what reading its own
log alone says."""

from __future__ import annotations

import json

import allocator.result as result_module
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from bench.workloads import existing_nodes


def simulated(docs: list[dict]) -> dict:
    out = simulate(load_files([("cluster.json", json.dumps(docs))]), SimulationOptions())
    out.result["stats"].pop("seconds")
    out.result["stats"].pop("suggestionSeconds", None)
    return out.result


def test_replicas_failing_alike_share_one_reading_and_name_their_own_claims(monkeypatch):
    # 12 H100 nodes, 40 training pods; every 10th asks for an A100 nobody has: four pods
    # refused by the twelve nodes (the full ones and the others each alike: more nodes than
    # reasons listed one by one).
    docs = existing_nodes(nodes=12, pods=40, missing_every=10)
    readings: list[int] = []
    walked: list[bool] = []  # whether the pod's own log was walked (not its attempt's reading)
    reading = result_module._Memos.reading

    def counted(self, outcome):
        attempt = outcome.attempt
        walked.append(attempt is None or id(attempt) not in self.by_attempt)
        found = reading(self, outcome)
        readings.append(len(self.readings))
        return found

    monkeypatch.setattr(result_module._Memos, "reading", counted)
    shared = simulated(docs)

    def alone(self, outcome):
        self.readings.clear()  # every log read on its own
        self.by_attempt.clear()
        return reading(self, outcome)

    monkeypatch.setattr(result_module._Memos, "reading", alone)
    plain = simulated(docs)
    monkeypatch.undo()

    assert shared == plain
    failed = [p for p in shared["pods"] if not p["scheduled"]]
    assert [p["pod"] for p in failed] == [f"ml-training/train-{i}" for i in (9, 19, 29, 39)]
    assert readings[-1] == 1  # four failed pods, one log read
    # train-9 and train-19 each made an attempt of their own; train-29 and train-39 replayed
    # train-19's: their logs are not walked again.
    assert walked == [True, True, False, False]
    for entry in failed:
        claim = f"{entry['pod']}-gpu"
        assert {f["claim"] for f in entry["explanation"]} == {claim}
        assert f"claim {claim} request" in entry["cause"]["message"]
        assert sum(r["targets"] for r in entry["reasons"]) == 12
        assert len(entry["reasons"]) == 2
