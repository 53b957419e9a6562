from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("access", "0001_initial"),
        ("web", "0003_move_models_to_access"),
    ]

    operations = [
        migrations.AlterModelTable(name="apitoken", table=None),
        migrations.AlterModelTable(name="profile", table=None),
        migrations.AlterModelTable(name="sharelink", table=None),
    ]
