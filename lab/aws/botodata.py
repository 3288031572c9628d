"""botocore's data files read once per process: every session shares one loader.

Role: each botocore ``Session`` (and each ``boto3.Session``, which wraps one) builds its own
data loader, whose cache lives and dies with that session, and reads botocore's JSON files (the
endpoint data, a service's whole model) again. moto creates fresh sessions by the dozen as its
modules load (``get_available_regions`` per service and partition, three times over in
``moto.ec2``'s region table), each parsing the service's model just to read its endpoint prefix:
EC2's model three times and the endpoint data six, about a third of the AWS endpoint's start.
:func:`share_loader` makes every session of the process, created after it, use one loader per
data path (``AWS_DATA_PATH``), so each file is parsed once (and :func:`share_with_moto` has
moto's own model lookups, a fresh loader per model, use the default paths' one); what a session
reads is what its own loader would have read (the loader's cached documents, which botocore
never changes once loaded, are what two clients of one session already share).

Design: botocore's ``Session._register_data_loader`` is replaced (marked, so a second call
changes nothing); the shared loader's search path ignores a directory already on it, since
``boto3.Session`` appends its own to its session's loader every time. Called before moto is
imported (``lab.aws.motostate.moto_dispatcher``).

Neighbours: :mod:`lab.aws.motopatches` (the edits to moto itself).
"""

from __future__ import annotations

import threading
from typing import Any

_LOCK = threading.Lock()
#: one loader per data path (the ``data_path`` config variable; "" when unset)
_LOADERS: dict[str, Any] = {}


class _SearchPath(list[str]):
    """A loader's search path on which a directory appears once (boto3 appends its data
    directory for every session it creates)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


def shared_loader(data_path: str | None) -> Any:
    """The process's botocore data loader for ``data_path`` (created on first use)."""
    from botocore.loaders import create_loader

    with _LOCK:
        loader: Any = _LOADERS.get(data_path or "")
        if loader is None:
            loader = create_loader(data_path)
            loader._search_paths = _SearchPath(loader.search_paths)
            _LOADERS[data_path or ""] = loader
        return loader


def share_loader() -> None:
    """Every botocore session created from now on reads through :func:`shared_loader`."""
    from botocore import session

    Session: Any = session.Session
    if getattr(Session._register_data_loader, "ccm_lab_shared", False):
        return

    def register_data_loader(self: Any) -> None:
        self._components.lazy_register_component(
            "data_loader", lambda: shared_loader(self.get_config_variable("data_path"))
        )

    register_data_loader.ccm_lab_shared = True  # type: ignore[attr-defined]
    Session._register_data_loader = register_data_loader


def share_with_moto() -> None:
    """moto's own model lookups (``moto.core.utils``: a fresh ``create_loader()`` per service
    model and paginator model) read through the shared loader of botocore's default paths."""
    import moto.core.utils

    moto_utils: Any = moto.core.utils
    if getattr(moto_utils.create_loader, "ccm_lab_shared", False):
        return

    def create_loader(search_path_string: str | None = None) -> Any:
        return shared_loader(search_path_string)

    create_loader.ccm_lab_shared = True  # type: ignore[attr-defined]
    moto_utils.create_loader = create_loader
