"""Verified fix suggestions for pods that could not be placed (docs/RESULT.md): ``core`` finds
and verifies candidate changes, ``ranking`` says what each touches and orders them,
``wholeloop`` re-runs the whole loop with a change to find the pods it affects,
``documents`` applies a change to the snapshot's documents."""

from allocator.suggestions.core import SuggestionReport, suggest
from allocator.suggestions.documents import apply_change, apply_suggestion

__all__ = ["SuggestionReport", "apply_change", "apply_suggestion", "suggest"]
