"""What the DRA features keep for one Allocator (one scheduling loop), and the small helpers
their device checks share.

The state is built by ``allocator.pipeline.setup_features`` (the pipeline's setup hook) and
kept in ``Allocator.extensions["features"]``; a run built with ``core_pipeline()`` has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from allocator.pools import TEMPLATE, DeviceWithID

if TYPE_CHECKING:
    from allocator.features.capacity import CapacityLedger
    from allocator.features.counters import CounterLedger
    from allocator.features.gates import FeatureGates
    from allocator.features.taints import TaintIndex
    from allocator.model import Device, DeviceID, Node, PoolKey
    from allocator.validation import RequestData

EXTENSION = "features"


@dataclass(slots=True)
class FeatureState:
    """What the features keep for one Allocator (one scheduling loop)."""

    gates: FeatureGates
    taints: TaintIndex
    counters: CounterLedger
    capacity: CapacityLedger
    devices: dict[DeviceID, Device] = field(default_factory=dict)
    grouped_pools: set[PoolKey] = field(default_factory=set)
    nodes: dict[str, Node] | None = None
    # id(template list) -> (the list, whether its templates use shared counters)
    template_counters: dict[int, tuple[list, bool]] = field(default_factory=dict)


def state_of(extensions: dict[str, Any]) -> FeatureState | None:
    return extensions.get(EXTENSION)


def is_admin(request: RequestData) -> bool:
    """An adminAccess request (DRAAdminAccess); the API has no adminAccess on subrequests."""
    exact = request.exact
    return exact is not None and exact.admin_access and "/" not in request.name


def is_template(cand: DeviceWithID) -> bool:
    return cand.source == TEMPLATE
