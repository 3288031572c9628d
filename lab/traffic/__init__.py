"""The traffic probe: where a request to a LoadBalancer Service goes, hop by hop.

Every documented failure this lab reproduces is, for its users, a traffic failure. The probe
models N requests the way they travel on AWS and in the cluster and says which pods answered
and where the others were dropped, with the reason.

Through a Classic ELB: client -> the load balancer's security groups on the listener port ->
the listener -> an InService instance (round robin; per zone unless cross-zone load balancing
is on) -> the instance's security groups on the instance port (the nodePort), from the load
balancer's groups -> kube-proxy on that node (:class:`lab.dataplane.kubeproxy.KubeProxyModel`)
-> the pod answers, or refuses.

Through a network load balancer (the Service's hostname is an NLB's): client -> the NLB's
security groups when it has any -> the listener on the port -> its target group -> a target
(``nlb.NlbPicker``: a healthy target, per zone unless cross-zone load balancing is on; no
healthy target anywhere: fail open) -> the instance's security groups on the target port (the
nodePort) from the **client's** address when the group preserves client IPs (the default for
instance targets; then a node reaching itself through the NLB times out), else from the NLB
node's address, with UDP rules for a UDP listener -> kube-proxy -> the pod.

On the sim backend nothing is sent on any network: every hop is evaluated from state (moto's,
the API server's through the data plane's informers; ``clusters.ModelledCluster``). A call models
its requests at one lab instant, so a load balancer's health and the endpoints do not change
within it. Deterministic for a seed. On a backend with real nodes (kind) the hops up to the
instance are the same (the lab's ELB, its health checks and security groups: no real network
enforces them), and from there each request is really sent to the node's address on the
nodePort, through the real kube-proxy (``clusters.RealCluster``); who answered is the pod the
answer names (agnhost ``netexec`` ``/hostname``).

Given ``settle`` (``Lab.traffic`` passes ``Lab.settle``), a call first waits until the lab's own
components have caught up (``lab.settle``: endpoints published, kube-proxy's informers current,
health checks due run), so a verdict never depends on how far a reaction had got when the call
came; a probe built without it models the lab exactly as it is at that instant (a test uses
that to show a component lagging).

Neighbours: :mod:`lab.aws.health.view` (the load balancer's configuration), the security-group
evaluator and the ELB health checker behind ``report.Gates``, :mod:`lab.dataplane` (kube-proxy
model, informers). ``Lab.traffic`` builds one; ``invoke lab.traffic`` reaches it through the
lab daemon.

Modules: ``report`` (the probe's vocabulary: reports, verdicts, the AWS gates it asks),
``clusters`` (the cluster side: :class:`~lab.traffic.clusters.ModelledCluster` on sim,
:class:`~lab.traffic.clusters.RealCluster` with real nodes), ``walk`` (one call's requests, hop
by hop, shared by both load balancer kinds), ``classic`` and ``nlb`` (each load balancer's hops
and choice of instance), ``probe`` (:class:`~lab.traffic.probe.TrafficProbe`, the entry point).
This package re-exports nothing: import the module that defines a name.
"""
