"""A pod of the kind rehearsal running ``agnhost netexec``: the answers the lab relies on.

Read from kubernetes ``test/images/agnhost/netexec/netexec.go``: an HTTP server on
``--http-port`` (default 8080) and a UDP server on ``--udp-port`` (default 8081; ``-1`` off).
Served here as agnhost serves them:

* ``/`` ``NOW: <time>``; ``/hostname`` and ``/hostName`` the hostname, no newline;
  ``/clientip`` the caller's ``host:port``; ``/echo?msg=M[&code=C]`` M with status C;
* ``/healthz`` 200 once the UDP server is up (agnhost's ``serverReady``; with ``--udp-port -1``
  it never is: 412), else 412;
* ``/exit?code=C`` and ``/shutdown`` end the process (code C, 0);
* UDP: ``hostname``, ``echo <msg>``, ``clientip``.

Not rehearsed (501 naming the path): ``/dial``, ``/shell``, ``/upload``, ``/redirect``, TLS,
``--http-override``, SCTP. A pod's hostname is its name (``--hostname``); in the rehearsal the
pods of one node share its network namespace, each on its own address (``--bind``). SIGTERM ends
it at once, as Go's default handler does for agnhost (it traps no signal).
"""

from __future__ import annotations

import argparse
import datetime
import http.server
import os
import socket
import sys
import threading
import urllib.parse

from tests.rehearsal.net import Server

NOT_REHEARSED = ("/dial", "/shell", "/upload", "/redirect")


def _serve_udp(sock: socket.socket, hostname: str, ready: threading.Event) -> None:
    ready.set()
    while True:
        data, peer = sock.recvfrom(2048)
        text = data.decode(errors="replace").strip()
        if text == "hostname":
            answer = hostname
        elif text.startswith("echo "):
            answer = text[len("echo ") :]
        elif text == "clientip":
            answer = f"{peer[0]}:{peer[1]}"
        else:
            continue
        sock.sendto(answer.encode(), peer)


def handler(hostname: str, ready: threading.Event) -> type[http.server.BaseHTTPRequestHandler]:
    class Netexec(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"GET {self.path}\n")

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            path = url.path
            if path in ("/hostname", "/hostName"):
                self._answer(200, hostname)
            elif path == "/healthz":
                self._answer(200 if ready.is_set() else 412, "")
            elif path == "/clientip":
                self._answer(200, f"{self.client_address[0]}:{self.client_address[1]}")
            elif path == "/echo":
                code = (query.get("code") or [""])[0]
                msg = (query.get("msg") or [""])[0]
                if code and not code.lstrip("-").isdigit():
                    self._answer(
                        200, f"argument 'code' must be an integer or empty, got {code!r}\n"
                    )
                else:
                    self._answer(int(code) if code else 200, msg)
            elif path in ("/exit", "/shutdown"):
                code = (query.get("code") or ["0"])[0] if path == "/exit" else "0"
                os._exit(int(code) if code.isdigit() else 0)
            elif path in NOT_REHEARSED:
                self._answer(501, f"{path} is not rehearsed")
            else:  # Go's ServeMux sends every other path to "/"
                now = datetime.datetime.now(datetime.UTC)
                self._answer(200, f"NOW: {now:%Y-%m-%d %H:%M:%S.%f} +0000 UTC")

        do_POST = do_GET

    return Netexec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netexec")
    parser.add_argument("--http-port", type=int, default=8080)
    parser.add_argument("--udp-port", type=int, default=8081)
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--bind", default="0.0.0.0")
    args = parser.parse_args(argv)
    ready = threading.Event()
    if args.udp_port != -1:
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((args.bind, args.udp_port))
        threading.Thread(target=_serve_udp, args=(udp, args.hostname, ready), daemon=True).start()
    server = Server((args.bind, args.http_port), handler(args.hostname, ready))
    # the port bound (agnhost prints the flag; 0 asks for a free one, as the tests do)
    sys.stderr.write(f"Started HTTP server on port {server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
