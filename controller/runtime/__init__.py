"""Controller runtime: the machinery generic controllers run on.

Neighbours: ``clock`` (injectable time), ``workqueue`` (rate-limited queue and the one loop
that interprets the retry vocabulary), ``kube`` (the Kubernetes access seam and its
implementation on the official client), ``informer`` (list+watch caches), ``events``
(core/v1 Event recorder), ``leader`` (Lease-based leader election), ``metrics`` and
``server`` (Prometheus and health endpoints), ``logs`` (structured logging).
"""
