"""An HTTP proxy on loopback that breaks a seeded share of the requests it passes on.

Put it in front of the moto S3 server (tests.support.s3server) and point a client at it instead
(`--s3_endpoint_url` for a Beam stage, `AWS_ENDPOINT_URL` for the trainer and smart_open):
every request, reads and writes alike (GET with a range, HEAD, LIST, PUT, the multipart
calls, copy, delete), is forwarded to the server, except that a request drawn by the seeded
generator meets one of these faults instead:

    503       answered `503 SlowDown` (S3's XML error) without reaching the server
    500       answered `500 InternalError` without reaching the server
    reset     the connection is closed halfway through the request's body (or right after
              its head when it has none): the server never sees the request
    drop      forwarded (a write is done), then the connection is closed unanswered: the
              client cannot know the write happened
    cut       forwarded, then the answer is cut off halfway through its body (through its
              head when the body is empty) and the connection closed

`rate` is the share of requests drawn for a fault. `max_in_a_row` caps the faults one
request (method and target) meets in a row, so a client that retries at least that often
always gets through: set it above a client's retry count to make it give up instead.
`only(method, target)` restricts faults to the requests it chooses (an outage of PUTs, say).
`counts` says what was injected, by fault and method. Not a command of its own:
tests/test_faults.py and bench.faults start it.

    proxy = FaultProxy("http://127.0.0.1:5000", rate=0.1, seed=1).start()
    … client at proxy.endpoint …
    proxy.stop(); print(proxy.counts)
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

FAULTS = ("503", "500", "reset", "drop", "cut")
# Hop-by-hop headers are the proxy's own business on each side; the rest pass unchanged (the
# SigV4 signature covers Host, and moto does not check it anyway).
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "expect",
    "te",
    "trailer",
    "upgrade",
    "content-length",
}
_ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>injected by tests.support.faultproxy</Message><RequestId>fault</RequestId></Error>"
)
_ERRORS = {
    "503": ("503 Slow Down", "SlowDown"),
    "500": ("500 Internal Server Error", "InternalError"),
}


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the proxy read it (the body already de-chunked)."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def key(self) -> str:
        return f"{self.method} {self.target}"


class FaultProxy:
    """A threaded loopback proxy to `upstream` that injects faults (see the module doc)."""

    def __init__(
        self,
        upstream: str,
        rate: float,
        seed: int,
        faults: tuple[str, ...] = FAULTS,
        max_in_a_row: int = 2,
        only: Callable[[str, str], bool] | None = None,
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}: choose from {FAULTS}")
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rate, self.faults, self.max_in_a_row, self.only = rate, faults, max_in_a_row, only
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._in_a_row: Counter[str] = Counter()
        self.counts: Counter[tuple[str, str]] = Counter()  # (fault, method) → injected
        self.requests: Counter[str] = Counter()  # method → requests seen
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._connections: set[socket.socket] = set()
        self.endpoint = ""

    @property
    def injected(self) -> int:
        return sum(self.counts.values())

    def start(self) -> FaultProxy:
        server = socket.create_server(("127.0.0.1", 0))
        server.listen(64)
        self._server = server
        self.endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        thread = threading.Thread(target=self._accept, name="faultproxy-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        if self._server is not None:
            # shutdown() wakes the accept() blocked in the accept thread; close() alone does
            # not on Linux, and the join below then waited its whole 5 s.
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _close(connection)
        for thread in self._threads:
            thread.join(timeout=5)

    def set_rate(self, rate: float) -> None:
        with self._lock:
            self.rate = rate

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- serving ------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            server = self._server
            if server is None:
                return
            try:
                connection, _ = server.accept()
            except OSError:
                return  # closed by stop()
            with self._lock:
                self._connections.add(connection)
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        reader = connection.makefile("rb")
        try:
            while self._serve_one(connection, reader):
                pass
        except OSError:
            pass  # the client went away
        finally:
            reader.close()
            _close(connection)
            with self._lock:
                self._connections.discard(connection)

    def _serve_one(self, connection: socket.socket, reader) -> bool:
        """One request on a kept-alive connection; False once the connection is done."""
        head = _read_head(reader)
        if head is None:
            return False
        method, target, headers = _parse_head(head)
        names = {name.lower(): value for name, value in headers}
        if names.get("expect", "").lower() == "100-continue":
            connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        fault = self._draw(method, target)
        if fault == "reset":
            length = int(names.get("content-length", "0") or 0)
            if length > 1 and "chunked" not in names.get("transfer-encoding", "").lower():
                reader.read(length // 2)
            _reset(connection)
            return False
        request = Request(method, target, headers, _read_body(reader, names))
        if fault in _ERRORS:
            status, code = _ERRORS[fault]
            payload = _ERROR_BODY.format(code=code).encode()
            connection.sendall(
                f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            return True
        status, reason, response_headers, response_body = self._forward(request)
        answer = _response_head(status, reason, response_headers, len(response_body), method)
        if fault == "drop":
            _reset(connection)
            return False
        if fault == "cut":
            if response_body and method != "HEAD":
                connection.sendall(answer + response_body[: len(response_body) // 2])
            else:
                connection.sendall(answer[: len(answer) // 2])
            _reset(connection)
            return False
        connection.sendall(answer + (b"" if method == "HEAD" else response_body))
        return names.get("connection", "").lower() != "close"

    def _draw(self, method: str, target: str) -> str | None:
        key = f"{method} {target}"
        with self._lock:
            self.requests[method] += 1
            chosen = self.only is None or self.only(method, target)
            if (
                not chosen
                or self._in_a_row[key] >= self.max_in_a_row
                or self._rng.random() >= self.rate
            ):
                self._in_a_row.pop(key, None)
                return None
            fault = self._rng.choice(self.faults)
            self._in_a_row[key] += 1
            self.counts[(fault, method)] += 1
            return fault

    def _forward(self, request: Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            headers = {n: v for n, v in request.headers if n.lower() not in _HOP_BY_HOP}
            if request.body or request.method in ("PUT", "POST"):
                headers["Content-Length"] = str(len(request.body))
            upstream.request(request.method, request.target, request.body or None, headers)
            response = upstream.getresponse()
            body = response.read()
            return response.status, response.reason, response.getheaders(), body
        finally:
            upstream.close()


def _read_head(reader) -> bytes | None:
    lines = []
    while True:
        line = reader.readline(65537)
        if not line:
            return None if not lines else b"".join(lines)
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue  # stray blank line between requests
            lines.append(line)
            return b"".join(lines)
        lines.append(line)


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    request_line, *header_lines = head.decode("iso-8859-1").split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = []
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return method, target, headers


def _read_body(reader, names: dict[str, str]) -> bytes:
    if "chunked" in names.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size = int(reader.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while reader.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(reader.read(size))
            reader.readline()
    length = int(names.get("content-length", "0") or 0)
    return reader.read(length) if length else b""


def _response_head(
    status: int, reason: str, headers: list[tuple[str, str]], length: int, method: str
) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    for name, value in headers:
        lower = name.lower()
        if lower in _HOP_BY_HOP and not (lower == "content-length" and method == "HEAD"):
            continue
        lines.append(f"{name}: {value}")
    if method != "HEAD" and status not in (204, 304):
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1")


def _reset(connection: socket.socket) -> None:
    """Close so that the client sees the connection break (RST), not a polite end."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _close(connection)


def _close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.close()
