"""The header's bell: the signed-in user's unread notifications, pushed live (web/badges.py)."""
from dashboard.web import badges

from .messages import bell_subject
from .models import Notification


def _subject(principal):
    return bell_subject(principal.user_id) if principal.user_id else None


def _context(principal) -> dict:
    unread = Notification.objects.filter(user_id=principal.user_id, read_at__isnull=True).count()
    return {"unread": unread}


BELL = badges.Badge(template="notifications/_bell.html", subject=_subject, context=_context)


def register() -> None:
    badges.register(BELL)
