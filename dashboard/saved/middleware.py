"""A list's bare address opens the user's default view of it (issue 40).

Only when the list is *arrived at* with no parameters at all (the menu, a typed address): not
when the list's own filters are cleared on the page (the referring page is the same list), and
not after "show all" (`?default=off`: once, then the bare list). The page then says which view
it is showing (templatetags/saved.py `saved_bar`), so a default is never mistaken for the list."""
from __future__ import annotations

from urllib.parse import urlsplit

from django.shortcuts import redirect

from . import saving

SKIP_KEY = "kubedash_skip_default"


class DefaultViewMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        moved = self.default_redirect(request)
        return moved if moved is not None else self.get_response(request)

    def default_redirect(self, request):
        path = request.path
        if request.method != "GET" or path == saving.OVERVIEW_PATH or path not in saving.list_paths():
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or getattr(request, "share_link", None) is not None:
            return None
        if list(request.GET.keys()) == ["default"] and request.GET["default"] == "off":
            request.session[SKIP_KEY] = path
            return redirect(path)
        if request.GET:
            return None
        if request.session.get(SKIP_KEY) == path:
            del request.session[SKIP_KEY]
            return None
        if urlsplit(request.META.get("HTTP_REFERER", "")).path == path:
            return None   # the list's own filters cleared, on the page
        view = saving.default_for(user, path)
        return redirect(view.url) if view is not None and view.url != path else None
