"""Following clusters, the configuration side: credentials encrypted at rest (follow/secrets.py),
kubeconfigs reduced to one context with files inlined (follow/upstream_kubeconfig.py), adding and
removing clusters (follow/following.py) through `manage.py follow` and the clusters page, and
the API client the follower gets from the stored credentials, used against a real server."""
from __future__ import annotations

import base64
import io
import os
import stat
import sys
from datetime import timedelta

import pytest
import yaml
from cryptography.fernet import Fernet
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from manifests import lease

TOKEN = "s3cr3t-token-Zq9vXw7"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfakeClient\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN EC PRIVATE KEY-----\nMHcfakeKey\n-----END EC PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(users: dict | None = None, current: str | None = "prod", clusters: dict | None = None,
               contexts: dict | None = None) -> str:
    """A kubeconfig with two contexts (prod: a token; dev: another cluster and user)."""
    clusters = clusters or {
        "prod-cluster": {"server": "https://prod.example.com:6443", "certificate-authority-data": b64(CA_PEM)},
        "dev-cluster": {"server": "https://dev.example.com", "insecure-skip-tls-verify": True},
    }
    users = users or {"prod-user": {"token": TOKEN}, "dev-user": {"username": "dev", "password": "dev-pass"}}
    contexts = contexts or {
        "prod": {"cluster": "prod-cluster", "user": "prod-user", "namespace": "team-a"},
        "dev": {"cluster": "dev-cluster", "user": "dev-user"},
    }
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in clusters.items()],
        "users": [{"name": k, "user": v} for k, v in users.items()],
        "contexts": [{"name": k, "context": v} for k, v in contexts.items()],
        "preferences": {},
    }
    if current is not None:
        config["current-context"] = current
    return yaml.safe_dump(config)


@pytest.fixture(autouse=True)
def credentials_key(monkeypatch):
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", key)
    return key


# ---------------------------------------------------------------------------------------------
# secrets


def test_encrypt_round_trip_hides_the_plaintext():
    from dashboard.follow import secrets

    token = secrets.encrypt(TOKEN.encode())
    assert TOKEN.encode() not in token and b64(TOKEN.encode()).encode() not in token
    assert secrets.decrypt(token) == TOKEN.encode()
    assert secrets.encrypt(TOKEN.encode()) != token    # a fresh IV each time


def test_a_wrong_key_fails_with_a_clear_error(monkeypatch):
    from dashboard.follow import secrets

    token = secrets.encrypt(b"data")
    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", Fernet.generate_key().decode())
    with pytest.raises(secrets.CredentialsError,
                       match="cannot be decrypted with this KUBEDASH_CREDENTIALS_KEY") as info:
        secrets.decrypt(token)
    assert info.value.__cause__ is None and info.value.__suppress_context__   # no cryptography traceback

    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", "not-a-key")
    with pytest.raises(secrets.CredentialsError, match="KUBEDASH_CREDENTIALS_KEY is not a Fernet key"):
        secrets.encrypt(b"data")


def test_keys_rotate_the_first_encrypts_any_decrypts(monkeypatch, credentials_key):
    from dashboard.follow import secrets

    old = secrets.encrypt(b"old")
    new_key = Fernet.generate_key().decode()
    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", f"{new_key},{credentials_key}")
    assert secrets.decrypt(old) == b"old"
    fresh = secrets.encrypt(b"new")
    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", new_key)
    assert secrets.decrypt(fresh) == b"new"


def test_without_the_variable_a_key_file_is_made_once_0600(monkeypatch, settings, tmp_path):
    from dashboard.follow import secrets

    monkeypatch.delenv("KUBEDASH_CREDENTIALS_KEY")
    settings.DATA_DIR = tmp_path
    token = secrets.encrypt(b"local")
    path = tmp_path / "credentials_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_bytes()
    Fernet(key)   # a real Fernet key
    assert secrets.decrypt(token) == b"local" and path.read_bytes() == key   # kept, not regenerated

    path.write_bytes(Fernet.generate_key())   # the data volume was replaced: another key
    with pytest.raises(secrets.CredentialsError, match=r"KUBEDASH_CREDENTIALS_KEY \(unset: the key in .*credentials_key\)"):
        secrets.decrypt(token)


