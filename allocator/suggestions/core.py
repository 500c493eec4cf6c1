"""Verified single-change suggestions for pods that could not be placed (docs/RESULT.md).

For every failed pod, a bounded list of candidate changes is derived from the pod, its claims,
the devices in reach, taints, NodePools and the instance type catalog (and from the pod's
refusal funnel when the loop recorded one). Each candidate is *tried*: the pod's placement is
decided again with that one change on the scheduler state the pod last saw (``Scheduler.trial``:
a decision without a commit; the loop stops after a pass that placed nothing, so the final
state is exactly that), and only a change that places the pod is reported, with the target the
decision names. Changes that touch run-wide structures (DeviceClasses, NodeClaim templates,
held devices) are applied by a scoped
override that is undone after the trial.

Candidates are tried least invasive first (a toleration or a count before a NodePool change
before freeing someone else's devices), at most ``MAX_TRIALS_PER_POD`` per pod.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import field

import orjson

from allocator.features.taints import toleration_matches, toleration_to_json
from allocator.funnel import RejectionGroup
from allocator.model import (
    DeviceSelector,
    DeviceTaint,
    DeviceToleration,
    Namespace,
    NodePool,
    Pod,
    ResourceClaim,
    Snapshot,
    Taint,
    Toleration,
)
from allocator.records import record
from allocator.requirements import LABEL_HOSTNAME, Requirements
from allocator.scheduling.decision import Decision
from allocator.scheduling.fit import (
    _BINARY,
    NODES,
    cheapest_offering,
    fits,
    format_quantity,
    format_taint,
    instance_type_info,
    max_capacity,
    merged,
    node_pool_requirements,
    pod_requests,
    untolerated_taint,
)
from allocator.scheduling.hooks import HostPortUsage
from allocator.scheduling.hostports import HostPort, host_ports
from allocator.scheduling.initialization import PodClaims
from allocator.scheduling.nodeclaim import largest_count
from allocator.scheduling.poddata import PodOutcome
from allocator.scheduling.trialtargets import TrialTargets
from allocator.suggestions.ranking import (
    SCOPES,
    rank_key,
    scope_of,
    shared_note,
    trial_order,
    widest,
)
from allocator.suggestions.wholeloop import WholeLoop, lost_pods

MAX_TRIALS_PER_POD = 24
MAX_PAIR_TRIALS = 8  # two-change trials per pod, when no single change places it
MAX_PER_KIND = 3  # candidates of one kind per pod (taints, selectors, holders ...)


@record
class SuggestionReport:
    """The verified suggestions per pod, and what finding them cost."""

    by_pod: dict[str, list[dict]] = field(default_factory=dict)
    trials: int = 0
    reruns: int = 0  # whole-loop re-runs (``wholeloop``)
    seconds: float = 0.0


@record
class _Candidate:
    """A change that may place a pod, before a trial verifies it."""

    kind: str
    change: dict
    message: str  # the change in words; the verified target is appended
    pod: Pod | None = None  # the pod as changed (None: unchanged)
    claims: list[ResourceClaim] | None = None  # the pod's claims as changed
    extended: object | None = None  # DRAExtendedResource: the pod's ExtendedClaim as changed
    override: Callable[[], object] | None = None  # context manager factory (run-wide change)
    counting: bool = True
    # reduce-count searches the largest count that fits instead of trying one value.
    search: (
        Callable[[Callable[[_Candidate], Decision | None]], tuple[_Candidate, Decision] | None]
        | None
    ) = None
    order: int = 0  # within the same rank, the order found (pod's own before NodePool's)
    # A placement that does not show what the message claims (the instance type it names) is
    # no verification of it.
    accept: Callable[[Decision], bool] | None = None
    scope: str = ""  # ranking.SCOPES; worked out from ``change`` when left empty
    # What the pod gets instead of what it asked for, in words, read off the trial's decision
    # (a relaxed selector: other hardware; a dropped node selector: another zone).
    gives_up: Callable[[Decision], str] | None = None
    # A search's plain alternatives, smallest first (a two-change trial takes the last).
    alternatives: list[_Candidate] = field(default_factory=list)
    # False: cannot place the pod alone (it needs another change first); tried only in pairs.
    alone: bool = True
    # True: a change to a whole workload that the trial cannot model (placed replicas hold the
    # old term through their inverse anti-affinity): verified only by the whole-loop re-run,
    # and not offered when that cannot be afforded.
    rerun_only: bool = False
    # The targets whose refusal the change may lift (None: any may); the trial asks only them
    # when the pod's refusals are known for every target (``_Trials``).
    targets: TrialTargets | None = None


# --- entry point -----------------------------------------------------------------------------


def suggest(
    snapshot: Snapshot, run, outcomes, whole_loop: WholeLoop | None = None
) -> SuggestionReport:
    """Suggestions for every failed pod of ``outcomes`` (placed pods get none). With
    ``whole_loop``, each is checked by re-running the whole loop with the change (see
    ``wholeloop``): one the re-run does not confirm is dropped, and ``affects`` says which other
    pods move; without it (or past its budget) ``affects`` is null."""
    started = time.perf_counter()
    report = SuggestionReport()
    ctx = _Context(snapshot, run)
    # Replicas (same namespace, pod spec and claim specs) see the same state and get the same
    # verified answers: tried once, renamed for the others.
    seen: dict[str, tuple[dict[str, str], _Written]] = {}
    for outcome in outcomes:
        if outcome.scheduled:
            continue
        signature = _signature(ctx, outcome)
        names = _names(outcome)
        if signature is not None and signature in seen:
            first_names, text = seen[signature]
            report.by_pod[outcome.pod.key] = _renamed(text, first_names, names)
            continue
        found = _for_pod(ctx, outcome, report)
        report.by_pod[outcome.pod.key] = found
        if signature is not None:
            seen[signature] = (names, _written(found))  # written once, renamed per replica
    for key, found in report.by_pod.items():
        report.by_pod[key] = _on_the_whole_loop(snapshot, whole_loop, key, found)
    if whole_loop is not None:
        report.reruns = whole_loop.runs
    report.seconds = time.perf_counter() - started
    return report


def _on_the_whole_loop(
    snapshot: Snapshot, whole_loop: WholeLoop | None, pod: str, found: list[dict]
) -> list[dict]:
    """``found`` checked on the whole loop where it can be afforded: a suggestion after which
    the pod is still not placed is dropped; the others carry ``affects`` (null: not known), and
    those that cost another pod its placement go after those that do not."""
    out = []
    for suggestion in found:
        changes = suggestion.get("changes") or [suggestion["change"]]
        rerun = whole_loop.check(snapshot, pod, changes) if whole_loop is not None else None
        if rerun is None:
            if suggestion["target"] is not None:
                out.append({**suggestion, "affects": None})
            continue  # a workload change no trial verified: never offered unverified
        if not rerun.placed:
            continue
        checked = {**suggestion, "affects": rerun.affects}
        if suggestion["target"] is None and rerun.target is not None:
            checked["target"] = rerun.target
            checked["message"] += f"; the pod would then go to {_where(rerun.target)}"
        elif rerun.target is not None and rerun.target != suggestion["target"]:
            # Placed at its turn in the queue, the pod goes where the whole loop puts it.
            checked["target"] = rerun.target
            checked["message"] = checked["message"].replace(
                f"the pod would then go to {_where(suggestion['target'])}",
                f"the pod would then go to {_where(rerun.target)}",
            )
        lost = lost_pods(rerun.affects)
        if lost:
            more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
            checked["message"] += (
                f"; on the whole loop, pod {', '.join(lost[:3])}{more} would no longer be placed"
            )
        out.append(checked)
    # Stable: the order found (gives up nothing first, then by scope ...) is kept within each.
    out.sort(key=lambda s: bool(lost_pods(s["affects"])))
    return out


def _signature(ctx: _Context, outcome) -> str | None:
    """What a trial reads of a pod, or None when a replica could see something else (claims
    allocated, or shared with other pods)."""
    claims = outcome.pod_claims.claims
    if outcome.pod_claims.error is not None or any(
        c.allocation is not None or c.reserved_for or c.key in ctx.scheduler.state.claim_users
        for c in claims
    ):
        return None
    spec = outcome.pod.raw.get("spec") if isinstance(outcome.pod.raw, dict) else None
    return repr(
        (
            outcome.pod.namespace,
            json.dumps(spec, sort_keys=True, default=str),
            [repr(c.spec) for c in claims],
        )
    )


def _names(outcome) -> dict[str, str]:
    """Names that differ between replicas: the pod's and its claims' (index -> name)."""
    out = {"pod": outcome.pod.key}
    for i, c in enumerate(outcome.pod_claims.claims):
        out[f"claim{i}"] = c.key
    return out


@record
class _Written:
    """A replica's suggestions, written once for renaming per replica: as JSON text (non-ASCII
    as is, as orjson writes it; the standard library writes what orjson refuses, an integer
    past 64 bits) but for each change's ``objects``, kept aside per suggestion and change. Those
    list the pods a change edits (every pod of a workload, the holders of devices): the same
    for every replica, and as long as the workload, so they are shared, not written again."""

    text: str
    objects: list[list[tuple[list[str], list[str]] | None]]  # (the change's keys, objects)


def _changes(suggestion: dict) -> list[dict]:
    return suggestion.get("changes") or [suggestion["change"]]


def _written(found: list[dict]) -> _Written:
    apart: list[dict] = []
    objects: list[list[tuple[list[str], list[str]] | None]] = []
    for suggestion in found:
        kept, changes = [], []
        for change in _changes(suggestion):
            if "objects" in change:
                kept.append((list(change), change["objects"]))
                change = {k: v for k, v in change.items() if k != "objects"}
            else:
                kept.append(None)
            changes.append(change)
        key = "changes" if suggestion.get("changes") else "change"
        apart.append({**suggestion, key: changes if key == "changes" else changes[0]})
        objects.append(kept)
    try:
        text = orjson.dumps(apart).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(apart, ensure_ascii=False)
    return _Written(text, objects)


def _renamed(written: _Written, old: dict[str, str], new: dict[str, str]) -> list[dict]:
    """The suggestions ``written`` for the replica named ``new``, the changes' objects shared."""
    text = written.text
    # Swapped, not only renamed: a replica's suggestion that names the first replica (a
    # workload change's words list its pods, a whole-loop effect on it) names this one's
    # instead.
    swaps = [(old[k], new[k]) for k in old if old[k] != new[k]]
    swaps += [(after, before) for before, after in swaps]
    pairs = sorted(swaps, key=lambda p: -len(p[0]))
    tokens = {}
    for i, (before, _) in enumerate(pairs):  # two steps, so that one rename never feeds another
        token = f"\x00{i}\x00"
        tokens[token] = pairs[i][1]
        text = text.replace(_in_json(before), _in_json(token))
    for token, after in tokens.items():
        text = text.replace(_in_json(token), _in_json(after))
    try:
        found = orjson.loads(text)
    except orjson.JSONDecodeError:
        found = json.loads(text)
    for suggestion, kept in zip(found, written.objects, strict=True):
        changes = _changes(suggestion)
        for i, aside in enumerate(kept):
            if aside is not None:
                keys, objects = aside
                change = changes[i]
                changes[i] = {k: objects if k == "objects" else change[k] for k in keys}
        if suggestion.get("changes"):
            suggestion["changes"] = changes
        else:
            suggestion["change"] = changes[0]
    return found


def _in_json(name: str) -> str:
    """``name`` as it stands inside a JSON string orjson wrote."""
    return orjson.dumps(name).decode()[1:-1]


