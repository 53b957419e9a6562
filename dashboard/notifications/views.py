"""/notifications/: the signed-in user's notifications, the rules (their own; admins: all), the
channels (masked; admins without limits add, test and remove them), the delivery log, muting."""
from __future__ import annotations

from functools import wraps

from django import forms
from django.contrib import messages as flash
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from dashboard.access.principals import principal_for
from dashboard.saved.saving import user_groups
from dashboard.web.share import forbidden, user_required

from . import actions, owners
from .delivery import ERRORS
from .models import Channel, Notification, Outbox, Rule
from .rules import KINDS


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=63, help_text="Lower-case letters, digits and “-”, e.g. “ops-slack”.")
    url = forms.CharField(label="URL", max_length=2000, widget=forms.TextInput(attrs={"autocomplete": "off",
                                                                                    "spellcheck": "false"}),
                          help_text="A webhook (https://…) or an Apprise URL (slack://…, mailto://…, ntfy://…). "
                                    "Stored encrypted, never shown again.")
    secret = forms.CharField(required=False, max_length=500, widget=forms.PasswordInput(render_value=False),
                             help_text="Webhooks only: signs each body (X-Kubedash-Signature: sha256=…).")


class RuleForm(forms.Form):
    name = forms.CharField(max_length=63)
    kind = forms.ChoiceField(label="When", choices=[(k.name, f"{k.name}: {k.help}") for k in KINDS.values()])
    channels = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                         help_text="None: in the app only (the bell).")
    namespace = forms.CharField(required=False, max_length=253, help_text="Empty: every namespace you may see.")
    selector = forms.CharField(required=False, max_length=1000, label="Label selector")
    cluster = forms.CharField(max_length=63, initial="local")
    for_seconds = forms.FloatField(label="For (seconds)", required=False, min_value=0)
    below = forms.FloatField(label="Below (percent)", required=False, min_value=0, max_value=100)
    reason = forms.CharField(label="Reason (regex)", required=False, max_length=500)

    def __init__(self, *args, admin=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["channels"].choices = [(c.name, c.name) for c in Channel.objects.all()]
        groups = owners.group_choices() if admin else []
        if groups:   # only admins make rules a group owns; the groups are those with a binding
            self.fields["owner_group"] = forms.ChoiceField(
                label="Owner", required=False, choices=[("", "Me")] + [(g, f"Group {g}") for g in groups],
                help_text="A group: evaluated with the group binding's rights, every member is told in the app.")


def _rules_for(principal, user):
    rules = Rule.objects.select_related("owner").prefetch_related("channels")
    if principal.is_full_admin:
        return rules
    mine = Q(owner=user, owner_group="") | Q(owner_group__in=user_groups(user, principal) | set(principal.idp_groups))
    return rules.filter(mine)


def _page(request, channel_form=None, rule_form=None, status=200):
    principal = principal_for(request.user)
    now = timezone.now()
    rules = list(_rules_for(principal, request.user))
    log = Outbox.objects.select_related("channel", "rule")
    if not principal.is_full_admin:
        log = log.filter(rule__owner=request.user)
    notes = list(Notification.objects.filter(user=request.user)[:50])
    response = render(request, "notifications/notifications.html", {
        "principal": principal, "active": "notifications", "now": now,
        "notes": notes, "unread": sum(1 for n in notes if n.read_at is None),
        "rules": [{"rule": r, "muted": r.muted(now)} for r in rules],
        "channels": list(Channel.objects.all()), "log": list(log[:100]), "errors": ERRORS,
        "channel_form": channel_form or ChannelForm(prefix="channel"), "rule_form": rule_form or RuleForm(prefix="rule", admin=principal.is_full_admin),
        "may_manage_channels": principal.is_full_admin}, status=status)
    response["Cache-Control"] = "no-store"
    return response


def admin_required(view):
    @user_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not principal_for(request.user).is_full_admin:
            return forbidden(request, "Only admins without namespace or cluster limits can manage channels.")
        return view(request, *args, **kwargs)
    return wrapper


@user_required
@require_http_methods(["GET"])
def page(request):
    return _page(request)


@user_required
@require_http_methods(["POST"])
def read_all(request):
    actions.mark_read(request.user)
    return redirect("notifications")


@admin_required
@require_http_methods(["POST"])
def channel_add(request):
    form = ChannelForm(request.POST, prefix="channel")
    if form.is_valid():
        d = form.cleaned_data
        try:
            channel = actions.add_channel(d["name"], d["url"], d["secret"], created_by=request.user)
        except ValueError as err:
            form.add_error("name" if isinstance(err, actions.NameRefused) else "url", str(err)[:1].upper() + str(err)[1:])
        else:
            flash.success(request, f"Channel {channel.name} added ({channel.shown}).")
            return redirect("notifications")
    return _page(request, channel_form=form, status=400)


@admin_required
@require_http_methods(["POST"])
def channel_test(request, name: str):
    channel = get_object_or_404(Channel, name=name)
    row = actions.send_test(channel, request.user.get_username())
    flash.success(request, f"A test ({row.message_id}) is on its way to {channel.name}: see the delivery log.")
    return redirect("notifications")


@admin_required
@require_http_methods(["POST"])
def channel_remove(request, name: str):
    try:
        actions.remove_channel(name)
    except ValueError:
        pass
    flash.success(request, f"Channel {name} removed.")
    return redirect("notifications")


@user_required
@require_http_methods(["POST"])
def rule_add(request):
    form = RuleForm(request.POST, prefix="rule", admin=principal_for(request.user).is_full_admin)
    if form.is_valid():
        d = form.cleaned_data
        try:
            rule = actions.add_rule(d["name"], d["kind"], d["channels"], request.user, namespace=d["namespace"],
                                    selector=d["selector"], cluster=d["cluster"] or "local",
                                    for_seconds=d["for_seconds"] or 0, below=d["below"], reason=d["reason"],
                                    group=d.get("owner_group") or "")
        except ValueError as err:
            form.add_error(None, str(err)[:1].upper() + str(err)[1:])
        else:
            flash.success(request, f"Rule {rule.name} added.")
            return redirect("notifications")
    return _page(request, rule_form=form, status=400)


def _own_rule(request, name: str):
    rule = get_object_or_404(Rule, name=name)
    if rule.owner_id != request.user.pk and not principal_for(request.user).is_full_admin:
        return None
    return rule


@user_required
@require_http_methods(["POST"])
def rule_mute(request, name: str):
    rule = _own_rule(request, name)
    if rule is None:
        return forbidden(request, "Only the rule's owner or an admin can mute it.")
    try:
        minutes = float(request.POST.get("minutes", "60"))
    except ValueError:
        minutes = 60
    actions.mute(rule, max(0.0, min(minutes, 60 * 24 * 30)))
    flash.success(request, f"Rule {rule.name} " + ("muted." if rule.muted_until else "unmuted."))
    return redirect("notifications")


@user_required
@require_http_methods(["POST"])
def rule_remove(request, name: str):
    rule = _own_rule(request, name)
    if rule is None:
        return forbidden(request, "Only the rule's owner or an admin can remove it.")
    actions.remove_rule(rule.name)
    flash.success(request, f"Rule {name} removed.")
    return redirect("notifications")
