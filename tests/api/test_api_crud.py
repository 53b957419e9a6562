"""The REST API's core semantics, through the full Django stack with bearer tokens."""
import pytest

from manifests import ENDPOINTS, JOBS, LEASES, endpoints, job, lease

# CI runs this module again on PostgreSQL, and through PgBouncer (.ci/run selects it by the markers).
pytestmark = [pytest.mark.django_db, pytest.mark.portable, pytest.mark.pgbouncer]


def test_create_get_list_round_trip(api):
    r = api.post(LEASES, lease())
    assert r.status_code == 201, r.content
    created = r.json()
    m = created["metadata"]
    assert m["uid"] and m["creationTimestamp"].endswith("Z") and m["resourceVersion"].isdigit()
    assert "generation" not in m
    assert created["spec"]["holderIdentity"] == "node-a"
    got = api.get(f"{LEASES}/l1").json()
    assert got == created
    lst = api.get(LEASES).json()
    assert lst["kind"] == "LeaseList" and lst["apiVersion"] == "coordination.k8s.io/v1"
    assert lst["metadata"]["resourceVersion"] == m["resourceVersion"]
    assert [i["metadata"]["name"] for i in lst["items"]] == ["l1"]
    all_ns = api.get("/apis/coordination.k8s.io/v1/leases").json()
    assert len(all_ns["items"]) == 1


def test_resource_version_is_global_and_increasing(api):
    a = api.post(LEASES, lease("a")).json()["metadata"]["resourceVersion"]
    b = api.post(ENDPOINTS, endpoints()).json()["metadata"]["resourceVersion"]
    c = api.post(JOBS, job()).json()["metadata"]["resourceVersion"]
    assert int(a) < int(b) < int(c)


def test_stored_text_gets_its_own_resource_version_only(api):
    """The store writes an object's text before the database numbers it (kube/storage: record,
    a mark in metadata.resourceVersion replaced by the revision in the same statement): a
    resourceVersion key elsewhere in the object keeps its value, in the answer, in a GET, in a
    list and in the revision log."""
    from dashboard.kube import storage
    from dashboard.kube.models import Revision

    body = lease("marked")
    body["metadata"]["annotations"] = {"resourceVersion": "kubedash-rv-0", "x": "\"resourceVersion\":\"1\""}
    created = api.post(LEASES, body).json()
    updated = api.put(f"{LEASES}/marked", {**created, "spec": {**created["spec"], "holderIdentity": "b"}}).json()
    for obj, older in ((created, None), (updated, created)):
        rv = obj["metadata"]["resourceVersion"]
        assert rv.isdigit() and (older is None or int(rv) > int(older["metadata"]["resourceVersion"]))
        assert obj["metadata"]["annotations"] == body["metadata"]["annotations"]
        logged = Revision.objects.get(rv=int(rv)).object
        assert '"resourceVersion":"%s"' % rv in logged and "kubedash-rv-0" in logged and storage.RV_MARK not in logged
    assert api.get(f"{LEASES}/marked").json() == updated
    assert api.get(LEASES).json()["items"] == [updated]


def test_system_fields_cannot_be_set(api):
    body = lease()
    body["metadata"].update(uid="mine", resourceVersion="999", creationTimestamp="2000-01-01T00:00:00Z",
                            generation=7)
    r = api.post(LEASES, body)
    assert r.status_code == 201
    m = r.json()["metadata"]
    assert m["uid"] != "mine" and m["creationTimestamp"] != "2000-01-01T00:00:00Z"
    assert "generation" not in m


def test_create_existing_is_409_already_exists(api):
    api.post(LEASES, lease())
    r = api.post(LEASES, lease())
    assert r.status_code == 409
    s = r.json()
    assert s["kind"] == "Status" and s["reason"] == "AlreadyExists"
    assert s["message"] == 'leases.coordination.k8s.io "l1" already exists'
    assert s["details"] == {"name": "l1", "group": "coordination.k8s.io", "kind": "leases"}


def test_namespace_mismatch_is_400(api):
    r = api.post(LEASES, lease(ns="other"))
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_invalid_name_is_422_with_causes(api):
    r = api.post(LEASES, lease(name="Not_Valid"))
    assert r.status_code == 422
    s = r.json()
    assert s["reason"] == "Invalid"
    assert s["details"]["causes"][0]["field"] == "metadata.name"


