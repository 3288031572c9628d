"""``python -m tests.component.forked_program MODE [ARG]``: what the forkserver tests run.

It prints one JSON line describing the process it runs in (argv, environment, working
directory, session, umask, and which process imported the preload module), then:
``exit N`` exits with N; ``raise`` raises; ``sysexit TEXT`` calls ``sys.exit(TEXT)``;
``random`` prints 64 random bits; ``wait`` prints ``waiting`` and sleeps until signalled.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

preload = sys.modules.get("tests.component.forked_preload")
UMASK = os.umask(0o077)
os.umask(UMASK)
print(
    json.dumps(
        {
            "argv": sys.argv[1:],
            "argv0": sys.argv[0],
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "session_leader": os.getsid(0) == os.getpid(),
            "preloaded_by": getattr(preload, "IMPORTED_BY", None),
            "name": __name__,
            "umask": UMASK,
        }
    )
)
mode = sys.argv[1] if len(sys.argv) > 1 else "exit"
if mode == "random":
    print(random.getrandbits(64))
    sys.exit(0)
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "raise":
    raise RuntimeError("the program failed on purpose")
if mode == "sysexit":
    sys.exit(sys.argv[2])
if mode == "wait":
    print("waiting", flush=True)
    while True:
        time.sleep(0.05)
