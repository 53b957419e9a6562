"""POST of the access reviews (reviews.py): decode the review, answer it for the caller, 201.

kubectl 1.32 sends these as protobuf (its typed clients default to it): a SelfSubjectReview
carries nothing the answer depends on, so its protobuf envelope is answered unread; the other
two need their spec, and protobuf bodies are not decoded here (docs/COMPATIBILITY.md).
"""
from __future__ import annotations

from . import codec, context, reviews
from .errors import unsupported_media_type
from .views import KubeAPIView, json_response, read_body, warning_headers, write_options


class ReviewView(KubeAPIView):
    review: reviews.Review = reviews.ACCESS

    def post(self, request, **kw):
        # Options as every create's (kube validates them; nothing is written): the field
        # manager is recorded in a SelfSubjectAccessReview's answer, the body decoded strictly.
        mode, manager, _dry = write_options(request, "CreateOptions")
        ctype = codec.content_type(request.META.get("CONTENT_TYPE", ""))
        warnings: list[str] = []
        if ctype == codec.PROTOBUF:
            if self.review is not reviews.WHOAMI or not request.body.startswith(b"k8s\x00"):
                raise unsupported_media_type(ctype, codec.BODY_TYPES + [
                    f"(a {self.review.kind} is not read from protobuf here: send it as JSON)"])
            body = {}   # kube's envelope around an empty SelfSubjectReview: nothing to read
        else:
            body = read_body(request)
            body, warnings = codec.decode_object(self.review, body, mode,
                                                 duplicates=codec.duplicate_fields(request.body, ctype, mode))
        ctx = context.of(request)
        read_only = ctx.cluster if ctx.cluster_path else ""   # (server/cluster_paths.py: reads only there)
        answer = reviews.answer(self.review, ctx.principal, body, read_only, manager=manager)
        return warning_headers(json_response(answer, 201, request=request), warnings)
