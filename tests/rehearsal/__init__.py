"""The kind rehearsal: the lab's kind path run against network namespaces standing in for
node containers (``plugin``: ``pytest --kind-rehearsal``; ``fakes``: what the fake ``kind`` and
``docker`` make; ``cluster``: one cluster's API server, control plane and nodes; ``pods``: a
node's pods as real processes; ``node_proxy``: a node's kube-proxy and kubelet port;
``netexec``: agnhost netexec's answers)."""
