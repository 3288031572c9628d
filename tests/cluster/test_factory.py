"""make_provider builds each backend, and every provider satisfies the ClusterProvider protocol
(checked by mypy through the annotated assignments below, and at run time by attribute)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.cluster.base import ClusterProvider
from lab.cluster.existing import ExistingProvider
from lab.cluster.factory import make_provider
from lab.cluster.kind import KindProvider
from lab.cluster.sim import SimProvider

PROTOCOL_MEMBERS = ("kind", "capabilities", "provision", "nodes", "kubeconfig", "logs", "delete")


def test_each_backend(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    sim: ClusterProvider = make_provider("sim", name="a", state_dir=tmp_path / "a")
    kind: ClusterProvider = make_provider("kind", name="b", state_dir=tmp_path / "b")
    existing: ClusterProvider = make_provider(
        "existing", name="c", state_dir=tmp_path, kubeconfig=kubeconfig
    )
    assert isinstance(sim, SimProvider)
    assert isinstance(kind, KindProvider)
    assert isinstance(existing, ExistingProvider)
    for provider, expected in ((sim, "sim"), (kind, "kind"), (existing, "existing")):
        assert provider.kind == expected
        for member in PROTOCOL_MEMBERS:
            assert hasattr(provider, member), (expected, member)
    assert kind.kubeconfig() == tmp_path / "b" / "kubeconfig"
    assert existing.kubeconfig() == kubeconfig


def test_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs kubeconfig"):
        make_provider("existing", name="c", state_dir=tmp_path)
    with pytest.raises(ValueError, match="'k3d' is not one of"):
        make_provider("k3d", name="c", state_dir=tmp_path)
