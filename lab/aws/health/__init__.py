"""Load-balancer health checks on the lab clock: one model for Classic ELBs and NLBs.

Role: moto answers every registered running instance healthy and never runs a check; this
package counts health checks against thresholds on the lab clock and answers
``DescribeInstanceHealth`` (Classic) and ``DescribeTargetHealth`` (NLB) as AWS would.

Map (each module's docstring says more):

* :mod:`~lab.aws.health.model`: the machinery both kinds share (registration, checks due,
  draining, transitions, questions, the wire), generic over the kind;
* :mod:`~lab.aws.health.classic` and :mod:`~lab.aws.health.network`: what only a Classic ELB
  (instances, its ``HealthCheck``, ``InService``) or an NLB target group (targets, its
  health-check settings, target states and reasons) adds;
* :mod:`~lab.aws.health.checks`: one target's run of results against the thresholds;
* :mod:`~lab.aws.health.schedule`: the one lab clock, prober and ticker both kinds share;
* :mod:`~lab.aws.health.probe`: how one check turns out (security groups, then the node);
* :mod:`~lab.aws.health.view`, :mod:`~lab.aws.health.network_view`,
  :mod:`~lab.aws.health.sgview`: what the load balancers, instances and security groups are,
  read from moto's backends;
* :mod:`~lab.aws.health.seam`: what the package needs of the endpoint (a Protocol).

Design: the package never imports :mod:`lab.aws.app`; ``AwsLab`` satisfies
:class:`~lab.aws.health.seam.HealthLab` and builds the models, so imports run one way (app
over health). Nothing is re-exported here: import from the module that defines a name.
"""
