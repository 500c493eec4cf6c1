"""The device check protocol: what a check of the pipeline is, what it may read of the search,
and what it answers.

A check's ``prefilter`` (path-independent) and ``try_add`` either refuse a device with a
``Rejection`` and leave no state behind, or accept it (``try_add`` applying its state);
``remove`` undoes exactly one accepted ``try_add``. The DFS (``allocator/dfs.py``) calls
``remove`` in reverse check order on backtrack, so state unwinds in exact reverse order. The
core checks are in ``allocator/eligibility.py``, the DRA features' in ``allocator/features/``;
``allocator/pipeline.py`` says which run, in which order.

Below the checks, the DFS and the explanation, so that none of them imports another for these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, NamedTuple, Protocol

from allocator.constraints import MatchAttributeConstraint
from allocator.featuregates import FeatureGates
from allocator.model import DeviceID, PoolKey, ResourceSliceTemplate
from allocator.pools import DeviceWithID
from allocator.records import record
from allocator.requests import ClaimData, RequestData, SelectorMatcher
from allocator.requirements import Requirements
from allocator.tracker import AllocationTracker

# --- reason codes: the trace's and the refusal funnel's names of what refused a device ------

POOL_INCOMPLETE = "pool-incomplete"
POOL_INVALID = "pool-invalid"
POOL_REASONS = frozenset({POOL_INCOMPLETE, POOL_INVALID})
ALLOCATED = "allocated"
SELECTOR = "selector"
CEL_ERROR = "cel-error"
CONSTRAINT = "constraint"
TOPOLOGY = "topology"
TAINT = "taint"
BINDING_CONDITION = "binding-condition"
NODE_OPERATIONS = "node-operations"
COUNTER = "counter"
COMPATIBILITY_GROUP = "compatibility-group"
CAPACITY = "capacity"
ADMIN_ACCESS = "admin-access"
DISTINCT = "distinct"


class Rejection(NamedTuple):
    """Why a check refused a device: its reason code and message (the trace shows both).

    ``on_path``: refused for what this search path took before (an earlier slot or request
    of the same pod holds the device), which the refusal funnel words as such; ``facts``: what
    the funnel's words need beyond the message, JSON-able (the counter check's counter set,
    counter, amount needed and left)."""

    reason: str
    message: str
    on_path: bool = False
    facts: Mapping[str, str] | None = None


@record(frozen=True)
class Refusal:
    """Why one device check refused one candidate, worded for the refusal funnel."""

    reason: str
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    group: tuple = ()  # devices refused with the same (reason, group) form one rejection group
    also: tuple[str, ...] = ()  # the other checks that refuse the device too (reason codes)


@record
class Step:
    """Where the DFS stands when a check runs."""

    claim: ClaimData
    request_index: int
    request: RequestData  # the request, or the FirstAvailable subrequest being tried
    slot: int
    position: int  # index of the candidate in the request's candidate list


@record
class PathEntry:
    """A device the search took: for which claim and request, and the allocation result fields
    the checks gave it (``extra``; keys starting with "_" stay internal)."""

    claim_index: int  # position in the pod's claim list
    request: str  # "<request>" or "<request>/<subrequest>"
    cand: DeviceWithID
    extra: dict[str, Any]


class SearchState(Protocol):
    """What a device check may read (and, for the fields said so, write) of the search of one
    instance type: the DFS's ``DFSContext`` is one."""

    gates: FeatureGates  # the run's, from its pipeline
    tracker: AllocationTracker
    matcher: SelectorMatcher
    node_claim_id: str
    instance_type: str
    # The NodeClaim's ResourceSliceTemplates per instance type (counter sets, slice fields).
    template_slices_by_it: Mapping[str, Sequence[ResourceSliceTemplate]]
    # Pools whose devices ExactCount never takes (incomplete, invalid), and why.
    pool_refusals: Mapping[PoolKey, Rejection]
    # The devices this path took (the allocated check adds and removes them).
    allocated_ids: set[DeviceID]
    allocated_templates: set[DeviceID]
    # The accumulated requirements as this instance type sees them, and the pools they reach.
    view: Requirements
    pool_keys: set[PoolKey]
    # Written by the checks: the accepted device's allocation result fields (keys starting
    # with "_" stay internal), and whether a rejection is pruning by reasoning.
    extra: dict[str, Any]
    pruned: bool

    def tighten(self, term: Requirements) -> None: ...
    def restore(self) -> None: ...
    def match_feasibility(self, c: MatchAttributeConstraint, step: Step) -> str | None: ...
    def remaining_demand(
        self, claim: ClaimData, step: Step | None, applies: Callable[[str], bool]
    ) -> tuple[int, Iterable[DeviceWithID]]: ...


class DeviceCheck(Protocol):
    name: str
    # The prefilter's answer for an in-cluster device is the same on every instance type: the
    # DFS then shares it across them (when every check of the run says so).
    prefilter_it_independent: bool

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None: ...  # path-independent part, or None
    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None: ...
    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None: ...


# Called once per instance type's search; None: the check has nothing to do there.
CheckFactory = Callable[[SearchState], "DeviceCheck | None"]

# A device that may fill several slots of one request (DRAConsumableCapacity).
Reusable = Callable[[SearchState, DeviceWithID], bool]