class _Context:
    """What every pod's candidates read: the run, the catalog, holders of devices."""

    def __init__(self, snapshot: Snapshot, run) -> None:
        self.snapshot = snapshot
        self.run = run
        self.scheduler = run.scheduler
        self.allocator = run.allocator
        self._infos = None
        self._pods_by_key = None
        self._devices = None
        self._device_nodes = None
        self._devices_left = None
        self._funnels: dict[str, list] = {}
        self.replans: dict[tuple[str, str], object] = {}  # see _replan
        # (spec path, namespace, the pod's spec there as canonical JSON) -> its workload.
        self.workloads: dict[tuple, list[str]] = {}

    @property
    def infos(self):
        if self._infos is None:
            known = {i.name: i for plan in self.scheduler.templates for i in plan.instance_types}
            self._infos = {
                name: known.get(name) or instance_type_info(it)
                for name, it in sorted(self.snapshot.instance_types.items())
            }
        return self._infos

    @property
    def devices(self) -> dict[tuple, object]:
        """Devices by (driver, pool, name), and a template's by (instance type, driver, name)
        (a NodeClaim's pools are named by the scheduler)."""
        if self._devices is None:
            index: dict[tuple, object] = {}
            for s in self.snapshot.resource_slices:
                for d in s.devices:
                    index.setdefault((s.driver, s.pool, d.name), d)
            for it in self.snapshot.instance_types.values():
                for tmpl in it.resource_slice_templates:
                    for d in tmpl.devices:
                        index.setdefault((it.name, tmpl.driver, d.name), d)
            self._devices = index
        return self._devices

    @property
    def device_nodes(self) -> dict[tuple, str | None]:
        """The node of each in-cluster device's slice, by device id (None: not one node's)."""
        if self._device_nodes is None:
            index: dict[tuple, str | None] = {}
            for s in self.snapshot.resource_slices:
                for d in s.devices:
                    key = (s.driver, s.pool, d.name)
                    # The same device published for two nodes is no one node's.
                    index[key] = s.node_name if index.get(key, s.node_name) == s.node_name else None
            self._device_nodes = index
        return self._device_nodes

    @property
    def devices_left(self) -> dict[tuple[str, str], int | None]:
        """The most template devices an instance type of each NodeClaim of the run has left
        (("nc", name)) and of each NodePool's new NodeClaim (("pool", name)); None: not
        bounded (a device that allows multiple allocations). Trials commit nothing, so this
        holds for every trial of every pod."""
        if self._devices_left is None:
            sched = self.scheduler
            cache = sched.state.cache
            held = sched.state.allocator.tracker.templates
            out: dict[tuple[str, str], int | None] = {}
            for kind, name, key, infos in [
                *(("nc", nc.name, nc.id, nc.candidates) for nc in sched.node_claims),
                *(("pool", t.name, None, t.instance_types) for t in sched.templates),
            ]:
                here = held.get(key, {}) if key is not None else {}
                out[(kind, name)] = cache.templates_left(infos, here)
            self._devices_left = out
        return self._devices_left

    def distinct_funnels(self, outcome: PodOutcome) -> list:
        """The pod's funnels, each once (its first place kept): targets refused alike share
        one funnel, read once, not once per target; worked out once per pod."""
        found = self._funnels.get(outcome.pod.key)
        if found is None:
            found = []
            seen: set[tuple[int, str | None]] = set()
            for _, funnel, claim in outcome.funnel_log:
                if (id(funnel), claim) in seen:
                    continue
                seen.add((id(funnel), claim))
                found.append(funnel if claim is None else funnel.for_claim(claim))
            self._funnels[outcome.pod.key] = found
        return found

    @property
    def pods_by_key(self) -> dict[str, Pod]:
        if self._pods_by_key is None:
            self._pods_by_key = {p.key: p for p in self.snapshot.pods}
        return self._pods_by_key


def _for_pod(ctx: _Context, outcome, report: SuggestionReport) -> list[dict]:
    if outcome.pod_claims.error is not None:
        return []  # a claim that does not exist: no placement to re-run
    # Changes to the pod's device requests, or to who holds devices, are tried only for a pod
    # that some target refused over devices: for one refused over cpu or a taint everywhere,
    # they cannot help, and each trial weighs every target again.
    device_side = _devices_refused(outcome)
    candidates: list[_Candidate] = []
    for build, devices_only in (
        (_tolerations, False),
        (_host_ports, False),
        (_counts, True),
        (_extended_counts, False),
        (_node_requests, False),
        (_topology, False),
        (_selectors, True),
        (_constraints, True),
        (_admin_namespace, True),
        (_pod_requirements, False),
        (_pool_allows_asked, False),
        (_volume_zones, False),
        (_affinity_domains, False),
        (_pool_requirements, False),
        (_min_values, False),
        (_pool_limits, False),
        (_instance_types, False),
        (_free_devices, False),
    ):
        if devices_only and not device_side:
            continue
        candidates.extend(build(ctx, outcome))
    for i, c in enumerate(candidates):
        c.order = i
        c.scope = c.scope or scope_of(c.kind, c.change)
    candidates.sort(key=lambda c: trial_order(c.kind, c.scope, c.order))

    trials = _Trials(ctx, outcome, report, MAX_TRIALS_PER_POD)
    found: list[_Found] = []
    failed: list[_Candidate] = []
    seen: set[str] = set()
    for candidate in candidates:
        if trials.left <= 0:
            break
        if not candidate.alone:
            failed.extend(
                _settled(c, candidate.order) for c in candidate.alternatives or [candidate]
            )
            continue
        if candidate.rerun_only:
            found.append(_Found(candidate, None, _gives_up(candidate, None)))
            continue
        if candidate.search is not None:
            hit = candidate.search(trials.attempt)
            if hit is None:
                failed.extend(_settled(c, candidate.order) for c in candidate.alternatives[-1:])
                continue
            candidate, decision = _settled(hit[0], candidate.order), hit[1]
        else:
            decision = trials.attempt(candidate)
        if decision is None or (candidate.accept is not None and not candidate.accept(decision)):
            failed.append(candidate)
            continue
        key = repr((candidate.kind, candidate.change))
        if key in seen:
            continue
        seen.add(key)
        found.append(_Found(candidate, decision, _gives_up(candidate, decision)))
    if not any(f.gives_up is None for f in found):
        # No single change places the pod with what it asked for: two changes together.
        found.extend(_pairs(ctx, outcome, report, failed))
    found.sort(key=lambda f: f.rank())
    return [f.render() for f in found]


def _settled(candidate: _Candidate, order: int) -> _Candidate:
    """A candidate a search made, ranked where the search was."""
    scope = candidate.scope or scope_of(candidate.kind, candidate.change)
    return dataclasses.replace(candidate, scope=scope, order=order)


def _devices_refused(outcome) -> bool:
    """Some target refused the pod over its devices: the loop recorded a refusal funnel (or
    its place, for a target refused by counting devices)."""
    return bool(outcome.funnel_log)


class _Trials:
    """Trials of one pod's candidates, at most ``budget``: each decides the pod's placement
    with the candidate's change on the loop's final state and commits nothing."""

    def __init__(self, ctx: _Context, outcome, report: SuggestionReport, budget: int) -> None:
        self.ctx, self.outcome, self.report, self.left = ctx, outcome, report, budget
        self.narrow = _refused_everywhere(ctx, outcome)

    def attempt(self, candidate: _Candidate) -> Decision | None:
        """The trial's decision (where the pod would go, with what), None when it fails."""
        if self.left <= 0:
            return None
        self.left -= 1
        self.report.trials += 1
        ctx, outcome = self.ctx, self.outcome
        pod = candidate.pod or outcome.pod
        claims = candidate.claims if candidate.claims is not None else outcome.pod_claims.claims
        extended = candidate.extended or outcome.pod_claims.extended  # DRAExtendedResource
        targets = candidate.targets if self.narrow else None
        if candidate.override is None:
            # Changed claims have new funnel cache keys: cached refusals stay true.
            return ctx.scheduler.trial(
                pod,
                PodClaims(claims, extended=extended),
                counting=candidate.counting,
                targets=targets,
            )
        with candidate.override():
            # A run-wide change (DeviceClass, NodePool, freed devices) makes every cached
            # refusal stale, and what the trial caches is stale once the change is undone.
            ctx.scheduler.invalidate_caches()
            try:
                return ctx.scheduler.trial(
                    pod,
                    PodClaims(claims, extended=extended),
                    counting=candidate.counting,
                    targets=targets,
                )
            finally:
                ctx.scheduler.invalidate_caches()


def _refused_everywhere(ctx: _Context, outcome) -> bool:
    """The pod's last attempt was refused by every target there is now (what a narrowed trial
    relies on). Not so for a pod whose NodeClaim was dropped after the loop (its reason names
    that NodeClaim's NodePool only) or one refused before any target was asked."""
    sched = ctx.scheduler
    refused = {target for target, _ in outcome.reasons}
    return (
        all(n.reason_target in refused for n in sched.existing)
        and all(nc.reason_target in refused for nc in sched.node_claims)
        and all(f"nodepool/{t.name}" in refused for t in sched.templates)
    )


@record
class _Found:
    """A verified candidate (or two applied together) and the trial's decision."""

    candidate: _Candidate
    decision: Decision | None  # None: verified by the whole-loop re-run only
    gives_up: str | None  # what the pod gets instead of what it asked for (None: nothing)
    parts: list[_Candidate] = field(default_factory=list)  # a two-change suggestion's

    def rank(self) -> tuple:
        c = self.candidate
        return rank_key(self.gives_up is not None, c.scope, len(self.parts) or 1, c.kind, c.order)

    def render(self) -> dict:
        c, decision = self.candidate, self.decision
        target = decision.target.target_json() if decision is not None else None
        message = c.message
        if target is not None:
            message += f"; the pod would then go to {_where(target)}"
        admitted = _devices_of(decision) if decision is not None else []
        if any(p.kind == "relax-selector" for p in self.parts or [c]) and admitted:
            message += f", with {', '.join(admitted[:5])}"
        if self.gives_up is not None:
            message += f"; {self.gives_up}"
        for part in self.parts or [c]:
            message += shared_note(part.scope, part.change)
        out = {
            "kind": c.kind,
            "message": message,
            "change": c.change,
            "target": target,
            "scope": c.scope,
        }
        if self.parts:
            out["changes"] = [p.change for p in self.parts]
        return out


def _where(target: dict) -> str:
    return f"{target['kind']} {target['name']}" + (" (new)" if target["new"] else "")


def _gives_up(candidate: _Candidate, decision: Decision | None) -> str | None:
    if candidate.gives_up is None:
        return None
    return candidate.gives_up(decision)


def _pairs(ctx: _Context, outcome, report: SuggestionReport, failed: list[_Candidate]):
    """Two of the changes that failed alone, applied together, for the first pairs that can
    be combined (different objects, at most one changing the pod and one its claims), tried
    least invasive first; at most ``MAX_PAIR_TRIALS`` trials."""
    trials = _Trials(ctx, outcome, report, MAX_PAIR_TRIALS)
    singles = [c for c in failed if c.change and c.gives_up is None]
    pairs = [
        (a, b)
        for i, a in enumerate(singles)
        for b in singles[i + 1 :]
        if a.change.get("object") != b.change.get("object") and _combinable(a, b)
    ]
    pairs.sort(key=lambda p: (max(SCOPES.index(p[0].scope), SCOPES.index(p[1].scope)),))
    out: list[_Found] = []
    for a, b in pairs:
        if trials.left <= 0 or len(out) >= MAX_PER_KIND:
            break
        both = _combined(a, b)
        decision = trials.attempt(both)
        if decision is None or (both.accept is not None and not both.accept(decision)):
            continue
        out.append(_Found(both, decision, None, parts=[a, b]))
    return out


def _combinable(a: _Candidate, b: _Candidate) -> bool:
    return not (
        (a.pod is not None and b.pod is not None)
        or (a.claims is not None and b.claims is not None)
        or (a.extended is not None and b.extended is not None)
    )


