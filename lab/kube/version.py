"""The Kubernetes version the simulator reports, and the ``/version`` document for it.

Role: one constant, :data:`DEFAULT_K8S_VERSION`, for the version a lab runs unless told
otherwise (the lab's cluster providers, tasks and CLIs default to it), and
:func:`version_info`, the ``/version`` body a kube-apiserver of a given version answers
(``apiserver-spec.md`` §1.2). kubectl's dispatcher and the Python ``DynamicClient`` read it;
from 1.33 on it also carries the emulation and minimum-compatibility versions
(``k8s.io/apimachinery/pkg/version.Info``), which an ordinary server sets to its own minor and
the one before.

What the lab cannot know, it fills in plainly: ``gitCommit`` is the SHA-1 of the version text
(stable, 40 hex digits, not a real commit), ``buildDate`` and ``goVersion`` are a stand-in per
minor. Clients do not act on those fields.

Neighbours: ``handlers.Api`` answers ``/version`` with this; ``openapi`` puts the same
``gitVersion`` into ``info.version``; ``server.KubeServer(version=...)`` chooses it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

#: The Kubernetes version a lab runs unless told otherwise.
DEFAULT_K8S_VERSION: Final = "1.33"

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
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
    """``"1.33"``, ``"v1.33.1"`` -> (1, 33, patch or 0); a clear error for anything else."""
    match = _VERSION.match(version.strip())
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
