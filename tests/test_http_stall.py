"""An http(s):// server that goes silent mid-answer: the read fails after the read timeout
and goes on from its byte (the object stores' clients had one; requests waits forever)."""

from __future__ import annotations

import http.server
import threading
import time
from typing import ClassVar

import pytest

from pipelines.io import clients
from pipelines.io.retry import ResumingStream, RetryPolicy

BODY = bytes(range(256)) * 400  # 102,400 bytes


class _StallingHandler(http.server.BaseHTTPRequestHandler):
    """Serves BODY (Range honoured); the first answer stops after STALL_AFTER bytes and
    sends nothing more for STALL_SECONDS."""

    stalls: ClassVar[list[int]] = []
    ranges: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        asked = self.headers.get("Range")
        self.ranges.append(asked)
        start = int(asked.split("=")[1].split("-")[0]) if asked else 0
        body = BODY[start:]
        self.send_response(206 if asked else 200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
        self.end_headers()
        if self.stalls:
            cut = self.stalls.pop()
            self.wfile.write(body[:cut])
            self.wfile.flush()
            time.sleep(5)
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stalling(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(clients, "READ_SECONDS", 0.5)
    _StallingHandler.stalls, _StallingHandler.ranges = [40_000], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StallingHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/shard.tar"
    server.shutdown()
    server.server_close()


def test_http_reads_have_the_object_stores_timeouts() -> None:
    assert clients.transport_params("https") == {"timeout": (10.0, 60.0)}
    assert clients.transport_params("http") == {"timeout": (10.0, 60.0)}


def test_a_stalled_answer_is_read_on_from_its_byte_after_the_read_timeout(stalling) -> None:
    started = time.monotonic()
    with ResumingStream(stalling, len(BODY), RetryPolicy(backoff_s=0.01)) as stream:
        read = stream.read()
    assert read == BODY
    assert time.monotonic() - started < 4  # not the 5 s stall: the 0.5 s timeout, then on
    assert len(_StallingHandler.ranges) == 2  # the stalled answer, then one more
