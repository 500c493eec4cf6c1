from django.contrib import admin

from dra_web.snapshots.models import Snapshot


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "source", "created", "size_bytes")
    list_filter = ("source",)
    search_fields = ("name", "content_hash")
    exclude = ("files_blob", "documents_blob")
    readonly_fields = ("content_hash", "object_counts", "warnings", "size_bytes", "file_names")
