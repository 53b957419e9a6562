from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("kube", "0002_singletons")]
    operations = [
        migrations.AddField(model_name="compactionstate", name="compacted_at", field=models.DateTimeField(null=True)),
    ]
