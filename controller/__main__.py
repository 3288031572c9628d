"""``python -m controller``: the cloud controller manager CLI (see ``controller.app``).

Once ``main`` has returned (every controller stopped, the lease released, the health server
closed), the exit handlers run (logging's flush, the Kubernetes client's removal of the
certificate and key files it wrote from the kubeconfig) and the process leaves with
``os._exit``: the interpreter's own teardown of the SDK's and the Kubernetes client's object
graphs took about a second, which every SIGTERM (a rolling update, ``lab.controller.restart``)
waited for.
"""

from __future__ import annotations

import atexit
import os
import sys

from controller.app import main

code = main()
atexit._run_exitfuncs()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