# ---------------------------------------------------------------------------------------------
# upstream_kubeconfig.reduce


def test_reduce_keeps_only_the_current_context_with_a_token():
    from dashboard.follow.upstream_kubeconfig import reduce

    r = reduce(kubeconfig())
    assert (r.server, r.context, r.namespace_hint, r.auth) == ("https://prod.example.com:6443", "prod", "team-a",
                                                               "bearer token")
    assert r.config == {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "prod-cluster", "cluster": {"server": "https://prod.example.com:6443",
                                                           "certificate-authority-data": b64(CA_PEM)}}],
        "users": [{"name": "prod-user", "user": {"token": TOKEN}}],
        "contexts": [{"name": "prod", "context": {"cluster": "prod-cluster", "user": "prod-user",
                                                   "namespace": "team-a"}}],
        "current-context": "prod",
    }
    assert TOKEN not in repr(r)   # the dataclass's repr leaves the config out


def test_reduce_picks_the_named_context():
    from dashboard.follow.upstream_kubeconfig import reduce

    r = reduce(kubeconfig(), context="dev")
    assert (r.server, r.context, r.namespace_hint, r.auth) == ("https://dev.example.com", "dev", "",
                                                               "username and password")
    assert r.config["clusters"] == [{"name": "dev-cluster", "cluster": {"server": "https://dev.example.com",
                                                                        "insecure-skip-tls-verify": True}}]
    assert r.config["users"] == [{"name": "dev-user", "user": {"username": "dev", "password": "dev-pass"}}]
    assert TOKEN not in yaml.safe_dump(r.config)


def test_a_missing_context_names_the_available_ones():
    from dashboard.follow.upstream_kubeconfig import KubeconfigError, reduce

    with pytest.raises(KubeconfigError, match="context 'staging' is not in the kubeconfig; its contexts: prod, dev") as info:
        reduce(kubeconfig(), context="staging")
    assert info.value.field == "context"
    with pytest.raises(ValueError, match=r"no current-context: choose a context \(prod, dev\)"):
        reduce(kubeconfig(current=None))


def test_files_are_inlined_relative_to_the_base_dir(tmp_path):
    from dashboard.follow.upstream_kubeconfig import reduce

    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(CA_PEM)
    (tmp_path / "pki" / "client.crt").write_bytes(CERT_PEM)
    (tmp_path / "client.key").write_bytes(KEY_PEM)
    text = kubeconfig(
        clusters={"c": {"server": "https://k.example.com/", "certificate-authority": "pki/ca.crt",
                        "tls-server-name": "kubernetes"}},
        users={"u": {"client-certificate": "pki/client.crt", "client-key": str(tmp_path / "client.key"),
                     "extensions": [{"name": "x", "extension": {}}]}},
        contexts={"ctx": {"cluster": "c", "user": "u"}}, current="ctx")
    r = reduce(text, base_dir=tmp_path)
    assert r.server == "https://k.example.com" and r.auth == "client certificate"
    assert r.config["clusters"][0]["cluster"] == {"server": "https://k.example.com", "certificate-authority-data": b64(CA_PEM),
                                                  "tls-server-name": "kubernetes"}
    assert r.config["users"][0]["user"] == {"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)}


def test_a_token_file_is_inlined(tmp_path):
    from dashboard.follow.upstream_kubeconfig import reduce

    (tmp_path / "token").write_text(TOKEN + "\n")
    r = reduce(kubeconfig(users={"prod-user": {"tokenFile": "token"}, "dev-user": {}}), base_dir=tmp_path)
    assert r.config["users"][0]["user"] == {"token": TOKEN}


def test_file_references_are_refused_without_a_base_dir_and_missing_files_named(tmp_path):
    from dashboard.follow.upstream_kubeconfig import KubeconfigError, reduce

    text = kubeconfig(clusters={"prod-cluster": {"server": "https://p", "certificate-authority": "/etc/passwd"}})
    with pytest.raises(KubeconfigError, match=r"refers to a file \(certificate-authority: /etc/passwd\); a pasted or "
                                              r"uploaded kubeconfig must hold the data itself"):
        reduce(text)
    text = kubeconfig(users={"prod-user": {"tokenFile": "nowhere/token"}})
    with pytest.raises(KubeconfigError, match=f"cannot read the tokenFile file {tmp_path}/nowhere/token: No such file"):
        reduce(text, base_dir=tmp_path)


@pytest.mark.parametrize("user, words", [
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
               "args": ["eks", "get-token"]}},
     "exec plugins are not supported: kubedash follows clusters with a token or client certificate; "
     "create a ServiceAccount token"),
    ({"auth-provider": {"name": "gcp", "config": {}}},
     "auth-provider users .* are not supported: kubedash follows clusters with a token or client certificate; "
     "create a ServiceAccount token"),
])
def test_exec_and_auth_provider_users_are_refused(user, words):
    from dashboard.follow.upstream_kubeconfig import reduce

    with pytest.raises(ValueError, match=words):
        reduce(kubeconfig(users={"prod-user": user}))