def test_get_missing_is_404_status(api):
    r = api.get(f"{LEASES}/nope")
    assert r.status_code == 404
    assert r.json()["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert r["Content-Type"] == "application/json"


def test_unknown_paths_answer_status(api):
    for path in ("/api/v1/namespaces/default/pods", "/apis/nope/v1", "/apis/batch/v1/namespaces/default/jobs/x/log",
                 "/api/v1/namespaces/default/configmaps"):
        r = api.get(path)
        assert r.status_code == 404, path
        assert r.json()["kind"] == "Status"


def test_put_stale_resource_version_conflicts(api):
    created = api.post(LEASES, lease()).json()
    first = dict(created, spec={**created["spec"], "holderIdentity": "b"})
    assert api.put(f"{LEASES}/l1", first).status_code == 200
    r = api.put(f"{LEASES}/l1", dict(created, spec={**created["spec"], "holderIdentity": "c"}))
    assert r.status_code == 409
    s = r.json()
    assert s["reason"] == "Conflict"
    assert s["message"] == ('Operation cannot be fulfilled on leases.coordination.k8s.io "l1": the object has been '
                            "modified; please apply your changes to the latest version and try again")
    assert s["details"]["name"] == "l1"


def test_lease_update_requires_resource_version(api):
    created = api.post(LEASES, lease()).json()
    del created["metadata"]["resourceVersion"]
    r = api.put(f"{LEASES}/l1", created)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_endpoints_and_job_allow_unconditional_update(api):
    ep = api.post(ENDPOINTS, endpoints()).json()
    del ep["metadata"]["resourceVersion"]
    ep["subsets"][0]["addresses"].append({"ip": "10.0.0.2"})
    assert api.put(f"{ENDPOINTS}/svc", ep).status_code == 200
    j = api.post(JOBS, job()).json()
    del j["metadata"]["resourceVersion"]
    j["metadata"]["labels"] = {"x": "y"}
    assert api.put(f"{JOBS}/j1", j).status_code == 200


def test_endpoints_put_creates_when_missing(api):
    r = api.put(f"{ENDPOINTS}/fresh", endpoints("fresh"))
    assert r.status_code == 201


def test_lease_put_creates_when_missing(api):
    assert api.put(f"{LEASES}/none", lease("none")).status_code == 201


def test_noop_update_keeps_resource_version(api):
    created = api.post(LEASES, lease()).json()
    again = api.put(f"{LEASES}/l1", created).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_job_generation_bumps_on_spec_change_only(api):
    j = api.post(JOBS, job()).json()
    assert j["metadata"]["generation"] == 1
    j["metadata"]["labels"] = {"a": "b"}
    j = api.put(f"{JOBS}/j1", j).json()
    assert j["metadata"]["generation"] == 1
    j = api.patch(f"{JOBS}/j1", {"spec": {"suspend": True}}).json()
    assert j["metadata"]["generation"] == 2
    s = api.patch(f"{JOBS}/j1/status", {"status": {"active": 1}}).json()
    assert s["metadata"]["generation"] == 2 and s["status"]["active"] == 1


def test_status_subresource_changes_only_status(api):
    api.post(JOBS, job())
    r = api.patch(f"{JOBS}/j1/status", {"spec": {"parallelism": 5}, "metadata": {"labels": {"x": "y"}},
                                        "status": {"succeeded": 1}})
    assert r.status_code == 200, r.content
    body = r.json()
    # kube's job status strategy resets only spec: metadata written through /status is kept.
    assert body["spec"]["parallelism"] == 1 and body["metadata"]["labels"]["x"] == "y"
    assert body["metadata"]["generation"] == 1
    assert body["status"]["succeeded"] == 1
    # ...and the main resource ignores status.
    body = api.patch(f"{JOBS}/j1", {"status": {"succeeded": 9}}).json()
    assert body["status"]["succeeded"] == 1
    st = api.get(f"{JOBS}/j1/status")
    assert st.status_code == 200 and st.json()["kind"] == "Job"


def test_status_merge_patch_keeps_annotations_and_conditions(api):
    """Upstream "should apply changes to a job status": annotations + a condition via /status."""
    api.post(JOBS, job())
    cond = {"type": "Suspended", "status": "False", "reason": "E2E", "message": "Set from an e2e test",
            "lastProbeTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    r = api.patch(f"{JOBS}/j1/status", {"metadata": {"annotations": {"patchedstatus": "true"}},
                                        "status": {"conditions": [cond]}})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["metadata"]["annotations"] == {"patchedstatus": "true"}
    assert body["status"]["conditions"][0]["reason"] == "E2E"
    assert api.get(f"{JOBS}/j1").json()["metadata"]["annotations"] == {"patchedstatus": "true"}
    # Server-owned metadata is still the server's, and invalid metadata is rejected.
    r = api.patch(f"{JOBS}/j1/status", {"metadata": {"uid": "other", "labels": {"bad key!": "x"}}})
    assert r.status_code == 422, r.content