def _combined(a: _Candidate, b: _Candidate) -> _Candidate:
    overrides = [c.override for c in (a, b) if c.override is not None]

    @contextmanager
    def scope() -> Iterator[None]:
        with ExitStack() as stack:
            for override in overrides:
                stack.enter_context(override())
            yield

    accepts = [c.accept for c in (a, b) if c.accept is not None]
    return _Candidate(
        "two-changes",
        a.change,
        f"{a.message}, and {b.message} (neither alone places the pod)",
        pod=a.pod or b.pod,
        claims=a.claims if a.claims is not None else b.claims,
        extended=a.extended or b.extended,
        override=scope if overrides else None,
        counting=a.counting and b.counting,
        accept=(lambda d: all(f(d) for f in accepts)) if accepts else None,
        order=min(a.order, b.order),
        scope=widest([a.scope, b.scope]),
        targets=a.targets | b.targets if a.targets and b.targets else None,
    )


def _devices_of(decision: Decision) -> list[str]:
    result = decision.result
    if result is None:
        return []
    its = decision.target.instance_types
    first = [its[0]] if its else None
    return [
        f"{d.driver}/{d.pool}/{d.device}"
        for co in result.claims
        for d in (co.devices_for(first) if first else co.devices)
    ]


# --- the pod's own objects: claims --------------------------------------------------------


def _dfs_claims(ctx: _Context, outcome) -> list[tuple[int, ResourceClaim]]:
    """The pod's claims that the DFS searches (allocated ones cannot be changed by a spec)."""
    sched = ctx.scheduler
    return [
        (i, c)
        for i, c in enumerate(outcome.pod_claims.claims)
        if sched.claim_state(c) in ("unallocated", "reallocated")
    ]


def _claim_object(ctx: _Context, claim: ResourceClaim) -> tuple[str, str]:
    """The object a user edits for this claim and the prefix of ``spec.devices``: a claim made
    from a template is changed through its ResourceClaimTemplate."""
    if claim.generated_from_template:
        return (
            f"ResourceClaimTemplate {claim.namespace}/{claim.generated_from_template}",
            "spec.spec.devices",
        )
    return f"ResourceClaim {claim.namespace}/{claim.name}", "spec.devices"


def _with_claim(outcome, index: int, claim: ResourceClaim) -> list[ResourceClaim]:
    claims = list(outcome.pod_claims.claims)
    claims[index] = claim
    return claims


def _copy_claim(claim: ResourceClaim) -> ResourceClaim:
    return dataclasses.replace(claim, spec=copy.deepcopy(claim.spec))


def _exact_requests(claim: ResourceClaim):
    for ri, request in enumerate(claim.spec.requests):
        if request.exactly is not None:
            yield ri, request


def _tolerations(ctx: _Context, outcome) -> list[_Candidate]:
    out: list[_Candidate] = []
    # Node, NodeClaim and NodePool taints the pod does not tolerate: a pod toleration.
    pod = outcome.pod
    sched = ctx.scheduler
    # Only taints that refused the pod somewhere (its reasons name them); NodePools' first, as
    # new capacity is where a tolerated pod most often fits.
    refused = " ".join(reason for _, reason in outcome.reasons)
    taints: dict[tuple, Taint] = {}
    sources = [plan.taints for plan in sched.templates]
    sources += [nc.taints for nc in sched.node_claims]
    sources += [t.taints for t in sched.existing]
    for n, source in enumerate(sources):
        for taint in source:
            if any(toleration_matches(t, taint) for t in pod.tolerations):
                continue
            # A NodePool's taint counts even when its refusal named another cause first (its
            # limits): the toleration may be one of two changes that place the pod.
            if n >= len(sched.templates) and f"taint {format_taint(taint)}" not in refused:
                continue
            taints.setdefault((taint.key, taint.value, taint.effect), taint)
    for taint in list(taints.values())[:MAX_PER_KIND]:
        added = Toleration(key=taint.key, operator="Exists", effect=taint.effect)
        changed = dataclasses.replace(pod, tolerations=[*pod.tolerations, added])
        out.append(
            _Candidate(
                "tolerate-taint",
                {
                    "object": f"Pod {pod.key}",
                    "field": "spec.tolerations",
                    "op": "set",
                    "value": [toleration_to_json(t) for t in changed.tolerations],
                },
                f"tolerate taint {format_taint(taint)} in pod {pod.key} "
                f"(toleration {taint.key} Exists:{taint.effect})",
                pod=changed,
            )
        )
    # Device taints (slices and DeviceTaintRules) no toleration of a request matches.
    device_taints = _device_taints(ctx, outcome)
    tried = 0
    for index, claim in _dfs_claims(ctx, outcome):
        if _is_extended(outcome, claim):
            continue  # the scheduler's claim has no tolerations a user could set
        obj, prefix = _claim_object(ctx, claim)
        for ri, request in _exact_requests(claim):
            for taint in device_taints:
                if tried >= MAX_PER_KIND:
                    return out
                if any(_device_tolerates(t, taint) for t in request.exactly.tolerations):
                    continue
                changed = _copy_claim(claim)
                exact = changed.spec.requests[ri].exactly
                exact.tolerations.append(
                    DeviceToleration(key=taint[0], operator="Exists", effect=taint[2])
                )
                tried += 1
                shown = (
                    f"{taint[0]}={taint[1]}:{taint[2]}" if taint[1] else f"{taint[0]}:{taint[2]}"
                )
                out.append(
                    _Candidate(
                        "tolerate-taint",
                        {
                            "object": obj,
                            "field": f"{prefix}.requests[{ri}].exactly.tolerations",
                            "op": "set",
                            "value": [toleration_to_json(t) for t in exact.tolerations],
                        },
                        f"tolerate device taint {shown} in request {request.name} of claim "
                        f"{claim.key} (toleration {taint[0]} Exists:{taint[2]})",
                        claims=_with_claim(outcome, index, changed),
                    )
                )
    return out


def _device_taints(ctx: _Context, outcome) -> list[tuple[str, str | None, str]]:
    """Distinct device taints that refuse devices: from the funnel when there is one, else
    every NoSchedule/NoExecute taint of a device in the snapshot, most frequent first."""
    from_funnel = [
        (t.get("key"), t.get("value"), t.get("effect"))
        for group in _funnel_groups(ctx, outcome, "taint")
        if isinstance(t := (group.detail or {}).get("taint"), dict)
    ]
    if from_funnel:
        return list(dict.fromkeys(from_funnel))
    counts: dict[tuple, int] = {}

    def note(taint) -> None:
        if taint.effect in ("NoSchedule", "NoExecute"):
            key = (taint.key, taint.value, taint.effect)
            counts[key] = counts.get(key, 0) + 1

    for s in ctx.snapshot.resource_slices:
        for d in s.devices:
            for t in d.taints:
                note(t)
    for it in ctx.snapshot.instance_types.values():
        for tmpl in it.resource_slice_templates:
            for d in tmpl.devices:
                for t in d.taints:
                    note(t)
    for rule in ctx.snapshot.device_taint_rules:
        note(rule.taint)
    return sorted(counts, key=lambda k: (-counts[k], k[0], k[1] or "", k[2]))


def _device_tolerates(t: DeviceToleration, taint: tuple) -> bool:
    key, value, effect = taint
    return toleration_matches(t, DeviceTaint(key=key, value=value, effect=effect))


def _counts(ctx: _Context, outcome) -> list[_Candidate]:
    out = []
    for index, claim in _dfs_claims(ctx, outcome):
        obj, prefix = _claim_object(ctx, claim)
        extended = outcome.pod_claims.extended if _is_extended(outcome, claim) else None
        for ri, request in _exact_requests(claim):
            exact = request.exactly
            if exact.allocation_mode != "ExactCount" or exact.count <= 1:
                continue
            if extended is not None:
                search = _extended_count_search(outcome, index, request, extended)
                out.append(_Candidate("reduce-count", {}, "", search=search, scope="pod"))
                continue
            out.append(
                _Candidate(
                    "reduce-count",
                    {},
                    "",
                    search=_count_search(ctx, outcome, index, claim, ri, obj, prefix),
                    scope="pod",
                )
            )
    return out[:MAX_PER_KIND]


_NODE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage", "hugepages-")


def _extended_counts(ctx: _Context, outcome) -> list[_Candidate]:
    """An extended resource (``nvidia.com/gpu: 16`` in a container's limits) that no node or
    allowed instance type has that many of: the largest count that places the pod, written
    into the one container that asks for it."""
    pod = outcome.pod
    containers = ((pod.raw or {}).get("spec") or {}).get("containers") or []
    out = []
    for name in sorted(pod.requests):
        if name.startswith(_NODE_RESOURCES):
            continue
        wanted = pod_requests(pod).get(name, 0)
        if wanted < 2000 or wanted % 1000:
            continue
        most = max(
            [i.capacity.get(name, 0) for i in ctx.infos.values()]
            + [t.available.get(name, 0) for t in ctx.scheduler.existing],
            default=0,
        )
        if most >= wanted or most < 1000:
            continue  # something has that many (another cause), or nothing has any
        asking = [
            i for i, c in enumerate(containers) if isinstance(c, dict) and _container_asks(c, name)
        ]
        if len(asking) != 1:
            continue  # several containers share it: which one to cut is the user's call
        out.append(
            _Candidate(
                "reduce-count",
                {},
                "",
                search=_extended_search(pod, name, asking[0]),
                scope="pod",
            )
        )
    return out[:MAX_PER_KIND]


# Node resources a request fix lowers, and the step it searches in (whole Gi, whole cores).
_REQUEST_STEPS = {"memory": 1000 * 2**30, "ephemeral-storage": 1000 * 2**30, "cpu": 1000}


def _node_requests(ctx: _Context, outcome) -> list[_Candidate]:
    """A cpu, memory or ephemeral-storage request above what every existing node has free and
    every instance type a NodePool the pod tolerates has: the largest request that places the
    pod, in whole Gi or cores, written into the one container that asks for it."""
    pod = outcome.pod
    containers = ((pod.raw or {}).get("spec") or {}).get("containers") or []
    requests = pod_requests(pod)
    sched = ctx.scheduler
    plans = [p for p in sched.templates if untolerated_taint(pod.tolerations, p.taints) is None]
    overheads = [(p, p.daemon_overhead) for p in plans]  # worked out per NodePool, once
    out = []
    for name, step in _REQUEST_STEPS.items():
        wanted = requests.get(name, 0)
        # What a node could give the pod: an instance type's capacity less its NodePool's
        # DaemonSet overhead, a node's free resources; only where the pod's other requests fit
        # (the largest request is looked for just under the largest of these).
        rest = {k: v for k, v in requests.items() if k != name}
        room = [
            i.capacity.get(name, 0) - overhead.get(name, 0)
            for p, overhead in overheads
            for asked in (merged(rest, overhead),)
            for i in p.instance_types
            if fits(asked, i.capacity)
        ]
        room += [t.available.get(name, 0) for t in sched.existing if fits(rest, t.available)]
        most = max(room, default=0)
        if wanted <= most or most < step:
            continue  # something has that much (another cause), or nothing has a step of it
        asking = [
            i for i, c in enumerate(containers) if isinstance(c, dict) and _container_asks(c, name)
        ]
        if len(asking) != 1:
            continue  # several containers share it: which one to cut is the user's call
        search = _request_search(pod, name, asking[0], wanted, most, step)
        if search is not None:
            out.append(_Candidate("reduce-request", {}, "", search=search, scope="pod"))
    return out


