"""``kube-system/extension-apiserver-authentication``, kept as kube-apiserver keeps it.

Read off upstream's ``pkg/controlplane/controller/clusterauthenticationtrust`` (the controller
the ``start-cluster-authentication-info-controller`` post-start hook runs): the ConfigMap tells
components that authenticate by delegation (aggregated API servers, kube-controller-manager,
kube-scheduler, the cloud-controller-manager) which client CA to trust and how a front proxy
passes identities. Its data, as ``getConfigMapDataFor`` writes it:

* ``client-ca-file``: the PEM bundle of ``--client-ca-file``, only when there is one;
* when there is a request-header CA: ``requestheader-client-ca-file`` (its PEM bundle) and the
  JSON-encoded string lists ``requestheader-username-headers``, ``requestheader-group-headers``,
  ``requestheader-extra-headers-prefix``, ``requestheader-allowed-names`` and, from 1.32
  (``--requestheader-uid-headers``, the RemoteRequestHeaderUID feature),
  ``requestheader-uid-headers``.

The values are the flags kind's kubeadm passes (``X-Remote-User``, ``X-Remote-Group``,
``X-Remote-Extra-``, allowed name ``front-proxy-client``, no UID header, so ``[]``) and the
simulator's one CA for both bundles (kind has a separate front-proxy CA). A simulator without
TLS has no CA, so, like a kube-apiserver started without either CA flag, it writes nothing.

Like upstream, what is written is the union of what the ConfigMap holds and what this server
requires (lists de-duplicated in order; certificates that parse and have not expired, the
required ones kept), written only when that differs; an edit that drops a value or a delete is
repaired. The simulator does it on write (``Registry.commit`` calls :func:`reconcile`) and
when the server's CA is made (``Registry.publish_ca``), not on an informer's resync.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re

from cryptography import x509

from lab.kube.exceptions import ApiError
from lab.kube.writes import Writer
from lab.versions.release import KubeVersion

NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"
MANAGER = "kube-apiserver"
CONFIGMAPS_KEY = ("", "configmaps")
#: kubeadm's front-proxy flags (kind's control plane)
REQUEST_HEADERS: dict[str, list[str]] = {
    "requestheader-username-headers": ["X-Remote-User"],
    "requestheader-group-headers": ["X-Remote-Group"],
    "requestheader-extra-headers-prefix": ["X-Remote-Extra-"],
    "requestheader-allowed-names": ["front-proxy-client"],
}
UID_HEADERS = "requestheader-uid-headers"
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", re.DOTALL)


def concerns(k: tuple[str, str], key: tuple[str, str]) -> bool:
    """Whether a commit of ``key`` (namespace, name) of kind ``k`` is one to reconcile after."""
    return k == CONFIGMAPS_KEY and key == (NAMESPACE, NAME)


def _valid_certs(bundle: str) -> list[str]:
    """The bundle's certificates that parse and have not expired (five minutes' slack), as
    ``combineCertLists`` keeps them."""
    out = []
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    for block in _PEM.findall(bundle or ""):
        try:
            cert = x509.load_pem_x509_certificate(block.encode())
        except ValueError:
            continue
        if cert.not_valid_after_utc > cutoff:
            out.append(block if block.endswith("\n") else block + "\n")
    return out


def _union(*lists: list[str]) -> list[str]:
    out: list[str] = []
    for items in lists:
        out += [i for i in items if i not in out]
    return out


def _decoded(data: dict[str, str], key: str) -> list[str]:
    try:
        value = json.loads(data.get(key) or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def desired(existing: dict[str, str], ca_pem: str, version: str) -> dict[str, str]:
    """The data the controller writes over ``existing`` for this server's CA and version."""
    required = _valid_certs(ca_pem)
    client_ca = _union(_valid_certs(existing.get("client-ca-file", "")), required)
    header_ca = _union(_valid_certs(existing.get("requestheader-client-ca-file", "")), required)
    data: dict[str, str] = {}
    if client_ca:
        data["client-ca-file"] = "".join(client_ca)
    if header_ca:
        keys = dict(REQUEST_HEADERS)
        if KubeVersion.parse(version).minor_key >= (1, 32):
            keys[UID_HEADERS] = []
        for key, values in keys.items():
            data[key] = json.dumps(_union(_decoded(existing, key), values), separators=(",", ":"))
        data["requestheader-client-ca-file"] = "".join(header_ca)
    return dict(sorted(data.items()))


def reconcile(writer: Writer) -> None:
    """One ``syncConfigMap`` through ``writer`` (the store's lock is taken here); a refusal
    is left for the next write, as upstream requeues it."""
    store = writer.store
    with store.lock:
        rt = store.by_key[CONFIGMAPS_KEY]
        if store.find(store.by_key[("", "namespaces")], "", NAMESPACE) is None:
            return
        entry = store.find(rt, NAMESPACE, NAME)
        current = entry.obj if entry is not None else None
        existing = dict((current or {}).get("data") or {})
        data = desired(existing, store.ca_pem, store.k8s_version)
        try:
            if current is None:
                if data:
                    body = {"metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data}
                    writer.create(rt, NAMESPACE, body, manager=MANAGER)
            elif existing != data:
                new = copy.deepcopy(current)
                new["data"] = data
                writer.update(rt, NAMESPACE, NAME, new, manager=MANAGER)
        except ApiError:
            return
