"""Socket helpers the rehearsal's processes share (standard library only: each runs alone)."""

from __future__ import annotations

import contextlib
import http.server
import socket
import socketserver


class Server(http.server.ThreadingHTTPServer):
    """An HTTP server that does not look its own address up (``HTTPServer.server_bind`` asks
    ``getfqdn``, which waits for resolvers a node namespace cannot reach)."""

    daemon_threads = True

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until either closes, then shut both down."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
