"""A real HTTP server on a free loopback port, in a thread: the base of the tests' fake OpenAI-compatible servers
and of the fault-injecting proxy in front of a real vLLM server; and a raw TCP server that accepts connections and
never completes an answer (silent or trickling), for the deadlines of every network wait."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    """One request; ``server.routes`` answers it. ``reply`` sends JSON (a dict, or bytes as they are)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.routes.get(self)

    def do_POST(self) -> None:
        self.server.routes.post(self, self.rfile.read(int(self.headers["Content-Length"])))

    def reply(self, status: int, data, headers: dict | None = None, raw: bytes | None = None) -> None:
        payload = raw if raw is not None else data if isinstance(data, bytes) else json.dumps(data).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a slow answer): nothing to do
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    """Quiet about clients that hang up (a deadline passed, a killed client, a client that gave up on a malformed
    reply): socketserver would print that traceback on the test process's stderr, where a CLI test reads its
    one-line error. A hang-up surfaces as an OSError (reset, broken pipe, timeout) or as a write to the closed
    socket file (ValueError); any other error still prints."""

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if not (isinstance(exc, OSError) or (isinstance(exc, ValueError) and "closed file" in str(exc))):
            super().handle_error(request, client_address)


class LocalHTTP:
    """Serve ``get(handler)`` and ``post(handler, body)`` on 127.0.0.1 until :meth:`close`; ``url`` ends in ``/v1``."""

    def __init__(self, get: Callable[[Handler], None], post: Callable[[Handler, bytes], None]) -> None:
        self.get, self.post = get, post
        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.routes = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class Stalling:
    """A raw TCP server on 127.0.0.1 that accepts every connection and never completes an answer: ``silent``
    reads the request and says nothing; ``trickle`` sends an HTTP answer (status line, headers, a body that never
    ends) one byte every ``gap_s`` seconds, forever, so every read succeeds well within any per-read timeout.
    ``url`` ends in ``/v1``; ``connections`` counts the connections accepted."""

    def __init__(self, mode: str, gap_s: float = 0.1) -> None:
        if mode not in ("silent", "trickle"):
            raise ValueError(mode)
        self.mode, self.gap_s = mode, gap_s
        self.connections = 0
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.threads: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            self.connections += 1
            worker = threading.Thread(target=self._stall, args=(conn,), daemon=True)
            self.threads.append(worker)
            worker.start()

    def _stall(self, conn: socket.socket) -> None:
        answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"choices": ['
        with conn:
            conn.settimeout(self.gap_s)
            sent = 0
            while not self.stop.wait(self.gap_s):
                try:
                    conn.recv(65536)  # drain the request (a silent server reads it and says nothing)
                except TimeoutError:
                    pass
                except OSError:
                    return
                if self.mode == "trickle":
                    try:
                        conn.sendall(answer[sent : sent + 1] if sent < len(answer) else b" ")
                    except OSError:  # the client gave up
                        return
                    sent += 1

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(5)
        for worker in self.threads:
            worker.join(5)
