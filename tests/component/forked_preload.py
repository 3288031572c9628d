"""Imported by the fork server in the forkserver tests: records which process imported it."""

from __future__ import annotations

import os

IMPORTED_BY = os.getpid()
