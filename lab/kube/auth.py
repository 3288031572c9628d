"""Who is asking, and may they: tokens, reviews and the authorizers.

Authentication: the lab's bearer token (when the simulator has one) is the cluster admin,
``kubernetes-admin`` in ``system:masters``; a ServiceAccount token the simulator signed is
``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts``,
``system:serviceaccounts:<ns>`` and ``system:authenticated`` (``pkg/serviceaccount``); no token
at all is ``system:anonymous`` in ``system:unauthenticated``.

Tokens are JWTs signed with HS256 under a key each simulator draws at start (kube-apiserver
signs RS256 with its service-account key; a client that verifies signatures itself against
the issuer's JWKS cannot verify these). Claims follow ``pkg/serviceaccount/claims.go``: ``iss``,
``sub``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and the ``kubernetes.io`` private claim
with the namespace, the ServiceAccount and the bound Pod / Secret / Node.

Authorization: ``AlwaysAllow`` by default; with ``authorization="rbac"`` the RBAC rules of the
stored Roles, ClusterRoles and bindings, evaluated as ``plugin/pkg/auth/authorizer/rbac`` does
(cluster role bindings first, then role bindings of the request's namespace; verbs, API
groups, ``resource/subresource``, resource names, non-resource URLs with a trailing ``*``;
``*`` everywhere), behind the ``system:masters`` privileged group. Aggregated ClusterRoles
(``aggregationRule``) are stored but not aggregated.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lab.kube import exceptions as E
from lab.kube.objects import Obj
from lab.kube.resources import ResourceType
from lab.kube.store import Selection, Store

ISSUER = "https://kubernetes.default.svc.cluster.local"  # kind's --service-account-issuer
API_AUDIENCES = (ISSUER,)  # --api-audiences defaults to the issuer
MIN_EXPIRATION = 600  # ValidateTokenRequest: "may not specify a duration less than 10 minutes"
MAX_EXPIRATION = 2**32
DEFAULT_EXPIRATION = 3600  # SetDefaults_TokenRequestSpec
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    def info(self) -> Obj:
        out: Obj = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = self.extra
        return out


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenError(Exception):
    """Why a bearer token does not authenticate (the TokenReview's ``status.error``)."""


class Tokens:
    """Signs and verifies the simulator's ServiceAccount tokens."""

    def __init__(self, store: Store, *, lab_token: str | None) -> None:
        self.store = store
        self.lab_token = lab_token
        self.key = secrets.token_bytes(32)
        self.kid = _b64(hashlib.sha256(self.key).digest()[:12])

    def sign(self, claims: Obj) -> str:
        header = {"alg": "HS256", "kid": self.kid}
        head = _b64(json.dumps(header, separators=(",", ":")).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        mac = hmac.new(self.key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"

    def claims(self, token: str) -> Obj:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("invalid bearer token")
        head, body, mac = parts
        want = hmac.new(self.key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        try:
            ok = hmac.compare_digest(_unb64(mac), want)
            claims = json.loads(_unb64(body))
        except (ValueError, json.JSONDecodeError):
            raise TokenError("invalid bearer token") from None
        if not ok or not isinstance(claims, dict):
            raise TokenError("invalid bearer token")
        return claims

    def authenticate(self, token: str, audiences: tuple[str, ...] = API_AUDIENCES) -> User:
        """The user a bearer token stands for; :class:`TokenError` when it stands for none."""
        if self.lab_token is not None and hmac.compare_digest(
            token.encode(), self.lab_token.encode()
        ):
            return ADMIN
        claims = self.claims(token)
        now = time.time()
        if claims.get("iss") != ISSUER:
            raise TokenError("invalid bearer token")
        if int(claims.get("exp", 0)) < now:
            raise TokenError("invalid bearer token, service account token has expired")
        if int(claims.get("nbf", 0)) > now + 60:
            raise TokenError("invalid bearer token, service account token is not valid yet")
        token_aud = claims.get("aud") or []
        if not set(token_aud) & set(audiences):
            raise TokenError(
                f"invalid bearer token, token audiences {json.dumps(token_aud)} is invalid for "
                f"the target audiences {json.dumps(list(audiences))}"
            )
        priv = claims.get("kubernetes.io") or {}
        ns = priv.get("namespace", "")
        sa_ref = priv.get("serviceaccount") or {}
        sa_rt = self.store.rt("", "serviceaccounts")
        sa = self.store.find(sa_rt, ns, sa_ref.get("name", ""))
        if sa is None or sa.obj["metadata"]["uid"] != sa_ref.get("uid"):
            raise TokenError(
                f"invalid bearer token, service account {ns}/{sa_ref.get('name', '')} has been "
                "deleted"
            )
        extra: dict[str, list[str]] = {}
        for kind, plural in (("pod", "pods"), ("secret", "secrets"), ("node", "nodes")):
            ref = priv.get(kind)
            if not ref:
                continue
            rt = self.store.rt("", plural)
            found = self.store.find(rt, "" if kind == "node" else ns, ref.get("name", ""))
            if found is None or found.obj["metadata"]["uid"] != ref.get("uid"):
                raise TokenError(
                    f"invalid bearer token, {kind} {ref.get('name', '')} bound to the token "
                    "has been deleted or recreated"
                )
            extra[f"authentication.kubernetes.io/{kind}-name"] = [ref.get("name", "")]
            extra[f"authentication.kubernetes.io/{kind}-uid"] = [ref.get("uid", "")]
        if claims.get("jti"):
            extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims['jti']}"]
        return User(
            f"system:serviceaccount:{ns}:{sa_ref.get('name', '')}",
            ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
            uid=sa_ref.get("uid", ""),
            extra=dict(sorted(extra.items())),
        )

    def user_for(self, authorization_header: str) -> User | None:
        """The requester; None when a bearer token was sent and does not authenticate."""
        if not authorization_header:
            return ANONYMOUS
        scheme, _, token = authorization_header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        try:
            return self.authenticate(token.strip())
        except TokenError:
            return None

    # ------------------------------------------------------------------ TokenRequest
    def token_request(self, sa_rt: ResourceType, ns: str, name: str, body: Any) -> Obj:
        """``POST serviceaccounts/{name}/token`` (``registry/core/serviceaccount/storage``)."""
        _check_token_request_kind(body)
        sa = self.store.get(sa_rt, ns, name).obj
        raw_spec = body.get("spec")
        spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
        expiration = _token_expiration(spec, name)
        audiences = [str(a) for a in spec.get("audiences") or []] or list(API_AUDIENCES)
        now = int(time.time())
        priv: Obj = {
            "namespace": ns,
            "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
        }
        ref = spec.get("boundObjectRef")
        out_spec: Obj = {"audiences": audiences, "expirationSeconds": expiration}
        if ref:
            priv.update(self._bound(ns, name, ref))
            out_spec["boundObjectRef"] = ref
        claims = {
            "aud": audiences,
            "exp": now + expiration,
            "iat": now,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": priv,
            "nbf": now,
            "sub": f"system:serviceaccount:{ns}:{name}",
        }
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + expiration))
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
            "spec": out_spec,
            "status": {"token": self.sign(claims), "expirationTimestamp": expires},
        }

    def _bound(self, ns: str, sa_name: str, ref: Any) -> Obj:
        if not isinstance(ref, dict):
            raise E.bad_request("boundObjectRef must be an object")
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        plural = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}.get(kind)
        if api_version != "v1" or plural is None:
            gvk = (
                f"{api_version or '/'}, Kind={kind}"
                if "/" in api_version
                else (f"/{api_version}, Kind={kind}")
            )
            raise E.bad_request(f"cannot bind token to object of type {gvk}")
        rt = self.store.rt("", plural)
        obj = self.store.get(rt, "" if kind == "Node" else ns, ref.get("name", "")).obj
        uid = ref.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise E.conflict(
                ResourceType("", "v1", kind, kind, kind.lower(), True),
                ref.get("name", ""),
                f"the UID in the bound object reference ({uid}) does not match the UID in "
                "record. The object might have been deleted and then recreated",
            )
        return {kind.lower(): {"name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}}


# ---------------------------------------------------------------------------- authorizers


@dataclass(frozen=True)
class Attributes:
    """``authorizer.Attributes``: a resource request or a non-resource one (``path`` set)."""

    user: User
    verb: str
    namespace: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return not self.path


def _verb_ok(rule: Obj, verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _rule_allows(rule: Obj, a: Attributes) -> bool:
    if not _verb_ok(rule, a.verb):
        return False
    if not a.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url in ("*", a.path) or (url.endswith("*") and a.path.startswith(url[:-1])):
                return True
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a.group not in groups:
        return False
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (a.subresource and r == f"*/{a.subresource}") for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


def _subject_matches(subject: Obj, user: User, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


class Authorizer:
    """``AlwaysAllow`` (``mode="allow"``) or privileged groups + RBAC (``mode="rbac"``)."""

    def __init__(self, store: Store, mode: str) -> None:
        if mode not in ("allow", "rbac"):
            raise ValueError(f'authorization must be "allow" or "rbac", not {mode!r}')
        self.store = store
        self.mode = mode

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        if self.mode == "allow" or "system:masters" in a.user.groups:
            return True, ""
        for binding, role_kind, role_name, rules, subject in self._bound_rules(a.user, a.namespace):
            if any(_rule_allows(r, a) for r in rules):
                where = binding["metadata"].get("namespace")
                bkind = "RoleBinding" if where else "ClusterRoleBinding"
                bname = (
                    f"{where}/{binding['metadata']['name']}"
                    if where
                    else binding["metadata"]["name"]
                )
                return True, (
                    f'RBAC: allowed by {bkind} "{bname}" of {role_kind} "{role_name}" to '
                    f'{subject.get("kind")} "{subject.get("name")}"'
                    + (f' in namespace "{where}"' if where else "")
                )
        return False, ""

    def _bound_rules(
        self, user: User, namespace: str
    ) -> list[tuple[Obj, str, str, list[Obj], Obj]]:
        out: list[tuple[Obj, str, str, list[Obj], Obj]] = []
        crb = self.store.rt(RBAC_GROUP, "clusterrolebindings")
        rb = self.store.rt(RBAC_GROUP, "rolebindings")
        bindings = [e.obj for e in self.store.list_objects(crb, None, Selection()).entries]
        if namespace:
            bindings += [e.obj for e in self.store.list_objects(rb, namespace, Selection()).entries]
        for binding in bindings:
            ns = binding["metadata"].get("namespace", "")
            subject = next(
                (s for s in binding.get("subjects") or [] if _subject_matches(s, user, ns)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            kind, name = ref.get("kind", ""), ref.get("name", "")
            if kind == "ClusterRole":
                role = self.store.find(self.store.rt(RBAC_GROUP, "clusterroles"), "", name)
            else:
                role = self.store.find(self.store.rt(RBAC_GROUP, "roles"), ns, name)
            if role is not None:
                out.append((binding, kind, name, list(role.obj.get("rules") or []), subject))
        return out

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj]]:
        """``SelfSubjectRulesReview``: (resource rules, non-resource rules)."""
        if self.mode == "allow":
            return (
                [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            )
        resource: list[Obj] = []
        non_resource: list[Obj] = []
        if "system:masters" in user.groups:
            resource.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            non_resource.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        for _, _, _, rules, _ in self._bound_rules(user, namespace):
            for rule in rules:
                if rule.get("nonResourceURLs"):
                    non_resource.append(
                        {
                            "verbs": rule.get("verbs") or [],
                            "nonResourceURLs": rule["nonResourceURLs"],
                        }
                    )
                else:
                    entry = {
                        k: rule[k]
                        for k in ("verbs", "apiGroups", "resources", "resourceNames")
                        if rule.get(k)
                    }
                    entry.setdefault("verbs", [])
                    resource.append(entry)
        return resource, non_resource


def _check_token_request_kind(body: Any) -> None:
    """A TokenRequest body (an object; ``kind``/``apiVersion`` absent or TokenRequest's), or
    400 as the apiserver's decoder answers."""
    if not isinstance(body, dict):
        raise E.bad_request("the body of the request was in an unknown format")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "TokenRequest") or api_version not in (
        None,
        "authentication.k8s.io/v1",
    ):
        raise E.bad_request(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme '
            '"pkg/api/legacyscheme/scheme.go:30"'
        )


def _token_expiration(spec: Obj, name: str) -> int:
    """``spec.expirationSeconds`` (default :data:`DEFAULT_EXPIRATION`), checked as the
    apiserver checks it: an integer, 10 minutes to 2^32 seconds."""
    expiration = spec.get("expirationSeconds")
    if expiration is None:
        expiration = DEFAULT_EXPIRATION
    review_rt = ResourceType(
        "authentication.k8s.io", "v1", "TokenRequest", "tokenrequests", "tokenrequest", True
    )
    if not isinstance(expiration, int) or isinstance(expiration, bool):
        raise E.bad_request(
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot '
            "unmarshal into Go struct field TokenRequestSpec.spec.expirationSeconds of type "
            "int64"
        )
    for outside, too in (
        (expiration < MIN_EXPIRATION, "less than 10 minutes"),
        (expiration > MAX_EXPIRATION, "larger than 2^32 seconds"),
    ):
        if outside:
            raise E.invalid(
                review_rt,
                name,
                [
                    E.invalid_value(
                        "spec.expirationSeconds", expiration, f"may not specify a duration {too}"
                    )
                ],
            )
    return expiration