@pytest.mark.parametrize("cluster, words", [
    ({"certificate-authority-data": b64(CA_PEM)}, "cluster 'prod-cluster' has no server address"),
    ({"server": "unix:///var/run/k8s.sock"}, "the server must be an http:// or https:// URL"),
    ({"server": "https://"}, "the server must be an http:// or https:// URL"),
    ({"server": "https://p", "certificate-authority-data": "%%%"}, "certificate-authority-data is not valid base64"),
    ({"server": "https://p", "insecure-skip-tls-verify": "yes"}, "insecure-skip-tls-verify must be true or false"),
])
def test_bad_clusters_are_refused(cluster, words):
    from dashboard.follow.upstream_kubeconfig import reduce

    with pytest.raises(ValueError, match=words):
        reduce(kubeconfig(clusters={"prod-cluster": cluster}))


# Issue 29: the follower talks only to what `server` names, never to kubedash's backends, and no
# message repeats a URL (it may hold a password).
@pytest.mark.parametrize("cluster, words", [
    ({"server": "https://admin:hunter2@prod.example.com"}, "must not hold a user name or password"),
    ({"server": "http://127.0.0.1:5432/#"}, "must not have a query \\(\\?\\) or fragment"),
    ({"server": "http://127.0.0.1:8000/api/v1/namespaces/x/secrets?"}, "must not have a query"),
    ({"server": "http://127.0.0.1:6379"}, "kubedash's database or Redis port"),
    ({"server": "http://localhost:5432/prefix"}, "kubedash's database or Redis port"),
    ({"server": "https://prod.example.com", "proxy-url": "http://127.0.0.1:6379"}, "proxy-url is not allowed here"),
])
def test_servers_that_would_reach_elsewhere_are_refused(cluster, words):
    from dashboard.follow.upstream_kubeconfig import reduce

    with pytest.raises(ValueError, match=words) as err:
        reduce(kubeconfig(clusters={"prod-cluster": cluster}))
    assert "hunter2" not in str(err.value) and "127.0.0.1" not in str(err.value)


def test_a_proxy_is_followed_only_when_an_admin_allows_it(settings):
    from dashboard.follow.upstream_kubeconfig import api_client, reduce

    settings.KUBEDASH_FOLLOW_ALLOW_PROXY = True
    config = reduce(kubeconfig(clusters={"prod-cluster": {"server": "https://prod.example.com",
                                                          "proxy-url": "http://proxy.example.com:3128"}})).config
    with api_client(config) as c:
        assert c.configuration.proxy == "http://proxy.example.com:3128"
    with pytest.raises(ValueError, match="the proxy is kubedash's database or Redis port"):
        reduce(kubeconfig(clusters={"prod-cluster": {"server": "https://prod.example.com",
                                                     "proxy-url": "http://127.0.0.1:5432"}}))
    settings.KUBEDASH_FOLLOW_ALLOW_PROXY = False
    with pytest.raises(ValueError, match="proxy-url is not allowed here"):
        api_client(config)