def test_status_subresource_only_for_jobs(api):
    api.post(LEASES, lease())
    assert api.get(f"{LEASES}/l1/status").status_code == 404


def test_patch_types(api):
    api.post(LEASES, lease())
    r = api.patch(f"{LEASES}/l1", [{"op": "replace", "path": "/spec/holderIdentity", "value": "jp"}],
                  content_type="application/json-patch+json")
    assert r.status_code == 200 and r.json()["spec"]["holderIdentity"] == "jp"
    r = api.patch(f"{LEASES}/l1", {"spec": {"holderIdentity": "mp"}})
    assert r.json()["spec"]["holderIdentity"] == "mp"
    r = api.patch(f"{LEASES}/l1", {"spec": {"holderIdentity": "smp"}},
                  content_type="application/strategic-merge-patch+json")
    assert r.json()["spec"]["holderIdentity"] == "smp"
    r = api.patch(f"{LEASES}/l1", {"spec": {}}, content_type="text/plain")
    assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType"


def test_job_template_is_immutable(api):
    api.post(JOBS, job())
    patch = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "main"}],
                                            "containers": [{"name": "main", "command": ["echo", "hi"]}]}}}}
    # template is immutable on a Job, so check the merge with a dry run of the patch result
    r = api.patch(f"{JOBS}/j1?dryRun=All", patch, content_type="application/strategic-merge-patch+json")
    assert r.status_code == 422  # immutable template...
    assert "spec.template" in r.json()["message"]


def test_status_conditions_merge_by_type(api):
    api.post(JOBS, job())
    api.patch(f"{JOBS}/j1/status", {"status": {"conditions": [
        {"type": "Suspended", "status": "False"}, {"type": "Complete", "status": "False"}]}})
    r = api.patch(f"{JOBS}/j1/status", {"status": {"conditions": [{"type": "Suspended", "status": "True"}]}},
                  content_type="application/strategic-merge-patch+json")
    conds = {c["type"]: c["status"] for c in r.json()["status"]["conditions"]}
    assert conds == {"Suspended": "True", "Complete": "False"}
    # kube-apiserver 1.32's status rules: Complete=True needs SuccessCriteriaMet, startTime, completionTime.
    r = api.patch(f"{JOBS}/j1/status", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
                  content_type="application/strategic-merge-patch+json")
    assert r.status_code == 422
    assert {c["field"] for c in r.json()["details"]["causes"]} >= {"status.completionTime", "status.startTime"}


def test_patch_resource_version_is_a_precondition(api):
    old_rv = api.post(LEASES, lease()).json()["metadata"]["resourceVersion"]
    new_rv = api.patch(f"{LEASES}/l1", {"spec": {"holderIdentity": "y"}}).json()["metadata"]["resourceVersion"]
    r = api.patch(f"{LEASES}/l1", {"metadata": {"resourceVersion": old_rv}, "spec": {"holderIdentity": "x"}})
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    r = api.patch(f"{LEASES}/l1", {"metadata": {"resourceVersion": new_rv}, "spec": {"holderIdentity": "x"}})
    assert r.status_code == 200


def test_patch_missing_is_404(api):
    assert api.patch(f"{LEASES}/none", {"spec": {}}).status_code == 404


def test_bad_json_is_400(api):
    r = api.post(LEASES, b"{not json")
    assert r.status_code == 400 and r.json()["kind"] == "Status"
    r = api.post(LEASES, b"[1,2]")
    assert r.status_code == 400
    r = api.patch(f"{LEASES}/x", b"{", content_type="application/merge-patch+json")
    assert r.status_code in (400, 404)


def test_protobuf_body_is_415_with_hint(api):
    r = api.post(JOBS, b"\x6b\x38\x73\x00", content_type="application/vnd.kubernetes.protobuf")
    assert r.status_code == 415
    assert "protobuf" in r.json()["message"]


def test_dry_run_persists_nothing(api):
    r = api.post(f"{LEASES}?dryRun=All", lease())
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "l1"
    assert api.get(f"{LEASES}/l1").status_code == 404
    api.post(LEASES, lease())
    before = api.get(f"{LEASES}/l1").json()
    r = api.patch(f"{LEASES}/l1?dryRun=All", {"spec": {"holderIdentity": "dry"}})
    assert r.json()["spec"]["holderIdentity"] == "dry"
    assert api.get(f"{LEASES}/l1").json() == before
    r = api.delete(f"{LEASES}/l1", {"dryRun": ["All"]})
    assert r.status_code == 200
    assert api.get(f"{LEASES}/l1").json() == before
    assert api.post(f"{LEASES}?dryRun=Bogus", lease("z")).status_code == 422


