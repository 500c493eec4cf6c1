from django.contrib import admin

from dra_web.runs.models import Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "snapshot", "owner", "status", "queued_at", "finished_at")
    list_filter = ("status",)
    exclude = ("trace_blob", "result")
    readonly_fields = ("task_id", "attempts", "error", "allocator_version")
