"""Team review of failed placements: one review per (run, pod), a verdict and a thread."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Review(models.Model):
    EXPECTED = "expected"
    NEEDS_CAPACITY = "needs-capacity"
    BUG_IN_CONFIG = "bug-in-config"
    BUG_IN_ALLOCATOR = "bug-in-allocator"
    VERDICTS = [
        (EXPECTED, "expected"),
        (NEEDS_CAPACITY, "needs capacity"),
        (BUG_IN_CONFIG, "bug in config"),
        (BUG_IN_ALLOCATOR, "bug in allocator"),
    ]
    OPEN = "open"
    RESOLVED = "resolved"
    STATES = [(OPEN, "open"), (RESOLVED, "resolved")]

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="reviews")
    pod = models.CharField(max_length=320)  # "namespace/name", as the result document keys it
    verdict = models.CharField(max_length=20, choices=VERDICTS, blank=True, default="")
    state = models.CharField(max_length=10, choices=STATES, default=OPEN, db_index=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    verdict_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated", "-id"]
        constraints = [models.UniqueConstraint(fields=["run", "pod"], name="review_one_per_pod")]
        indexes = [models.Index(fields=["run", "state"], name="review_run_state")]

    def __str__(self) -> str:
        return f"review of {self.pod} in run #{self.run_id} ({self.state})"

    @property
    def namespace(self) -> str:
        return self.pod.partition("/")[0]

    @property
    def name(self) -> str:
        return self.pod.partition("/")[2]

    @property
    def is_open(self) -> bool:
        return self.state == self.OPEN


class Comment(models.Model):
    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    body = models.TextField()
    # A comment that changed the verdict or state records it, so the thread tells the story.
    event = models.CharField(max_length=80, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]

    def __str__(self) -> str:
        return f"comment #{self.pk} on {self.review}"
