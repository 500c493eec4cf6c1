from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_run_pinned")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="page_facts_blob",
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
