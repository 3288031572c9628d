"""A small kopf operator the conformance tests run (``kopf run --standalone`` in a subprocess).

It serves two built-in kinds, as the simulator serves no CustomResourceDefinitions:

* ConfigMaps labelled ``ccm-lab.test/kopf=yes``: on create, the handler fails once with a
  temporary error (kopf keeps its progress, the retry count, in an annotation of the
  object) and then writes the retry number it was given and a value from the data into
  annotations; on update it writes the new value; on delete (which makes kopf add its
  finalizer) it logs, then kopf removes its finalizer and the ConfigMap goes.
* Services of type LoadBalancer labelled the same: on create, the handler fills
  ``status.loadBalancer.ingress``, as a cloud controller does, through kopf's status patch
  (kopf sends it to the ``status`` subresource when discovery lists one).

Every handler logs at INFO, which kopf also posts as Events about the object (reason
``Logging``); the Service handler posts one of its own with ``kopf.info``.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

LABELS = {"ccm-lab.test/kopf": "yes"}
PREFIX = "ccm-lab.test"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = logging.INFO
    settings.posting.loggers = True  # handlers' log lines become Events too (off by default)
    settings.posting.reporting_component = "ccm-lab-kopf"
    settings.posting.reporting_instance = "kopf-test"
    # a stopped watch is re-established quickly, and the operator stops quickly
    settings.watching.server_timeout = 30
    settings.watching.client_timeout = 40
    settings.queueing.exit_timeout = 5.0


@kopf.on.create("v1", "configmaps", labels=LABELS)
def configmap_created(
    body: kopf.Body, patch: kopf.Patch, retry: int, logger: logging.Logger, **_: Any
) -> None:
    if retry == 0:
        raise kopf.TemporaryError("first attempt refused on purpose", delay=0.5)
    patch.metadata.annotations[f"{PREFIX}/created-after-retries"] = str(retry)
    patch.metadata.annotations[f"{PREFIX}/value"] = body.get("data", {}).get("k", "")
    logger.info("configmap handled after %d retries", retry)


@kopf.on.update("v1", "configmaps", labels=LABELS, field="data")
def configmap_updated(new: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
    patch.metadata.annotations[f"{PREFIX}/value"] = (new or {}).get("k", "")
    logger.info("configmap data changed")


@kopf.on.delete("v1", "configmaps", labels=LABELS)
def configmap_deleted(logger: logging.Logger, **_: Any) -> None:
    logger.info("configmap deletion recorded")


@kopf.on.create("v1", "services", labels=LABELS)
def service_created(
    body: kopf.Body,
    spec: kopf.Spec,
    name: str,
    patch: kopf.Patch,
    logger: logging.Logger,
    **_: Any,
) -> None:
    if spec.get("type") != "LoadBalancer":
        return
    hostname = f"{name}.elb.example.com"
    patch.status["loadBalancer"] = {"ingress": [{"hostname": hostname}]}
    kopf.info(body, reason="EnsuredLoadBalancer", message=f"load balancer {hostname} ensured")
    logger.info("load balancer ensured")
