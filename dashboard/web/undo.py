"""The session's undo of the last action on a list's objects (one at a time, bounded): kept by
the bulk actions (bulk_views) and by a detail page's Delete (edit_views), offered by the list
page (templates/web/_bulk_undo.html) and carried out by bulk_views.undo."""
from __future__ import annotations

import json
import secrets

from dashboard.access import clusters

from .kinds import KindWeb

SESSION_KEY = "bulk_undo"        # the template reads request.session.bulk_undo
MAX_UNDO_BYTES = 256 * 1024


def keep_undo(request, info: KindWeb, action: str, saved: list) -> bool:
    """Keep what the list page's Undo needs (the last action only): [namespace, name, the
    object as it was] per object. False when too big."""
    request.session.pop(SESSION_KEY, None)
    state = {"id": secrets.token_urlsafe(8), "kind": info.kind, "action": action, "objects": saved,
             "cluster": clusters.current()}   # undone only in the cluster it was done in
    if len(json.dumps(state)) > MAX_UNDO_BYTES:
        return False
    request.session[SESSION_KEY] = state
    return True
