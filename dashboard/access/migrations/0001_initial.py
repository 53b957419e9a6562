# Takes over the tables that web.0001 and web.0002 created (state only: no table is touched);
# 0002 gives them this app's names.
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("web", "0002_share_links"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name="ApiToken",
                fields=[
                    ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                    ("name", models.CharField(blank=True, default="", max_length=100)),
                    ("token_hash", models.CharField(max_length=64, unique=True)),
                    ("created", models.DateTimeField(auto_now_add=True)),
                    ("last_used", models.DateTimeField(blank=True, null=True)),
                    ("revoked", models.BooleanField(default=False)),
                    ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="api_tokens",
                                               to=settings.AUTH_USER_MODEL)),
                ],
                options={"db_table": "web_apitoken"},
            ),
            migrations.CreateModel(
                name="Profile",
                fields=[
                    ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                    ("role", models.CharField(choices=[("admin", "Admin"), ("editor", "Editor"), ("viewer", "Viewer")],
                                              default="viewer", max_length=8)),
                    ("namespaces", models.JSONField(blank=True, default=list)),
                    ("user", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="kube_profile",
                                                  to=settings.AUTH_USER_MODEL)),
                ],
                options={"db_table": "web_profile"},
            ),
            migrations.CreateModel(
                name="ShareLink",
                fields=[
                    ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                    ("token_hash", models.CharField(max_length=64, unique=True)),
                    ("label", models.CharField(max_length=100)),
                    ("kind", models.CharField(max_length=32)),
                    ("namespace", models.CharField(blank=True, default="", max_length=253)),
                    ("label_selector", models.CharField(blank=True, default="", max_length=1000)),
                    ("created", models.DateTimeField(auto_now_add=True)),
                    ("expires", models.DateTimeField()),
                    ("last_used", models.DateTimeField(blank=True, null=True)),
                    ("revoked_at", models.DateTimeField(blank=True, null=True)),
                    ("creator", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="share_links",
                                                  to=settings.AUTH_USER_MODEL)),
                ],
                options={"ordering": ["-created"], "db_table": "web_sharelink"},
            ),
        ]),
    ]
