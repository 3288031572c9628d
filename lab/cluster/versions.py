"""Kubernetes versions and the version-dependent facts the cluster providers act on.

One table per fact, each row naming where it comes from, so the kind config renderer
(``lab.cluster.kind``) and the kubelet stand-in (``lab.cluster.kubelet``) agree on what a given
minor does. Sources: ``docs/reference/peers.md`` §1 (kind, kubelet with
``--cloud-provider=external``), ``docs/reference/upstream-ccm.md`` §6-§7 (node controller,
service-controller predicates), and kind's own tree (``pkg/apis/config/defaults/image.go`` at each
release tag, ``pkg/cluster/internal/kubeadm/config.go``) for the pinned node-image digests.
"""

from __future__ import annotations

import dataclasses
import functools
import re

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


@functools.total_ordering
@dataclasses.dataclass(frozen=True)
class KubeVersion:
    """A Kubernetes ``major.minor[.patch]``; compares on (major, minor, patch or 0)."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str | KubeVersion) -> KubeVersion:
        """Parse ``"1.29"``, ``"v1.29.2"`` or ``"latest"`` (the newest kind node image)."""
        if isinstance(text, KubeVersion):
            return text
        if text == "latest":
            return LATEST
        match = _VERSION_RE.match(text.strip())
        if match is None:
            raise ValueError(
                f"kubernetes version {text!r} is not of the form 1.29, v1.29.2 or 'latest'"
            )
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch) if patch is not None else None)

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch or 0)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, KubeVersion):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KubeVersion):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def at_least(self, minor: int, major: int = 1) -> bool:
        """True from ``major.minor.0`` on (patch ignored)."""
        return (self.major, self.minor) >= (major, minor)

    @property
    def minor_key(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        base = f"v{self.major}.{self.minor}"
        return base if self.patch is None else f"{base}.{self.patch}"


@dataclasses.dataclass(frozen=True)
class NodeImage:
    """A ``kindest/node`` image and the kind release that published it."""

    version: KubeVersion
    digest: str
    kind_release: tuple[int, int, int]
    #: Pair with exactly ``kind_release``: the image predates what current kind binaries are
    #: built and tested against (peers.md §1.3: "node-image/entrypoint compatibility across kind
    #: releases is not promised").
    pair_exactly: bool = False

    @property
    def reference(self) -> str:
        return f"kindest/node:{self.version}@sha256:{self.digest}"

    @property
    def kind_release_text(self) -> str:
        return "v{}.{}.{}".format(*self.kind_release)


def _image(version: str, digest: str, kind: str, *, pair_exactly: bool = False) -> NodeImage:
    major, minor, patch = (int(p) for p in kind.lstrip("v").split("."))
    return NodeImage(KubeVersion.parse(version), digest, (major, minor, patch), pair_exactly)


#: One image per supported minor: the default image of the kind release named (read from
#: ``pkg/apis/config/defaults/image.go`` at that tag), except v1.22.17 which peers.md §1.3 gives
#: from kind v0.20.0's release image list.
NODE_IMAGES: tuple[NodeImage, ...] = (
    _image(
        "v1.22.17",
        "f5b2e5698c6c9d6d0adc419c0deae21a425c07d81bbf3b6a6834042f25d4fba2",
        "v0.20.0",
        pair_exactly=True,
    ),
    _image(
        "v1.27.3", "3966ac761ae0136263ffdb6cfd4db23ef8a83cba8a463690e98317add2c9ba72", "v0.20.0"
    ),
    _image(
        "v1.29.2", "51a1434a5397193442f0be2a297b488b6c919ce8a3931be0ce822606ea5ca245", "v0.22.0"
    ),
    _image(
        "v1.31.0", "53df588e04085fd41ae12de0c3fe4c72f7013bba32a20e7325357a1ac94ba865", "v0.24.0"
    ),
    _image(
        "v1.32.0", "c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027", "v0.26.0"
    ),
    _image(
        "v1.33.1", "050072256b9a903bd914c0b2866828150cb229cea0efe5892e2b644d5dd3b34f", "v0.29.0"
    ),
    _image(
        "v1.34.0", "7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a", "v0.30.0"
    ),
    _image(
        "v1.35.0", "452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f", "v0.31.0"
    ),
    _image(
        "v1.36.1", "3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5", "v0.32.0"
    ),
)

#: "latest": the newest released node image (kind v0.32.0's default).
LATEST = NODE_IMAGES[-1].version

#: Older patch releases, pinned for the seed-004 scenarios' buggy and fixed clusters
#: (``reference/termination-bugs.md`` §5, digests from the kind release notes; each with the kind
#: release that built it): v1.22.9 has the kubelet and endpoint-controller bugs of
#: kubernetes#109414/#109718, v1.22.13 their fixes. Chosen only when that exact patch is asked
#: for; a bare ``1.22`` still means the image of :data:`NODE_IMAGES`.
PATCH_IMAGES: tuple[NodeImage, ...] = (
    _image(
        "v1.22.9",
        "8135260b959dfe320206eb36b3aeda9cffcb262f4b44cda6b33f7bb73f453105",
        "v0.14.0",
        pair_exactly=True,
    ),
    _image(
        "v1.22.13",
        "4904eda4d6e64b402169797805b8ec01f50133960ad6c19af45173a27eadf959",
        "v0.15.0",
        pair_exactly=True,
    ),
)


def node_image(version: str | KubeVersion) -> NodeImage:
    """The pinned node image for ``version``'s minor (a patch, if given, must match; the
    patch-pinned :data:`PATCH_IMAGES` only by exact patch)."""
    wanted = KubeVersion.parse(version)
    for image in NODE_IMAGES:
        if image.version.minor_key == wanted.minor_key and wanted.patch in (
            None,
            image.version.patch,
        ):
            return image
    for image in PATCH_IMAGES:
        if wanted.patch is not None and image.version == wanted:
            return image
    known = ", ".join(str(i.version) for i in (*NODE_IMAGES, *PATCH_IMAGES))
    raise ValueError(
        f"no pinned kindest/node image for kubernetes {wanted}; pinned: {known} "
        "(pass an explicit image to use another)"
    )


# --- facts keyed by version ----------------------------------------------------------------


def kubeadm_api_version(version: KubeVersion) -> str:
    """The kubeadm config API kind generates for ``version`` (peers.md §1.1; kind config.go).

    v1beta2 below 1.23, v1beta3 from 1.23, v1beta4 from 1.36 (only kind >= v0.32.0 emits it).
    """
    if not version.at_least(23):
        return "kubeadm.k8s.io/v1beta2"
    if not version.at_least(36):
        return "kubeadm.k8s.io/v1beta3"
    return "kubeadm.k8s.io/v1beta4"


def apiserver_has_cloud_provider_flag(version: KubeVersion) -> bool:
    """kube-apiserver ``--cloud-provider``: deprecated 1.29 (k/k#120903), removed 1.33 (#130162)."""
    return not version.at_least(33)


def kubeadm_control_plane_labels(version: KubeVersion) -> dict[str, str]:
    """Labels kubeadm puts on a control-plane node (upstream-ccm.md §7; kubeadm changelogs).

    * <= 1.19: ``node-role.kubernetes.io/master``.
    * 1.20: ``master`` and the new ``node-role.kubernetes.io/control-plane``.
    * 1.21-1.23: both, plus ``node.kubernetes.io/exclude-from-external-load-balancers``
      (kubeadm PR #98269, when the service controller stopped honouring ``master``).
    * >= 1.24: ``control-plane`` and the exclusion label; ``master`` is no longer applied.
    """
    labels: dict[str, str] = {}
    if not version.at_least(24):
        labels[LABEL_ROLE_MASTER] = ""
    if version.at_least(20):
        labels[LABEL_ROLE_CONTROL_PLANE] = ""
    if version.at_least(21):
        labels[LABEL_EXCLUDE_FROM_LB] = ""
    return labels


def kubeadm_control_plane_taints(version: KubeVersion) -> list[str]:
    """NoSchedule taint keys kubeadm puts on control planes: master (<= 1.23), both (1.24),
    control-plane (>= 1.25)."""
    keys = []
    if not version.at_least(25):
        keys.append(LABEL_ROLE_MASTER)
    if version.at_least(24):
        keys.append(LABEL_ROLE_CONTROL_PLANE)
    return keys


def kubelet_seeds_addresses_without_node_ip(version: KubeVersion) -> bool:
    """Whether kubelet (external cloud provider, no specific ``--node-ip``) fills
    ``status.addresses`` itself: yes up to 1.28; 1.29 (k/k#121028) waits for the CCM."""
    return not version.at_least(29)


def kubelet_seeds_default_address_for_unspecified_ip(version: KubeVersion) -> bool:
    """``--node-ip=0.0.0.0`` means "seed the default address, let the CCM override" from 1.30
    (k/k#125337); 1.29 treats it like no ``--node-ip`` (no addresses); older kubelets seed.

    The 1.30 boundary is peers.md §1.2's; #125337 merged in June 2024 (the 1.31 cycle) and
    whether 1.30 got it only through a patch release was not checked here."""
    return not version.at_least(29) or version.at_least(30)


def kind_single_node_keeps_exclusion_label(version: KubeVersion) -> bool:
    """Whether a one-node kind cluster keeps kubeadm's exclusion label on its control plane.

    kind always removes the control-plane taint(s) from a one-node cluster, and since kind
    v0.22.0 (kind commit 18bb5af0, Feb 2024) also ``node.kubernetes.io/exclude-from-external-
    load-balancers``, so that a load balancer can target the only node. The kind release is
    the one paired with ``version``'s pinned image (the newest kind for unpinned versions).
    """
    try:
        kind_release = node_image(version).kind_release
    except ValueError:
        kind_release = NODE_IMAGES[-1].kind_release
    return kind_release < (0, 22, 0)


def node_monitor_grace_period(version: KubeVersion) -> float:
    """kube-controller-manager's default ``--node-monitor-grace-period`` (seconds): 40, raised
    to 50 in 1.32 (k/k#126287). The kubelet stand-in's NotReady delay for that version."""
    return 50.0 if version.at_least(32) else 40.0


LABEL_ROLE_MASTER = "node-role.kubernetes.io/master"
LABEL_ROLE_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
LABEL_EXCLUDE_FROM_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_ALPHA_EXCLUDE_BALANCER = "alpha.service-controller.kubernetes.io/exclude-balancer"
ANNOTATION_PROVIDED_NODE_IP = "alpha.kubernetes.io/provided-node-ip"
TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
