"""Error types of the allocator core; messages carry the design's substrings verbatim."""

from __future__ import annotations


class AllocationError(Exception):
    """An Allocate call that cannot succeed. ``str(e)`` is what a user reads.

    ``code`` is a short machine-readable reason (``validation``, ``incompatible``,
    ``no-instance-type``, ``timeout``, ...) for the trace and the result document.
    """

    def __init__(self, message: str, code: str = "allocation") -> None:
        super().__init__(message)
        self.code = code


class ValidationError(AllocationError):
    """A claim that fails Request Validation (the design's error table)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="validation")


class AllocationTimeout(AllocationError):
    def __init__(self, message: str) -> None:
        super().__init__(message, code="timeout")
