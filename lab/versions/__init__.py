"""Kubernetes versions and what differs by release, in one place for every layer of the lab.

* :mod:`lab.versions.release`: what a version is (:class:`~lab.versions.release.KubeVersion`,
  the lab's default, the ``/version`` document, the pinned ``kindest/node`` images).
* :mod:`lab.versions.provisioning`: what kubeadm, kind and the kubelet do per version (labels,
  taints, kubeadm API, address seeding, the node monitor grace period).
* :mod:`lab.versions.dataplane`: what the data-plane components do per release (the change
  table, feature gates, behaviour records for the stand-ins).

Design: shared plumbing (the lowest layer of the ``lab layers`` contract) importing nothing of
the lab, so the API simulator (``lab.kube``), the cluster providers (``lab.cluster``) and the
data plane (``lab.dataplane``) all import it downward and never each other for a version fact.
Import the submodules; this package re-exports nothing.
"""
