"""The Kubernetes DRA CEL environment on cel-python (``device`` selectors)."""

from allocator.cel.engine import (
    CelCompileError,
    CompiledSelector,
    MatchOutcome,
    SelectorEngine,
    split_name,
)

__all__ = ["CelCompileError", "CompiledSelector", "MatchOutcome", "SelectorEngine", "split_name"]
