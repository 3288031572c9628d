"""Imports everything a start of the controller imports, without starting anything.

For launchers that fork an interpreter which has imported the controller already instead of
starting ``python -m controller`` afresh (the lab's test harness restarts the controller about
fifty times in one catalog run; most of a start is ``import``). Importing this module has no
side effect beyond the imports and one parse of the EC2 and ELB service models (kept in a
loader, ``controller.aws.clients.preload_models``): no client, session, credential, logger
configuration or thread survives it, so nothing that depends on the environment is fixed before
the real start reads it.
"""

from __future__ import annotations

import kubernetes.client
import kubernetes.config  # noqa: F401

import controller.app
import controller.aws
import controller.aws.config
import controller.runtime.kube  # noqa: F401
from controller.aws.clients import preload_models

preload_models()
