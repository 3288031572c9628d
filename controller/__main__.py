"""``python -m controller``: the cloud controller manager CLI (see ``controller.app``).

Once ``main`` has returned (every controller stopped, the lease released, the health server
closed), the process leaves with ``os._exit`` after flushing its logs and streams: the
interpreter's own teardown of the SDK's and the Kubernetes client's object graphs took about a
second, which every SIGTERM (a rolling update, ``lab.controller.restart``) waited for.
"""

from __future__ import annotations

import logging
import os
import sys

from controller.app import main

code = main()
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