@pytest.mark.parametrize("token", [TOKEN + "\n", "  " + TOKEN + "\t"])
def test_tokens_are_stripped(token):
    from dashboard.follow.upstream_kubeconfig import api_client, reduce

    reduced = reduce(kubeconfig(users={"prod-user": {"token": token}}))
    assert reduced.config["users"][0]["user"] == {"token": TOKEN}
    with api_client(reduced.config) as c:
        assert c.configuration.api_key == {"BearerToken": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("token", ["abc\ndef", "abc def", "abc\r\nX-Injected: 1", "tok\x00en", "tökén"])
def test_tokens_that_are_not_bearer_tokens_are_refused_without_repeating_them(token):
    from dashboard.follow.upstream_kubeconfig import KubeconfigError, reduce

    with pytest.raises(KubeconfigError, match="not a valid bearer token") as err:
        reduce(kubeconfig(users={"prod-user": {"token": token}}))
    assert token.strip() not in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("clusters: [", "the kubeconfig is not valid YAML"),
    ("- a\n- b\n", "expected a mapping with clusters, users and contexts"),
    (kubeconfig(users={"prod-user": {"client-certificate-data": b64(CERT_PEM)}}), "client certificate without its key"),
    (kubeconfig(contexts={"prod": {"cluster": "gone", "user": "prod-user"}}), "no cluster named 'gone'"),
])
def test_unusable_kubeconfigs_say_why(text, words):
    from dashboard.follow.upstream_kubeconfig import reduce

    with pytest.raises(ValueError, match=words):
        reduce(text)


