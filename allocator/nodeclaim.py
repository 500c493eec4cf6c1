"""The NodeClaim interface the allocator consumes (existing nodes, pre-initialized nodes and
in-flight NodeClaims look the same to it), and a plain implementation of it."""

from __future__ import annotations

from dataclasses import field
from typing import Protocol, runtime_checkable

from allocator.model import ResourceSliceTemplate
from allocator.records import record
from allocator.requirements import Requirements


@runtime_checkable
class NodeClaimView(Protocol):
    id: str  # stable NodeClaim identity ("node/NAME" or the NodeClaim name)
    node_name: str | None  # existing nodes only; None for in-flight NodeClaims
    node_pool: str | None
    requirements: Requirements  # current (possibly tightened) requirements
    instance_types: list[str]  # candidate instance type names, in try order

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]: ...

    def instance_type_requirements(self, name: str) -> Requirements | None:
        """An instance type's own requirements, which in-flight pool gathering intersects
        with the NodeClaim's; None when unknown (an existing node: its requirements say it)."""
        ...


@record
class SimpleNodeClaim:
    """A NodeClaimView from plain data.

    ``templates`` holds what ``resource_slices()`` returns (empty for initialized nodes);
    ``it_requirements`` holds each candidate instance type's own requirements, which the
    allocator intersects with the NodeClaim's when deciding pool accessibility for in-flight
    NodeClaims (none given: unknown, the NodeClaim's requirements alone decide).
    """

    id: str
    requirements: Requirements
    instance_types: list[str]
    node_name: str | None = None
    node_pool: str | None = None
    templates: dict[str, list[ResourceSliceTemplate]] = field(default_factory=dict)
    it_requirements: dict[str, Requirements] = field(default_factory=dict)

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return {it: self.templates[it] for it in self.instance_types if it in self.templates}

    def instance_type_requirements(self, name: str) -> Requirements | None:
        return self.it_requirements.get(name)
