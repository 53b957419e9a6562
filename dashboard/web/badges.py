"""Header badges: a small live count another app shows in every page's header (the notifications'
bell). The app registers a Badge in its ready(); base.html renders each (templatetags/badges.py),
and each page's socket (consumers.py) pushes it again when its notice arrives: the subject the
app records with access/signals.py's record() in the transaction that changes the count, which
every process's hub reads like any access notice. web knows no badge by name."""
from __future__ import annotations

from dataclasses import dataclass

from django.template.loader import render_to_string


@dataclass(frozen=True)
class Badge:
    template: str     # rendered with the badge's context; its root element has an id (pushed with hx-swap-oob)
    subject: object   # principal -> the notice subject that says it changed, or None (no badge for them)
    context: object   # principal -> the template's context


_badges: list[Badge] = []


def register(badge: Badge) -> None:
    if badge not in _badges:
        _badges.append(badge)


def registered() -> list[Badge]:
    return list(_badges)


def render(badge: Badge, principal, push: bool = False) -> str:
    """The badge's HTML (push: as an out-of-band swap of the one on the page)."""
    return render_to_string(badge.template, {**badge.context(principal), "push": push})
