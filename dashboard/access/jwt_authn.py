"""Bearer JWTs from identity providers, as kube-apiserver's structured authentication
configuration accepts them: KUBEDASH_AUTHENTICATION_CONFIG names a file in kube's
AuthenticationConfiguration format (apiserver.config.k8s.io/v1beta1, also v1alpha1 and v1):

    jwt:
    - issuer: {url: https://..., audiences: [kubedash], certificateAuthority: <PEM>}
      claimMappings:
        username: {claim: email, prefix: ""}
        groups: {claim: groups, prefix: ""}
      claimValidationRules: [{claim: hd, requiredValue: example.com}]

CEL (`expression` in claimMappings, claimValidationRules, userValidationRules) is refused at
start-up, with the field named. A token is verified once (signature against the issuer's JWKS,
fetched by discovery and again on an unknown `kid`; iss, aud, exp, nbf; the rules) and its
identity kept until it expires, so each later request costs a dictionary lookup plus the group
bindings' query. The identity's rights: its groups' bindings (and the grant of a kubedash user
of the same name, if any), as for people signed in on the pages (principals.principal_for).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

from .models import GroupBinding, Profile
from .principals import Grant, widest

log = logging.getLogger(__name__)

API_VERSIONS = ("apiserver.config.k8s.io/v1alpha1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1")
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"]   # kube's list
CLOCK_SKEW = 60            # seconds of leeway on exp / nbf / iat
CACHE_SIZE = 10_000        # verified tokens kept (by sha256), each until it expires
JWKS_REFETCH_SECONDS = 10  # an unknown kid fetches the JWKS again at most this often per issuer


class TokenRefused(Exception):
    """Why a JWT is not accepted (logged; the client gets kube's bare 401 "Unauthorized")."""


@dataclass
class Issuer:
    url: str
    audiences: tuple[str, ...]
    ca_pem: str = ""
    discovery_url: str = ""
    username_claim: str = "sub"
    username_prefix: str = ""
    groups_claim: str = ""
    groups_prefix: str = ""
    required: tuple[tuple[str, str], ...] = ()
    _jwks: dict | None = field(default=None, repr=False)
    _jwks_at: float = 0.0

    def ssl_context(self):
        return ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else ssl.create_default_context()

    def _get(self, url: str) -> dict:
        with urllib.request.urlopen(url, context=self.ssl_context(), timeout=10) as resp:
            return json.load(resp)

    def keys(self, refetch: bool = False) -> KeySet:
        """The issuer's JWKS (discovery's jwks_uri), fetched once; again on an unknown kid."""
        if self._jwks is None or (refetch and time.monotonic() - self._jwks_at > JWKS_REFETCH_SECONDS):
            discovery = self._get(self.discovery_url or self.url.rstrip("/") + "/.well-known/openid-configuration")
            self._jwks = self._get(discovery["jwks_uri"])
            self._jwks_at = time.monotonic()
        return KeySet.import_key_set(self._jwks)


@dataclass(frozen=True)
class Identity:
    username: str
    groups: tuple[str, ...]
    expires: float


@dataclass
class JwtRow:
    """What authentication returns beside the principal for a JWT (as TokenRow does for a
    kubedash token): no row, an expiry for watches to end at."""

    pk: str
    last_used: object = None
    user_id: int | None = None
    expires: datetime | None = None
    may_impersonate: bool = False


def _field(obj, name, where, kind=dict, required=False):
    value = obj.get(name) if isinstance(obj, dict) else None
    if value is None:
        if required:
            raise ImproperlyConfigured(f"{where}.{name} is required")
        return kind()
    if not isinstance(value, kind):
        raise ImproperlyConfigured(f"{where}.{name} must be a {kind.__name__}")
    return value


def parse_config(text: str, source: str = "KUBEDASH_AUTHENTICATION_CONFIG") -> list[Issuer]:
    """The issuers of an AuthenticationConfiguration; ImproperlyConfigured naming the field for
    anything kubedash does not do (CEL expressions) or that is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{source}: not YAML: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "AuthenticationConfiguration" \
            or doc.get("apiVersion") not in API_VERSIONS:
        raise ImproperlyConfigured(f"{source}: expected kind AuthenticationConfiguration, apiVersion one of "
                                   + ", ".join(API_VERSIONS))
    if doc.get("anonymous"):
        raise ImproperlyConfigured(f"{source}: anonymous is not supported by kubedash")
    issuers = []
    for i, entry in enumerate(_field(doc, "jwt", source, list, required=True)):
        where = f"{source}: jwt[{i}]"
        issuer = _field(entry, "issuer", where, required=True)
        url = _field(issuer, "url", where + ".issuer", str, required=True)
        if not url.startswith("https://"):
            raise ImproperlyConfigured(f"{where}.issuer.url must be an https:// URL")
        audiences = _field(issuer, "audiences", where + ".issuer", list, required=True)
        if not audiences or not all(isinstance(a, str) and a for a in audiences):
            raise ImproperlyConfigured(f"{where}.issuer.audiences must list at least one audience")
        mappings = _field(entry, "claimMappings", where, required=True)
        username = _field(mappings, "username", where + ".claimMappings", required=True)
        groups = _field(mappings, "groups", where + ".claimMappings")
        for name, mapping in (("username", username), ("groups", groups), ("uid", _field(mappings, "uid", where))):
            if "expression" in mapping:
                raise ImproperlyConfigured(f"{where}.claimMappings.{name}.expression: CEL expressions are not "
                                           "supported by kubedash; use claim and prefix")
        if mappings.get("extra"):
            raise ImproperlyConfigured(f"{where}.claimMappings.extra: CEL expressions are not supported by kubedash")
        if entry.get("userValidationRules"):
            raise ImproperlyConfigured(f"{where}.userValidationRules: CEL expressions are not supported by kubedash")
        if not username.get("claim"):
            raise ImproperlyConfigured(f"{where}.claimMappings.username.claim is required")
        required = []
        for j, rule in enumerate(_field(entry, "claimValidationRules", where, list)):
            if not isinstance(rule, dict) or "expression" in rule:
                raise ImproperlyConfigured(f"{where}.claimValidationRules[{j}].expression: CEL expressions are not "
                                           "supported by kubedash; use claim and requiredValue")
            if not rule.get("claim"):
                raise ImproperlyConfigured(f"{where}.claimValidationRules[{j}].claim is required")
            required.append((rule["claim"], str(rule.get("requiredValue", ""))))
        issuers.append(Issuer(url=url.rstrip("/") if url.count("/") > 2 and url.endswith("/") else url,
                              audiences=tuple(audiences), ca_pem=issuer.get("certificateAuthority") or "",
                              discovery_url=issuer.get("discoveryURL") or "",
                              username_claim=username["claim"], username_prefix=username.get("prefix") or "",
                              groups_claim=groups.get("claim") or "", groups_prefix=groups.get("prefix") or "",
                              required=tuple(required)))
    urls = [i.url for i in issuers]
    if len(set(urls)) != len(urls):
        raise ImproperlyConfigured(f"{source}: two jwt entries have the same issuer.url")
    return issuers


@functools.cache
def issuers() -> dict[str, Issuer]:
    """The configured issuers by URL ({} when KUBEDASH_AUTHENTICATION_CONFIG is unset)."""
    path = settings.KUBEDASH_AUTHENTICATION_CONFIG
    if not path:
        return {}
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise ImproperlyConfigured(f"KUBEDASH_AUTHENTICATION_CONFIG: cannot read {path}: {exc}") from exc
    return {i.url: i for i in parse_config(text, f"KUBEDASH_AUTHENTICATION_CONFIG ({path})")}


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


def _unverified_claims(token: str) -> dict:
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, IndexError) as exc:
        raise TokenRefused("not a JWT") from exc


def verify(token: str) -> Identity:
    """The identity of a JWT from one of the configured issuers, or TokenRefused."""
    claims = _unverified_claims(token)
    issuer = issuers().get(claims.get("iss")) if isinstance(claims, dict) else None
    if issuer is None:
        raise TokenRefused(f"issuer {claims.get('iss')!r} is not configured")
    registry = JWSRegistry(algorithms=ALGORITHMS)
    try:
        try:
            decoded = jwt.decode(token, issuer.keys(), registry=registry)
        except InvalidKeyIdError:
            decoded = jwt.decode(token, issuer.keys(refetch=True), registry=registry)
    except (JoseError, ValueError) as exc:
        raise TokenRefused(f"signature not verified: {exc}") from exc
    except OSError as exc:
        raise TokenRefused(f"issuer's keys not reachable: {exc}") from exc
    claims = decoded.claims
    now = time.time()
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else list(audiences or ())
    if not set(audiences) & set(issuer.audiences):
        raise TokenRefused("audience not accepted")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or exp < now - CLOCK_SKEW:
        raise TokenRefused("expired")
    if isinstance(claims.get("nbf"), (int, float)) and claims["nbf"] > now + CLOCK_SKEW:
        raise TokenRefused("not yet valid")
    for claim, value in issuer.required:
        actual = claims.get(claim)
        if (json.dumps(actual) if isinstance(actual, bool) else actual) != value:   # (true: "true")
            raise TokenRefused(f"claim {claim} is not {value!r}")
    name = claims.get(issuer.username_claim)
    if not isinstance(name, str) or not name:
        raise TokenRefused(f"no {issuer.username_claim} claim")
    if issuer.username_claim == "email" and claims.get("email_verified", True) is not True:
        raise TokenRefused("email not verified")   # kube-apiserver's rule
    raw_groups = claims.get(issuer.groups_claim, ()) if issuer.groups_claim else ()
    if isinstance(raw_groups, str):
        raw_groups = [raw_groups]
    groups = tuple(issuer.groups_prefix + g for g in raw_groups if isinstance(g, str) and g)
    return Identity(issuer.username_prefix + name, groups, float(exp))


_cache: dict[str, Identity] = {}
_lock = threading.Lock()


def identity(token: str) -> Identity:
    """verify(), once per token: kept until it expires."""
    key = hashlib.sha256(token.encode()).hexdigest()
    found = _cache.get(key)
    if found is not None and found.expires > time.time() - CLOCK_SKEW:
        return found
    ident = verify(token)
    with _lock:
        if len(_cache) >= CACHE_SIZE:
            now = time.time()
            for k in [k for k, v in _cache.items() if v.expires < now] or list(_cache)[: CACHE_SIZE // 2]:
                _cache.pop(k, None)
        _cache[key] = ident
    return ident


@functools.cache
def _rights_sql(groups: int) -> str:
    """One plain query (as authentication.token_principal: the ORM's query building would cost
    more than the rest of the request): the grant of a user of that name, and the bindings of
    `groups` groups."""
    user_model = get_user_model()
    t = {"user": user_model._meta.db_table, "profile": Profile._meta.db_table,
         "binding": GroupBinding._meta.db_table, "username": user_model.USERNAME_FIELD}
    sql = ("SELECT p.role, p.namespaces, p.clusters, '', u.id FROM {user} u LEFT JOIN {profile} p ON p.user_id = u.id "
           "WHERE u.{username} = %s AND u.is_active = %s").format(**t)
    if groups:
        sql += (" UNION ALL SELECT b.role, b.namespaces, b.clusters, b.{g}, NULL FROM {binding} b WHERE b.{g} IN ("
                .format(g=connection.ops.quote_name("group"), **t) + ", ".join(["%s"] * groups) + ")")
    return sql


def _limits(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = json.loads(value)
    return tuple(value or ())


def principal(token: str):
    """(Principal, JwtRow) for a JWT, or TokenRefused. Rights: the bindings of its groups, and
    the grant of a kubedash user of the same name (if there is one): one query."""
    ident = identity(token)
    with connection.cursor() as cursor:
        cursor.execute(_rights_sql(len(ident.groups)), [ident.username, True, *ident.groups])
        rows = cursor.fetchall()
    user_id, own, bound = None, [], []
    for role, namespaces, clusters, group, uid in rows:
        if not group:
            user_id = uid
            if role:
                own.append(Grant(role, _limits(namespaces), _limits(clusters)))
        elif role:
            bound.append(Grant(role, _limits(namespaces), _limits(clusters), f"group {group}"))
    grants = tuple(own + sorted(bound, key=lambda g: g.source))
    who = widest(ident.username, grants, user_id=user_id, idp_groups=ident.groups)
    row = JwtRow("jwt:" + hashlib.sha256(token.encode()).hexdigest()[:16], user_id=user_id,
                 expires=datetime.fromtimestamp(ident.expires, dt_timezone.utc))
    return who, row
