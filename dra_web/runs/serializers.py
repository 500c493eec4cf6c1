"""Run representations of the REST API (docs/API.md); names are camelCase."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from dra_web.runs.models import Run
from dra_web.runs.storage import run_storage
from dra_web.snapshots.serializers import SnapshotUploadResultSerializer


class RunSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    snapshot = serializers.IntegerField(source="snapshot_id", read_only=True)
    snapshotName = serializers.CharField(source="snapshot.name", read_only=True)
    queuedAt = serializers.DateTimeField(source="queued_at", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True)
    heartbeatAt = serializers.DateTimeField(source="heartbeat_at", read_only=True)
    durationSeconds = serializers.FloatField(source="duration_seconds", read_only=True)
    progress = serializers.SerializerMethodField()
    stats = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    allocatorVersion = serializers.CharField(source="allocator_version", read_only=True)
    taskId = serializers.CharField(source="task_id", read_only=True)
    traceNodes = serializers.IntegerField(source="trace_node_count", read_only=True)
    traceOmitted = serializers.IntegerField(source="trace_omitted", read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "snapshot",
            "snapshotName",
            "owner",
            "status",
            "options",
            "queuedAt",
            "startedAt",
            "finishedAt",
            "heartbeatAt",
            "durationSeconds",
            "progress",
            "stats",
            "error",
            "allocatorVersion",
            "taskId",
            "attempts",
            "traceNodes",
            "traceOmitted",
            "pinned",
        ]
        read_only_fields = fields

    def get_progress(self, obj) -> dict:
        return {"done": obj.progress_done, "total": obj.progress_total}

    def get_stats(self, obj) -> dict | None:
        if obj.pods_total is None:
            return None
        return {"pods": obj.pods_total, "scheduled": obj.pods_scheduled, "failed": obj.pods_failed}

    def get_error(self, obj) -> str | None:
        return obj.error or None


class RunStorageSerializer(serializers.Serializer):
    result = serializers.IntegerField(help_text="bytes of the stored result document")
    trace = serializers.IntegerField(help_text="bytes of the stored (compressed) trace")
    traceIndex = serializers.IntegerField(help_text="bytes of the trace's index rows")
    total = serializers.IntegerField()


class RunDetailSerializer(RunSerializer):
    result = serializers.JSONField(read_only=True, help_text="the result document, when done")
    storage = serializers.SerializerMethodField(
        help_text="what the run takes in the database, in bytes (pruned with the run)"
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "storage", "result"]
        read_only_fields = fields

    @extend_schema_field(RunStorageSerializer)
    def get_storage(self, obj) -> dict:
        return run_storage(obj)


class RunUpdateSerializer(serializers.Serializer):
    """What a user may change on a run: ``pinned`` (kept past the retention age)."""

    pinned = serializers.BooleanField()

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"pinned"})
            if unknown:
                raise serializers.ValidationError({unknown[0]: ["cannot be changed"]})
            if "pinned" in data and not isinstance(data["pinned"], bool):
                raise serializers.ValidationError({"pinned": ["must be true or false"]})
        return super().to_internal_value(data)


class RunCreateSerializer(serializers.Serializer):
    snapshot = serializers.IntegerField()
    options = serializers.JSONField(required=False, default=dict)

    def validate_options(self, value):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be an object")
        # docs/API.md: every API run has a trace (GET .../trace/) unless the script
        # opts out with "trace": false.
        return {"trace": True, **value}


class TraceNodeSerializer(serializers.Serializer):
    """A trace node (docs/TRACE.md) plus its subtree counts."""

    id = serializers.IntegerField()
    parent = serializers.IntegerField(allow_null=True)
    kind = serializers.CharField()
    label = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    message = serializers.CharField(allow_null=True)
    depth = serializers.IntegerField()
    childCount = serializers.IntegerField()
    descendants = serializers.IntegerField()
    failedDescendants = serializers.IntegerField()


class VariantResultSerializer(serializers.Serializer):
    """What ``POST /api/snapshots/{id}/variants/`` answers: the derived snapshot and its run."""

    snapshot = serializers.SerializerMethodField()
    run = serializers.SerializerMethodField()

    @extend_schema_field(SnapshotUploadResultSerializer)
    def get_snapshot(self, obj) -> dict:
        return SnapshotUploadResultSerializer(obj["snapshot"]).data

    @extend_schema_field(RunSerializer(allow_null=True))
    def get_run(self, obj) -> dict | None:
        return RunSerializer(obj["run"]).data if obj["run"] is not None else None
