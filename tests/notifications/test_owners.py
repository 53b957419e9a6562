"""Who a rule answers to and where it looks: a rule a group owns (evaluated with the group binding's
rights, every member told in the app, no one else), and a rule on a followed cluster (told of a
change there, not of the same change in the local cluster)."""
import pytest

from chromium import axe_violations, log_in  # noqa: F401 (plugin fixtures)
from conftest import eventually
from followed import mirror
from manifests import lease, write

from .conftest import notify
from .receivers import Webhook, query

SETUP = """
from django.contrib.auth.models import Group
from dashboard.access.models import GroupBinding
from dashboard.access.tokens import ensure_user
GroupBinding.objects.create(group="team-g", role="viewer", namespaces=["grp-a"])
member = ensure_user("g-member", "viewer"); p = member.kube_profile
p.groups = ["team-g"]; p.namespaces = ["elsewhere"]; p.save()
ensure_user("g-local", "viewer").groups.add(Group.objects.get_or_create(name="team-g")[0])
ensure_user("g-outsider", "viewer")
"""


@pytest.fixture(scope="module")
def hook(server):
    with Webhook() as hook:
        notify(server, f"channel add owners-hook {hook.url}")
        yield hook


def episodes(server, rule, cluster="local"):
    return query(server, "SELECT e.namespace, e.memo FROM notifications_episode e JOIN notifications_rule r "
                         "ON r.id = e.rule_id WHERE r.name = ? AND e.cluster = ?", (rule, cluster))


def told(server, rule):
    """(user, namespace) of each in-app notification of `rule`."""
    rows = query(server, "SELECT u.username, json_extract(n.payload, '$.namespace') FROM notifications_notification n "
                         "JOIN auth_user u ON u.id = n.user_id WHERE json_extract(n.payload, '$.rule') = ?", (rule,))
    return sorted(rows)


@pytest.mark.slow
def test_a_group_owned_rule_has_the_bindings_rights_and_tells_every_member(server, hook):
    server.manage("shell", "-c", SETUP)
    out = notify(server, "rule add grp-moves --when lease-holder-changed --to owners-hook --group team-g")
    assert "owner group team-g" in out
    for ns in ("grp-b", "grp-a"):
        write(server, "POST", "Lease", ns, "leader", lease("leader", ns=ns, holder="x"))
    eventually(lambda: episodes(server, "grp-moves"), what="grp-a's lease remembered")
    write(server, "PATCH", "Lease", "grp-b", "leader", {"spec": {"holderIdentity": "y"}})
    write(server, "PATCH", "Lease", "grp-a", "leader", {"spec": {"holderIdentity": "y"}})   # the sentinel
    eventually(lambda: hook.states("grp-moves"), what="grp-a's change")
    assert [m["namespace"] for m in hook.received if m["rule"] == "grp-moves"] == ["grp-a"]
    assert [ns for ns, _ in episodes(server, "grp-moves")] == ["grp-a"]   # grp-b: beyond the binding
    # Every member (the identity provider's group, and a local Django group) and no one else.
    eventually(lambda: len(told(server, "grp-moves")) == 2, what="both members told")
    assert told(server, "grp-moves") == [("g-local", "grp-a"), ("g-member", "grp-a")]
    assert "owner=group:team-g" in notify(server, "list")


@pytest.mark.slow
def test_a_group_without_a_binding_owns_no_rule(server):
    out = server.manage("shell", "-c", "from django.core.management import call_command\n"
                                       "from django.core.management.base import CommandError\n"
                                       "try:\n    call_command('notify', 'rule', 'add', 'nobody', '--when', "
                                       "'job-failed', '--group', 'no-such-group')\n"
                                       "except CommandError as err:\n    print('refused:', err)")
    assert 'refused: group "no-such-group" has no group binding' in out


