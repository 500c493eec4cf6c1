"""Error types of the allocator core; messages carry the design's substrings verbatim."""

from __future__ import annotations

from collections.abc import Sequence

from allocator.funnel import Funnel
from allocator.model import PoolKey

# The count stage of one instance type, request by request until the first refused one:
# (claim index, request name, its funnel when refused else None).
Counted = list[tuple[int, str, Funnel | None]]


class AllocationError(Exception):
    """An Allocate call that cannot succeed. ``str(e)`` is what a user reads.

    - ``code``: a short machine-readable reason (``validation``, ``no-instance-type``,
      ``timeout``, ``node-resources``, ...) for the trace and the result document;
    - ``funnels``: the refusal funnels (``funnel.py``): per request and target, the
      devices in reach and what refused each; empty when none were built (a timeout, a search
      run without its words);
    - ``counted``: when a single instance type was tried, its count stage (see ``Counted``),
      which the scheduler keeps to refuse the same requests there again without a search;
    - ``reach``: the in-cluster pools a finished search read, sorted; None when the refusal is
      not a search's (validation, timeout), so it says nothing about which pools matter;
    - ``refused``: per instance type tried, in order, the words that refused it (the message
      groups them); empty when the refusal is not one of every instance type.
    """

    def __init__(
        self,
        message: str,
        code: str = "allocation",
        *,
        funnels: Sequence[Funnel] = (),
        counted: Counted | None = None,
        reach: tuple[PoolKey, ...] | None = None,
        refused: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.funnels: tuple[Funnel, ...] = tuple(funnels)
        self.counted = counted
        self.reach = reach
        self.refused = refused


class ValidationError(AllocationError):
    """A claim that fails Request Validation (the design's error table). ``request``: the
    claim's request the message names (``request NAME: ...``), None when it names none."""

    def __init__(
        self, message: str, *, request: str | None = None, funnels: Sequence[Funnel] = ()
    ) -> None:
        super().__init__(message, code="validation", funnels=funnels)
        self.request = request


class AllocationTimeout(AllocationError):
    def __init__(self, message: str) -> None:
        super().__init__(message, code="timeout")
