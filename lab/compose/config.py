"""What shapes a lab: :class:`LabConfig` (every knob, checked once) and :class:`LabNode`.

Role: the composed lab's value types. :class:`LabConfig` is what ``Lab(config)`` takes (the
pytest plugin, ``lab.daemon`` and the benchmarks build one); :class:`LabNode` is one node of a
started lab, its Kubernetes name beside the EC2 instance behind it (``Lab.nodes``).

Neighbours: ``lab.compose.lab`` (the :class:`~lab.compose.lab.Lab` that takes the config),
``lab.compose.world`` (seeding makes the nodes), ``lab.state`` (the backend names).

Design: plain frozen values in a module of their own, apart from the machinery that reads them,
so the option set can be replaced (issue 26's ``LabSpec``) without touching the lab.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lab.clock import DEFAULT_SPEED, check_speed
from lab.cluster.base import Role
from lab.cluster.versions import KubeVersion
from lab.dataplane.versions import parse_feature_gates
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.state import AWS_BACKENDS, BACKENDS


@dataclasses.dataclass(frozen=True)
class LabNode:
    """One node of the lab: its Kubernetes name and the EC2 instance behind it."""

    name: str
    role: Role
    private_ip: str
    zone: str
    instance_id: str
    private_dns_name: str

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"


@dataclasses.dataclass(frozen=True)
class LabConfig:
    """Everything that shapes a lab. Defaults give the write-ups' setup, already fixed."""

    name: str = "default"
    nodes: int = 2
    k8s_version: str = DEFAULT_K8S_VERSION
    region: str = "us-east-1"
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b")
    cluster_id: str = "ccm-lab"
    seed: int = 1
    #: register nodes with ``provider-id`` (as the kind configs do); False = name lookup only
    provider_ids: bool = True
    #: "sim" (API simulator + kubelet stand-in), "kind" (real kind through its CLI) or
    #: "existing" (the cluster ``kubeconfig`` names: its own nodes, nothing of ours in it)
    backend: str = "sim"
    #: existing: the kubeconfig of the cluster to attach to
    kubeconfig: Path | None = None
    kind_binary: str = "kind"
    docker_binary: str = "docker"
    #: kind only: the AWS endpoint and metadata service listen on the nodes' Docker gateway
    #: (not loopback) so an in-cluster controller (``invoke lab.controller.deploy``) reaches them
    expose_to_nodes: bool = False
    #: sim: lab seconds per real second for every timed stand-in (``lab.clock``): grace
    #: periods, probes, node-monitor and health-check periods; 1.0 is real time.
    clock_speed: float = DEFAULT_SPEED
    #: sim, in lab seconds: the kubelet's Lease renewal (kubelet default 10 s) and
    #: kube-controller-manager's node-monitor grace period (None: that version's default,
    #: 40 s or 50 s from 1.32). At the default speed a node goes Unknown 4-5 s after its
    #: kubelet stops.
    lease_renew_interval: float = 10.0
    node_monitor_grace_period: float | None = None
    #: sim: the data plane's ``--feature-gates`` (``Name=true,...``), checked against what
    #: that release knows; only gates the data-plane models act on (``FEATURE_GATES``)
    feature_gates: str = ""
    state_dir: Path | None = None
    #: the VPC's block (its first zone's subnet is the kind nodes' Docker network); None: the
    #: topology's 10.0.0.0/16 on sim, the first block free on this host on kind
    #: (``lab.cluster.kind_network``)
    vpc_cidr: str | None = None
    #: sim: serve the API simulator over plain HTTP to anyone (no CA, no token in the
    #: kubeconfig). By default it serves HTTPS with a fresh CA and requires the lab's token,
    #: both in the kubeconfig. The control planes (``/_lab/``) need the token either way.
    insecure_api: bool = False
    #: how :meth:`Lab.start_controller` starts our controller: "fork" from this process's
    #: fork server, which has imported it once (``lab.component.forkserver``: a start then
    #: costs what the controller does, not its imports), or "exec" (``python -m controller``
    #: afresh every time). Another build (``--controller-cmd``) is always exec'd.
    controller_launch: str = "fork"
    #: the AWS endpoint: "moto" (the lab's own, with the fidelity layer and the ELB model) or
    #: "localstack" (``aws_endpoint``, or a container started through Docker), reached through
    #: the recording proxy (``lab.aws.proxied``) so the trail and faults work the same
    aws: str = "moto"
    #: localstack: the base URL of a running LocalStack; None starts one through Docker
    aws_endpoint: str | None = None
    #: real: the run (``lab.aws.realaccount``) whose instances are the nodes; the account is
    #: boto3's usual chain's, reached through the recording proxy with the run's guard
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if not self.zones:
            raise ValueError("zones must not be empty")
        if self.backend not in (*BACKENDS, "existing"):
            raise ValueError(
                f"backend must be one of {', '.join(BACKENDS)}, existing; got {self.backend!r}"
            )
        if (self.backend == "existing") != (self.kubeconfig is not None):
            raise ValueError(
                "kubeconfig names the cluster of backend 'existing' and only that backend's; "
                f"got backend={self.backend!r}, kubeconfig={self.kubeconfig!r}"
            )
        KubeVersion.parse(self.k8s_version)  # raises ValueError naming the text
        check_speed(self.clock_speed)  # raises ValueError naming the value
        if self.controller_launch not in ("fork", "exec"):
            raise ValueError(
                f"controller_launch must be fork or exec, got {self.controller_launch!r}"
            )
        if self.feature_gates and self.backend != "sim":
            raise ValueError(
                "feature_gates set the sim backend's data plane; on kind, set them in the "
                "cluster's kubeadm config"
            )
        parse_feature_gates(self.feature_gates, self.k8s_version)  # ValueError naming the gate
        if self.aws not in AWS_BACKENDS:
            raise ValueError(f"aws must be one of {', '.join(AWS_BACKENDS)}, got {self.aws!r}")
        if self.aws_endpoint is not None and self.aws != "localstack":
            raise ValueError("aws_endpoint names a LocalStack: it needs aws='localstack'")
        if (self.aws == "real") != (self.run_id is not None):
            raise ValueError(
                f"run_id names the real-account run of aws='real' and only that; got "
                f"aws={self.aws!r}, run_id={self.run_id!r}"
            )
        if self.aws == "real" and self.backend != "sim":
            raise ValueError(f"aws='real' runs with backend 'sim' only, got {self.backend!r}")
        if self.insecure_api and self.backend != "sim":
            raise ValueError(
                "insecure_api opens the sim backend's API simulator; a kind cluster's API "
                "server always serves TLS with kind's own credentials"
            )

    @property
    def cluster_name(self) -> str:
        """The cluster's name (and its nodes' name prefix). kind clusters share the host's
        Docker engine, so each lab's is its own; the simulator's is the cluster id."""
        if self.backend in ("sim", "existing"):
            return self.cluster_id
        return f"{self.cluster_id}-{self.name}"
