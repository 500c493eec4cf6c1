"""A run: one simulation of a snapshot, queued on Celery, with its result and search trace.

The trace is kept twice, on purpose: ``Run.trace_blob`` is the whole trace compressed (the
exact document, for download and diffs), and ``TraceNode`` rows index it so that the children
of one node, with their subtree sizes, come from one indexed query whatever the trace's size.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from dra_web import blobs
from dra_web.fields import FastJSONField


class Run(models.Model):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED)]
    FINISHED = (SUCCEEDED, FAILED)

    snapshot = models.ForeignKey(
        "snapshots.Snapshot", on_delete=models.CASCADE, related_name="runs"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    options = models.JSONField(default=dict)  # the API's "options", normalised (to_json)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED, db_index=True)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # written by the worker
    progress_done = models.IntegerField(default=0)
    progress_total = models.IntegerField(default=0)
    result = FastJSONField(null=True, blank=True)  # docs/RESULT.md
    # zlib(JSON) of docs/TRACE.md {"nodes": [...], "omitted": n, "maxNodes": n}.
    trace_blob = models.BinaryField(null=True, blank=True)
    # zlib(JSON) of runs.page_facts.PageFacts: what the run's page shows from the snapshot,
    # derived when the result is stored (null for runs stored before it was).
    page_facts_blob = models.BinaryField(null=True, blank=True)
    # zlib(JSON) of runs.failures.Failures: the failed pods' result entries, kept apart so a
    # failed pod's explanation reads its own (null for runs stored before they were).
    failures_blob = models.BinaryField(null=True, blank=True)
    trace_node_count = models.IntegerField(default=0)
    trace_omitted = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")
    allocator_version = models.CharField(max_length=40, blank=True, default="")
    task_id = models.CharField(max_length=64, blank=True, default="")
    attempts = models.IntegerField(default=0)  # task deliveries that reached execute_run
    # Copies of result["stats"] counts, for lists and filters without reading the result.
    pods_total = models.IntegerField(null=True, blank=True)
    pods_scheduled = models.IntegerField(null=True, blank=True)
    pods_failed = models.IntegerField(null=True, blank=True)
    # Kept past DRA_WEB_RUN_RETENTION_DAYS (runs/retention.py), like a run with reviews.
    pinned = models.BooleanField(default=False, db_index=True)

    class Meta:
        ordering = ["-queued_at", "-id"]

    def __str__(self) -> str:
        return f"run #{self.pk} of {self.snapshot_id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    def trace(self) -> dict | None:
        return blobs.unpack(self.trace_blob)


class TraceNode(models.Model):
    """One node of a run's DFS trace, with its subtree counts precomputed."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="trace_nodes")
    node_id = models.IntegerField()  # the trace's own id
    parent = models.IntegerField(null=True, blank=True)  # the parent's node_id
    depth = models.IntegerField(default=0)
    kind = models.CharField(max_length=16)
    label = models.TextField()
    status = models.CharField(max_length=8)
    reason = models.CharField(max_length=40, null=True, blank=True)
    message = models.TextField(null=True, blank=True)
    child_count = models.IntegerField(default=0)
    descendants = models.IntegerField(default=0)
    failed_descendants = models.IntegerField(default=0)
    extra = models.JSONField(null=True, blank=True)  # every other field of the node
    # Lower-cased label and string extras (device, claim, NodeClaim ...): one LIKE for ?q=.
    search = models.TextField(default="")

    class Meta:
        ordering = ["run", "node_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "node_id"], name="trace_node_unique_id")
        ]
        indexes = [
            models.Index(fields=["run", "parent", "node_id"], name="trace_node_children"),
            models.Index(fields=["run", "reason"], name="trace_node_reason"),
        ]

    def as_json(self) -> dict:
        node = {
            "id": self.node_id,
            "parent": self.parent,
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
        }
        if self.extra:
            node.update(self.extra)
        node["depth"] = self.depth
        node["childCount"] = self.child_count
        node["descendants"] = self.descendants
        node["failedDescendants"] = self.failed_descendants
        return node
