"""A list's column menu, a page of its own (/<plural>/columns/?<the list's query>): the columns
to show and their order, label and annotation columns to add (web/columns.py). Its form opens the
list with the chosen `columns`; the ← / → links reorder on this page. (On a page of its own, its
many labels never compete with the list's filters for a name.)"""
from __future__ import annotations

from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View

from dashboard.kube import context
from dashboard.kube.errors import ApiError
from dashboard.kube.selectors import parse_label_selector

from . import cluster_scope, columns, kinds, scope
from .queries import view_rows
from .share import page_principal, viewer_required
from .views import Filters, base_context, forbidden_page


@method_decorator(viewer_required, name="dispatch")
class ColumnsView(View):
    web: kinds.KindWeb | None = None   # set by the URLconf

    def get(self, request):
        page = self.web
        principal = page_principal(request)
        filters = Filters.from_request(request, page, context.of(request).at)
        back = cluster_scope.in_cluster(page.list_url + (f"?{request.GET.urlencode()}" if request.GET else ""),
                                        at=filters.at)
        namespaces = scope.list_scope(principal, filters.namespace, page.kind)
        if namespaces is None:
            return forbidden_page(request, principal, page.plural, filters.namespace)
        if filters.errors:
            return redirect(back)   # (the list says what is wrong)
        try:
            selector = scope.narrow(principal, parse_label_selector(filters.label_selector))
        except ApiError:
            return redirect(back)
        ctx = base_context(request, principal, page.plural)
        present = columns.label_keys(view_rows(page.kind, namespaces, selector, filters.q)[0])
        query = filters.query()
        ctx.update(page=page, filters=filters, column_menu=columns.menu(page, filters, present),
                   chosen_columns=filters.chosen, view_columns=columns.shown(page, filters.chosen),
                   list_url=cluster_scope.in_cluster(page.list_url + (f"?{query}" if query else ""), at=filters.at))
        return render(request, "web/columns.html", ctx)