def test_field_validation_modes(api):
    body = lease()
    body["spec"]["bogusField"] = 1
    r = api.post(f"{LEASES}?fieldValidation=Strict", body)
    assert r.status_code == 400
    assert 'unknown field "spec.bogusField"' in r.json()["message"]
    r = api.post(f"{LEASES}?fieldValidation=Warn", body)
    assert r.status_code == 201
    assert r["Warning"] == '299 - "unknown field \\"spec.bogusField\\""'
    assert "bogusField" not in r.json()["spec"]
    body["metadata"]["name"] = "l2"
    r = api.post(f"{LEASES}?fieldValidation=Ignore", body)
    assert r.status_code == 201 and not r.has_header("Warning")
    r = api.post(f"{LEASES}?fieldValidation=Loud", body)
    assert r.status_code == 422 and r.json()["details"]["kind"] == "CreateOptions"


JOB_DUP = (b'{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j1"},"spec":{"parallelism":1,'
           b'"bogus":1,"parallelism":2,"template":{"spec":{"restartPolicy":"Never","containers":'
           b'[{"name":"c","image":"busybox"}]}}}}')


def test_duplicate_fields_on_create_and_update(api):
    """kube's strict JSON decoder reports a repeated key (after the unknown ones)."""
    r = api.post(f"{JOBS}?fieldValidation=Strict", JOB_DUP)
    assert r.status_code == 400
    assert r.json()["message"].endswith(
        'strict decoding error: unknown field "spec.bogus", duplicate field "spec.parallelism"'), r.json()
    r = api.post(f"{JOBS}?fieldValidation=Warn", JOB_DUP)
    assert r.status_code == 201 and r.json()["spec"]["parallelism"] == 2  # the last one wins
    assert r["Warning"] == ('299 - "unknown field \\"spec.bogus\\"", '
                            '299 - "duplicate field \\"spec.parallelism\\""')
    import orjson
    current = orjson.dumps(api.get(f"{JOBS}/j1").json())
    assert b'"annotations"' not in current
    body = current.replace(b'"metadata":{', b'"metadata":{"annotations":{"a":"1","a":"2"},', 1)
    r = api.put(f"{JOBS}/j1?fieldValidation=Strict", body)
    assert r.status_code == 400 and r.json()["message"].endswith('duplicate field "metadata.annotations.a"')
    r = api.put(f"{JOBS}/j1?fieldValidation=Ignore", body)
    assert r.status_code == 200 and not r.has_header("Warning") and r.json()["metadata"]["annotations"] == {"a": "2"}


@pytest.mark.parametrize("ctype,body,expected", [
    ("application/merge-patch+json", b'{"spec":{"parallelism":2,"parallelism":3}}', 'duplicate field "spec.parallelism"'),
    ("application/strategic-merge-patch+json", b'{"spec":{"parallelism":2,"parallelism":3}}', 'duplicate field "spec.parallelism"'),
    ("application/json-patch+json", b'[{"op":"replace","op":"replace","path":"/spec/parallelism","value":3}]',
     'json patch duplicate field "[0].op"'),
])
def test_duplicate_fields_on_every_patch_type(api, ctype, body, expected):
    api.post(JOBS, job())
    r = api.patch(f"{JOBS}/j1?fieldValidation=Strict", body, content_type=ctype)
    assert r.status_code == 422, r.content
    assert r.json()["message"].endswith("strict decoding error: " + expected)
    assert api.get(f"{JOBS}/j1").json()["spec"]["parallelism"] == 1  # nothing written
    r = api.patch(f"{JOBS}/j1?fieldValidation=Warn", body, content_type=ctype)
    assert r.status_code == 200 and r.json()["spec"]["parallelism"] == 3
    assert expected.replace('"', '\\"') in r["Warning"]


def test_duplicate_keys_in_apply_patch(api):
    body = b"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j1\n  labels:\n    a: x\n    a: y\n"
    api.post(JOBS, job())
    r = api.patch(f"{JOBS}/j1?fieldValidation=Strict&fieldManager=m", body, content_type="application/apply-patch+yaml")
    assert r.status_code == 400
    assert r.json()["message"] == ('error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n'
                                   '  line 7: key "a" already set in map')
    r = api.patch(f"{JOBS}/j1?fieldManager=m", body, content_type="application/apply-patch+yaml")
    assert r.status_code == 200 and "already set in map" in r["Warning"]


def test_wrong_type_is_400(api):
    body = lease()
    body["spec"]["leaseDurationSeconds"] = "fifteen"
    r = api.post(LEASES, body)
    assert r.status_code == 400
    assert "leaseDurationSeconds" in r.json()["message"]


