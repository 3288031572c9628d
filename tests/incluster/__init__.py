"""The in-cluster deployment option (``lab.incluster``, ``deploy/``), tested through its seams.

There is no Docker engine here, so the image is never built unless ``test_kind`` finds Docker
and kind. One module per concern:

* ``test_manifests``: the rendered manifests, field by field, and as the official client's
  models (every object round-trips through ``kubernetes.client`` deserialization unchanged, so
  no misspelled or unknown field survives), plus ``kubectl apply --dry-run=server`` against the
  API simulator for the kinds it serves (it serves no ``rbac.authorization.k8s.io``, and
  kubectl's client-side dry run needs a server's discovery, so RBAC objects are checked by the
  models and by ``test_rbac``);
* ``test_rbac``: RBAC derived from the controller, verified against what the API simulator
  served: the real controller process runs a service and a node lifecycle while a hook on the
  simulator's request handler records every request carrying the controller's own bearer token;
  every request must be allowed by the rendered roles, and every granted verb must have been
  used. A second test calls each method of the ``KubeClient`` seam
  (``controller/runtime/kube.py``) directly, so a new API call in the controller fails there
  until the roles grant it;
* ``test_deploy``: ``deploy``/``undeploy`` command sequences with fake ``docker``/``kind``/
  ``kubectl`` on PATH;
* ``test_image``: the Dockerfile (read by BuildKit's parser) and ``.dockerignore`` (an
  allow-list, evaluated by docker-py's implementation of Docker's matching rules);
* ``test_kind``: the real build, load and rollout, where Docker and kind exist.

The helpers all of these share live in ``support``.
"""
