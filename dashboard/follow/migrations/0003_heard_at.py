from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('follow', '0002_write_modes'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='heard_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
