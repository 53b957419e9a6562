"""The clusters page (admins): follow a real cluster from a kubeconfig, see how each followed
cluster's copy is doing, stop following one. Credentials go in once and are never shown again.

A kubeconfig given here (pasted or uploaded) must hold its data inline: the server never reads
its own files on a form's word (follow/upstream_kubeconfig.py).
"""
from __future__ import annotations

from functools import wraps

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from dashboard.access import clusters as access_clusters
from dashboard.access.principals import principal_for
from dashboard.follow import following, secrets, upstream_kubeconfig, writes
from dashboard.follow.upstream_kubeconfig import KubeconfigError
from dashboard.follow.models import Cluster, UserCredentials
from dashboard.kube import context
from dashboard.kube.formats import human_duration
from dashboard.kube.registry import all_resources

from .cluster_scope import staleness, state_tone
from .forms import LIMITS_HIT, note_limits_hit
from .present import ago, clock
from .share import forbidden, user_required

MAX_KUBECONFIG_BYTES = 1 << 20
def _sentence(message: str) -> str:
    message = message.strip()
    message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else message + "."


class ClusterForm(forms.Form):
    name = forms.CharField(max_length=63, help_text="Its name in kubedash, e.g. “prod-eu”: lower-case letters, "
                                                    "digits and “-”.")
    kubeconfig = forms.CharField(
        label="Kubeconfig", required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "autocomplete": "off",
                                     "class": "yaml-input"}),
        help_text="The file’s YAML with its data inline, e.g. from "
                  "“kubectl config view --minify --flatten --raw”. A token or client certificate; "
                  "exec plugins are not supported.")
    kubeconfig_file = forms.FileField(label="Kubeconfig file", required=False,
                                      help_text="Instead of pasting: upload the file (its data inline too).")
    context = forms.CharField(max_length=253, required=False,
                              help_text="Empty: the kubeconfig’s current-context.")
    namespace = forms.CharField(max_length=253, required=False,
                                help_text="Follow only this namespace. Empty: every namespace.")

    def clean_name(self):
        try:
            return following.check_name(self.cleaned_data["name"])
        except ValueError as exc:
            raise forms.ValidationError(_sentence(str(exc))) from None

    def clean_namespace(self):
        try:
            return following.check_namespace(self.cleaned_data["namespace"])
        except ValueError as exc:
            raise forms.ValidationError(_sentence(str(exc))) from None

    def clean_kubeconfig_file(self):
        upload = self.cleaned_data.get("kubeconfig_file")
        if not upload:
            return ""
        if upload.size > MAX_KUBECONFIG_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_KUBECONFIG_BYTES // 1024} KiB: "
                                        "it is not a kubeconfig.")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not text (UTF-8): upload the kubeconfig itself.") from None

    def clean(self):
        data = super().clean()
        pasted, uploaded = (data.get("kubeconfig") or "").strip(), data.get("kubeconfig_file") or ""
        if "kubeconfig_file" in self.errors:
            return data
        if pasted and uploaded:
            self.add_error("kubeconfig", "Paste a kubeconfig or upload a file, not both.")
        elif not pasted and not uploaded:
            self.add_error("kubeconfig", "Paste a kubeconfig here or upload its file below.")
        data["text"], data["source"] = (uploaded, "kubeconfig_file") if uploaded else (pasted, "kubeconfig")
        if data["text"] and "kubeconfig" not in self.errors and "context" not in self.errors:
            # Checked here too (add() checks again), so every problem shows at once.
            try:
                upstream_kubeconfig.reduce(data["text"], context=data.get("context") or None, base_dir=None)
            except KubeconfigError as exc:
                self.add_error("context" if exc.field == "context" else data["source"],
                               forms.ValidationError(_sentence(str(exc)), code=LIMITS_HIT if exc.limits_hit else None))
        return data


def admin_required(view):
    @user_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not principal_for(request.user).is_full_admin:
            # (a followed cluster's credentials reach every namespace of it, and its write mode
            # decides what every user may do there)
            return forbidden(request, "Only admins without namespace or cluster limits can manage followed clusters.")
        return view(request, *args, **kwargs)
    return wrapper


def _row(cluster: Cluster, now) -> dict:
    last, since = cluster.last_event_at, cluster.state_since
    stale = staleness(cluster, now) is not None
    return {"cluster": cluster, "tone": state_tone(cluster, stale), "stale": stale,
            "last_event": ago(max((now - last).total_seconds(), 0)) if last else "",
            "last_event_clock": clock(last) if last else "",
            "state_for": human_duration(max((now - since).total_seconds(), 0)) if since else "",
            "state_since_clock": clock(since) if since else ""}


