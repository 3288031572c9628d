"""Cluster providers: ``sim`` (API simulator + kubelet stand-in), ``kind`` and ``existing``.

``base`` holds the interface and provider selection, ``steps`` the ordered-steps framework,
``versions`` the per-Kubernetes-version facts, ``kind``/``existing``/``sim`` the providers and
``kubelet`` the node-registration stand-in the ``sim`` provider runs.
"""
