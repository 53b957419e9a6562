"""Every user gets a profile (a superuser's says admin), and is_staff / is_superuser are set from
it: true only for admins without namespace or cluster limits (access/signals.py keeps them so).
Before this, `issue_token --role admin` set both and nothing cleared them."""
from django.conf import settings
from django.db import migrations


def staff_follows_role(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Profile = apps.get_model("access", "Profile")
    for user in User.objects.filter(kube_profile__isnull=True):
        Profile.objects.create(user=user, role="admin" if user.is_superuser else "viewer")
    for profile in Profile.objects.all():
        full = profile.role == "admin" and not profile.namespaces and not profile.clusters
        User.objects.filter(pk=profile.user_id).update(is_staff=full, is_superuser=full)


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0005_token_may_impersonate"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(staff_follows_role, migrations.RunPython.noop)]
