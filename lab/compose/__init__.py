"""The composed lab: AWS endpoint, EC2 topology, metadata, cluster, controller, as one object.

``from lab.compose import Lab`` (with a :class:`lab.spec.LabSpec`) is how tests, tasks, the
daemon and the benchmarks make a lab; this package face re-exports the names they use.
Inside, the parts:

* ``lab`` — :class:`Lab`, which owns the parts of one lab, starts and stops them, resets them;
* ``node`` — :class:`LabNode` (one node of a lab);
* ``base`` — :class:`LabNotReady` and :func:`wait_for`;
* ``factory`` — which cluster provider (``config.backend``) and which AWS side
  (``config.aws``) a spec gets;
* ``aws_side`` — the AWS side's interface; ``aws_moto``, ``aws_localstack``, ``aws_real``
  (with ``aws_proxied``, their shared half) implement it;
* ``parts``, ``steps`` — a started lab's parts and the ordered start steps that fill them;
* ``plan``, ``world`` — the nodes a lab plans and the EC2 world seeded for them;
* ``controller`` — the controller under test; ``probe`` — ``Lab.traffic``'s probe.

Neighbours: ``lab.cluster`` (providers) and ``lab.aws``/``lab.imds`` (emulators) below;
``lab.daemon``, ``lab.pytest_plugin`` above. Design: one module per concern, each under 400
lines, instead of one 1,200-line module whose class branched on both backends.
"""

from lab.compose.base import LabNotReady, wait_for
from lab.compose.lab import Lab
from lab.compose.node import LabNode

__all__ = ["Lab", "LabNode", "LabNotReady", "wait_for"]
