"""Snapshot representations of the REST API (docs/API.md); names are camelCase."""

from __future__ import annotations

from rest_framework import serializers

from dra_web.snapshots.models import Snapshot


class SnapshotSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    contentHash = serializers.CharField(source="content_hash", read_only=True)
    objectCounts = serializers.JSONField(source="object_counts", read_only=True)
    objectTotal = serializers.IntegerField(source="object_total", read_only=True)
    sizeBytes = serializers.IntegerField(source="size_bytes", read_only=True)
    fileNames = serializers.JSONField(source="file_names", read_only=True)
    warnings = serializers.JSONField(
        source="all_warnings",
        read_only=True,
        help_text="what the load skipped or read differently, then what the documents use that "
        "changes scheduling but is not simulated ('not simulated: ...')",
    )
    kubernetesVersion = serializers.CharField(
        source="kubernetes_version",
        read_only=True,
        allow_null=True,
        help_text="the API server's version of a live import (null for uploads); its runs use "
        "that release's feature gate defaults unless options.kubernetesVersion says otherwise",
    )
    parent = serializers.IntegerField(
        source="parent_id",
        read_only=True,
        allow_null=True,
        help_text="a what-if: the snapshot this one was derived from (null otherwise)",
    )
    edits = serializers.JSONField(
        read_only=True,
        help_text="a what-if: the edits made to the parent, in order, each {object, patch} "
        "(RFC 6902) or {object, delete: true}; the owner made them",
    )

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "name",
            "owner",
            "created",
            "source",
            "contentHash",
            "objectCounts",
            "objectTotal",
            "warnings",
            "kubernetesVersion",
            "sizeBytes",
            "fileNames",
            "parent",
            "edits",
        ]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["kubernetesVersion"] = data["kubernetesVersion"] or None
        return data


class SnapshotUploadResultSerializer(SnapshotSerializer):
    existing = serializers.BooleanField(
        read_only=True, help_text="true when the same content was already uploaded by you"
    )

    class Meta(SnapshotSerializer.Meta):
        fields = [*SnapshotSerializer.Meta.fields, "existing"]
        read_only_fields = fields


class SnapshotDetailSerializer(SnapshotSerializer):
    objects = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()

    class Meta(SnapshotSerializer.Meta):
        fields = [*SnapshotSerializer.Meta.fields, "objects", "runs"]
        read_only_fields = fields

    def get_objects(self, obj) -> dict[str, list[dict]]:
        from dra_web.snapshots.selectors import object_refs

        return object_refs(obj)

    def get_runs(self, obj) -> list[int]:
        return list(obj.runs.order_by("-id").values_list("id", flat=True)[:100])


class SnapshotObjectSerializer(serializers.Serializer):
    kind = serializers.CharField()
    namespace = serializers.CharField(allow_null=True)
    name = serializers.CharField()
    raw = serializers.JSONField()


class SnapshotUploadSerializer(serializers.Serializer):
    """The multipart form; a raw YAML/JSON body works too (``?name=`` names it)."""

    file = serializers.ListField(child=serializers.FileField(), help_text="one or more files")
    name = serializers.CharField(required=False)
    catalogRegion = serializers.CharField(
        required=False,
        help_text="add the AWS catalog's InstanceType documents for this region as one more "
        "file (also a query parameter for a raw body)",
    )
    catalogFamilies = serializers.CharField(
        required=False, help_text="comma-separated instance families (default: all)"
    )


class ClusterImportSerializer(serializers.Serializer):
    kubeconfig = serializers.JSONField(help_text="kubeconfig content: YAML text or an object")
    context = serializers.CharField(required=False, allow_blank=True)
    name = serializers.CharField(required=False, allow_blank=True)
    catalog = serializers.BooleanField(
        required=False,
        default=True,
        help_text="without instanceTypes: add the AWS catalog's instance types that the "
        "cluster's NodePools allow (and its nodes' families); false: add none",
    )
    region = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="AWS region of the catalog (default: read from the nodes' labels)",
    )
    instanceTypes = serializers.JSONField(
        required=False,
        help_text="instance type file content (YAML/JSON text), or a list of them",
    )


class VariantEditSerializer(serializers.Serializer):
    object = serializers.CharField(help_text='"Kind namespace/name" or "Kind name"')
    patch = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="RFC 6902 operations against the object, as kubectl patch --type json takes them",
    )
    delete = serializers.BooleanField(
        required=False, help_text="true: the object is removed (instead of a patch)"
    )


class VariantRunSerializer(serializers.Serializer):
    options = serializers.JSONField(required=False, default=dict)


class VariantCreateSerializer(serializers.Serializer):
    """A what-if: the parent snapshot with these edits applied, in order."""

    edits = VariantEditSerializer(many=True)
    name = serializers.CharField(required=False, allow_blank=True)
    run = VariantRunSerializer(
        required=False, help_text="when present, a run of the derived snapshot is queued"
    )
