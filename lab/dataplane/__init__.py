"""The sim backend's data plane: stand-ins for kube-scheduler, kube-controller-manager's
workload, endpoint, node and garbage-collection controllers, the kubelet's pod lifecycle and a
kube-proxy model, each driven by the lab's Kubernetes version and the lab clock.

One module per real component; ``lab.versions.dataplane`` holds what each release does. The
stand-ins talk to the API server only through the Kubernetes API (``informers`` is their shared
list+watch cache), like the real components. ``plane.SimDataPlane`` starts them together for the sim
cluster provider (``lab.cluster.sim``).
"""
