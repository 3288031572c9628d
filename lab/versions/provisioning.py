"""What kubeadm, kind and the kubelet do differently per Kubernetes version, one function per
fact, each naming where it comes from.

Role: the kind config renderer (``lab.cluster.kind_config``), the Node builders
(``lab.cluster.node_shapes``) and the kubelet stand-in (``lab.cluster.kubelet``) ask these
instead of comparing version numbers, so they agree on what a given minor does; the well-known
label, annotation and taint names the facts speak of sit at the end.

Neighbours: :mod:`lab.versions.release` (the version type and the pinned node images, which
fix the kind release a version pairs with); :mod:`lab.versions.dataplane` takes the node
monitor grace period from here. Sources: ``docs/reference/peers.md`` §1 (kind, kubelet with
``--cloud-provider=external``), ``docs/reference/upstream-ccm.md`` §6-§7 (node controller,
service-controller predicates), kind's ``pkg/cluster/internal/kubeadm/config.go``.

Design: facts about provisioning a cluster of a version, apart from the data plane's release
table, because their readers are the providers, not the stand-ins.
"""

from __future__ import annotations

from lab.versions.release import NODE_IMAGES, KubeVersion, node_image


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
