"""Share-link revocation across worker processes on the embedded setup (no Redis).

Revoking a link closes its open websockets through a channel-layer group message
(dashboard.web.share.revoke). The in-memory channel layer reaches only the process that took
the revoke; the other workers learn of it from the database instead: whenever their watch hub
sees that the database changed, this re-checks the share links that have websockets open in
the process (one primary-key query) and sends the revoke message to those that stopped
working. With Redis the channel layer itself crosses processes and this is not installed.
"""
from __future__ import annotations

import asyncio

from django.utils import timezone

SHARE_GROUP_PREFIX = "share-"   # dashboard.web.share.group_name


def close_stopped_share_sockets(loop: asyncio.AbstractEventLoop) -> None:
    """Called from the hub's follower thread after it saw the database change."""
    from channels.layers import get_channel_layer

    from dashboard.access.models import ShareLink
    from dashboard.web.share import group_name

    layer = get_channel_layer()
    open_ids = [int(name[len(SHARE_GROUP_PREFIX):]) for name in list(getattr(layer, "groups", ()))
                if name.startswith(SHARE_GROUP_PREFIX)]
    if not open_ids:
        return
    stopped = (ShareLink.objects.filter(pk__in=open_ids).exclude(revoked_at=None, expires__gt=timezone.now())
               .values_list("pk", flat=True))
    for pk in stopped:
        asyncio.run_coroutine_threadsafe(layer.group_send(group_name(pk), {"type": "share.revoked"}), loop)
