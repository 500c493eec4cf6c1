from django.db import migrations, models


def merge_duplicates(apps, schema_editor):
    """Before the constraint: an owner's duplicate snapshots (concurrent uploads could make
    them) become the earliest one; their runs move to it."""
    Snapshot = apps.get_model("snapshots", "Snapshot")
    Run = apps.get_model("runs", "Run")
    seen: dict[tuple[int, str], int] = {}
    for pk, owner, digest in Snapshot.objects.order_by("created", "id").values_list(
        "pk", "owner_id", "content_hash"
    ):
        keep = seen.setdefault((owner, digest), pk)
        if keep != pk:
            Run.objects.filter(snapshot_id=pk).update(snapshot_id=keep)
            Snapshot.objects.filter(pk=pk).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("snapshots", "0003_snapshot_object_index"),
        ("runs", "0002_tracenode_search"),
    ]

    operations = [
        migrations.RunPython(merge_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="snapshot",
            constraint=models.UniqueConstraint(
                fields=("owner", "content_hash"), name="snapshot_unique_owner_content"
            ),
        ),
    ]
