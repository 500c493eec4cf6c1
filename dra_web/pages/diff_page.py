"""The model of the page comparing two runs (reads only): what changed in their options, and
once both have a result, their diff with its divergences grouped by cause."""

from __future__ import annotations

from typing import Any

from dra_web.pages import presenters
from dra_web.pages.run_page import other_runs
from dra_web.runs import selectors as run_selectors
from dra_web.runs.models import Run


def diff_page(a: Run, b: Run) -> dict[str, Any]:
    """A is the run before, B the run after (``diff_order``), whichever way it was asked."""
    a, b = run_selectors.diff_order(a, b)
    ctx: dict[str, Any] = {
        "a": a,
        "b": b,
        "other_runs": other_runs(a),
        "option_changes": presenters.option_changes(a.options, b.options),
    }
    if a.result and b.result:
        diff = run_selectors.diff_runs(a, b)
        ctx["diff"] = diff
        ctx["cost_saved"] = -float((diff.get("cost") or {}).get("delta") or 0)
        ctx["input_changes"] = presenters.input_changes_view(diff.get("inputChanges"))
        ctx["causes"] = presenters.divergence_causes((diff.get("trace") or {}).get("divergences"))
        ctx["errors"] = presenters.error_changes((diff.get("pods") or {}).get("changedErrors"))
        ctx["funnels"] = presenters.funnel_diff(a.result, b.result)
    return ctx
