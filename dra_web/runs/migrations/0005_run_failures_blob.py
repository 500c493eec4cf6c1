from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0004_run_page_facts_blob")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="failures_blob",
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
