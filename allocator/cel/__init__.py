"""The Kubernetes DRA CEL environment for ``device`` selectors: our own parser, type checker
and evaluator (``parser.py``, ``checker.py``, ``interp.py``, ``runtime.py``, ``lib.py``) with
the Kubernetes CEL libraries, and ``engine.py``, the memoised matching the allocator calls."""

from allocator.cel.engine import (
    CelCompileError,
    CompiledSelector,
    MatchOutcome,
    SelectorEngine,
    split_name,
)

__all__ = ["CelCompileError", "CompiledSelector", "MatchOutcome", "SelectorEngine", "split_name"]