def test_api_client_from_a_reduced_kubeconfig():
    from dashboard.follow.upstream_kubeconfig import api_client, reduce

    users = {"prod-user": {"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)},
             "dev-user": {"token": TOKEN}}
    with api_client(reduce(kubeconfig(users=users)).config) as c:
        conf = c.configuration
        assert conf.host == "https://prod.example.com:6443" and conf.verify_ssl
        assert conf.ca_cert_data == CA_PEM.decode() and conf.ssl_ca_cert is None   # in memory
        assert open(conf.cert_file, "rb").read() == CERT_PEM and open(conf.key_file, "rb").read() == KEY_PEM
        # Issue 29: key material never on a disk (the client's own loader wrote it to /tmp, kept
        # after the cluster was removed or the process killed): an in-memory file of this process.
        assert conf.key_file.startswith("/proc/self/fd/") and "memfd:" in os.readlink(conf.key_file)
        key_file = conf.key_file
    assert not os.path.exists(key_file) or "memfd:" not in os.readlink(key_file)   # closed with the client
    with api_client(reduce(kubeconfig(users=users), context="dev").config) as c:
        assert c.configuration.api_key == {"BearerToken": f"Bearer {TOKEN}"}
        assert c.configuration.verify_ssl is False


# ---------------------------------------------------------------------------------------------
# clusters.add / remove


@pytest.mark.django_db
def test_add_stores_the_credentials_encrypted():
    from dashboard.follow import following
    from dashboard.follow.models import Cluster

    cluster = following.add("prod", kubeconfig(), namespace="team-b")
    row = Cluster.objects.get(name="prod")
    assert (row.server, row.context, row.namespace, row.state) == ("https://prod.example.com:6443", "prod", "team-b",
                                                                  Cluster.SYNCING)
    stored = bytes(row.credentials)
    assert TOKEN.encode() not in stored and b64(TOKEN.encode()).encode() not in stored
    assert following.credentials(row)["users"] == [{"name": "prod-user", "user": {"token": TOKEN}}]
    assert following.cluster_api_client(cluster).configuration.api_key == {"BearerToken": f"Bearer {TOKEN}"}


@pytest.mark.django_db
def test_a_cluster_saved_under_another_key_fails_clearly(monkeypatch):
    from dashboard.follow import following, secrets

    cluster = following.add("prod", kubeconfig())
    monkeypatch.setenv("KUBEDASH_CREDENTIALS_KEY", Fernet.generate_key().decode())
    with pytest.raises(secrets.CredentialsError, match="cannot be decrypted with this KUBEDASH_CREDENTIALS_KEY"):
        following.cluster_api_client(cluster)


@pytest.mark.django_db
@pytest.mark.parametrize("name, words", [
    ("local", "'local' is the name of kubedash's own objects: choose another name"),
    ("Prod", "'Prod' is not a valid cluster name"),
    ("-x", "is not a valid cluster name"),
    ("a" * 64, "is not a valid cluster name"),
    ("", "a cluster needs a name"),
])
def test_add_refuses_bad_names(name, words):
    from dashboard.follow import following
    from dashboard.follow.models import Cluster

    with pytest.raises(ValueError, match=words):
        following.add(name, kubeconfig())
    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_add_refuses_duplicates_and_bad_namespaces_and_contacts_nothing():
    from dashboard.follow import following

    # Nothing listens at this address: add only records the cluster.
    following.add("prod", kubeconfig(clusters={"prod-cluster": {"server": "https://127.0.0.1:1"}}))
    with pytest.raises(ValueError, match="a cluster named 'prod' is already followed"):
        following.add("prod", kubeconfig())
    with pytest.raises(ValueError, match="'Team_A' is not a valid namespace name"):
        following.add("other", kubeconfig(), namespace="Team_A")


@pytest.mark.django_db(transaction=True)
def test_remove_forgets_the_clusters_objects():
    from dashboard.access import clusters as access_clusters
    from dashboard.follow import following
    from dashboard.follow.models import Cluster
    from dashboard.kube import mirror, registry, store

    following.add("prod", kubeconfig())
    res = registry.by_kind("Lease")
    upstream = [lease(f"l{i}", uid=f"uid-{i}", resourceVersion=str(100 + i),
                      creationTimestamp="2026-01-02T03:04:05Z") for i in range(3)]
    mirror.mirror("prod", [mirror.Mirrored(res, "default", o["metadata"]["name"], o) for o in upstream])
    store.create(res, "default", lease("mine"))   # a local object of the same name space
    with access_clusters.within("prod"):
        assert res.model.objects.count() == 3

    assert following.remove("prod") == 3
    assert not Cluster.objects.exists()
    with access_clusters.within("prod"):
        assert res.model.objects.count() == 0
    assert list(res.model.objects.values_list("name", flat=True)) == ["mine"]   # local objects stay
    with pytest.raises(ValueError, match="no followed cluster is named 'prod'"):
        following.remove("prod")


# ---------------------------------------------------------------------------------------------
# manage.py follow


def run(*args, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    call_command("follow", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_follow_command_add_list_remove(tmp_path, monkeypatch):
    from dashboard.follow.models import Cluster
    from dashboard.access.own_kubeconfig import build_kubeconfig, write_kubeconfig

    path = write_kubeconfig(tmp_path / "kubeconfig",
                            build_kubeconfig("https://127.0.0.1:8443", CA_PEM, "admin", TOKEN, "team-a"))
    out = run("add", "home", "--kubeconfig", str(path))
    assert out.startswith("Following home: https://127.0.0.1:8443 (context kubedash, every namespace, writes read-only)")
    assert TOKEN not in out

    text = kubeconfig(users={"prod-user": {"tokenFile": "token"}, "dev-user": {}})
    (tmp_path / "token").write_text(TOKEN)
    monkeypatch.chdir(tmp_path)   # stdin: relative files from the working directory
    out = run("add", "prod", "--kubeconfig", "-", "--context", "prod", "--namespace", "team-a", "--writes", "as-user",
              stdin=text, monkeypatch=monkeypatch)
    assert "(context prod, namespace team-a, writes as-user)" in out
    assert run("set", "prod", "--writes", "own-credentials") == "prod: writes own-credentials.\n"
    with pytest.raises(CommandError, match="no followed cluster is named 'nope'"):
        run("set", "nope", "--writes", "as-user")

    Cluster.objects.filter(name="prod").update(state=Cluster.STALE, message="Unauthorized: the token was revoked")
    listing = run("list")
    lines = listing.splitlines()
    assert lines[0].split() == ["NAME", "SERVER", "CONTEXT", "NAMESPACE", "WRITES", "STATE", "LAST", "WORD", "LAST",
                                "EVENT", "MESSAGE"]
    assert lines[1].split() == ["home", "https://127.0.0.1:8443", "kubedash", "(all)", "read-only", "syncing", "never",
                                "never"]
    assert lines[2].split()[:8] == ["prod", "https://prod.example.com:6443", "prod", "team-a", "own-credentials",
                                    "stale", "never", "never"]
    assert lines[2].endswith("Unauthorized: the token was revoked")
    assert TOKEN not in listing and b64(TOKEN.encode()) not in listing
    # "live" left on the row by a follower that stopped reporting (its process died) is not live.
    long_ago = timezone.now() - timedelta(minutes=5)
    Cluster.objects.filter(name="prod").update(state=Cluster.LIVE, heartbeat_at=long_ago, heard_at=long_ago)
    prod = run("list").splitlines()[2]
    assert "stale (no heartbeat)" in prod and "5m ago" in prod, prod

    assert run("remove", "home") == "Stopped following home; removed 0 of its objects from kubedash.\n"
    assert [c.name for c in Cluster.objects.all()] == ["prod"]
    run("remove", "prod")
    assert run("list").startswith("No followed clusters.")


@pytest.mark.django_db
def test_follow_command_errors_are_plain(tmp_path):
    exec_config = tmp_path / "exec"
    exec_config.write_text(kubeconfig(users={"prod-user": {"exec": {"command": "aws"}}}))
    with pytest.raises(CommandError, match="^exec plugins are not supported"):
        run("add", "eks", "--kubeconfig", str(exec_config))
    with pytest.raises(CommandError, match=f"cannot read the kubeconfig {tmp_path}/missing: No such file"):
        run("add", "eks", "--kubeconfig", str(tmp_path / "missing"))
    with pytest.raises(CommandError, match="'local' is the name of kubedash's own objects"):
        run("add", "local", "--kubeconfig", str(exec_config))
    with pytest.raises(CommandError, match="context 'nope' is not in the kubeconfig; its contexts: prod, dev"):
        good = tmp_path / "good"
        good.write_text(kubeconfig())
        run("add", "eks", "--kubeconfig", str(good), "--context", "nope")
    with pytest.raises(CommandError, match="no followed cluster is named 'eks'"):
        run("remove", "eks")


# ---------------------------------------------------------------------------------------------
# The clients the follower gets, against a real server


@pytest.mark.django_db
def test_the_api_client_reaches_a_real_server(kube_server, tmp_path, monkeypatch):
    """A kubeconfig as `manage.py kubeconfig` writes it (CA inline), and one with the CA and the
    token in files beside it: both work once stored and decrypted."""
    from kubernetes import client as k8s

    from dashboard.follow import following

    path = kube_server.kubeconfig(tmp_path / "kubeconfig", "follower", "viewer")
    run("add", "live", "--kubeconfig", str(path))

    config = yaml.safe_load(path.read_text())
    token = config["users"][0]["user"].pop("token")
    (tmp_path / "sa-token").write_text(token)
    config["users"][0]["user"]["tokenFile"] = "sa-token"
    config["clusters"][0]["cluster"].pop("certificate-authority-data")
    config["clusters"][0]["cluster"]["certificate-authority"] = kube_server.ca_file
    (tmp_path / "files.yaml").write_text(yaml.safe_dump(config))
    run("add", "live-files", "--kubeconfig", str(tmp_path / "files.yaml"))

    from dashboard.follow.models import Cluster
    for cluster in Cluster.objects.all():
        with following.cluster_api_client(cluster) as c:
            leases = k8s.CoordinationV1Api(c).list_lease_for_all_namespaces()
            assert leases.metadata.resource_version
            with pytest.raises(k8s.ApiException) as info:   # a viewer: reads only
                k8s.CoordinationV1Api(c).create_namespaced_lease("default", {"metadata": {"name": "x"}})
            assert info.value.status == 403


# ---------------------------------------------------------------------------------------------
# The clusters page


def post(client, **data):
    form = {"name": "", "kubeconfig": "", "context": "", "namespace": "", **data}
    return client.post("/clusters/", form)


def field_errors(response, field: str) -> str:
    """The text of the error list next to a field (web/edit/_field.html)."""
    import re

    html = response.content.decode()
    found = re.search(rf'<ul class="field-errors" id="id_{field}_error">(.*?)</ul>', html, re.S)
    return re.sub(r"<[^>]+>", "", found.group(1)).replace("&#x27;", "'").strip() if found else ""


def test_the_page_is_for_admins_only(login, client):
    from django.conf import settings

    for role in ("viewer", "editor"):
        c = login(role)
        assert c.get("/clusters/").status_code == 403
        assert post(c, name="x", kubeconfig=kubeconfig()).status_code == 403
        assert c.post("/clusters/x/remove/").status_code == 403
    r = client.get("/clusters/")
    assert r.status_code == 302 and r["Location"].startswith(settings.LOGIN_URL)


def test_admin_adds_by_pasting_and_uploading_and_removes(login):
    from dashboard.follow.models import Cluster

    c = login("admin")
    r = c.get("/clusters/")
    html = r.content.decode()
    assert r.status_code == 200 and "No followed clusters yet" in html
    for field in ("name", "kubeconfig", "kubeconfig_file", "context", "namespace"):
        assert f'<label for="id_{field}">' in html
    assert 'enctype="multipart/form-data"' in html

    r = post(c, name="prod", kubeconfig=kubeconfig(), namespace="team-a")
    assert r.status_code == 302 and r["Location"] == "/clusters/"
    upload = SimpleUploadedFile("config", kubeconfig().encode(), content_type="application/octet-stream")
    r = c.post("/clusters/", {"name": "dev", "context": "dev", "kubeconfig_file": upload})
    assert r.status_code == 302

    Cluster.objects.filter(name="dev").update(state=Cluster.STALE, message="connection refused")
    r = c.get("/clusters/")
    html = r.content.decode()
    assert "Following dev: https://dev.example.com (context dev, every namespace)" in html
    assert '<tr id="cluster-prod">' in html and '<tr id="cluster-dev">' in html
    assert "https://prod.example.com:6443" in html and "team-a" in html
    assert '<span class="badge">syncing</span>' in html and '<span class="badge">stale</span>' in html
    assert "connection refused" in html
    assert TOKEN not in html and "dev-pass" not in html and b64(CA_PEM) not in html
    assert r["Cache-Control"] == "no-store"

    r = c.get("/clusters/dev/remove/")
    assert r.status_code == 200 and "Stop following dev?" in r.content.decode()
    assert "deletes its 0 objects" in r.content.decode()
    r = c.post("/clusters/dev/remove/")
    assert r.status_code == 302 and r["Location"] == "/clusters/"
    assert list(Cluster.objects.values_list("name", flat=True)) == ["prod"]
    assert "Stopped following dev; removed its 0 objects from kubedash." in c.get("/clusters/").content.decode()
    assert c.post("/clusters/dev/remove/").status_code == 404


def test_errors_are_shown_next_to_their_fields(login):
    from dashboard.follow.models import Cluster

    c = login("admin")
    r = post(c, name="prod", kubeconfig=kubeconfig(users={"prod-user": {"exec": {"command": "gke-gcloud-auth-plugin"}}}))
    assert r.status_code == 400
    assert field_errors(r, "kubeconfig").startswith("Exec plugins are not supported: kubedash follows clusters with a "
                                                    "token or client certificate; create a ServiceAccount token")
    assert "Not saved." in r.content.decode()

    r = post(c, name="prod", kubeconfig=kubeconfig(), context="staging")
    assert field_errors(r, "context") == "Context 'staging' is not in the kubeconfig; its contexts: prod, dev."

    # Every problem at once, each beside its field.
    r = post(c, name="local", kubeconfig=kubeconfig(users={"prod-user": {"auth-provider": {"name": "oidc"}}}))
    assert field_errors(r, "name") == "'local' is the name of kubedash's own objects: choose another name."
    assert field_errors(r, "kubeconfig").startswith("Auth-provider users (e.g. gcp, azure, oidc) are not supported")
    assert "Fix the 2 problems below" in r.content.decode()

    r = post(c, name="local", kubeconfig="")
    assert field_errors(r, "name") == "'local' is the name of kubedash's own objects: choose another name."
    assert field_errors(r, "kubeconfig") == "Paste a kubeconfig here or upload its file below."

    # A pasted kubeconfig may not make the server read its own files.
    r = post(c, name="prod", kubeconfig=kubeconfig(users={"prod-user": {"tokenFile": "/etc/hostname"}}))
    assert "refers to a file (tokenFile: /etc/hostname)" in field_errors(r, "kubeconfig")

    upload = SimpleUploadedFile("config", b"\xff\xfe\x00binary", content_type="application/octet-stream")
    r = c.post("/clusters/", {"name": "prod", "kubeconfig_file": upload})
    assert field_errors(r, "kubeconfig_file") == "The file is not text (UTF-8): upload the kubeconfig itself."
    upload = SimpleUploadedFile("config", b"clusters: [", content_type="application/octet-stream")
    r = c.post("/clusters/", {"name": "prod", "kubeconfig_file": upload})
    assert field_errors(r, "kubeconfig_file").startswith("The kubeconfig is not valid YAML")

    r = post(c, name="prod", kubeconfig=kubeconfig(), namespace="Not A Namespace")
    assert "is not a valid namespace name" in field_errors(r, "namespace")
    assert not Cluster.objects.exists()

    post(c, name="prod", kubeconfig=kubeconfig())
    r = post(c, name="prod", kubeconfig=kubeconfig())
    assert field_errors(r, "name") == "A cluster named 'prod' is already followed."


def test_the_page_says_when_a_cluster_is_not_current(login):
    """A cluster whose state says live but whose follower stopped confirming it (its leader
    died, say) is not shown as current: a warning badge, "(no heartbeat)"."""
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.follow.models import Cluster

    now = timezone.now()
    Cluster.objects.create(name="fresh", server="https://a:6443", credentials=b"x", state="live", heartbeat_at=now)
    Cluster.objects.create(name="silent", server="https://b:6443", credentials=b"x", state="live",
                           heartbeat_at=now - timedelta(minutes=5))
    Cluster.objects.create(name="down", server="https://c:6443", credentials=b"x", state="stale",
                           message="leases: cannot connect to the API server (connection refused)")
    page = login("admin").get("/clusters/").content.decode()
    row = {name: page.split(f'<tr id="cluster-{name}">', 1)[1].split("</tr>", 1)[0] for name in ("fresh", "silent", "down")}
    assert '<td class="ok"><span class="badge">live</span>' in row["fresh"]
    assert '<td class="warn"><span class="badge">live (no heartbeat)</span>' in row["silent"]
    assert '<td class="bad"><span class="badge">stale</span>' in row["down"] and "connection refused" in row["down"]
    # /metrics says the same, read from the rows at scrape (a dead leader's gauges say nothing).
    metrics = login("admin").get("/metrics").content.decode()
    stale = {name: f'kubedash_follow_stale{{cluster="{name}"}}' for name in ("fresh", "silent", "down")}
    assert f'{stale["fresh"]} 0.0' in metrics and f'{stale["silent"]} 1.0' in metrics, metrics[-2000:]
    assert f'{stale["down"]} 1.0' in metrics


@pytest.mark.django_db
def test_a_cluster_whose_credentials_cannot_be_used_is_reported_not_followed():
    """Stored under another KUBEDASH_CREDENTIALS_KEY (or damaged): the leader does not start a
    follower, says why on the cluster (the Clusters page, the banner), and tries again later."""
    from dashboard.follow.models import Cluster
    from dashboard.follow.runner import Followers

    Cluster.objects.create(name="lost-key", server="https://a:6443", credentials=b"not a fernet token")
    followers = Followers()
    followers.sync(leading=True)
    assert followers.running == {}
    row = Cluster.objects.get(name="lost-key")
    assert row.state == "stale" and row.message.startswith("cannot use its credentials: ")
    assert "KUBEDASH_CREDENTIALS_KEY" in row.message
    followers.sync(leading=True)   # not retried at once (every second would flood the log)
    assert followers.running == {} and followers.retry_at
