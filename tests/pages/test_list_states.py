"""The lists' state filters (`?state=`) over HTTP against a real server: each kind's values, an
unknown one (400, naming the allowed ones), the filter kept by the form, paging, sorting and
share links; the Overview's coloured counts linking to those lists; and, over the page's
websocket, a Lease that expires or is renewed entering and leaving a filtered list live with no
write at the moment it expires (issue 41, item 7)."""
from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from html import unescape

import pytest

from manifests import endpoints, job, lease, micro, write
from page_helpers import SignedIn


@pytest.fixture(scope="module")
def browser(kube_server, login_user):
    return SignedIn(kube_server, *login_user)


def fresh_ns(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def names(resp) -> set[str]:
    """The objects a list page shows (their rows' or cards' ids end in --name)."""
    return set(re.findall(r'<(?:tr|article) id="[a-z]+-[^"]*--([^"]+)"', resp.text))


def renewed_lease(name: str, ns: str, seconds: int, holder: str = "node-a", at: datetime | None = None) -> dict:
    obj = lease(name, holder=holder, duration=seconds, ns=ns)
    obj["spec"]["renewTime"] = micro(at or datetime.now(timezone.utc))
    return obj


def test_lease_states_select_the_rows_that_show_them(browser, kube_server):
    ns = fresh_ns("ls")
    write(kube_server, "POST", "Lease", ns, "", renewed_lease("held", ns, 3600))
    no_expiry = lease("no-expiry", ns=ns)
    del no_expiry["spec"]["renewTime"]   # a holder without an expiry: counted as held
    write(kube_server, "POST", "Lease", ns, "", no_expiry)
    write(kube_server, "POST", "Lease", ns, "", lease("expired", ns=ns))   # renewed days ago, 15 s
    write(kube_server, "POST", "Lease", ns, "", lease("free", holder="", ns=ns))
    expected = {"held": {"held", "no-expiry"}, "expired": {"expired"}, "unheld": {"free"}}
    row_state = {"held": "held", "no-expiry": "unknown", "expired": "expired", "free": "free"}
    for state, shown in expected.items():
        r = browser.get(f"/leases/?namespace={ns}&state={state}")
        assert r.status_code == 200 and names(r) == shown, (state, names(r))
        for name in shown:   # the rows say the state the filter chose them by
            assert f'id="lease-{ns}--{name}" class="is-{row_state[name]}"' in r.text
        # The heading counts the filtered view.
        assert f"{len(shown)} lease" in unescape(re.sub(r"<[^>]+>", "", r.text.split('id="list-totals"')[1][:400]))
    assert names(browser.get(f"/leases/?namespace={ns}")) == {"held", "no-expiry", "expired", "free"}


def test_job_states(browser, kube_server):
    ns = fresh_ns("js")
    for name in ("running", "complete", "failed"):
        write(kube_server, "POST", "Job", ns, "", job(name, ns=ns))
    write(kube_server, "POST", "Job", ns, "", job("suspended", ns=ns, suspend=True))
    at = "2026-11-22T00:00:00Z"

    def condition(kind):
        return {"type": kind, "status": "True", "lastProbeTime": at, "lastTransitionTime": at}

    for name, status in (("complete", {"succeeded": 1, "startTime": at, "completionTime": "2026-11-22T00:01:00Z",
                                       "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}),
                         ("failed", {"failed": 1, "startTime": at, "conditions": [
                             condition("FailureTarget"), condition("Failed")]})):
        code, _, out = kube_server.request("PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}/status",
                                           {"status": status}, content_type="application/merge-patch+json")
        assert code == 200, out
    for state in ("running", "complete", "failed", "suspended"):
        r = browser.get(f"/jobs/?namespace={ns}&state={state}")
        assert r.status_code == 200 and names(r) == {state}, (state, names(r))


def test_endpoints_states(browser, kube_server):
    ns = fresh_ns("es")
    write(kube_server, "POST", "Endpoints", ns, "", endpoints("all-ready", ns=ns, ips=("10.0.0.1", "10.0.0.2")))
    write(kube_server, "POST", "Endpoints", ns, "", endpoints("one-not", ns=ns, not_ready=("10.0.0.3",)))
    write(kube_server, "POST", "Endpoints", ns, "", endpoints("none-ready", ns=ns, ips=(), not_ready=("10.0.0.4",)))
    empty = endpoints("empty", ns=ns)
    empty["subsets"] = []
    write(kube_server, "POST", "Endpoints", ns, "", empty)
    assert names(browser.get(f"/endpoints/?namespace={ns}&state=ready")) == {"all-ready"}
    assert names(browser.get(f"/endpoints/?namespace={ns}&state=not-ready")) == {"one-not", "none-ready"}


@pytest.mark.parametrize("plural,allowed", [("leases", "held, expired, unheld"),
                                            ("jobs", "running, complete, failed, suspended"),
                                            ("endpoints", "ready, not-ready")])
def test_an_unknown_state_is_a_400_naming_the_allowed_ones(browser, plural, allowed):
    r = browser.get(f"/{plural}/?state=bogus")
    assert r.status_code == 400
    text = unescape(r.text)
    assert "State: “bogus” is not a state of this list (one of " + allowed + ")." in text
    assert 'id="f-state" name="state" aria-invalid="true"' in r.text   # the field that is wrong


def test_the_state_is_in_the_form_and_kept_by_paging_sorting_and_sharing(browser, kube_server):
    ns = fresh_ns("kp")
    for i in range(3):
        write(kube_server, "POST", "Lease", ns, "", renewed_lease(f"h{i}", ns, 3600))
    write(kube_server, "POST", "Lease", ns, "", lease("old", ns=ns))
    r = browser.get(f"/leases/?namespace={ns}&state=held&limit=2")
    html = unescape(r.text)
    assert '<label for="f-state">State</label>' in html
    assert '<option value="held" selected>Held</option>' in html
    assert names(r) == {"h0", "h1"}
    nxt = re.search(r'<a[^>]*href="(\?[^"]*continue=[^"]*)"', html).group(1)
    assert "state=held" in nxt
    assert names(browser.get("/leases/" + nxt)) == {"h2"}   # not "old": the filter went along
    sort_link = re.search(r'href="(\?[^"]*sort=-?holder[^"]*)"', html).group(1)
    assert "state=held" in sort_link
    r = browser.get(f"/leases/?namespace={ns}&state=held&sort=-name&limit=2")
    assert names(r) == {"h2", "h1"}
    assert names(browser.get(f"/leases/?namespace={ns}&state=held&sort=-name&limit=2&page=2")) == {"h0"}
    share = re.search(r'href="(/share/new/\?[^"]+)"', unescape(browser.get(f"/leases/?namespace={ns}&state=held").text))
    assert share and "state=held" in share.group(1)
    form = browser.get(share.group(1)).text
    assert 'name="state" value="held"' in form


def test_every_coloured_count_on_the_overview_links_to_its_filtered_list(browser, kube_server):
    ns = fresh_ns("ov")
    write(kube_server, "POST", "Lease", ns, "", renewed_lease("h", ns, 3600))
    write(kube_server, "POST", "Lease", ns, "", lease("x", ns=ns))
    write(kube_server, "POST", "Lease", ns, "", lease("f", holder="", ns=ns))
    write(kube_server, "POST", "Job", ns, "", job("j", ns=ns))
    write(kube_server, "POST", "Endpoints", ns, "", endpoints("e", ns=ns, not_ready=("10.0.0.9",)))
    html = unescape(browser.get(f"/?namespace={ns}").text)
    card = html[html.index(f'id="ns-{ns}"'):]
    card = card[:card.index("</article>")]
    links = re.findall(r'<a class="badge" href="([^"]+)">(.*?)</a>', card, re.S)
    found = {" ".join(re.sub(r"<[^>]+>", "", text).split()): href for href, text in links}
    expected = {"1 held": ("leases", "held", {"h"}), "1 expired": ("leases", "expired", {"x"}),
                "1 no holder": ("leases", "unheld", {"f"}), "1 running": ("jobs", "running", {"j"}),
                "0 complete": ("jobs", "complete", set()), "0 failed": ("jobs", "failed", set()),
                "1 ready": ("endpoints", "ready", set()), "1 not ready": ("endpoints", "not-ready", {"e"})}
    for text, (plural, state, shown) in expected.items():
        href = found.get(text)
        assert href == f"/{plural}/?namespace={ns}&state={state}", (text, found)
        r = browser.get(href)
        assert r.status_code == 200 and names(r) == shown, (href, names(r))


def test_a_lease_expiring_and_renewed_leaves_and_enters_filtered_lists_live(browser, kube_server):
    """Nothing is written when a Lease expires: the page learns it from the time. A `?state=held`
    list drops the row at its expiry and an `?state=expired` list gains it; a renewal (a write)
    brings it back to held and out of expired."""
    ns = fresh_ns("lv")
    held = browser.socket(browser.get(f"/leases/?namespace={ns}&state=held"))
    expired = browser.socket(browser.get(f"/leases/?namespace={ns}&state=expired"))
    try:
        row, gone = f'<tr id="lease-{ns}--leader"', f'id="lease-{ns}--leader" hx-swap-oob="delete"'
        write(kube_server, "POST", "Lease", ns, "", renewed_lease("leader", ns, 3))
        held.wait_for(row)                    # a write: held now
        expired.wait_for(row)                 # 3 s on, expired, though nothing was written ...
        held.wait_for(gone)                   # ... and no longer held
        write(kube_server, "PATCH", "Lease", ns, "leader",
              {"spec": {"renewTime": micro(datetime.now(timezone.utc)), "leaseDurationSeconds": 3600}})
        held.wait_for(row)                    # renewed: held again
        expired.wait_for(gone)
    finally:
        held.close()
        expired.close()

