from django.db import migrations


def create_singletons(apps, schema_editor):
    apps.get_model("kube", "RevisionCounter").objects.get_or_create(pk=1, defaults={"value": 0})
    apps.get_model("kube", "CompactionState").objects.get_or_create(pk=1, defaults={"compacted_rv": 0})


class Migration(migrations.Migration):
    dependencies = [("kube", "0001_initial")]
    operations = [migrations.RunPython(create_singletons, migrations.RunPython.noop)]
