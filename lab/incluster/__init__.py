"""The in-cluster deployment option: the controller as a Deployment on kind.

By default the lab runs the controller as a local process (``lab.controllerproc``): fast to
restart, easy to debug. This package is the other option, the way a real cluster runs a cloud
controller manager: an image (``deploy/Dockerfile``) loaded into the kind nodes and manifests
rendered from Python data. ``manifests`` renders them (pure: settings, RBAC rules as data, the
Deployment); ``deploy`` builds, loads, applies and removes them, in a kind cluster or a running
kind lab. This face hands on the names the tasks and tests use.
"""

from lab.incluster.deploy import (
    KindLabTarget,
    build_image,
    deploy,
    deploy_to_lab,
    kind_lab_target,
    undeploy,
    undeploy_from_lab,
)
from lab.incluster.manifests import (
    CLUSTER_RULES,
    DEFAULT_IMAGE,
    DEFAULT_NAME,
    REPO_ROOT,
    InClusterSettings,
    lab_endpoints,
    lab_settings,
    render_manifests,
    to_yaml,
)

__all__ = [
    "CLUSTER_RULES",
    "DEFAULT_IMAGE",
    "DEFAULT_NAME",
    "REPO_ROOT",
    "InClusterSettings",
    "KindLabTarget",
    "build_image",
    "deploy",
    "deploy_to_lab",
    "kind_lab_target",
    "lab_endpoints",
    "lab_settings",
    "render_manifests",
    "to_yaml",
    "undeploy",
    "undeploy_from_lab",
]
