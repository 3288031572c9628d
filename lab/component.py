"""What every lab component shares: the recent-log buffer attached to readiness errors.

Components (``lab.aws.AwsEndpoint``, ``lab.imds.ImdsServer``, ``lab.kube.server.KubeSimulator``)
start on port 0, wait for readiness with explicit timeouts, and when readiness fails put their
recent log into the exception (conventions.md, "Components are context managers"). This module
holds the one buffer they use for that.
"""

from __future__ import annotations

import collections
import logging


class RecentLog(logging.Handler):
    """Keeps the last ``size`` records of the loggers it is added to, as text."""

    def __init__(self, size: int = 200) -> None:
        super().__init__(logging.DEBUG)
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines) or "(no log records)"
