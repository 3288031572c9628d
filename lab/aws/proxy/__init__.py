"""The recording, fault-injecting proxy: the lab's trail and faults in front of any AWS endpoint.

Public API (see ``lab/aws/README.md``, "Recording proxy")::

    from lab.aws.proxy import AwsProxyServer
    with AwsProxyServer(upstream_url, credentials=("key", "secret")) as proxy:
        proxy.client("ec2"); proxy.control.add_fault(...); proxy.trail.calls("DescribeVpcs")

Modules: ``app`` (the WSGI proxy and its state), ``upstream`` (forwarding, SigV4 re-signing,
pooled connections), ``callerauth`` (the key pair callers must sign with, when given),
``server`` (in-process component, served by :mod:`lab.aws.keepalive`),
``process`` (child process), ``__main__`` (the CLI, ``python -m lab.aws.proxy --upstream URL``).
"""

from __future__ import annotations

from lab.aws.proxy.app import AwsProxy, ProxyApp, ProxySettings
from lab.aws.proxy.process import AwsProxyProcess
from lab.aws.proxy.server import AwsProxyServer
from lab.aws.proxy.upstream import Upstream, UpstreamUnavailable

__all__ = [
    "AwsProxy",
    "AwsProxyProcess",
    "AwsProxyServer",
    "ProxyApp",
    "ProxySettings",
    "Upstream",
    "UpstreamUnavailable",
]