def _page(request, form: ClusterForm, status: int = 200):
    now = timezone.now()
    rows = [_row(c, now) for c in Cluster.objects.order_by("name")]
    principal = principal_for(request.user)
    response = render(request, "web/clusters.html", {
        "principal": principal, "active": "clusters", "form": form, "rows": rows,
        "write_modes": Cluster.WRITE_MODES, "headers": writes.impersonation(principal)},
        status=status)
    response["Cache-Control"] = "no-store"   # the form may carry a pasted kubeconfig back
    return response


@admin_required
@require_http_methods(["GET", "POST"])
def cluster_list(request):
    if request.method == "GET":
        return _page(request, ClusterForm())
    form = ClusterForm(request.POST, request.FILES)
    if not form.is_valid():
        note_limits_hit(form, context.of(request))
        return _page(request, form, status=400)
    data = form.cleaned_data
    try:
        cluster = following.add(data["name"], data["text"], context=data["context"] or None,
                               namespace=data["namespace"], base_dir=None)
    except KubeconfigError as exc:
        form.add_error("context" if exc.field == "context" else data["source"], _sentence(str(exc)))
        return _page(request, form, status=400)
    except secrets.CredentialsError as exc:
        form.add_error(None, str(exc))
        return _page(request, form, status=400)
    except ValueError as exc:   # a cluster of that name was added meanwhile
        form.add_error("name", _sentence(str(exc)))
        return _page(request, form, status=400)
    scope = f"namespace {cluster.namespace}" if cluster.namespace else "every namespace"
    messages.success(request, f"Following {cluster.name}: {cluster.server} (context {cluster.context}, {scope}). "
                              "Its state below shows when its objects have been read.")
    return redirect("clusters")


def _object_count(name: str) -> int:
    with access_clusters.within(name):
        return sum(res.model.objects.count() for res in all_resources())


@admin_required
@require_http_methods(["GET", "POST"])
def cluster_remove(request, name: str):
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "GET":
        return render(request, "web/cluster_remove.html", {
            "principal": principal_for(request.user), "active": "clusters", "cluster": cluster,
            "objects": _object_count(name)})
    try:
        removed = following.remove(cluster.name)
    except ValueError:   # removed meanwhile (another admin, the command)
        messages.info(request, f"{cluster.name} was no longer followed.")
        return redirect("clusters")
    messages.success(request, f"Stopped following {cluster.name}; removed its {removed} "
                              f"object{'' if removed == 1 else 's'} from kubedash.")
    return redirect("clusters")


@admin_required
@require_http_methods(["POST"])
def cluster_writes(request, name: str):
    """Set how the dashboard's writes reach a followed cluster (follow/writes.py)."""
    try:
        cluster = following.set_writes(name, request.POST.get("writes", ""))
    except ValueError as exc:
        messages.error(request, _sentence(str(exc)))
        return redirect("clusters")
    messages.success(request, f"{cluster.name}: changes through the dashboard are now {cluster.writes}.")
    return redirect("clusters")


class CredentialsForm(forms.Form):
    kubeconfig = forms.CharField(widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "autocomplete": "off"}),
                                 label="Your kubeconfig", max_length=MAX_KUBECONFIG_BYTES,
                                 help_text="One context for this cluster's server, with its data inline (kubectl config "
                                           "view --minify --flatten --raw). Stored encrypted, never shown again.")
    context = forms.CharField(required=False, max_length=253, label="Context", help_text="Empty: its current-context.")


@user_required
@require_http_methods(["GET", "POST"])
def cluster_credentials(request, name: str):
    """A user's own kubeconfig for a cluster in own-credentials mode (replaced, never shown)."""
    principal = principal_for(request.user)
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or not principal.sees_cluster(name) or principal.is_share:
        return forbidden(request, f"You have no access to cluster “{name}”.")
    form = CredentialsForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            following.save_user_credentials(cluster, request.user, form.cleaned_data["kubeconfig"],
                                           context=form.cleaned_data["context"] or None)
        except KubeconfigError as exc:
            form.add_error("context" if exc.field == "context" else "kubeconfig", _sentence(str(exc)))
            context.of(request).limits_hit |= exc.limits_hit
        except secrets.CredentialsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Your credentials for {cluster.name} are stored; your changes there use them.")
            return redirect("cluster_credentials", name=cluster.name)
    stored = UserCredentials.objects.filter(cluster=cluster, user=request.user).first()
    response = render(request, "web/cluster_credentials.html", {
        "principal": principal, "active": "clusters", "cluster": cluster, "form": form, "stored": stored},
        status=400 if request.method == "POST" else 200)
    response["Cache-Control"] = "no-store"
    return response
