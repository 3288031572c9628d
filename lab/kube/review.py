"""The create-only review kinds of ``authentication.k8s.io`` and ``authorization.k8s.io``.

Each POST is answered with the request's object and a ``status``, 201, and nothing is stored
(``pkg/registry/authentication/tokenreview``, ``.../selfsubjectreview``,
``pkg/registry/authorization/*``): TokenReview verifies a token (``auth.Tokens``),
SelfSubjectReview names the requester, SubjectAccessReview / LocalSubjectAccessReview /
SelfSubjectAccessReview ask the authorizer, SelfSubjectRulesReview lists the requester's rules.
"""

from __future__ import annotations

from typing import Any

from lab.kube import exceptions as E
from lab.kube.auth import API_AUDIENCES, Attributes, Authorizer, TokenError, Tokens, User
from lab.kube.objects import Obj, clone
from lab.kube.resources import ResourceType


def _base(rt: ResourceType, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise E.bad_request("the body of the request was in an unknown format")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind is not None and kind != rt.kind:
        raise E.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    if api_version is not None and api_version != rt.api_version:
        raise E.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rt.api_version})"
        )
    out = clone(body)
    out["kind"], out["apiVersion"] = rt.kind, rt.api_version
    raw_meta = out.get("metadata")
    meta: Obj = raw_meta if isinstance(raw_meta, dict) else {}
    meta.setdefault("creationTimestamp", None)
    out["metadata"] = meta
    if not isinstance(out.get("spec"), dict):
        out["spec"] = {}
    return out


def _attributes(rt: ResourceType, spec: Obj, user: User, path_ns: str) -> Attributes:
    res: Obj = spec.get("resourceAttributes") or {}
    non: Obj = spec.get("nonResourceAttributes") or {}
    if not isinstance(res, dict) or not isinstance(non, dict):
        raise E.bad_request("resourceAttributes and nonResourceAttributes must be objects")
    if bool(res) == bool(non):
        raise E.invalid(
            rt,
            "",
            [
                E.invalid_value(
                    "spec.resourceAttributes",
                    res,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
        )
    if non:
        return Attributes(user, str(non.get("verb", "")), path=str(non.get("path", "")))
    ns = str(res.get("namespace", ""))
    if rt.kind == "LocalSubjectAccessReview" and ns != path_ns:
        raise E.invalid(
            rt,
            "",
            [
                E.invalid_value(
                    "spec.resourceAttributes.namespace", ns, "must match metadata.namespace"
                )
            ],
        )
    return Attributes(
        user,
        str(res.get("verb", "")),
        namespace=ns,
        group=str(res.get("group", "")),
        resource=str(res.get("resource", "")),
        subresource=str(res.get("subresource", "")),
        name=str(res.get("name", "")),
    )


def review(
    rt: ResourceType,
    ns: str,
    body: Any,
    requester: User,
    tokens: Tokens,
    authorizer: Authorizer,
) -> Obj:
    out = _base(rt, body)
    spec = out["spec"]
    if rt.kind == "TokenReview":
        out["status"] = _token_review_status(spec, tokens)
    elif rt.kind == "SelfSubjectReview":
        out["status"] = {"userInfo": requester.info()}
    elif rt.kind == "SelfSubjectRulesReview":
        namespace = str(spec.get("namespace", ""))
        resource, non_resource = authorizer.rules_for(requester, namespace)
        out["status"] = {
            "resourceRules": resource,
            "nonResourceRules": non_resource,
            "incomplete": False,
        }
    else:
        user = requester if rt.kind == "SelfSubjectAccessReview" else _subject(rt, spec)
        if rt.kind == "LocalSubjectAccessReview":
            out["metadata"]["namespace"] = ns
        allowed, reason = authorizer.authorize(_attributes(rt, spec, user, ns))
        status: Obj = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        out["status"] = status
    return out


def _token_review_status(spec: Obj, tokens: Tokens) -> Obj:
    """Whom the token authenticates, for which audiences (the API's by default), or why not."""
    token = spec.get("token")
    if not token:
        raise E.bad_request("token is required for TokenReview in authentication")
    audiences = tuple(str(a) for a in spec.get("audiences") or []) or API_AUDIENCES
    try:
        user = tokens.authenticate(str(token), audiences)
    except TokenError as err:
        return {"user": {}, "error": str(err)}
    return {"authenticated": True, "user": user.info(), "audiences": list(audiences)}


def _subject(rt: ResourceType, spec: Obj) -> User:
    """The user a (Local)SubjectAccessReview asks about: a user or groups at least."""
    name, groups = spec.get("user") or "", spec.get("groups") or []
    if not name and not groups:
        raise E.invalid(
            rt,
            "",
            [E.invalid_value("spec.user", "", "at least one of user or group must be specified")],
        )
    return User(
        str(name),
        tuple(str(g) for g in groups),
        uid=str(spec.get("uid") or ""),
        extra=dict(spec.get("extra") or {}),
    )
