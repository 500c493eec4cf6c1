"""Writes of the review app: open a review, comment, set a verdict, resolve or reopen."""

from __future__ import annotations

from django.db import transaction

from dra_web.reviews.models import Comment, Review

MAX_COMMENT = 10_000


class ReviewError(ValueError):
    """Bad review input; the message names the field."""


def failed_pods(run) -> set[str]:
    result = run.result or {}
    return {p.get("pod") for p in result.get("pods") or [] if not p.get("scheduled")}


def _review(run, pod: str, user) -> Review:
    if pod not in failed_pods(run):
        raise ReviewError(f"pod: {pod!r} is not a failed pod of run #{run.pk}")
    review, _ = Review.objects.get_or_create(run=run, pod=pod, defaults={"opened_by": user})
    return review


@transaction.atomic
def add_comment(run, pod: str, user, body: str) -> Comment:
    body = (body or "").strip()
    if not body:
        raise ReviewError("body: a comment cannot be empty")
    if len(body) > MAX_COMMENT:
        raise ReviewError(f"body: at most {MAX_COMMENT} characters")
    review = _review(run, pod, user)
    comment = Comment.objects.create(review=review, author=user, body=body)
    review.save(update_fields=["updated"])
    return comment


@transaction.atomic
def set_verdict(run, pod: str, user, verdict: str, body: str = "") -> Review:
    valid = dict(Review.VERDICTS)
    if verdict not in valid:
        raise ReviewError(f"verdict: must be one of {', '.join(valid)}")
    review = _review(run, pod, user)
    if review.verdict != verdict:
        # Anyone on the team may set or change a verdict; the thread records who, when and
        # what it was before, so a change never silently replaces someone's call.
        event = (
            f"changed the verdict from {valid.get(review.verdict, review.verdict)} to "
            f"{valid[verdict]}"
            if review.verdict
            else f"set the verdict to {valid[verdict]}"
        )
        review.verdict = verdict
        review.verdict_by = user
        review.save(update_fields=["verdict", "verdict_by", "updated"])
        Comment.objects.create(
            review=review, author=user, body=(body or "").strip()[:MAX_COMMENT], event=event
        )
    elif (body or "").strip():
        add_comment(run, pod, user, body)
    return review


@transaction.atomic
def set_state(run, pod: str, user, state: str) -> Review:
    if state not in dict(Review.STATES):
        raise ReviewError("state: must be open or resolved")
    review = _review(run, pod, user)
    if review.state != state:
        review.state = state
        review.save(update_fields=["state", "updated"])
        event = "resolved the review" if state == Review.RESOLVED else "reopened the review"
        Comment.objects.create(review=review, author=user, body="", event=event)
    return review
