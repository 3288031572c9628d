"""The lab daemon's control server around a stand-in lab, for tests of its routes.

``serving(lab)`` starts ``lab.daemon.control_server`` on 127.0.0.1 (port 0) in a thread and
yields its URL; the server is shut down and its thread joined on the way out.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def serving(lab: Any) -> Iterator[str]:
    from lab.daemon import control_server

    server = control_server(lab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
