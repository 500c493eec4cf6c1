"""The dashboard's model (reads only): runs and snapshots, filtered and a page at a time, the
open reviews, and the snapshots a run can be started on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allocator.featuregates import GATE_NAMES
from dra_web.pages.presenters import page_of
from dra_web.reviews import selectors as review_selectors
from dra_web.runs import selectors as run_selectors
from dra_web.runs.models import Run
from dra_web.snapshots import selectors as snapshot_selectors

RUNS_PER_PAGE = 15
SNAPSHOTS_PER_PAGE = 10
OPEN_REVIEWS_SHOWN = 50
SNAPSHOT_CHOICES = 200


@dataclass(frozen=True, slots=True)
class DashboardQuery:
    """What the dashboard was asked for (its query parameters)."""

    review: str = ""  # "open": only runs with an open review (the Reviews tab)
    status: str = ""
    mine: bool = False
    runs_page: str | None = None
    snapshots_page: str | None = None


def dashboard_page(user, query: DashboardQuery) -> dict[str, Any]:
    """The dashboard's template context, without the forms (the view's)."""
    owner = user if query.mine else None
    runs = run_selectors.run_list(
        owner=owner,
        status=query.status or None,
        has_open_review=True if query.review == "open" else None,
    )
    runs_page = page_of(runs, RUNS_PER_PAGE, query.runs_page)
    open_ids = review_selectors.run_ids_with_open_review()
    for run in runs_page:
        run.has_open_review = run.pk in open_ids
    return {
        "nav": "reviews" if query.review == "open" else "dashboard",
        "runs": runs_page,
        "snapshots": page_of(
            snapshot_selectors.snapshot_list(owner=owner),
            SNAPSHOTS_PER_PAGE,
            query.snapshots_page,
        ),
        "snapshot_choices": snapshot_selectors.snapshot_list(owner=None)[:SNAPSHOT_CHOICES],
        "open_reviews": review_selectors.open_reviews()[:OPEN_REVIEWS_SHOWN],
        "gate_names": GATE_NAMES,
        "filters": {"review": query.review, "status": query.status, "mine": query.mine},
        "statuses": [status for status, _ in Run.STATUSES],
    }
