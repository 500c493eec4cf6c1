"""What a target answers when asked whether it can take a pod (Karpenter's ``CanAdd``): a
decision the scheduler may commit (``Add``), or a refusal the pod's result reports.

Asking changes no placement state; only committing a decision does. A fix suggestion's trial
is a decision that is never committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from allocator.model import ResourceClaim
from allocator.records import record
from allocator.requirements import Requirements
from allocator.scheduling.fit import InstanceTypeInfo, NoInstanceType, Resources
from allocator.scheduling.poddata import FunnelEntry, Target
from allocator.scheduling.topology import TopologyError


@record
class Refusal:
    """Why a target cannot take the pod, in the words the result reports. The scheduler only
    reads it: a refusal many targets give alike may be one shared object."""

    reason: str
    code: str = ""  # the trace's short reason (taint, resources, requirements, ...)
    funnels: Sequence[FunnelEntry] = ()  # for the pod's funnel log
    # Refused by the device-count pre-check: nothing was searched, so the funnel is worked
    # out only if the pod fails everywhere (``trace_node``: the trace node to fill in then).
    counted: bool = False
    trace_node: int = -1
    # Found without its words (a quick Allocate): they are built if the pod fails everywhere.
    deferred: bool = False
    # The in-cluster pools the refusal read (None: not known, any may matter).
    reach: tuple | None = ()
    # A topology refused the pod: which, and the domains and pods that kept it out.
    topology: TopologyError | None = None
    # A deferred refusal of a NodeClaim's instance type filter, as the filter recorded it: its
    # words come from there (nothing else refused, no funnel), not from an attempt again.
    unfit: NoInstanceType | None = None
    # What only the node and the pod decide refused it (``ExistingNode._local``): that node
    # refuses every later pod of the pod's shape in the loop too (scheduling/lasting.py).
    lasting: bool = False


@record
class Plan:
    """A NodeClaim's state after adding a pod (Karpenter's CanAdd output, applied by Add)."""

    requirements: Requirements
    candidates: list[InstanceTypeInfo]
    requests: Resources
    result: object | None  # AllocationResult, or None for a pod without claims
    dra_resources: Resources
    claims: list[ResourceClaim] = field(default_factory=list)
    # For the NodeClaim report: the pod's requirement term and, per filtering stage, the
    # instance type lists it started from and kept (references only; see report.PruneLog).
    term: Requirements | None = None
    stages: list[tuple] = field(default_factory=list)


@record
class Decision:
    """Where the pod would go and what it would get there (a trial's answer too)."""

    target: Target  # an ExistingNode or a NodeClaim
    result: object | None  # AllocationResult, or None for a pod without claims
    requirements: Requirements  # the target's requirements once the pod is added
    dra_resources: Resources  # what the devices add to the pod's node resources


@record
class ExistingNodeDecision(Decision):
    """An existing node takes the pod: what it charges and the claims committed."""

    requests: Resources = field(default_factory=dict)  # charged against what the node has left
    claims: list[ResourceClaim] = field(default_factory=list)  # committed with ``result``


@record
class NodeClaimDecision(Decision):
    """A NodeClaim takes the pod: its plan, and whether the NodeClaim is new."""

    plan: Plan | None = None
    # A NodeClaim to create (NodeClaimTemplate.can_add): the instance types it started from
    # and what its NodePool's limits left (the NodeClaim report's first stage).
    new: bool = False
    remaining: Resources | None = None
