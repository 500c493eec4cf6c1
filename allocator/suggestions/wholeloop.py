"""A suggestion checked on the whole loop: the snapshot's documents with the change applied,
loaded again and simulated from the start, as a user who applied it would see.

A trial decides the failed pod alone on the loop's final state. Applied for real, the changed
pod is placed at its turn in the queue, and may take what another pod would have had (or a
freed device, a raised limit, a widened NodePool may move others). The re-run answers both:
whether the pod is placed, and which other pods' placements or devices change (``affects``).
Re-runs cost a whole loop each, so they are made only for a run small enough to afford them,
and only so many (``WholeLoop.afford``: counted in pods, nodes and the run's own work, not
timed, so that the same snapshot always gets the same answer); otherwise ``affects`` is null:
not known. Suggestions whose edits are the same (a ResourceClaimTemplate every failed replica
uses) share one re-run: the same documents load into the same loop, so its placements answer
for each of those pods.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import field

import orjson

from allocator.model import Snapshot
from allocator.records import record
from allocator.scheduling.poddata import PodOutcome
from allocator.snapshot.errors import SnapshotError
from allocator.snapshot.loader import load_documents
from allocator.suggestions.documents import apply_change

# A re-run is made only for a run of at most this many pending pods and existing nodes (a
# larger cluster gets null ``affects``: a re-run per suggestion would cost more than the run
# itself; the demo's 28 pods on 10 nodes re-run in about 0.1 s) ...
MAX_RUN_SIZE = 300
# ... and at most this many per result ...
MAX_RERUNS = 16
# ... and only while the re-runs' work, each counted as the run's own (``loop_work``), stays
# within this many units: a run whose pods weigh many targets each (topology over dozens of
# NodeClaims) costs seconds per re-run however few its pods. The demo (about 640 units a run)
# and the examples afford all 16; a 300-pod run onto 60 NodeClaims (about 39,000) none.
MAX_RERUN_WORK = 20_000


def _content_key(changes: list[dict]) -> bytes:
    """The changes' content, as a key: a workload-wide change lists thousands of replicas,
    which orjson writes ten times faster than the standard library (that one for what orjson
    refuses, such as integers past 64 bits)."""
    try:
        return orjson.dumps(
            changes, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str
        )
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(changes, sort_keys=True, default=str).encode()


# Where a pod went, comparable across runs: an existing node by name and devices; a NodeClaim
# of the run by its NodePool (its name is a counter that any earlier new NodeClaim shifts, and
# which pods share it is not yet decided in the cluster). None: not placed.
Placement = tuple | None


@record
class Rerun:
    """The answer of one re-run for the suggestion's pod."""

    placed: bool
    target: dict | None  # where the pod went, as ``pods[].target``
    affects: list[dict]  # [{"pod", "from", "to"}] for the other pods that moved


@record
class WholeLoop:
    """What re-running the loop needs: the loop as the run composed it (``solve``: a snapshot's
    pending pods placed, as ``simulation`` runs them), the run's own placements and time."""

    solve: Callable[[Snapshot], list[PodOutcome]]
    size: int  # the run's pending pods and existing nodes
    before: dict[str, tuple[Placement, dict | None]] = field(default_factory=dict)
    work: int = 0  # what one re-run is counted to cost: the run's own work (``loop_work``)
    spent: float = 0.0  # seconds, for the record
    runs: int = 0
    # Per edit (the changes, whichever pod they were found for): the re-run's placements, or
    # None when the changed documents do not load or the loop failed on them.
    _after: dict[bytes, dict | None] = field(default_factory=dict)

    @classmethod
    def of(cls, solve, outcomes: Sequence[PodOutcome], nodes: int, work: int = 0) -> WholeLoop:
        return cls(solve, len(outcomes) + nodes, before=placements(outcomes), work=work)

    def afford(self) -> bool:
        return (
            self.size <= MAX_RUN_SIZE
            and self.runs < MAX_RERUNS
            and (self.runs + 1) * self.work <= MAX_RERUN_WORK
        )

    def check(self, snapshot: Snapshot, pod: str, changes: list[dict]) -> Rerun | None:
        """The re-run with ``changes`` applied, None when it cannot be afforded (or the changed
        documents no longer load: the suggestion is then left unconfirmed, not failed)."""
        if not self._after and not self.afford():
            # Nothing re-run, and nothing will be (what ``afford`` reads only grows): no key
            # is written (a workload-wide change lists every replica, 4,000 failed ones each).
            return None
        key = _content_key(changes)
        if key not in self._after:
            if not self.afford():
                return None
            self._after[key] = self._rerun(snapshot, changes)
        after = self._after[key]
        return compare(self.before, after, pod) if after is not None else None

    def _rerun(self, snapshot: Snapshot, changes: list[dict]) -> dict | None:
        """The placements of the loop run on the documents with ``changes`` applied."""
        started = time.perf_counter()
        try:
            documents = [raw for _, raw in snapshot.documents]
            for change in changes:
                documents = apply_change(documents, change)
            changed = load_documents([(str(d.get("kind")), d) for d in documents])
        except (SnapshotError, KeyError, IndexError, TypeError, AttributeError, ValueError):
            return None
        try:
            after = placements(self.solve(changed))
        except Exception:  # noqa: BLE001 - a check of a suggestion never fails the user's run
            after = None
        self.spent += time.perf_counter() - started
        self.runs += 1
        return after


def loop_work(outcomes: Sequence[PodOutcome], targets: int, dfs_nodes: int) -> int:
    """What the loop did, counted (never timed, so a snapshot always gets the same answer):
    every attempt of every pod weighed against the run's targets (its existing nodes, the
    NodeClaims it made, its NodePools), plus the DFS nodes its device searches visited."""
    return sum(o.attempts for o in outcomes) * max(targets, 1) + dfs_nodes


def placements(outcomes: Sequence[PodOutcome]) -> dict[str, tuple[Placement, dict | None]]:
    """Each pending pod's placement (comparable across runs) and its target as the result
    shows it."""
    out: dict[str, tuple[Placement, dict | None]] = {}
    for outcome in outcomes:
        if not outcome.scheduled or outcome.target is None:
            out[outcome.pod.key] = (None, None)
            continue
        target = outcome.target.target_json()
        if target["new"]:
            where: Placement = ("new", outcome.target.node_pool)
        else:
            devices = tuple(
                sorted(
                    f"{d.driver}/{d.pool}/{d.device}"
                    for claim in outcome.claim_outcomes
                    for d in claim.devices
                )
            )
            where = (target["kind"], target["name"], devices)
        out[outcome.pod.key] = (where, target)
    return out


def compare(before: dict, after: dict, pod: str) -> Rerun:
    """The suggestion's pod in the re-run, and every other pod whose placement differs."""
    where, target = after.get(pod, (None, None))
    affects = []
    for key, (was, shown) in before.items():
        if key == pod:
            continue
        now, now_shown = after.get(key, (None, None))
        if was != now:
            affects.append({"pod": key, "from": shown, "to": now_shown})
    return Rerun(placed=where is not None, target=target, affects=affects)


def lost_pods(affects: list[dict] | None) -> list[str]:
    """The other pods the run placed that the change leaves unplaced."""
    return [a["pod"] for a in affects or () if a["from"] is not None and a["to"] is None]
