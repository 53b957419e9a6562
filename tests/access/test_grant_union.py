"""A person holding several grants (their own and their groups' bindings, issue 37): a filter
built for one cluster counts only the grants that reach it, so a list's live updates never show
what the initial render (which asks each grant) refused."""
from dashboard.access import clusters
from dashboard.access.principals import Grant, widest
from dashboard.web.queries import view_predicate


def lease(namespace):
    return {"kind": "Lease", "metadata": {"namespace": namespace, "name": "leader", "labels": {}}}


def test_namespaces_here_counts_only_the_grants_that_reach_the_cluster():
    person = widest("ann", (Grant("viewer", ("team-a",)), Grant("viewer", ("team-b",), ("prod",), "group b")))
    assert person.namespaces == ("team-a", "team-b")   # the union across clusters (menus, the header)
    with clusters.within(clusters.LOCAL):
        assert person.namespaces_here == ("team-a",)
    with clusters.within("prod"):
        assert person.namespaces_here == ("team-a", "team-b")
    unlimited_in_prod = widest("bob", (Grant("viewer", ("team-a",)), Grant("viewer", (), ("prod",), "group ops")))
    with clusters.within(clusters.LOCAL):
        assert unlimited_in_prod.namespaces_here == ("team-a",)
    with clusters.within("prod"):
        assert unlimited_in_prod.namespaces_here == ()
    only_prod = widest("cy", (Grant("viewer", ("team-a",), ("prod",)), Grant("viewer", ("team-b",), ("prod",), "g")))
    with clusters.within(clusters.LOCAL):
        assert only_prod.namespaces_here and "team-a" not in only_prod.namespaces_here


def test_a_live_list_filter_is_no_wider_than_the_grants_of_its_cluster():
    person = widest("ann", (Grant("viewer", ("team-a",)), Grant("viewer", ("team-b",), ("prod",), "group b")))
    with clusters.within(clusters.LOCAL):
        visible = view_predicate(person, "", kind="Lease")
        assert visible(lease("team-a")) and not visible(lease("team-b"))
    with clusters.within("prod"):
        visible = view_predicate(person, "", kind="Lease")
        assert visible(lease("team-a")) and visible(lease("team-b"))
