"""Prioritized lists of subrequests (DRAPrioritizedList, ``firstAvailable``).

A request either names exactly one kind of device (``exactly``) or lists alternatives that are
tried in order; the first subrequest for which the whole claim can be allocated wins, and the
result names it ``<request>/<subrequest>``. Constraints naming the request apply to whichever
subrequest is chosen; constraints naming ``<request>/<subrequest>`` apply only to that one.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.model import DeviceRequest, ExactDeviceRequest
from allocator.records import record
from allocator.requests import RequestData
from allocator.validation import ValidationContext, validate_exact_request

GATE = "DRAPrioritizedList"


class PrioritizedListError(ValueError):
    """A request that cannot be served; the message carries "only Exactly requests"."""


@record(frozen=True)
class RequestAlternative:
    """One way of satisfying a request: the request itself, or one of its subrequests."""

    request: str
    subrequest: str | None
    spec: ExactDeviceRequest
    index: int = 0  # position among the request's alternatives (0 for an exactly request)

    @property
    def result_name(self) -> str:
        """The ``request`` field of the device's allocation result."""
        return f"{self.request}/{self.subrequest}" if self.subrequest else self.request

    @property
    def admin_access(self) -> bool:
        # The API has no adminAccess on subrequests.
        return self.subrequest is None and self.spec.admin_access


def request_alternatives(
    request: DeviceRequest, gates: FeatureGates, claim_key: str = ""
) -> list[RequestAlternative]:
    """The alternatives to try for ``request``, in order. Raises PrioritizedListError when the
    request uses firstAvailable while the gate is off (kube-scheduler refuses it then)."""
    where = f"claim {claim_key}, request {request.name}" if claim_key else f"request {request.name}"
    if request.first_available:
        if not gates.enabled(GATE):
            raise PrioritizedListError(
                f"{where}: only Exactly requests are supported: the request lists "
                f"firstAvailable subrequests, but the {GATE} feature is disabled"
            )
        if request.exactly is not None:
            raise PrioritizedListError(
                f"{where}: exactly and firstAvailable are mutually exclusive"
            )
        names = [sub.name for sub in request.first_available]
        if len(set(names)) != len(names):
            raise PrioritizedListError(f"{where}: subrequest names must be unique")
        return [
            RequestAlternative(request.name, sub.name, sub.request, i)
            for i, sub in enumerate(request.first_available)
        ]
    if request.exactly is None:
        raise PrioritizedListError(
            f"{where}: only Exactly requests are supported (neither exactly nor firstAvailable)"
        )
    return [RequestAlternative(request.name, None, request.exactly, 0)]


def constraint_applies(
    constraint_requests: Iterable[str], request: str, subrequest: str | None
) -> bool:
    """Whether a constraint scoped to ``constraint_requests`` covers a device chosen for
    ``request`` (through ``subrequest``, if any). An empty scope covers every request."""
    names = set(constraint_requests)
    if not names:
        return True
    if request in names:
        return True
    return subrequest is not None and f"{request}/{subrequest}" in names


def min_devices(alternatives: list[RequestAlternative]) -> int:
    """A lower bound of the devices the request needs (for the 32-device claim limit)."""
    counts = [a.spec.count if a.spec.allocation_mode == "ExactCount" else 0 for a in alternatives]
    return min(counts) if counts else 0


def top_level_request(result_name: str) -> str:
    """``gpu/high-memory`` -> ``gpu`` (the request a device result belongs to)."""
    return result_name.split("/", 1)[0]


# --- in the pipeline ---------------------------------------------------------------------------


def first_available(ctx: ValidationContext, request: DeviceRequest) -> list[RequestData]:
    """Request Validation of a ``firstAvailable`` request: its subrequests' RequestData, in
    order (refused while the gate is off)."""
    try:
        alternatives = request_alternatives(request, ctx.gates, ctx.claim_key)
    except PrioritizedListError as e:
        raise ValidationError(str(e), request=request.name) from e
    return [validate_exact_request(ctx, alt.result_name, alt.spec) for alt in alternatives]
