"""Structured logging for the controller manager.

``-v N`` sets verbosity like the Kubernetes components' klog levels: 0 logs INFO and up from
our code, 2 adds DEBUG from ``controller.*``, 4 adds DEBUG from the libraries (kubernetes
client, urllib3, botocore; careful, those can be chatty). Two formats: ``text``
(``2026-01-01T00:00:00.000Z INFO controller.service: message``) and ``json`` (one object per
line with ``ts``, ``level``, ``logger``, ``msg`` and ``exc`` when there is one). Credentials
never reach the logs: we never log request headers, and library DEBUG stays off below 4.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


class TextFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return (
            datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        )

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")


def setup_logging(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    if fmt not in ("text", "json"):
        raise ValueError(f"--log-format: want text or json, got {fmt!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)
    logging.getLogger("controller").setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
    if verbosity < 4:
        for noisy in ("urllib3", "kubernetes", "botocore", "boto3"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