@pytest.mark.slow
def test_a_rule_on_a_followed_cluster_is_told_of_changes_there_only(server, hook):
    notify(server, "rule add prod-moves --when lease-holder-changed --to owners-hook --cluster fprod "
                   "--namespace fol")
    write(server, "POST", "Lease", "fol", "leader", lease("leader", ns="fol", holder="x"))
    mirror(server, "fprod", "fol", [["leader", "x", 10]])
    eventually(lambda: episodes(server, "prod-moves", "fprod"), what="the followed lease remembered")
    write(server, "PATCH", "Lease", "fol", "leader", {"spec": {"holderIdentity": "y"}})   # local: not its cluster
    mirror(server, "fprod", "fol", [["leader", "y", 11]])                                # the sentinel
    eventually(lambda: hook.states("prod-moves"), what="the followed cluster's change")
    [message] = [m for m in hook.received if m["rule"] == "prod-moves"]
    assert (message["cluster"], message["namespace"], message["name"]) == ("fprod", "fol", "leader")
    assert message["details"] == {"from": "x", "to": "y"} and "cluster=fprod" in message["url"]
    assert not episodes(server, "prod-moves", "local")


@pytest.mark.django_db
def test_only_admins_are_offered_a_group_owner_on_the_page(login):
    from dashboard.access.models import GroupBinding
    from dashboard.notifications.models import Rule

    GroupBinding.objects.create(group="ops-team", role="editor")
    admin, viewer = login("admin", "chief"), login("viewer", "plain-viewer")
    assert '<option value="ops-team">Group ops-team</option>' in admin.get("/notifications/").content.decode()
    assert "ops-team" not in viewer.get("/notifications/").content.decode()
    rule = {"rule-name": "ops-fails", "rule-kind": "job-failed", "rule-cluster": "local", "rule-owner_group": "ops-team"}
    assert viewer.post("/notifications/rules/", {**rule, "rule-name": "mine"}).status_code == 302
    assert Rule.objects.get(name="mine").owner_group == ""   # (not offered: ignored)
    assert admin.post("/notifications/rules/", rule).status_code == 302
    assert Rule.objects.get(name="ops-fails").owner_group == "ops-team"
    page = admin.get("/notifications/").content.decode()
    assert 'id="rule-ops-fails"' in page and "group ops-team" in page
    # Its members see it among their rules; others do not.
    from django.contrib.auth.models import Group, User
    User.objects.get(username="plain-viewer").groups.add(Group.objects.create(name="ops-team"))
    assert 'id="rule-ops-fails"' in viewer.get("/notifications/").content.decode()
    assert 'id="rule-ops-fails"' not in login("viewer", "other-viewer").get("/notifications/").content.decode()


def test_the_owner_choice_is_labelled_and_axe_clean(chromium, server):
    from playwright.sync_api import expect

    server.manage("shell", "-c", "from dashboard.access.models import GroupBinding\n"
                                 "from dashboard.access.tokens import ensure_user\n"
                                 "GroupBinding.objects.get_or_create(group='on-call', defaults={'role': 'viewer'})\n"
                                 "u = ensure_user('owner-admin', 'admin'); u.set_password('owner-password-1'); u.save()")
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)   # (to inject axe)
    try:
        page = ctx.new_page()
        log_in(page, server.http_url, "owner-admin", "owner-password-1")
        page.goto(f"{server.http_url}/notifications/")
        owner = page.get_by_label("Owner", exact=True)
        expect(owner).to_be_visible()
        owner.select_option("on-call")
        page.locator("#rule-add-h").scroll_into_view_if_needed()
        page.screenshot(path="/tmp/kubedash-rule-owner.png", full_page=True)
        assert axe_violations(page) == []
    finally:
        ctx.close()


@pytest.mark.django_db
def test_a_groups_members_are_exactly_its_members_whatever_the_name():
    # (owners.py reads only the profiles that can hold the group: on SQLite by their JSON text,
    # which LIKE matches case-insensitively and as a substring, then checked exactly.)
    from django.contrib.auth.models import Group

    from dashboard.access.tokens import ensure_user
    from dashboard.notifications.owners import group_members

    def member(name, groups):
        user = ensure_user(name, "viewer")
        user.kube_profile.groups = groups
        user.kube_profile.save()
        return user.pk

    ops = member("m-ops", ["ops", "dev"])
    upper = member("m-upper", ["OPS"])
    member("m-longer", ["ops-team", "devops"])
    odd = member("m-odd", ['é "quoted" \\ 50%_x'])
    local = ensure_user("m-local", "viewer")
    local.groups.add(Group.objects.get_or_create(name="ops")[0])
    assert group_members("ops") == sorted([ops, local.pk])
    assert group_members("OPS") == [upper]
    assert group_members('é "quoted" \\ 50%_x') == [odd]
    assert group_members("50%_x") == [] and group_members("op") == []