def _request_search(pod: Pod, name: str, ci: int, wanted: int, most: int, step: int):
    """The largest request of ``name`` (a multiple of ``step``, at most ``most``) that places
    the pod, as _largest_count searches a count."""
    from allocator.quantity import Quantity

    container = pod.raw["spec"]["containers"][ci]
    own = _container_milli(container, name)
    if own is None:
        return None
    others = wanted - own  # init containers and overhead are not touched
    shown_before = format_quantity(name, wanted)

    def candidate(units: int) -> _Candidate:
        total = units * step
        value = _quantity_text(name, total - others)
        resources = copy.deepcopy(container.get("resources") or {})
        resources.setdefault("requests", {})[name] = value
        limits = resources.get("limits") or {}
        if name in limits and _milli(limits[name]) < total - others:
            limits[name] = value  # a request above its limit is invalid
        raw = copy.deepcopy(pod.raw)
        raw["spec"]["containers"][ci]["resources"] = resources
        changed = dataclasses.replace(
            pod,
            requests={**pod.requests, name: Quantity.parse(_quantity_text(name, total))},
            raw=raw,
        )
        return _Candidate(
            "reduce-request",
            {
                "object": f"Pod {pod.key}",
                "field": f"spec.containers[{ci}].resources",
                "op": "set",
                "value": resources,
            },
            f"lower the {name} request of container {container.get('name')} of pod {pod.key} "
            f"to {value} (the largest that fits: the pod asks for {shown_before}, no node or "
            f"instance type it may use has more than {format_quantity(name, most)})"
            + _owner_note(pod),
            pod=changed,
        )

    lo = max(others // step + 1, 1)
    hi = min(most // step, (wanted - 1) // step)
    if lo > hi:
        return None
    return lambda attempt: _largest_from_top(candidate, attempt, lo, hi)


def _container_milli(container: dict, name: str) -> int | None:
    """The container's own request of ``name`` in milli-units (its limit when it has no
    request: the API server defaults one to the other); None when unreadable."""
    resources = container.get("resources") or {}
    for key in ("requests", "limits"):
        value = (resources.get(key) or {}).get(name)
        if value is not None:
            return _milli(value)
    return None


def _milli(value) -> int:
    from allocator.quantity import Quantity

    try:
        return int(Quantity.parse(str(value)).value * 1000)
    except (ValueError, TypeError, AttributeError, ArithmeticError):
        return 0


def _quantity_text(name: str, milli: int) -> str:
    """Whole Gi or cores as a person writes them (``15Gi``, ``8``), else canonical."""
    step = _REQUEST_STEPS.get(name, 1000)
    if milli % step == 0:
        units = milli // step
        return f"{units}Gi" if name in ("memory", "ephemeral-storage") else str(units)
    return format_quantity(name, milli)


def _container_asks(container: dict, name: str) -> bool:
    resources = container.get("resources") or {}
    return any(name in (resources.get(k) or {}) for k in ("requests", "limits"))


def _extended_search(pod: Pod, name: str, ci: int):
    from allocator.quantity import Quantity

    container = pod.raw["spec"]["containers"][ci]
    total = pod_requests(pod)[name] // 1000
    own = _container_count(container, name)
    others = total - own  # init containers and overhead are not touched

    def candidate(count: int) -> _Candidate:
        resources = copy.deepcopy(container.get("resources") or {})
        for key in ("requests", "limits"):
            if name in (resources.get(key) or {}):
                resources[key][name] = str(count - others)
        changed = dataclasses.replace(
            pod, requests={**pod.requests, name: Quantity.parse(str(count))}
        )
        return _Candidate(
            "reduce-count",
            {
                "object": f"Pod {pod.key}",
                "field": f"spec.containers[{ci}].resources",
                "op": "set",
                "value": resources,
            },
            f"reduce {name} of container {container.get('name')} of pod {pod.key} from "
            f"{own} to {count - others} (the largest count that fits)",
            pod=changed,
        )

    return lambda attempt: _largest_count(candidate, attempt, max(others, 0) + 1, total - 1)


def _container_count(container: dict, name: str) -> int:
    from allocator.quantity import Quantity

    resources = container.get("resources") or {}
    for key in ("requests", "limits"):
        value = (resources.get(key) or {}).get(name)
        if value is not None:
            try:
                return int(Quantity.parse(value).value)
            except (ValueError, TypeError, AttributeError):
                return 0
    return 0


def _count_search(ctx: _Context, outcome, index, claim, ri, obj, prefix):
    """The largest count that places the pod, among 1..count-1."""
    request = claim.spec.requests[ri]

    def candidate(count: int) -> _Candidate:
        changed = _copy_claim(claim)
        changed.spec.requests[ri].exactly.count = count
        claims = _with_claim(outcome, index, changed)
        return _Candidate(
            "reduce-count",
            {
                "object": obj,
                "field": f"{prefix}.requests[{ri}].exactly.count",
                "op": "set",
                "value": count,
            },
            f"reduce request {request.name} of claim {claim.key} from "
            f"{request.exactly.count} to {count} devices (the largest count that fits)",
            claims=claims,
            targets=_room_for(ctx, claims),
        )

    return lambda attempt: _largest_count(candidate, attempt, 1, request.exactly.count - 1)


def _room_for(ctx: _Context, claims: list[ResourceClaim]) -> TrialTargets | None:
    """The targets that may have room for the devices ``claims`` ask: every existing node
    (the device-count pre-check refuses full ones without a search), and the NodeClaims of the
    run and NodePools with an instance type that has at least the largest count asked in
    template devices left. The others refuse, as the scheduler's own count bound of a NodeClaim
    (``NodeClaim._count_bound_refuses``) does; None (every target) when that bound does not
    hold: NodeClaims may reach in-cluster devices, a claim is allocated, or no request counts."""
    state = ctx.scheduler.state
    if state.cache.nodeclaims_reach_cluster:
        return None
    need = largest_count(claims, state)
    if not need:
        return None
    sched = ctx.scheduler
    left = ctx.devices_left
    return TrialTargets(
        nodes=frozenset(n.name for n in sched.existing),
        node_claims=frozenset(
            nc.name for nc in sched.node_claims if _has_room(left[("nc", nc.name)], need)
        ),
        node_pools=frozenset(
            t.name for t in sched.templates if _has_room(left[("pool", t.name)], need)
        ),
    )


def _has_room(most: int | None, need: int) -> bool:
    return most is None or most >= need


def _largest_count(candidate, attempt, lo: int, hi: int):
    """Binary search for the largest count in lo..hi whose candidate places the pod (fewer
    devices are never harder to find, barring constraints; every answer is verified anyway):
    (candidate, where it goes) or None."""
    best = None
    while lo <= hi:
        mid = (lo + hi + 1) // 2
        c = candidate(mid)
        hit = attempt(c)
        if hit is not None:
            best = (c, hit)
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def _largest_from_top(candidate, attempt, lo: int, hi: int):
    """The largest value in lo..hi whose candidate places the pod, probing down from ``hi`` in
    growing steps (hi, hi-1, hi-3, hi-7 ...) and then bisecting between the first that places
    it and the last that did not: a request that fits lies just under a node's size, so this
    takes a few trials where bisecting from the middle takes a dozen."""
    failed_at, offset = hi + 1, 0
    while True:
        probe = max(hi - offset, lo)
        c = candidate(probe)
        hit = attempt(c)
        if hit is not None:
            better = _largest_count(candidate, attempt, probe + 1, failed_at - 1)
            return better or (c, hit)
        if probe <= lo:
            return None
        failed_at, offset = probe, offset * 2 + 1


def _is_extended(outcome, claim: ResourceClaim) -> bool:
    """The claim the scheduler makes for the pod's extended resources (DRAExtendedResource):
    a user changes it through the pod's containers."""
    extended = outcome.pod_claims.extended
    return extended is not None and extended.claim is claim and not extended.fixed


def _extended_count_search(outcome, index: int, request, extended):
    """reduce-count for the extended resource claim: the container asking for the devices
    asks for fewer (its ``resources``), the largest count that fits, as ``_count_search``."""
    from allocator.features.extendedresources import with_fewer_devices

    def candidate(count: int) -> _Candidate | None:
        found = with_fewer_devices(extended, request.name, count)
        if found is None:
            return None
        claims = list(outcome.pod_claims.claims)
        if found.extended.claim is None:
            del claims[index]
        else:
            claims[index] = found.extended.claim
        return _Candidate(
            "reduce-count",
            found.change,
            f"reduce {found.resource} of container {found.container} of pod "
            f"{outcome.pod.key} from {found.before} to {found.after} (request {request.name} "
            f"of claim {extended.claim.key}: {request.exactly.count} to {count} devices, the "
            "largest count that fits)",
            pod=found.pod,
            claims=claims,
            extended=found.extended,
        )

    def search(attempt):
        lo, hi, best = 1, request.exactly.count - 1, None
        while lo <= hi:
            mid = (lo + hi + 1) // 2
            c = candidate(mid)
            hit = attempt(c) if c is not None else None
            if hit is not None:
                best = (c, hit)
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    return search


def _selectors(ctx: _Context, outcome) -> list[_Candidate]:
    """Relax one selector expression: drop one conjunct of ``a && b`` (or the whole expression
    when it has one), a request's own selectors first, then its DeviceClass's."""
    preferred = {
        (g.detail or {}).get("expression")
        for g in _funnel_groups(ctx, outcome, "selector", "cel-error")
    }
    own, of_class = [], []
    classes_seen: set[str] = set()
    for index, claim in _dfs_claims(ctx, outcome):
        obj, prefix = _claim_object(ctx, claim)
        for ri, k, exact, path, label in _selector_slots(claim):
            for si, selector in enumerate(exact.selectors):
                for dropped, relaxed in _relaxations(selector.cel):
                    changed = _copy_claim(claim)
                    rest = _slot(changed, ri, k).selectors
                    _set_selector(rest, si, relaxed)
                    claims = _with_claim(outcome, index, changed)
                    own.append(
                        _Candidate(
                            "relax-selector",
                            {
                                "object": obj,
                                "field": f"{prefix}.{path}.selectors",
                                "op": "set",
                                "value": [s.raw for s in rest],
                            },
                            f"relax selector {selector.cel!r} of request {label} of claim "
                            f"{claim.key}: drop {dropped!r}{_condition_on(dropped)}",
                            claims=claims,
                            order=0 if selector.cel in preferred else 1,
                            gives_up=_other_hardware(ctx, dropped),
                            # A wider selector asks as many devices as before: targets without
                            # room for that many refuse it still.
                            targets=_room_for(ctx, claims),
                        )
                    )
            device_class = ctx.allocator.device_classes.get(exact.device_class_name)
            if device_class is None or device_class.name in classes_seen:
                continue
            classes_seen.add(device_class.name)
            for si, selector in enumerate(device_class.selectors):
                for dropped, relaxed in _relaxations(selector.cel):
                    rest = list(device_class.selectors)
                    if relaxed is None and len(rest) == 1:
                        # A class without selectors selects every driver's devices: keep the
                        # driver whose attributes the expression read.
                        relaxed = _driver_expression(ctx, dropped)
                    _set_selector(rest, si, relaxed)
                    of_class.append(
                        _Candidate(
                            "relax-selector",
                            {
                                "object": f"DeviceClass {device_class.name}",
                                "field": "spec.selectors",
                                "op": "set",
                                "value": [s.raw for s in rest],
                            },
                            f"relax selector {selector.cel!r} of DeviceClass "
                            f"{device_class.name}: drop {dropped!r}{_condition_on(dropped)}",
                            override=_class_override(ctx, device_class, rest),
                            order=0 if selector.cel in preferred else 1,
                            gives_up=_other_hardware(ctx, dropped),
                            targets=_room_for(ctx, outcome.pod_claims.claims),
                        )
                    )
    own.sort(key=lambda c: c.order)
    of_class.sort(key=lambda c: c.order)
    return (own + of_class)[: MAX_PER_KIND + 1]


def _other_hardware(ctx: _Context, dropped: str) -> Callable[[Decision], str]:
    """What the pod's devices are instead of what the dropped expression asked for: ``it would
    get productName "NVIDIA L40S", not "NVIDIA H100 80GB HBM3"`` (the values of the attributes
    the expression reads on the devices the trial picked)."""

    def words(decision: Decision) -> str:
        names = _attributes_read(dropped)
        got: list[str] = []
        for device in _picked_devices(ctx, decision):
            for name in names:
                value = _attribute(device, name)
                if value is not None and str(value) not in got:
                    got.append(str(value))
        asked = _LITERAL.findall(dropped)
        shown = ", ".join(f'"{v}"' for v in got[:3]) or "devices the condition did not admit"
        wanted = f', not "{asked[0][1]}"' if asked else ""
        return f"it would get other hardware than it asked for: {shown}{wanted}"

    return words


_LITERAL = re.compile(r"""==\s*(["'])([^"']*)\1""")


def _picked_devices(ctx: _Context, decision: Decision) -> list:
    """The Device objects of the trial's allocation (in-cluster slices or the target's
    instance type templates)."""
    index = ctx.devices
    out = []
    result = decision.result
    its = (result.instance_types if result is not None else None) or [""]
    for claim in result.claims if result is not None else ():
        for d in claim.devices:
            device = index.get((d.driver, d.pool, d.device)) or index.get(
                (its[0], d.driver, d.device)
            )
            if device is not None:
                out.append(device)
    return out


def _attribute(device, qualified: str):
    value = device.attributes.get(qualified)
    if value is None:
        value = device.attributes.get(qualified.rpartition("/")[2])
    return getattr(value, "value", value)


def _attributes_read(expression: str) -> list[str]:
    names = []
    for m in _ATTRIBUTE.finditer(expression):
        name = m.group(4) or m.group(6)
        qualified = name if "/" in name else f"{m.group(3)}/{name}"
        if qualified not in names:
            names.append(qualified)
    return names


def _other_place(key: str, asked: list, operator: str) -> Callable[[Decision], str]:
    """Where the pod would run instead of where its dropped node selector kept it: ``it would
    run in topology.kubernetes.io/zone us-west-2a, not eu-west-1a``."""

    def words(decision: Decision) -> str:
        requirements = decision.requirements
        got = sorted(requirements.get(key).values()) if requirements.has(key) else []
        shown = " or ".join(got[:3]) if got else "any value"
        wanted = " ".join(str(v) for v in asked) or operator
        verb = "not" if operator in ("In", "Exists") else "despite"
        return f"it would run in {key} {shown}, {verb} {wanted} as it asked"

    return words


_ATTRIBUTE = re.compile(
    r"""\b(attributes|capacity)\s*\[\s*(["'])([^"']+)\2\s*\]\s*"""
    r"""(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(["'])([^"']+)\5\s*\])"""
)


def _condition_on(expression: str) -> str:
    """``, the condition on gpu.nvidia.com/productName``: the device attributes and capacities
    the dropped expression reads, by their qualified names (empty when it reads none)."""
    names = _attributes_read(expression)
    if not names:
        return ""
    return f", the condition on {' and '.join(names)}"


def _driver_expression(ctx: _Context, expression: str) -> str | None:
    """``device.driver == "gpu.nvidia.com"`` for the one known driver whose attribute domain
    ``expression`` reads (None when it reads none, or several)."""
    known = {s.driver for s in ctx.snapshot.resource_slices}
    for it in ctx.snapshot.instance_types.values():
        known.update(t.driver for t in it.resource_slice_templates)
    domains = {m.group(3) for m in _ATTRIBUTE.finditer(expression)} & known
    if len(domains) != 1:
        return None
    return f'device.driver == "{domains.pop()}"'


def _selector_slots(claim: ResourceClaim):
    """(request index, subrequest index or None, the exact request, its path under
    ``devices``, its name) for every request and FirstAvailable subrequest of the claim."""
    for ri, request in enumerate(claim.spec.requests):
        if request.exactly is not None:
            yield ri, None, request.exactly, f"requests[{ri}].exactly", request.name
        for k, sub in enumerate(request.first_available):
            yield (
                ri,
                k,
                sub.request,
                f"requests[{ri}].firstAvailable[{k}]",
                (f"{request.name}/{sub.name}"),
            )


def _slot(claim: ResourceClaim, ri: int, k: int | None):
    request = claim.spec.requests[ri]
    return request.exactly if k is None else request.first_available[k].request


def _set_selector(selectors: list, index: int, expression: str | None) -> None:
    """Replace selector ``index`` by ``expression`` (None: remove it)."""
    if expression is None:
        del selectors[index]
    else:
        selectors[index] = DeviceSelector(cel=expression, raw={"cel": {"expression": expression}})


def _relaxations(expression: str | None) -> list[tuple[str, str | None]]:
    """(what is dropped, the relaxed expression or None) for one selector. A conjunct that
    only names the driver is kept: without it any driver's devices would match."""
    if not expression:
        return []
    parts = _conjuncts(expression)
    if len(parts) == 1:
        return [] if _driver_only(expression) else [(expression, None)]
    out = []
    for i, part in enumerate(parts):
        if _driver_only(part):
            continue
        rest = [p for j, p in enumerate(parts) if j != i]
        out.append((part, " && ".join(rest)))
    return out


def _conjuncts(expression: str) -> list[str]:
    """Top-level ``&&`` operands (outside brackets and string literals)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(expression):
        ch = expression[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expression.startswith("&&", i):
            parts.append(expression[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    parts.append(expression[start:].strip())
    return [p for p in parts if p]


def _driver_only(expression: str) -> bool:
    return (
        "device.driver" in expression
        and "attributes" not in expression
        and ("capacity" not in expression)
    )


def _class_override(ctx: _Context, device_class, rest):
    @contextmanager
    def scope() -> Iterator[None]:
        classes = ctx.allocator.device_classes
        classes[device_class.name] = dataclasses.replace(device_class, selectors=rest)
        try:
            yield
        finally:
            classes[device_class.name] = device_class

    return scope


def _constraints(ctx: _Context, outcome) -> list[_Candidate]:
    out = []
    for index, claim in _dfs_claims(ctx, outcome):
        obj, prefix = _claim_object(ctx, claim)
        for ci, constraint in enumerate(claim.spec.constraints):
            changed = _copy_claim(claim)
            del changed.spec.constraints[ci]
            which = (
                f"matchAttribute {constraint.match_attribute}"
                if constraint.match_attribute
                else f"distinctAttribute {constraint.distinct_attribute}"
            )
            out.append(
                _Candidate(
                    "drop-constraint",
                    {
                        "object": obj,
                        "field": f"{prefix}.constraints",
                        "op": "set",
                        "value": [c.raw for c in changed.spec.constraints],
                    },
                    f"drop constraint {which} of claim {claim.key} (no set of devices meets it)",
                    claims=_with_claim(outcome, index, changed),
                )
            )
    return out[:MAX_PER_KIND]


def _admin_namespace(ctx: _Context, outcome) -> list[_Candidate]:
    """An admin-access request in a namespace without the admin-access label: label it (a
    cluster admin's change, so ranked with the NodePool ones)."""
    from allocator.features.adminaccess import ADMIN_ACCESS_LABEL, namespace_allows_admin_access

    namespaces = ctx.allocator.namespaces
    wanted = []
    for _, claim in _dfs_claims(ctx, outcome):
        admin = any(r.exactly is not None and r.exactly.admin_access for r in claim.spec.requests)
        allowed = namespace_allows_admin_access(namespaces.get(claim.namespace))
        if admin and not allowed and claim.namespace not in wanted:
            wanted.append(claim.namespace)
    out = []
    for name in wanted:
        before = namespaces.get(name)
        labels = {**(before.labels if before is not None else {}), ADMIN_ACCESS_LABEL: "true"}
        labelled = (
            dataclasses.replace(before, labels=labels)
            if before is not None
            else Namespace(name=name, labels=labels)
        )
        out.append(
            _Candidate(
                "label-namespace",
                {
                    "object": f"Namespace {name}",
                    "field": "metadata.labels",
                    "op": "set",
                    "value": dict(sorted(labels.items())),
                },
                f'label namespace {name} {ADMIN_ACCESS_LABEL}="true" (admin access to devices '
                f"is only allowed in namespaces with that label)",
                override=_namespace_override(ctx, name, labelled),
            )
        )
    return out


def _namespace_override(ctx: _Context, name: str, labelled):
    @contextmanager
    def scope() -> Iterator[None]:
        namespaces = ctx.allocator.namespaces
        missing = object()
        saved = namespaces.get(name, missing)
        namespaces[name] = labelled
        try:
            yield
        finally:
            if saved is missing:
                del namespaces[name]
            else:
                namespaces[name] = saved

    return scope


# --- the pod's workload: topology ----------------------------------------------------------

_ANTI = "podAntiAffinity"
_AFFINITY = "podAffinity"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _topology(ctx: _Context, outcome) -> list[_Candidate]:
    """A required pod anti-affinity or pod affinity term made preferred, a spread constraint's
    maxSkew raised by one or made ScheduleAnyway, for a pod a topology refused. The term is
    the workload's (its replicas carry it, and placed replicas keep the pod away through it),
    so the change is made to every pod of the workload, and verified by re-running the whole
    loop with it (``rerun_only``)."""
    pod = outcome.pod
    if not any("topology" in reason for _, reason in outcome.reasons):
        return []
    spec = (pod.raw or {}).get("spec") or {}
    affinity = spec.get("affinity") or {}
    out: list[_Candidate] = []
    for which, words in ((_ANTI, "pod anti-affinity"), (_AFFINITY, "pod affinity")):
        section = affinity.get(which) or {}
        members = _workload(ctx, pod, ("affinity", which))
        note = _workload_note(pod, members)
        for ti, term in enumerate(section.get(_REQUIRED) or []):
            if not isinstance(term, dict):
                continue
            relaxed = copy.deepcopy(section)
            del relaxed[_REQUIRED][ti]
            if not relaxed[_REQUIRED]:
                del relaxed[_REQUIRED]
            relaxed.setdefault(_PREFERRED, []).append({"weight": 100, "podAffinityTerm": term})
            key = term.get("topologyKey")
            out.append(
                _workload_candidate(
                    "relax-topology",
                    pod,
                    members,
                    f"spec.affinity.{which}",
                    relaxed,
                    f"make the required {words} on {key} of pod {pod.key} preferred (weight "
                    f"100){note}",
                    _ANTI_GIVES_UP if which == _ANTI else _AFFINITY_GIVES_UP,
                    key,
                )
            )
    constraints = spec.get("topologySpreadConstraints") or []
    members = _workload(ctx, pod, ("topologySpreadConstraints",))
    note = _workload_note(pod, members)
    for ci, tsc in enumerate(constraints):
        if not isinstance(tsc, dict) or tsc.get("whenUnsatisfiable") == "ScheduleAnyway":
            continue
        key = tsc.get("topologyKey")
        skew = tsc.get("maxSkew") if isinstance(tsc.get("maxSkew"), int) else 1
        for changed, words in (
            ({**tsc, "maxSkew": skew + 1}, f"raise maxSkew from {skew} to {skew + 1}"),
            ({**tsc, "whenUnsatisfiable": "ScheduleAnyway"}, "make it ScheduleAnyway"),
        ):
            value = [changed if i == ci else c for i, c in enumerate(constraints)]
            out.append(
                _workload_candidate(
                    "relax-topology",
                    pod,
                    members,
                    "spec.topologySpreadConstraints",
                    value,
                    f"{words} in the topology spread constraint on {key} of pod {pod.key}{note}",
                    _SPREAD_GIVES_UP,
                    key,
                )
            )
    return out[: MAX_PER_KIND + 1]


_ANTI_GIVES_UP = "its replicas could then share a {key}, which the anti-affinity kept apart"
_AFFINITY_GIVES_UP = "it could then run outside the {key} of the pods it asked to be near"
_SPREAD_GIVES_UP = "its workload's spread over {key} could then be more uneven than it asked"


def _workload_candidate(kind, pod, members, field_path, value, message, gives_up, key):
    words = gives_up.format(key=key)
    return _Candidate(
        kind,
        {
            "object": f"Pod {pod.key}",
            "field": field_path,
            "op": "set",
            "value": value,
            "objects": [f"Pod {m}" for m in members],
        },
        message,
        scope="pod",
        rerun_only=True,
        gives_up=lambda _decision: words,
    )


def _workload(ctx: _Context, pod: Pod, path: tuple[str, ...]) -> list[str]:
    """The pods of the pod's workload in the snapshot: those of its namespace that carry the
    same topology terms (``path`` under ``spec``), as the replicas of one pod template do.
    Found once per terms (a failed replica of 4,000 asks for the same ones as the others):
    terms written alike are equal."""
    mine = _spec_at(pod, path)
    try:
        written = orjson.dumps(mine, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        written = None
    key = (path, pod.namespace, written)
    found = ctx.workloads.get(key) if written is not None else None
    if found is None:
        found = sorted(
            other.key
            for other in ctx.snapshot.pods
            if other.namespace == pod.namespace and _spec_at(other, path) == mine
        )
        if written is not None:
            ctx.workloads[key] = found
    return list(found)


def _spec_at(pod: Pod, path: tuple[str, ...]):
    node = (pod.raw or {}).get("spec")
    for step in path:
        node = node.get(step) if isinstance(node, dict) else None
    return node


def _workload_note(pod: Pod, members: list[str]) -> str:
    owners = [o for o in pod.owner_references if o.controller] or list(pod.owner_references)
    named = ", ".join(members[:3]) + (f" and {len(members) - 3} more" if len(members) > 3 else "")
    where = (
        f"set in the pod template of {owners[0].kind} {owners[0].name}, which recreates them"
        if owners
        else "the pods are recreated with it"
    )
    return f", in every pod of its workload ({len(members)}: {named}); {where}"


# --- the pod's own host ports ----------------------------------------------------------------


def _port_usages(ctx: _Context) -> list[HostPortUsage]:
    """Every target's host port usage: existing nodes, NodeClaims of the run, and what each
    NodePool's DaemonSet pods hold on a new node."""
    sched = ctx.scheduler
    usages = [t.host_port_usage for t in sched.existing]
    usages += [nc.host_port_usage for nc in sched.node_claims]
    usages += [plan.daemon_host_ports for plan in sched.templates]
    return [u for u in usages if u is not None]


def _host_ports(ctx: _Context, outcome) -> list[_Candidate]:
    """A host port of the pod that another pod holds on a target (an existing node, a NodeClaim
    of the run, a NodePool's new node with its DaemonSet pods): bind another port (the first
    one above it that no pod in reach holds), or bind none. Both change only the pod, so they
    rank with a toleration."""
    pod = outcome.pod
    if not pod.host_ports:
        return []
    usages = _port_usages(ctx)
    out: list[_Candidate] = []
    for cp, port in zip(pod.host_ports, host_ports(pod), strict=True):
        holders: list[str] = []
        for usage in usages:
            conflict = usage.conflicts(pod, (port,))
            if conflict is not None and conflict.holder not in holders:
                holders.append(conflict.holder)
        if not holders:
            continue
        slot = _port_slot(pod, cp)
        if slot is None:
            continue  # not written where a user could change it (no such container port)
        ci, pi = slot
        shown = f"hostPort {cp.host_port}/{cp.protocol} of container {cp.container}"
        more = len(holders) - 3
        named = ", ".join(holders[:3]) + (f" and {more} more" if more > 0 else "")
        held = f"port {cp.host_port}/{cp.protocol} is held by pod {named}" + _owner_note(pod)
        field_path = f"spec.containers[{ci}].ports[{pi}].hostPort"
        free = _free_port(usages, pod, port)
        if free is not None:
            out.append(
                _Candidate(
                    "change-host-port",
                    {"object": f"Pod {pod.key}", "field": field_path, "op": "set", "value": free},
                    f"change {shown} of pod {pod.key} to {free} ({held})",
                    pod=_with_host_port(pod, cp, ci, pi, free),
                )
            )
        out.append(
            _Candidate(
                "change-host-port",
                {"object": f"Pod {pod.key}", "field": field_path, "op": "set", "value": None},
                f"drop {shown} of pod {pod.key}, reaching it through a Service instead ({held})",
                pod=_with_host_port(pod, cp, ci, pi, None),
            )
        )
    return out[: MAX_PER_KIND + 1]


def _owner_note(pod: Pod) -> str:
    """Where the change is made: a pod's container ports cannot change in place, so through
    the pod template of the workload that owns it."""
    owners = [o for o in pod.owner_references if o.controller] or list(pod.owner_references)
    if not owners:
        return "; the pod is recreated with it"
    return f"; set in the pod template of {owners[0].kind} {owners[0].name}, which recreates it"


def _port_slot(pod: Pod, cp) -> tuple[int, int] | None:
    """(container index, port index) of the container port that binds ``cp``."""
    containers = ((pod.raw or {}).get("spec") or {}).get("containers") or []
    for ci, container in enumerate(containers):
        if not isinstance(container, dict) or (container.get("name") or "") != cp.container:
            continue
        for pi, port in enumerate(container.get("ports") or []):
            if (
                isinstance(port, dict)
                and port.get("hostPort") == cp.host_port
                and (port.get("protocol") or "TCP") == cp.protocol
                and (port.get("hostIP") or "") == cp.host_ip
            ):
                return ci, pi
    return None


def _free_port(usages: list[HostPortUsage], pod: Pod, port: HostPort) -> int | None:
    """The first port above ``port`` that no pod in reach binds (nor the pod itself)."""
    taken = {
        (held.port, held.protocol)
        for usage in usages
        for holder, ports in usage.holders().items()
        if holder != pod.key
        for held in ports
    }
    taken |= {(p.host_port, p.protocol) for p in pod.host_ports}
    for number in range(port.port + 1, _MAX_PORT + 1):
        if (number, port.protocol) not in taken:
            return number
    return None


_MAX_PORT = 65535


def _with_host_port(pod: Pod, cp, ci: int, pi: int, number: int | None) -> Pod:
    """The pod binding ``number`` instead of ``cp`` (None: no host port), its spec to match
    (the scheduler's caches read the spec)."""
    raw = copy.deepcopy(pod.raw)
    entry = raw["spec"]["containers"][ci]["ports"][pi]
    if number is None:
        entry.pop("hostPort", None)
        ports = tuple(p for p in pod.host_ports if p is not cp)
    else:
        entry["hostPort"] = number
        ports = tuple(
            dataclasses.replace(p, host_port=number) if p is cp else p for p in pod.host_ports
        )
    return dataclasses.replace(pod, host_ports=ports, raw=raw)


# --- requirements: the pod's, then the NodePools' ------------------------------------------


def _pod_requirements(ctx: _Context, outcome) -> list[_Candidate]:
    pod = outcome.pod
    out = []
    for key in sorted(pod.node_selector):
        rest = {k: v for k, v in pod.node_selector.items() if k != key}
        out.append(
            _Candidate(
                "nodepool-requirement",
                {
                    "object": f"Pod {pod.key}",
                    "field": "spec.nodeSelector",
                    "op": "set",
                    "value": rest,
                },
                f"drop the pod's node selector {key}={pod.node_selector[key]} (pod {pod.key})",
                pod=dataclasses.replace(pod, node_selector=rest),
                gives_up=_other_place(key, [pod.node_selector[key]], "In"),
            )
        )
    affinity = pod.required_node_affinity
    terms = (affinity or {}).get("nodeSelectorTerms") or []
    if len(terms) == 1 and isinstance(terms[0], dict):
        expressions = terms[0].get("matchExpressions") or []
        for ei, expr in enumerate(expressions):
            new = copy.deepcopy(affinity)
            del new["nodeSelectorTerms"][0]["matchExpressions"][ei]
            if not new["nodeSelectorTerms"][0].get("matchExpressions") and not new[
                "nodeSelectorTerms"
            ][0].get("matchFields"):
                new = None  # an empty term matches nothing: drop the affinity instead
            out.append(
                _Candidate(
                    "nodepool-requirement",
                    {
                        "object": f"Pod {pod.key}",
                        "field": "spec.affinity.nodeAffinity."
                        "requiredDuringSchedulingIgnoredDuringExecution",
                        "op": "set",
                        "value": new,
                    },
                    f"drop the pod's required node affinity {_req_text(expr)} (pod {pod.key})",
                    pod=dataclasses.replace(pod, required_node_affinity=new),
                    gives_up=_other_place(
                        str(expr.get("key")), expr.get("values") or [], str(expr.get("operator"))
                    ),
                )
            )
    return out[: MAX_PER_KIND + 1]


def _req_text(req: dict) -> str:
    values = req.get("values") or []
    shown = f" [{' '.join(str(v) for v in values)}]" if values else ""
    return f"{req.get('key')} {req.get('operator')}{shown}"


def _pod_keys(pod: Pod) -> set[str]:
    keys = set(pod.node_selector)
    for term in (pod.required_node_affinity or {}).get("nodeSelectorTerms") or []:
        for expr in (term or {}).get("matchExpressions") or []:
            keys.add(expr.get("key"))
    return keys


def _pool_requirements(ctx: _Context, outcome) -> list[_Candidate]:
    """Drop one requirement of a NodePool, where that matters for this pod: it names a key the
    pod selects on, or it shuts out catalog instance types."""
    out = []
    pod_keys = _pod_keys(outcome.pod)
    for plan in ctx.scheduler.templates:
        if untolerated_taint(outcome.pod.tolerations, plan.taints) is not None:
            continue  # the pod cannot go there whatever the requirements
        allowed = {i.name for i in plan.instance_types}
        for ri, req in enumerate(plan.pool.requirements):
            rest = [r for i, r in enumerate(plan.pool.requirements) if i != ri]
            pool = dataclasses.replace(plan.pool, requirements=rest)
            widened = _replan(ctx, plan, pool)
            gains = {i.name for i in widened.instance_types} - allowed
            if req.get("key") not in pod_keys and not gains:
                continue
            out.append(
                _Candidate(
                    "nodepool-requirement",
                    {
                        "object": f"NodePool {plan.pool.name}",
                        "field": "spec.template.spec.requirements",
                        "op": "set",
                        "value": rest,
                    },
                    f"drop requirement {_req_text(req)} of NodePool {plan.pool.name}",
                    override=_plan_override(ctx, plan, widened),
                    targets=_pool_targets(plan),
                )
            )
    return out[: MAX_PER_KIND + 1]


def _asked_values(pod: Pod) -> list[tuple[str, list[str]]]:
    """(key, values) the pod's node selector and its one required node affinity term ask
    for with ``In``."""
    asked = [(k, [v]) for k, v in sorted(pod.node_selector.items())]
    terms = (pod.required_node_affinity or {}).get("nodeSelectorTerms") or []
    if len(terms) == 1 and isinstance(terms[0], dict):
        for expr in terms[0].get("matchExpressions") or []:
            if isinstance(expr, dict) and expr.get("operator") == "In" and expr.get("values"):
                asked.append((str(expr.get("key")), sorted(str(v) for v in expr["values"])))
    return asked


def _pool_allows_asked(ctx: _Context, outcome) -> list[_Candidate]:
    """The pod asks for a label value (a zone, an instance family ...) that a NodePool's
    requirements shut out: allow it in the NodePool, when an instance type of the catalog has
    it (the supply side: the pod keeps what it asked for)."""
    pod = outcome.pod
    out: list[_Candidate] = []
    for plan in ctx.scheduler.templates:
        if untolerated_taint(pod.tolerations, plan.taints) is not None:
            continue
        for key, values in _asked_values(pod):
            if key == LABEL_HOSTNAME:
                continue
            asked = f"pod {pod.key} asks for {key} In [{' '.join(values)}]"
            found = _allowing(ctx, plan, key, values, asked)
            if found is not None:
                out.append(found)
    return out[:MAX_PER_KIND]


def _volume_zones(ctx: _Context, outcome) -> list[_Candidate]:
    """A volume that pins the pod (a bound PersistentVolume's node affinity, an unbound claim's
    StorageClass ``allowedTopologies``) to a zone, or another label value, that a NodePool's
    requirements shut out: allow that value in the NodePool (the volume cannot move)."""
    pod = outcome.pod
    alternatives = ctx.scheduler.state.volumes.alternatives(pod)
    out: list[_Candidate] = []
    for plan in ctx.scheduler.templates:
        if untolerated_taint(pod.tolerations, plan.taints) is not None:
            continue
        for alternative in alternatives:
            for pinned in alternative.requirements:
                if pinned.key == LABEL_HOSTNAME or pinned.operator() != "In":
                    continue
                values = sorted(pinned.values())
                sources = "; ".join(str(src) for src in alternative.sources)
                why = f"{sources} pins the pod to {pinned.key} In [{' '.join(values)}]"
                found = _allowing(ctx, plan, pinned.key, values, why)
                if found is not None:
                    out.append(found)
    return out[:MAX_PER_KIND]


def _affinity_domains(ctx: _Context, outcome) -> list[_Candidate]:
    """A required pod affinity on a key other than the hostname (``zone``: run near the
    kv-cache), whose pods run only in values of the key that a NodePool's requirements shut
    out: allow one of those values in the NodePool (the pods it must be near cannot move; the
    pod keeps its affinity)."""
    pod = outcome.pod
    if pod.pod_affinity is None or not any("topology" in r for _, r in outcome.reasons):
        return []
    out: list[_Candidate] = []
    for term in pod.pod_affinity.required:
        if term.topology_key == LABEL_HOSTNAME or term.label_selector is None:
            continue
        if term.namespace_selector is not None:
            continue  # which namespaces it names is the namespaces' labels: not guessed here
        near = _running_near(ctx, pod, term)
        if not near:
            continue
        values = sorted(near)
        for plan in ctx.scheduler.templates:
            if untolerated_taint(pod.tolerations, plan.taints) is not None:
                continue
            pods = ", ".join(sorted({p for v in values for p in near[v]})[:3])
            why = (
                f"pod {pod.key} must run in the {term.topology_key} of {pods} by its required "
                "pod affinity"
            )
            found = _allowing(ctx, plan, term.topology_key, values, why)
            if found is not None:
                out.append(found)
    return out[:MAX_PER_KIND]


def _allowing(ctx: _Context, plan, key: str, values: list[str], why: str) -> _Candidate | None:
    """Allow one of ``values`` of ``key`` in the NodePool of ``plan``, whose requirements shut
    them all out (``why``: what asks for them); None when the NodePool allows one already
    (something else refuses the pod) or no instance type of the catalog offers any."""
    if not plan.requirements.has(key):
        return None
    allowed = plan.requirements.get(key)
    if any(allowed.has(v) for v in values):
        return None
    found = _allow_value(ctx, plan, key, values)
    if found is None:
        return None
    value, widened, replacement = found
    return _Candidate(
        "nodepool-requirement",
        {
            "object": f"NodePool {plan.pool.name}",
            "field": "spec.template.spec.requirements",
            "op": "set",
            "value": widened,
        },
        f"allow {key} {value} in NodePool {plan.pool.name} ({why}, which the NodePool's "
        f"requirement {allowed} shuts out)",
        override=_plan_override(ctx, plan, replacement),
        targets=_pool_targets(plan),
    )


def _running_near(ctx: _Context, pod: Pod, term) -> dict[str, list[str]]:
    """The values of ``term``'s topology key of the nodes where the pods it selects run (bound
    in the snapshot), each with those pods."""
    namespaces = set(term.namespaces) or {pod.namespace}
    found: dict[str, list[str]] = {}
    for other in ctx.snapshot.pods:
        if other is pod or other.node_name is None or other.namespace not in namespaces:
            continue
        if not term.label_selector.matches(other.labels):
            continue
        node = ctx.snapshot.nodes.get(other.node_name)
        value = node.labels.get(term.topology_key) if node is not None else None
        if value is not None:
            found.setdefault(value, []).append(other.key)
    return found


def _allow_value(ctx: _Context, plan, key: str, values: list[str]):
    """(value, the NodePool's requirements widened to allow it, its replanned template) for the
    first of ``values`` that an instance type of the widened NodePool offers; None if none."""
    for value in values:
        widened = []
        for req in plan.pool.requirements:
            if not isinstance(req, dict) or req.get("key") != key:
                widened.append(req)
                continue
            op = req.get("operator")
            if op == "In":
                widened.append({**req, "values": sorted({*req.get("values", []), value})})
            elif op == "NotIn":
                kept = [v for v in req.get("values", []) if v != value]
                if kept:
                    widened.append({**req, "values": kept})
            elif op == "Exists":
                widened.append(req)
            # DoesNotExist / Gt / Lt that shut it out: dropped.
        pool = dataclasses.replace(plan.pool, requirements=widened)
        replacement = _replan(ctx, plan, pool)
        if any(
            i.requirements.has(key) and i.requirements.get(key).has(value)
            for i in replacement.instance_types
        ):
            return value, widened, replacement
    return None


def _min_values(ctx: _Context, outcome) -> list[_Candidate]:
    """A NodePool requirement's ``minValues`` (Strict) that the instance types fitting the pod
    fall short of: the largest lower ``minValues`` that places the pod (the smallest change)."""
    out: list[_Candidate] = []
    for plan in ctx.scheduler.templates:
        if untolerated_taint(outcome.pod.tolerations, plan.taints) is not None:
            continue
        for ri, req in enumerate(plan.pool.requirements):
            if not isinstance(req, dict) or not isinstance(req.get("minValues"), int):
                continue
            if req["minValues"] <= 1:
                continue
            out.append(
                _Candidate(
                    "lower-min-values",
                    {},
                    "",
                    search=_min_values_search(ctx, plan, ri),
                    scope="nodepool",
                )
            )
    return out[:MAX_PER_KIND]


def _min_values_search(ctx: _Context, plan, ri: int):
    req = plan.pool.requirements[ri]
    before = req["minValues"]

    def candidate(count: int) -> _Candidate:
        lowered = [dict(r) for r in plan.pool.requirements]
        lowered[ri]["minValues"] = count
        replacement = _replan(ctx, plan, dataclasses.replace(plan.pool, requirements=lowered))
        return _Candidate(
            "lower-min-values",
            {
                "object": f"NodePool {plan.pool.name}",
                "field": f"spec.template.spec.requirements[{ri}].minValues",
                "op": "set",
                "value": count,
            },
            f"lower minValues of requirement {_req_text(req)} of NodePool {plan.pool.name} "
            f"from {before} to {count} (the instance types that fit the pod offer fewer "
            f"{req.get('key')} values; the largest minValues that places it)",
            override=_plan_override(ctx, plan, replacement),
            targets=_pool_targets(plan),
        )

    return lambda attempt: _largest_count(candidate, attempt, 1, before - 1)


def _replan(ctx: _Context, plan, pool: NodePool):
    """The NodeClaimTemplate of a changed NodePool (requirements recomputed, catalog refiltered).
    The same change is asked for by many failed pods: computed once per run."""
    key = (plan.pool.name, json.dumps(pool.requirements, sort_keys=True, default=str))
    cached = ctx.replans.get(key)
    if cached is not None:
        return cached
    reqs = node_pool_requirements(pool)
    its = [i for i in ctx.infos.values() if reqs.intersects(i.requirements) is None]
    replacement = dataclasses.replace(plan, pool=pool, requirements=reqs, instance_types=its)
    ctx.replans[key] = replacement
    return replacement


def _pool_targets(plan) -> TrialTargets:
    """A NodePool's change reaches only the new NodeClaims made from it: the NodeClaims this
    run made keep the requirements, instance types and bindings they were made with."""
    return TrialTargets(node_pools=frozenset({plan.name}))


def _plan_override(ctx: _Context, plan, replacement):
    """The NodePool plan replaced for the trial; attribute bindings follow its instance types
    (setup builds them from each NodePool's types)."""

    @contextmanager
    def scope() -> Iterator[None]:
        from allocator.bindings import AttributeBindings
        from allocator.scheduling.initialization import binding_instance_types

        sched, allocator = ctx.scheduler, ctx.allocator
        saved, saved_bindings = sched.templates, allocator.bindings
        sched.templates = [replacement if p is plan else p for p in saved]
        if {i.name for i in replacement.instance_types} - {i.name for i in plan.instance_types}:
            per_pool = {p.pool.name: p.instance_types for p in sched.templates}
            allocator.bindings = AttributeBindings.build(
                binding_instance_types(ctx.snapshot, per_pool)
            )
        try:
            yield
        finally:
            sched.templates, allocator.bindings = saved, saved_bindings

    return scope


def _pool_limits(ctx: _Context, outcome) -> list[_Candidate]:
    """Raise a NodePool's limits just enough for a NodeClaim the pod fits: first for the
    smallest allowed instance type that has the pod's resources but does not fit under the
    limits, then (when that does not place it, say its devices are too few) for the largest."""
    out = []
    sched = ctx.scheduler
    requests = pod_requests(outcome.pod)
    for plan in sched.templates:
        if plan.limits is None or not plan.instance_types:
            continue
        # A NodePool whose taint the pod does not tolerate: a raise is only worth trying
        # together with the toleration (a two-change suggestion).
        tainted = untolerated_taint(outcome.pod.tolerations, plan.taints) is not None
        remaining = plan.remaining()
        keys = sorted(plan.limits)
        over = [
            i
            for i in plan.instance_types
            if fits(requests, i.capacity)
            and any(i.capacity.get(n, 0) > remaining.get(n, 0) for n in keys)
        ]
        over.sort(key=lambda i: (tuple(i.capacity.get(n, 0) for n in keys), i.name))
        sizes = [over[0].capacity] if over else []
        biggest = max_capacity(plan.instance_types)
        if biggest not in sizes:
            sizes.append(biggest)
        steps = [c for c in (_limit_raise(ctx, plan, remaining, size) for size in sizes) if c]
        if steps:
            out.append(
                _Candidate(
                    "nodepool-limit",
                    {},
                    "",
                    search=_first_that_places(steps),
                    scope="nodepool",
                    alternatives=steps,
                    alone=not tainted,
                )
            )
    return out[:MAX_PER_KIND]


def _limit_raise(ctx: _Context, plan, remaining, capacity) -> _Candidate | None:
    """The NodePool's limits raised so that a node of ``capacity`` fits under them."""
    raised = dict(plan.limits)
    grew = []
    for name, limit in plan.limits.items():
        # A node count is used up by one more node, not by the instance type's size.
        needed = 1000 if name == NODES else capacity.get(name, 0)
        short = needed - remaining.get(name, 0)
        if short > 0:
            raised[name] = _round_up(name, limit + short)
            short = raised[name] - limit
            grew.append(
                f"{name} from {format_quantity(name, limit)} to "
                f"{format_quantity(name, raised[name])} "
                f"(+{format_quantity(name, short)})"
            )
    if not grew:
        return None
    value = {name: format_quantity(name, v) for name, v in sorted(raised.items())}
    return _Candidate(
        "nodepool-limit",
        {
            "object": f"NodePool {plan.pool.name}",
            "field": "spec.limits",
            "op": "set",
            "value": value,
        },
        f"raise the limits of NodePool {plan.pool.name}: {', '.join(grew)}",
        override=_plan_override(ctx, plan, dataclasses.replace(plan, limits=raised)),
        targets=_pool_targets(plan),
    )


def _first_that_places(steps: list[_Candidate]):
    """A search over alternatives, smallest change first: the first that places the pod."""

    def search(attempt):
        seen = set()
        for c in steps:
            key = repr(c.change)
            if key in seen:
                continue
            seen.add(key)
            hit = attempt(c)
            if hit is not None:
                return c, hit
        return None

    return search


def _round_up(name: str, milli: int) -> int:
    """A limit a person would write: whole units (cpu, pods ...), whole Gi for byte sizes."""
    step = 1000 * 2**30 if name.startswith(_BINARY) else 1000
    return -(-milli // step) * step


def _instance_types(ctx: _Context, outcome) -> list[_Candidate]:
    """Catalog instance types no NodePool allows, cheapest first: widen the first NodePool the
    pod tolerates so that it allows the type. ``instance-type-resources`` when the pod's cpu /
    memory fit no allowed type but fit this one, else ``add-instance-type``. For a pod that
    needs devices, types whose drivers publish devices are tried before those without any; a
    trial counts only when the pod's NodeClaim could be of the type the suggestion names."""
    sched = ctx.scheduler
    plans = [
        p for p in sched.templates if untolerated_taint(outcome.pod.tolerations, p.taints) is None
    ]
    if not plans:
        return []
    allowed = {i.name for p in sched.templates for i in p.instance_types}
    requests = pod_requests(outcome.pod)
    allowed_types = [i for p in plans for i in p.instance_types]
    fits_allowed = any(fits(requests, i.capacity) for i in allowed_types)
    needs_devices = any(c.spec.requests for _, c in _dfs_claims(ctx, outcome))
    plan = plans[0]
    # Priced as the NodePool would buy it: its zones and capacity types select the offerings.
    offering_reqs = Requirements.from_node_selector_requirements(
        [
            {k: v for k, v in r.items() if k in ("key", "operator", "values")}
            for r in plan.pool.requirements
            if isinstance(r, dict) and r.get("key") in _OFFERING_KEYS
        ]
    )
    priced = []
    for name, info in ctx.infos.items():
        if name in allowed:
            continue
        price = cheapest_offering(info, offering_reqs)
        if price is not None and fits(requests, info.capacity):
            deviceless = needs_devices and not _has_template_devices(info)
            priced.append((deviceless, price, name, info))
    priced.sort(key=lambda e: (e[0], e[1], e[2]))
    out = []
    for _, price, name, info in priced[:MAX_PER_KIND]:
        widened = _widen(plan.pool.requirements, info)
        pool = dataclasses.replace(plan.pool, requirements=widened)
        replacement = _replan(ctx, plan, pool)
        if name not in {i.name for i in replacement.instance_types}:
            continue
        if not allowed_types:
            kind = "add-instance-type"
            why = f"NodePool {plan.pool.name} allows no instance type of the catalog"
        elif fits_allowed:
            kind = "add-instance-type"
            why = "no allowed instance type has enough devices"
        else:
            kind = "instance-type-resources"
            why = f"no allowed instance type has the pod's resources ({_resources(requests)})"
        out.append(
            _Candidate(
                kind,
                {
                    "object": f"NodePool {plan.pool.name}",
                    "field": "spec.template.spec.requirements",
                    "op": "set",
                    "value": widened,
                },
                f"allow instance type {name} (${price:g}/h) in NodePool {plan.pool.name}: {why}",
                override=_plan_override(ctx, plan, replacement),
                accept=_lands_on(name),
                targets=_pool_targets(plan),
            )
        )
    return out


_OFFERING_KEYS = ("karpenter.sh/capacity-type", "topology.kubernetes.io/zone")


def _has_template_devices(info) -> bool:
    return any(t.devices for t in info.it.resource_slice_templates)


def _lands_on(name: str) -> Callable[[object], bool]:
    """The trial's NodeClaim can be of instance type ``name`` (the DFS found the devices on it,
    or the pod needs none and the type is among the NodeClaim's candidates)."""

    def check(decision: Decision) -> bool:
        result = decision.result
        if result is not None and result.claims:
            return name in result.instance_types
        return name in decision.target.instance_types

    return check


def _resources(requests) -> str:
    return ", ".join(
        f"{k}={format_quantity(k, v)}" for k, v in sorted(requests.items()) if k != "pods"
    )


def _widen(requirements: list[dict], info) -> list[dict]:
    """The NodePool's requirements changed as little as possible to admit ``info``."""
    out = []
    for req in requirements:
        key = req.get("key")
        single = Requirements.from_node_selector_requirements(
            [{k: v for k, v in req.items() if k in ("key", "operator", "values")}]
        )
        if single.intersects(info.requirements) is None:
            out.append(req)
            continue
        own = info.requirements.get(key) if info.requirements.has(key) else None
        value = own.any() if own is not None else None
        op = req.get("operator")
        if op == "In" and value is not None:
            out.append({**req, "values": sorted({*req.get("values", []), value})})
        elif op == "NotIn" and own is not None:
            kept = [v for v in req.get("values", []) if not own.has(v)]
            if kept:
                out.append({**req, "values": kept})
        # Exists / DoesNotExist / Gt / Lt that shut it out: dropped.
    return out


# --- other workloads: free held devices ----------------------------------------------------


def _free_devices(ctx: _Context, outcome) -> list[_Candidate]:
    """Devices held by claims of running pods: delete those pods (as ``--disrupt`` frees
    them). One holding claim at a time, fewest pods first; then every holder on one node."""
    if not _devices_refused(outcome) and not _fits_a_node_when_empty(ctx, outcome.pod):
        # Deleting pods frees devices and node resources on existing nodes only: a pod no
        # target refused over devices, and too large for every existing node even when
        # empty, cannot be helped by it.
        return []
    holders = _holders(ctx, outcome)
    if not holders:
        return []
    out = []
    singles = sorted(holders, key=lambda h: (len(h[1]), h[0].key))[:MAX_PER_KIND]
    groups = [[h] for h in singles]
    by_node: dict[str, list] = {}
    for h in holders:
        by_node.setdefault(h[2] or "", []).append(h)
    for node, held in sorted(by_node.items()):
        if len(held) > 1 and node:
            groups.append(held)
    for group in groups[: MAX_PER_KIND + 2]:
        pods = sorted({p for _, ps, _ in group for p in ps})
        devices = {d.device_id for c, _, _ in group for d in c.allocation.devices}
        claims = ", ".join(c.key for c, _, _ in group)
        objects = [f"Pod {p}" for p in pods]
        out.append(
            _Candidate(
                "free-device",
                {"object": objects[0], "op": "delete", "objects": objects},
                f"free {len(devices)} devices held by claim {claims}: delete pod {', '.join(pods)}",
                override=_free_override(ctx, devices, pods),
                counting=False,
                targets=_freed_on(ctx, devices, pods),
            )
        )
    return out


def _freed_on(ctx: _Context, devices: set, pods: list[str]) -> TrialTargets | None:
    """The existing nodes whose devices and resources deleting ``pods`` gives back: their
    nodes, and those of the slices the freed devices are published in (None when a freed
    device is not a node's own: a network-attached one may serve any target)."""
    nodes = {ctx.pods_by_key[p].node_name for p in pods if p in ctx.pods_by_key}
    for device in devices:
        node = ctx.device_nodes.get(device, None)
        if node is None:
            return None
        nodes.add(node)
    nodes.discard(None)
    return TrialTargets(nodes=frozenset(nodes))


def _fits_a_node_when_empty(ctx: _Context, pod: Pod) -> bool:
    requests = {k: v for k, v in pod_requests(pod).items() if k in _REQUEST_STEPS}
    return any(fits(requests, t.allocatable) for t in ctx.scheduler.existing)


def _holders(ctx: _Context, outcome) -> list[tuple[ResourceClaim, list[str], str | None]]:
    """(claim, pods it is reserved for, their node) for in-cluster claims whose devices the run
    counts as allocated, reserved only for bound pods (not pods of this run)."""
    preallocated = ctx.allocator.tracker.preallocated
    pending = {p.key for p in ctx.run.pods.pending}
    wanted = _drivers_of_interest(ctx, outcome)
    named = {
        h.get("claim")
        for g in _funnel_groups(ctx, outcome, "allocated")
        for h in (g.detail or {}).get("holders") or ()
        if isinstance(h, dict)
    }
    own = {c.key for c in outcome.pod_claims.claims}
    out = []
    for claim in ctx.snapshot.resource_claims.values():
        if claim.allocation is None or claim.key in own:
            continue
        if named and claim.key not in named:
            continue
        devices = [d for d in claim.allocation.devices if d.device_id in preallocated]
        if not devices or (wanted and not any(d.driver in wanted for d in devices)):
            continue
        pods = [
            f"{claim.namespace}/{r.name}"
            for r in claim.reserved_for
            if r.resource == "pods" and r.api_group in ("", None)
        ]
        # A pod of this run holds nothing to give back. A reserving pod the snapshot left out
        # (only the claims were exported) is still the one to delete.
        if not pods or any(p in pending for p in pods):
            continue
        nodes = {ctx.pods_by_key[p].node_name for p in pods if p in ctx.pods_by_key}
        out.append((claim, pods, nodes.pop() if len(nodes) == 1 else None))
    return out


def _drivers_of_interest(ctx: _Context, outcome) -> set[str]:
    """Drivers the pod's requests may use, read off their DeviceClass selectors (empty: any)."""
    drivers = set()
    known = {s.driver for s in ctx.snapshot.resource_slices}
    for _, claim in _dfs_claims(ctx, outcome):
        for request in claim.spec.requests:
            subs = (
                [request.exactly]
                if request.exactly
                else [s.request for s in request.first_available]
            )
            for sub in subs:
                dc = ctx.allocator.device_classes.get(sub.device_class_name)
                text = " ".join(s.cel or "" for s in (dc.selectors if dc else ()))
                text += " ".join(s.cel or "" for s in sub.selectors)
                found = {d for d in known if f'"{d}"' in text or f"'{d}'" in text}
                if not found:
                    return set()
                drivers |= found
    return drivers


def _free_override(ctx: _Context, devices: set, pods: list[str]):
    @contextmanager
    def scope() -> Iterator[None]:
        tracker = ctx.allocator.tracker
        saved = tracker.preallocated
        tracker.preallocated = saved - devices
        # The shared-counter ledger seeds the same devices (DRAPartitionableDevices).
        ledgers = []
        features = ctx.allocator.features
        if features is not None:
            seed = features.counters.seed
            ledgers.append((seed, seed & devices))
            seed -= devices
        # The deleted pods' requests go back to their nodes.
        returned = []
        by_node = {t.node_name: t for t in ctx.scheduler.existing if t.node_name}
        for key in pods:
            pod = ctx.pods_by_key.get(key)
            target = by_node.get(pod.node_name) if pod is not None else None
            if target is None:
                continue
            for name, value in pod_requests(pod).items():
                target.available[name] = target.available.get(name, 0) + value
                returned.append((target, name, value))
        try:
            yield
        finally:
            tracker.preallocated = saved
            for seed, removed in ledgers:
                seed |= removed
            for target, name, value in returned:
                target.available[name] -= value

    return scope


# --- the funnel the loop recorded ---------------------------------------------------------


def _funnel_groups(ctx: _Context, outcome: PodOutcome, *reasons: str) -> list[RejectionGroup]:
    """Rejection groups of the pod's funnels with these reasons, in the order tried."""
    return [g for f in ctx.distinct_funnels(outcome) for g in f.rejections if g.reason in reasons]
