"""Why a pod was refused (the refusal funnel) and what would fix it (docs/RESULT.md)."""

from allocator.explanation.funnel import Funnel, RejectionGroup

__all__ = ["Funnel", "RejectionGroup"]
