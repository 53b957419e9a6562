"""Settings an operator sets from the environment (docs/OPERATIONS.md): secret-key rotation
without signing everyone out, and PgBouncer's transaction pooling."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from conftest import ROOT, server_env


def _settings(tmp_path, **env) -> dict:
    code = ("import json; from django.conf import settings; db = settings.DATABASES['default']; "
            "print(json.dumps({'fallbacks': settings.SECRET_KEY_FALLBACKS, "
            "'no_cursors': db.get('DISABLE_SERVER_SIDE_CURSORS', False), "
            "'prepare': db.get('OPTIONS', {}).get('prepare_threshold', 'default')}))")
    out = subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code],
                         env={**server_env(tmp_path), **env}, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_environment_sets_fallback_keys_and_pgbouncer_mode(tmp_path):
    assert _settings(tmp_path) == {"fallbacks": [], "no_cursors": False, "prepare": "default"}
    got = _settings(tmp_path, DJANGO_SECRET_KEY="new", DJANGO_SECRET_KEY_FALLBACKS="old-1, old-2",
                    DATABASE_URL="postgres://u@127.0.0.1:6432/kubedash", KUBEDASH_PGBOUNCER="1")
    assert got == {"fallbacks": ["old-1", "old-2"], "no_cursors": True, "prepare": None}


@pytest.mark.django_db
def test_rotating_the_secret_key_with_a_fallback_keeps_people_signed_in(client):
    User.objects.create_user("rotating", password="pw-rotating-1")
    old, new = "old-key-" + "x" * 40, "new-key-" + "y" * 40
    for fallbacks, signed_in in (([], False), ([old], True)):
        with override_settings(SECRET_KEY=old, SECRET_KEY_FALLBACKS=[]):
            assert client.login(username="rotating", password="pw-rotating-1")
            assert client.get("/").status_code == 200
        with override_settings(SECRET_KEY=new, SECRET_KEY_FALLBACKS=fallbacks):   # the rotation
            assert (client.get("/").status_code == 200) is signed_in, fallbacks
        client.logout()
