"""How following and writing to a cluster fail, in a fixed vocabulary (no kubernetes import: the
pages use it too): the exceptions, and describe(): what failed, the HTTP status, when. Never a
traceback, a library's text or upstream's body (docs/FOLLOWING.md, issue 29)."""
from __future__ import annotations

import http
import time
from urllib.parse import quote

import orjson

from dashboard.kube import registry


class NotAList(Exception):
    """Upstream's answer is not a Kubernetes list or watch stream."""


class Gone(Exception):
    """The resourceVersion asked for is compacted upstream (410): relist."""


class Upstream(Exception):
    """Upstream answered with an error (its HTTP status code; its words are not kept)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class Silent(Exception):
    """Nothing heard on a watch (no event, no bookmark) within the silence deadline: the
    connection is presumed dead (a partition leaves it half-open). Relist once it answers."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


class Refused(Exception):
    """The server (or proxy) is not one the follower may connect to (follow/destination.py)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def collection_path(res: registry.Resource, namespace: str) -> str:
    root = res.prefix()
    if namespace:
        return f"{root}/namespaces/{quote(namespace, safe='')}/{res.plural}"
    return f"{root}/{res.plural}"


# What a follower says when it fails: a fixed vocabulary (what failed, the HTTP status, when).
# Library exception texts are never shown: they can hold a request's headers (a bearer token in
# "Invalid header value b'Bearer …'"), a URL with a password, or what the server answered.
_CAUSES = (   # (words in the exception chain's texts or class names, what is shown)
    (("Connection refused", "ConnectionRefused"), "cannot connect to the API server (connection refused)"),
    (("NameResolutionError", "Name or service not known", "gaierror", "nodename nor servname"),
     "cannot find the API server (its name does not resolve)"),
    (("Read timed out", "ReadTimeoutError", "ConnectTimeout", "timed out"), "the API server stopped answering (timed out)"),
    (("CERTIFICATE_VERIFY_FAILED", "certificate verify failed"),
     "the API server's certificate is not trusted by the kubeconfig's CA"),
    (("SSLError", "SSL", "TLS"), "the TLS handshake with the API server failed"),
    (("ProtocolError", "Connection aborted", "IncompleteRead", "ended prematurely", "Connection reset",
      "RemoteDisconnected", "BadStatusLine"), "the connection to the API server was lost"),
    (("ProxyError",), "the proxy refused or failed the connection"),
)


def _chain_texts(err: BaseException) -> str:
    texts, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        texts.append(f"{type(err).__name__}: {err}")
        reason = getattr(err, "reason", None)
        if isinstance(reason, BaseException):
            texts.append(f"{type(reason).__name__}: {reason}")
            reason_cause = reason.__cause__ or reason.__context__
            if reason_cause is not None:
                texts.append(f"{type(reason_cause).__name__}: {reason_cause}")
        err = err.__cause__ or err.__context__
    return " | ".join(texts)


def describe(err: Exception) -> str:
    """A failure in a sentence from a fixed vocabulary, for the banner, the Clusters page and the
    log: what failed, the HTTP status, when. Never a traceback, a library's text or upstream's."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if isinstance(err, Upstream):
        try:
            phrase = " " + http.HTTPStatus(err.code).phrase
        except ValueError:
            phrase = ""
        what = f"the API server answered HTTP {err.code}{phrase}" if err.code else "the API server answered an error"
    elif isinstance(err, Silent):
        what = f"no word from the API server for {err.seconds:g} s (no event or bookmark): the connection is presumed dead"
    elif isinstance(err, Refused):
        what = f"not followed: {err.why}"
    elif isinstance(err, (NotAList, orjson.JSONDecodeError)):
        what = "the API server's answer is not a Kubernetes list or watch"
    else:
        texts = _chain_texts(err)
        what = next((shown for words, shown in _CAUSES if any(w in texts for w in words)),
                    "the request to the API server failed")
    return f"{what} (at {when})"
