"""What the scheduler knows of one pod: its outcome across attempts (the result's pod entry)
and, for one attempt, what every target reads of it (Karpenter's ``PodData``).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Protocol

from allocator.model import Pod, ResourceClaim
from allocator.records import record
from allocator.requirements import Requirements
from allocator.scheduling.fit import Resources
from allocator.scheduling.hostports import HostPort
from allocator.scheduling.initialization import PodClaims
from allocator.scheduling.volumes import VolumeAlternative, Volumes

if TYPE_CHECKING:
    from allocator.funnel import Funnel


class Target(Protocol):
    """Where a pod was placed: an existing node or a NodeClaim (existingnode.py, nodeclaim.py)."""

    name: str
    pods: list[Pod]

    @property
    def instance_types(self) -> list[str]: ...

    def target_json(self) -> dict: ...


# One entry of a pod's funnel log: (target as reasons[].target names it, funnel, this pod's
# claim when the funnel is a cached one computed for another claim of the same spec, else None).
FunnelEntry = tuple[str, "Funnel", str | None]


@record
class PodOutcome:
    """One pod's outcome: where it went, its claims, or every target's refusal."""

    pod: Pod
    pod_claims: PodClaims
    scheduled: bool = False
    target: Target | None = None
    claim_outcomes: list = field(default_factory=list)  # AllocationResult.claims
    claim_states: dict[str, str] = field(default_factory=dict)  # for unplaced pods
    reasons: list[tuple[str, str]] = field(default_factory=list)
    # Targets whose words name what differs per target (a topology's domains and the pods
    # there) for one cause: target -> that cause (explain.topology_kind), so they group.
    reason_kinds: dict[str, tuple] = field(default_factory=dict)
    error: str | None = None
    dra_node_resources: Resources = field(default_factory=dict)
    attempts: int = 0
    # The preferences dropped to place it (preferences.Relaxation), in the order dropped.
    relaxed: list = field(default_factory=list)
    validated: bool = False  # an Allocate call got past Request Validation
    # The refusal funnels of the last attempt, in the order tried; read them through
    # ``funnels``. A None entry stands for the funnel of a node refused by counting devices,
    # filled in if the pod fails everywhere.
    funnel_log: list[FunnelEntry] = field(default_factory=list)
    # The scheduler's state version the last attempt saw, and the DFS nodes it spent: a retry
    # in an unchanged state would repeat it exactly (see RefusalCache.unchanged).
    seen_version: int = -1
    seen_validated: bool = False  # ``validated`` when that attempt started
    dfs_nodes: int = 0
    # Whether the last failed attempt built its words and funnels: one that will be retried
    # (another pod was placed earlier in the same pass) does not (Scheduler.solve).
    explained: bool = True
    # The remembered attempt whose funnel log the last attempt's is, with this pod's claims
    # in the same places: the one remembered from it, or one of a pod of the same shape it
    # replayed (None: neither). The result reads that log once for all the replicas
    # (result._Memos.reading).
    attempt: ShapeAttempt | None = None

    @property
    def funnels(self) -> list[tuple[str, Funnel]]:
        """(target, funnel) of every refusal of the last attempt, in the order tried."""
        return [(t, f if c is None else f.for_claim(c)) for t, f, c in self.funnel_log]


@record
class ShapeAttempt:
    """A failed attempt of a pod, replayable for a pod of the same shape in the same state."""

    version: int  # the state version the attempt started from
    claim_keys: list[str]
    reasons: list[tuple[str, str]]
    funnel_log: list[FunnelEntry]
    validated: bool
    dfs_nodes: int
    error: str | None = None  # the attempt's summary
    reason_kinds: dict[str, tuple] = field(default_factory=dict)  # PodOutcome.reason_kinds


@record
class PodData:
    """One attempt's view of a pod, computed once and read by every target it is tried on.

    ``pod`` is the pod as this attempt sees it (its preferences possibly relaxed); ``outcome``
    is where the attempt's reasons and funnels go.
    """

    pod: Pod
    outcome: PodOutcome
    claims: list[ResourceClaim]  # the pod's claims, the scheduler's extended one last
    extended: object | None  # DRAExtendedResource: PodClaims.extended
    requests: Resources  # what the pod needs from the node (milli-units, one ``pods`` slot)
    wanted: list[tuple[str, int]]  # the requests that are not zero
    # Karpenter's pod requirements (node selector, heaviest preferred and first required node
    # affinity term: preferences.pod_requirements), as the one term a target must allow.
    terms: list[Requirements]
    check_terms: bool  # whether ``terms`` can refuse anything (a selector or affinity)
    # Without the preferences (Karpenter's StrictRequirements): what topology counts domains by.
    strict: Requirements
    needed: int  # devices the pod's claims need at least (the device-count pre-check)
    specs: list | None  # RefusalCache.specs: what a cached count-stage refusal is keyed by
    trace_node: int = -1  # the attempt's trace node (-1: untraced)
    # RefusalCache.shape of the pod as this attempt sees it (None: not to be remembered):
    # pods of one Deployment share it, and so do the refusals of what only they and a node read.
    shape: tuple | None = None
    # Untraced and nothing but resources and devices can refuse the pod on an open node:
    # ExistingNode.can_add may answer from the device count or a cached refusal directly.
    fast: bool = False
    # Host ports the pod asks for (hooks.HostPortUsage), its volumes as an existing node's
    # attach limits count them (hooks.VolumeUsage) and the alternatives of their topology
    # (Karpenter's PodData.VolumeRequirements: one must hold): empty until those are read.
    host_ports: tuple[HostPort, ...] = ()
    volumes: Volumes = ()
    volume_requirements: tuple[VolumeAlternative, ...] = ()
