"""What Request Validation makes of a claim and the DFS searches with: one ``ClaimData`` per
claim, one ``RequestData`` per request (or FirstAvailable subrequest), and the selector matcher
the checks and the validation share.

Below validation, the checks and the DFS, so that each of them reads the same data without
importing another.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from allocator.constraints import Constraint
from allocator.model import DeviceClass, DeviceSelector, ExactDeviceRequest, ResourceClaim
from allocator.pools import DeviceWithID
from allocator.records import record

EXACT_COUNT = "ExactCount"
ALL = "All"


@record(eq=False)
class RequestData:
    """A request (or subrequest) prepared for the search: class, selectors, count, devices."""

    name: str  # "<request>" or "<request>/<subrequest>"
    device_class: DeviceClass | None
    num_devices: int  # ExactCount
    allocation_mode: str  # ExactCount | All
    selectors: list[DeviceSelector]  # class selectors first, then the request's
    compiled: list[Any] = field(default_factory=list)  # engine CompiledSelector, same order
    all_devices: list[DeviceWithID] | None = None  # All mode: eligible in-cluster devices
    all_template_devices_by_it: dict[str, list[DeviceWithID]] | None = None
    exact: ExactDeviceRequest | None = None  # the source request (tolerations, capacity, ...)
    # FirstAvailable: the subrequests, tried in order; this entry is then only their parent.
    alternatives: list[RequestData] = field(default_factory=list)

    def slots_for(self, instance_type: str) -> list[DeviceWithID] | None:
        """All mode: the predetermined devices of every slot on this instance type."""
        if self.allocation_mode != ALL:
            return None
        templates = (self.all_template_devices_by_it or {}).get(instance_type, [])
        return list(self.all_devices or []) + templates

    def max_devices(self) -> int:
        if self.alternatives:
            return max(a.max_devices() for a in self.alternatives)
        if self.allocation_mode == ALL:
            return len(self.all_devices or [])
        return self.num_devices

    @property
    def is_admin(self) -> bool:
        """An adminAccess request (DRAAdminAccess); the API has no adminAccess on
        subrequests."""
        exact = self.exact
        return exact is not None and exact.admin_access and "/" not in self.name


@record
class ClaimData:
    """A claim prepared for the search: its requests and constraints."""

    index: int
    key: str
    claim: ResourceClaim
    requests: list[RequestData]
    constraints: list[Constraint]
    # Instance types this claim cannot use, with why (All mode: no match, 32-device limit).
    pruned_instance_types: dict[str, PrunedInstanceType] = field(default_factory=dict)


@record(frozen=True)
class PrunedInstanceType:
    """Why Request Validation took an instance type away from a claim: ``code`` is the trace's
    reason (``no-devices``: an All-mode request matches nothing there; ``exceeding-maximum``:
    its template devices take the claim past the 32 devices of an allocation result)."""

    code: str
    message: str


class SelectorMatcher:
    """Selector matching for one Allocate, memoised per (device, claim, request)."""

    __slots__ = ("engine", "memo")

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.memo: dict[tuple[DeviceWithID, int, str], tuple[bool, str | None]] = {}

    def match(
        self, request: RequestData, claim_index: int, cand: DeviceWithID
    ) -> tuple[bool, str | None]:
        """(matched, error): error is a CEL runtime error text (the device does not match)."""
        key = (cand, claim_index, request.name)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        result: tuple[bool, str | None] = (True, None)
        for sel in request.compiled:
            outcome = self.engine.matches(sel, cand.device, cand.id.driver)
            if not outcome.matched:
                result = (False, outcome.error)
                break
        self.memo[key] = result
        return result
