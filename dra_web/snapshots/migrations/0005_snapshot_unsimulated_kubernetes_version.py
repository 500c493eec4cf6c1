from django.db import migrations, models


def fill_unsimulated(apps, schema_editor):
    """Snapshots stored before: their documents' unsimulated fields, as an upload records them."""
    import zlib

    from allocator.snapshot.unsimulated import field_warnings
    from dra_web import blobs

    Snapshot = apps.get_model("snapshots", "Snapshot")
    for pk in list(Snapshot.objects.values_list("pk", flat=True)):
        blob = Snapshot.objects.filter(pk=pk).values_list("documents_blob", flat=True).first()
        try:
            documents = [(kind, raw) for kind, raw in blobs.unpack(blob)]
        except (zlib.error, ValueError, TypeError):  # unreadable: no list, as before
            continue
        found = field_warnings(documents)
        if found:
            Snapshot.objects.filter(pk=pk).update(unsimulated=found)


class Migration(migrations.Migration):
    dependencies = [("snapshots", "0004_unique_owner_content")]

    operations = [
        migrations.AddField(
            model_name="snapshot",
            name="unsimulated",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="snapshot",
            name="kubernetes_version",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(fill_unsimulated, migrations.RunPython.noop),
    ]
