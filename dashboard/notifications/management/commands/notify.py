"""`manage.py notify`: notification channels and rules (docs/OPERATIONS.md, "Notifications").

    notify channel add NAME URL [--secret S]       a webhook (https://…) or an Apprise URL (slack://…, mailto://…)
    notify channel remove NAME
    notify channel test NAME                       a test message through the outbox
    notify rule add NAME --when KIND [--to CHANNEL…] [--namespace NS] [--selector SEL]
                    [--cluster C] [--for SECONDS] [--below PERCENT] [--reason REGEX]
                    [--owner USER | --group GROUP]      a group owner: its binding's rights, every member told
    notify rule remove NAME
    notify rule mute NAME --minutes M              (0: unmute)
    notify list                                    channels (masked), rules, the delivery log's last messages

Channel URLs and secrets are stored encrypted (KUBEDASH_CREDENTIALS_KEY) and never printed.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard.notifications import actions
from dashboard.notifications.models import Channel, Outbox, Rule
from dashboard.notifications.rules import KINDS


class Command(BaseCommand):
    help = "Notification channels and rules: channel add|remove|test, rule add|remove|mute, list."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True, metavar="{channel,rule,list}")
        channel = sub.add_parser("channel", help="where notifications go").add_subparsers(dest="action", required=True)
        add = channel.add_parser("add", help="a webhook URL (http/https) or an Apprise URL")
        add.add_argument("name")
        add.add_argument("url")
        add.add_argument("--secret", default="", help="signs webhook bodies: X-Kubedash-Signature: sha256=<HMAC>")
        channel.add_parser("remove").add_argument("name")
        channel.add_parser("test", help="send a test message").add_argument("name")
        rule = sub.add_parser("rule", help="when to notify").add_subparsers(dest="action", required=True)
        radd = rule.add_parser("add")
        radd.add_argument("name")
        radd.add_argument("--when", required=True, choices=list(KINDS), metavar="KIND",
                          help="one of: " + ", ".join(KINDS))
        radd.add_argument("--to", action="append", default=[], metavar="CHANNEL",
                          help="a channel (repeatable; none: in the app only, the owner's bell)")
        radd.add_argument("--namespace", default="")
        radd.add_argument("--selector", default="", help="a label selector the objects must match")
        radd.add_argument("--cluster", default="local", help="local (default) or a followed cluster's name")
        radd.add_argument("--for", dest="for_seconds", type=float, default=0.0, metavar="SECONDS")
        radd.add_argument("--below", type=float, default=None, metavar="PERCENT")
        radd.add_argument("--reason", default="", metavar="REGEX")
        radd.add_argument("--owner", default="", help="whose rights it is evaluated with, who sees it in the app "
                                                      "(default: the first admin)")
        radd.add_argument("--group", "--owner-group", dest="group", default="",
                          help="a group owns it: evaluated with the group's binding's rights, every member "
                               "sees it in the app (made by --owner, or the first admin)")
        rule.add_parser("remove").add_argument("name")
        mute = rule.add_parser("mute")
        mute.add_argument("name")
        mute.add_argument("--minutes", type=float, required=True)
        sub.add_parser("list", help="channels, rules and the latest deliveries")

    def handle(self, *args, **options):
        try:
            if options["what"] == "list":
                return self._list()
            return getattr(self, f"_{options['what']}_{options['action']}")(options)
        except ValueError as err:
            raise CommandError(str(err)) from None

    def _channel_add(self, o):
        c = actions.add_channel(o["name"], o["url"], o["secret"])
        self.stdout.write(f"channel {c.name} added ({c.shown}{', signed' if c.secret else ''})")

    def _channel_remove(self, o):
        actions.remove_channel(o["name"])
        self.stdout.write(f"channel {o['name']} removed")

    def _channel_test(self, o):
        channel = Channel.objects.filter(name=o["name"]).first()
        if channel is None:
            raise ValueError(f'no channel named "{o["name"]}"')
        row = actions.send_test(channel, "manage.py notify")
        self.stdout.write(f"test {row.message_id} queued for {channel.name} (the maintenance leader sends it)")

    def _rule_add(self, o):
        if o["owner"]:
            owner = actions.owner_named(o["owner"])
        else:
            owner = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
            if owner is None:
                raise ValueError("no admin to own the rule: name one with --owner USER")
        rule = actions.add_rule(o["name"], o["when"], o["to"], owner, namespace=o["namespace"],
                                selector=o["selector"], cluster=o["cluster"], for_seconds=o["for_seconds"],
                                below=o["below"], reason=o["reason"], group=o["group"])
        who = f"group {rule.owner_group}" if rule.owner_group else owner.get_username()
        self.stdout.write(f"rule {rule.name} added: {rule.kind} -> {', '.join(o['to']) or '(in the app only)'} (owner {who})")

    def _rule_remove(self, o):
        actions.remove_rule(o["name"])
        self.stdout.write(f"rule {o['name']} removed")

    def _rule_mute(self, o):
        rule = Rule.objects.filter(name=o["name"]).first()
        if rule is None:
            raise ValueError(f'no rule named "{o["name"]}"')
        actions.mute(rule, o["minutes"])
        self.stdout.write(f"rule {rule.name} " + (f"muted until {rule.muted_until:%Y-%m-%d %H:%M:%SZ}"
                                                  if rule.muted_until else "unmuted"))

    def _list(self):
        w = self.stdout.write
        w("CHANNELS")
        for c in Channel.objects.all():
            w(f"  {c.name:<24} {c.shown:<14} {'signed' if c.secret else ''}")
        w("RULES")
        for r in Rule.objects.select_related("owner").prefetch_related("channels"):
            scope = " ".join(x for x in (f"cluster={r.cluster}", r.namespace and f"namespace={r.namespace}",
                                         r.selector and f"selector={r.selector}",
                                         r.for_seconds and f"for={r.for_seconds:g}s",
                                         r.below_percent is not None and f"below={r.below_percent:g}%",
                                         r.reason and f"reason={r.reason}") if x)
            muted = " (muted)" if r.muted() else ""
            w(f"  {r.name:<24} {r.kind:<22} -> {','.join(c.name for c in r.channels.all()) or '(in-app only)'} "
              f"{scope} owner={'group:' + r.owner_group if r.owner_group else r.owner.get_username()}{muted}")
        w("DELIVERIES (latest 20)")
        for m in Outbox.objects.select_related("channel")[:20]:
            w(f"  {m.message_id:<48} {m.channel.name:<16} {m.status:<9} attempts={m.attempts} {m.last_error}")
