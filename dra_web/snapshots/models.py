"""A snapshot: the uploaded (or imported) cluster state, stored compressed and immutable."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from dra_web import blobs


class Snapshot(models.Model):
    SOURCE_UPLOAD = "upload"
    SOURCE_IMPORT = "import"
    SOURCE_DEMO = "demo"
    SOURCE_VARIANT = "variant"
    SOURCES = [
        (SOURCE_UPLOAD, "upload"),
        (SOURCE_IMPORT, "live import"),
        (SOURCE_DEMO, "demo"),
        (SOURCE_VARIANT, "what-if"),
    ]

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="snapshots"
    )
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    source = models.CharField(max_length=10, choices=SOURCES, default=SOURCE_UPLOAD)
    # sha256 of the normalised documents (canonical JSON, in load order): the same cluster
    # state uploaded twice as YAML or JSON, in one file or several, hashes the same.
    content_hash = models.CharField(max_length=64, db_index=True)
    # sha256 of the files as uploaded (names and bytes): an identical re-upload is recognised
    # without parsing it again.
    files_hash = models.CharField(max_length=64, db_index=True, blank=True, default="")
    # zlib(JSON [{"name": file name, "content": text}]): the files as uploaded, re-parsed by runs.
    files_blob = models.BinaryField()
    # zlib(JSON [[kind, raw document], ...]): every recognised document, normalised, load order.
    documents_blob = models.BinaryField()
    object_counts = models.JSONField(default=dict)  # kind -> count
    # kind -> [[namespace, name], ...] in load order: the detail view without decompressing.
    object_index = models.JSONField(default=dict)
    warnings = models.JSONField(default=list)  # list[str]
    # What the documents use that changes scheduling but is not simulated, as of the upload
    # (allocator/snapshot/unsimulated.py; runs work it out again from the documents).
    unsimulated = models.JSONField(default=list)  # list[str]
    # The API server's version of a live import ("v1.34.2-eks-113cf36"); "" for uploads.
    kubernetes_version = models.CharField(max_length=64, blank=True, default="")
    size_bytes = models.BigIntegerField(default=0)  # uploaded bytes
    file_names = models.JSONField(default=list)
    # A what-if: the snapshot it was derived from and the edits made to it, in order, each
    # {"object": "Kind ns/name", "patch": [RFC 6902 ops]} or {"object", "delete": true}; the
    # owner is who made it.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="variants"
    )
    edits = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["owner", "content_hash"])]
        # One snapshot per (owner, content), also under concurrent uploads (services catches
        # the IntegrityError and answers with the stored one).
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "content_hash"], name="snapshot_unique_owner_content"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def all_warnings(self) -> list[str]:
        return [*(self.warnings or []), *(self.unsimulated or [])]

    @property
    def object_total(self) -> int:
        return sum(self.object_counts.values())

    def files(self) -> list[tuple[str, str]]:
        return [(f["name"], f["content"]) for f in blobs.unpack(self.files_blob)]

    def documents(self) -> list[tuple[str, dict]]:
        return [(kind, raw) for kind, raw in blobs.unpack(self.documents_blob)]
