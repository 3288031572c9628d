"""Embedded Kubernetes API server simulator (see shared/docs/apiserver-spec.md).

Layout, named as in every emulator of the lab: ``server`` (``KubeServer``, the in-process
component), ``process`` (``KubeProcess``, ``python -m lab.kube`` as a child), ``control`` (the
``/_lab`` routes), ``control_client`` (``KubeControlClient``), ``exceptions``; the API is
``handlers`` over ``store``; ``version`` holds the default Kubernetes version. See
``lab/kube/README.md``.
"""