def test_delete_returns_success_status(api):
    created = api.post(LEASES, lease()).json()
    r = api.delete(f"{LEASES}/l1", {"propagationPolicy": "Background"})
    assert r.status_code == 200
    s = r.json()
    assert s["status"] == "Success" and s["details"]["uid"] == created["metadata"]["uid"]
    assert api.get(f"{LEASES}/l1").status_code == 404
    assert api.delete(f"{LEASES}/l1").status_code == 404


def test_delete_preconditions(api):
    created = api.post(LEASES, lease()).json()
    r = api.delete(f"{LEASES}/l1", {"preconditions": {"uid": "other"}})
    assert r.status_code == 409 and "Precondition failed: UID in precondition" in r.json()["message"]
    r = api.delete(f"{LEASES}/l1", {"preconditions": {"resourceVersion": str(int(created["metadata"]["resourceVersion"]) + 100)}})
    assert r.status_code == 409 and "Precondition failed: ResourceVersion" in r.json()["message"]
    r = api.delete(f"{LEASES}/l1", {"preconditions": {"uid": created["metadata"]["uid"],
                                                      "resourceVersion": created["metadata"]["resourceVersion"]}})
    assert r.status_code == 200
    assert api.delete(f"{LEASES}/x", {"propagationPolicy": "Sideways"}).status_code == 422


def test_finalizers_hold_deletion(api):
    api.post(LEASES, lease(finalizers=["example.com/hold"]))
    r = api.delete(f"{LEASES}/l1")
    assert r.status_code == 200
    obj = r.json()
    assert obj["kind"] == "Lease" and obj["metadata"]["deletionTimestamp"]
    assert api.get(f"{LEASES}/l1").status_code == 200
    r = api.patch(f"{LEASES}/l1", {"metadata": {"finalizers": None}})
    assert r.status_code == 200
    assert api.get(f"{LEASES}/l1").status_code == 404


def test_deletecollection(api):
    for i in range(3):
        api.post(LEASES, lease(f"l{i}", labels={"team": "a" if i < 2 else "b"}))
    r = api.delete(f"{LEASES}?labelSelector=team%3Da")
    assert r.status_code == 200
    assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["l0", "l1"]
    assert [i["metadata"]["name"] for i in api.get(LEASES).json()["items"]] == ["l2"]


def test_pretty_output(api):
    api.post(LEASES, lease())
    assert b'\n  "kind"' in api.get(f"{LEASES}/l1?pretty=true").content
    assert b"\n" not in api.get(f"{LEASES}/l1").content


def test_generate_name(api):
    body = lease()
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    r = api.post(LEASES, body)
    assert r.status_code == 201 and r.json()["metadata"]["name"].startswith("gen-")


def test_yaml_body_accepted(api):
    body = b"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: y1\nspec:\n  holderIdentity: h\n"
    r = api.post(LEASES, body, content_type="application/yaml")
    assert r.status_code == 201, r.content


def test_kind_mismatch_is_400(api):
    body = lease()
    body["kind"] = "Job"
    assert api.post(LEASES, body).status_code == 400


def test_disallowed_host_still_answers_status(api):
    r = api.get(LEASES, headers={"Host": "evil.example"})
    assert r.status_code == 400
    assert r.json()["kind"] == "Status" and r.json()["reason"] == "BadRequest"


def test_an_internal_error_says_what_is_known_of_the_write(api, monkeypatch):
    """A bug of ours is a 500 InternalError Status, never a traceback; and it claims nothing it
    does not know: a read changed nothing, a write may have been made (here its answer fails
    to encode after the commit, and the update is stored)."""
    from dashboard.kube import views

    created = api.post(LEASES, lease()).json()

    def broken(*args, **kwargs):
        raise RuntimeError("an answer that fails to encode")

    monkeypatch.setattr(views.store, "get_raw", broken)
    r = api.get(f"{LEASES}/l1")
    assert r.status_code == 500 and r.json()["reason"] == "InternalError", r.content
    assert "nothing was changed" in r.json()["message"]
    monkeypatch.undo()
    monkeypatch.setattr(views, "object_response", broken)
    created["spec"]["holderIdentity"] = "node-b"
    r = api.put(f"{LEASES}/l1", created)
    assert r.status_code == 500 and r.json()["kind"] == "Status", r.content
    assert "may or may not have been applied" in r.json()["message"], r.json()
    monkeypatch.undo()
    assert api.get(f"{LEASES}/l1").json()["spec"]["holderIdentity"] == "node-b"
