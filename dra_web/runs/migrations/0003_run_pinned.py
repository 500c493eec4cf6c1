from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_tracenode_search")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="pinned",
            field=models.BooleanField(db_index=True, default=False),
        ),
    ]
