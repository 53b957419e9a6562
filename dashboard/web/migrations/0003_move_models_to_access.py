# The access models (Profile, ApiToken, ShareLink) moved to the access app. Their tables stay
# where they are; access.0001 takes them over in the migration state and access.0002 renames them.
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0002_share_links"),
        ("access", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.DeleteModel(name="ApiToken"),
            migrations.DeleteModel(name="Profile"),
            migrations.DeleteModel(name="ShareLink"),
        ]),
    ]
