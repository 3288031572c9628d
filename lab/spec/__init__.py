"""One lab, described once: :class:`LabSpec`, its rule table and its JSON form.

Role: every option that shapes a lab, typed, in one frozen object that crosses every process
boundary: ``invoke lab.up`` (``tasks.py`` builds it with :func:`up_request`) hands it to the
front door (``lab.frontdoor``), which resolves ``--backend auto``, writes it to the lab
directory (``spec.json``) and starts ``lab.daemon``, which reads it back and hosts a
:class:`lab.compose.Lab` built from it; the pytest fixtures (``lab.pytest_plugin``) build the
same object from their options, and ``lab.status`` shows it. Nobody re-parses argv.

The rule table (:data:`RULES`) is the one place a combination of options is judged. A rule is a
small named function of the spec that returns its one-line refusal (the flag, the value and
the fix) or None. Each rule has a scope: :attr:`Scope.SPEC` rules are invariants of every
spec, checked when one is made (so a ``LabSpec`` that exists keeps them: ``Lab``, the daemon and
the fixtures never check again); :attr:`Scope.UP` rules are ``lab.up``'s own limits and consent
flags (at most 20 nodes, the releases the stand-ins model, ``--i-accept-aws-charges``), which a
lab built in Python (a benchmark of 50 nodes) need not keep; :attr:`Scope.FINAL` rules say a
spec is ready to become a lab (its backend chosen, a real-account run's id known), checked when
it is written or read. Rules that depend on the backend (``auto`` may become kind) run again
on the resolved spec: the same table, nothing else. What needs the machine (a kubeconfig file,
an API server or a LocalStack that answers, a Docker network) is ``lab.preflight``.

The package: ``table`` (the machinery: scopes, rules, :class:`SpecError`; it knows no spec),
``model`` (:class:`LabSpec`, the kinds, ``spec.json``; building a spec runs the table) and
``rules`` (the rules, which read specs); this face imports all three, so the rules are in the
table before the first spec is made, and every import points one way.

Neighbours: ``lab.state`` (the running lab's ``state.json``, and :class:`LabError`, which
:class:`SpecError` is); below this package only leaf helpers, imported where a rule needs them
so that building a spec imports no SDK.
"""

from __future__ import annotations

from lab.spec import rules
from lab.spec.model import (
    AUTO,
    MAX_NODES,
    SIM_MINORS,
    SPEC_FILE,
    SPEC_VERSION,
    AwsKind,
    Backend,
    BackendRequest,
    LabSpec,
    read_spec,
    up_request,
    write_spec,
    zones_of,
)
from lab.spec.rules import validate_name
from lab.spec.table import RULES, Rule, Scope, SpecError, check, refusals, rule

__all__ = [
    "AUTO",
    "MAX_NODES",
    "RULES",
    "SIM_MINORS",
    "SPEC_FILE",
    "SPEC_VERSION",
    "AwsKind",
    "Backend",
    "BackendRequest",
    "LabSpec",
    "Rule",
    "Scope",
    "SpecError",
    "check",
    "read_spec",
    "refusals",
    "rule",
    "rules",
    "up_request",
    "validate_name",
    "write_spec",
    "zones_of",
]
