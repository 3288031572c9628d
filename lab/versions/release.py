"""What a Kubernetes version is: its parsing and order, the lab's default, the ``/version``
document a server of it answers, and the ``kindest/node`` image pinned for it.

Role: the lowest layer's one answer to "which Kubernetes": :class:`KubeVersion` (``1.29``,
``v1.29.2`` or ``latest``, ordered on major, minor, patch), :data:`DEFAULT_K8S_VERSION` (the
version a lab runs unless told otherwise: the cluster providers, tasks and CLIs default to it),
:func:`version_info` (the ``/version`` body, ``apiserver-spec.md`` §1.2) and :data:`NODE_IMAGES`
(one pinned kind node image per supported minor, which also fixes what ``latest`` means).

Neighbours: ``lab.versions.provisioning`` (what kubeadm, kind and the kubelet do per version)
and ``lab.versions.dataplane`` (what the data-plane components do per release) build on
:class:`KubeVersion`; ``lab.kube`` answers ``/version`` and ``openapi`` ``info.version`` with
:func:`version_info` and :func:`git_version`; ``lab.cluster.kind_config`` renders the node
images.

Design: the node-image table lives beside the version type because ``latest`` is its last row;
splitting them would make the parser and the table import each other. Sources for the images:
kind's own tree (``pkg/apis/config/defaults/image.go`` at each release tag) and
``docs/reference/peers.md`` §1.3.

``/version``: from 1.33 on it also carries the emulation and minimum-compatibility versions
(``k8s.io/apimachinery/pkg/version.Info``), which an ordinary server sets to its own minor and
the one before. What the lab cannot know it fills in plainly: ``gitCommit`` is the SHA-1 of the
version text (stable, 40 hex digits, not a real commit), ``buildDate`` and ``goVersion`` are a
stand-in per minor. Clients do not act on those fields.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from typing import Final

#: The Kubernetes version a lab runs unless told otherwise.
DEFAULT_K8S_VERSION: Final = "1.33"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?\Z")


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


# --- the /version document ----------------------------------------------------------------

#: ``goVersion`` per Kubernetes minor: a Go release of the line that minor was built with (a
#: stand-in, like ``buildDate``; the newest listed one for minors not listed).
_GO: Final = {
    22: "go1.16.7",
    27: "go1.20.4",
    29: "go1.21.6",
    31: "go1.22.5",
    32: "go1.23.3",
    33: "go1.24.2",
    34: "go1.24.6",
    35: "go1.25.5",
}


def parse(version: str) -> tuple[int, int, int]:
    """``"1.33"``, ``"v1.33.1"`` -> (1, 33, patch or 0); a clear error for anything else
    (``latest`` included: a server states its version)."""
    match = _VERSION_RE.match(version.strip())
    if match is None:
        raise ValueError(f"kubernetes version {version!r} is not of the form 1.33 or v1.33.1")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def git_version(version: str) -> str:
    """The ``gitVersion`` of ``version``: ``"1.33"`` -> ``"v1.33.0"``."""
    major, minor, patch = parse(version)
    return f"v{major}.{minor}.{patch}"


def version_info(version: str = DEFAULT_K8S_VERSION) -> dict[str, str]:
    """The ``/version`` document a kube-apiserver of ``version`` answers."""
    major, minor, _ = parse(version)
    text = git_version(version)
    info = {"major": str(major), "minor": str(minor)}
    if (major, minor) >= (1, 33):
        info |= {
            "emulationMajor": str(major),
            "emulationMinor": str(minor),
            "minCompatibilityMajor": str(major),
            "minCompatibilityMinor": str(minor - 1),
        }
    return info | {
        "gitVersion": text,
        "gitCommit": hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest(),
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": _GO.get(minor, _GO[max(_GO)]),
        "compiler": "gc",
        "platform": "linux/amd64",
    }
