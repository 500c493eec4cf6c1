"""Reads of the review app."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from dra_web.reviews.models import Review


def review_for(run, pod: str) -> Review | None:
    return (
        Review.objects.filter(run=run, pod=pod)
        .select_related("opened_by", "verdict_by")
        .prefetch_related("comments__author")
        .first()
    )


def reviews_by_pod(run) -> dict[str, Review]:
    reviews = Review.objects.filter(run=run).annotate(comment_count=Count("comments"))
    return {r.pod: r for r in reviews}


def open_reviews(*, run=None) -> QuerySet[Review]:
    qs = Review.objects.filter(state=Review.OPEN).select_related("run", "run__snapshot")
    if run is not None:
        qs = qs.filter(run=run)
    return qs.annotate(comment_count=Count("comments"))


def run_ids_with_open_review() -> set[int]:
    return set(Review.objects.filter(state=Review.OPEN).values_list("run_id", flat=True).distinct())


def has_open_review(run) -> bool:
    return Review.objects.filter(run=run, state=Review.OPEN).exists()


def thread(review: Review) -> list[dict]:
    """The review's history, oldest first: every comment, verdict and state change with its
    author and time (``event`` is empty for a plain comment)."""
    return [
        {
            "id": c.pk,
            "author": c.author.get_username() if c.author else None,
            "at": c.created,
            "event": c.event,
            "body": c.body,
        }
        for c in review.comments.select_related("author").order_by("created", "id")
    ]
