"""The front door: what ``invoke lab.*`` does to a lab, as importable functions.

A lab lives under ``.lab/<name>/`` (private to the user): ``spec.json`` (the
:class:`~lab.spec.LabSpec` it was made from), ``state.json`` (``lab.state``), the kubeconfig,
the cloud config and the logs. ``tasks.py`` builds a spec and calls these modules; tests call
the same functions.

One module per concern, each importing only those before it:

* ``processes``: the daemon a lab runs in, stopping what a state names, leftovers;
* ``controller``: ``lab.controller.restart``, the one way a local controller starts, the image;
* ``up``: ``lab.up`` (preflight, the daemon, the controller, the node wait);
* ``realaccount``: ``lab.up --aws real`` and its ``lab.down``;
* ``down``: ``lab.down``;
* ``debug``: ``lab.debug``;
* ``nodes``: ``lab.kubectl`` and ``lab.nodes.*``;
* ``faults``: ``lab.fault.*`` (the rules it reads and ``lab.status`` shows: ``lab.faultview``).

Judging options is not here: the rule table is ``lab.spec``, the machine's checks
``lab.preflight``; the read-only views (status, trail, env, traffic) are ``lab.labview``, one
layer below, which the pytest fixtures and ``tasks.py`` read as well.
"""
