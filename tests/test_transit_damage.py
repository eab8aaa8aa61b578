"""A response damaged in transit is not a damaged shard: a remote block (or block table)
whose sha256 does not match is read once more, and only a mismatch seen twice stops the run.
Against a Python http server with Range support that flips a byte of chosen answers, and
moto's S3 behind a proxy that does the same (tests/support/faultproxy.py's forwarding)."""

from __future__ import annotations

import http.server
import logging
import re
import threading
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest

from pipelines.io.shards import ShardReadError
from tests.support.faultproxy import FaultProxy, Request
from tests.support.s3server import client_environment
from tests.test_data import indices, write_uneven_shards
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, RetryPolicy, open_source

QUICK = RetryPolicy(attempts=3, backoff_s=0.01)
CONFIG = LoaderConfig(5, shuffle=False, shuffle_buffer=5, retry=QUICK)


def damaged(body: bytes) -> bytes:
    """The body with its middle byte flipped: same length, another sha256."""
    if not body:
        return body
    middle = len(body) // 2
    return body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]


class _Damaging(http.server.BaseHTTPRequestHandler):
    """Serves `root` with Range support; the first `times` GETs of each path matching
    `damage` are answered with one byte flipped. `gets` counts the GETs of each path."""

    root: ClassVar[Path]
    damage: ClassVar[str] = r"$^"
    times: ClassVar[int] = 1
    gets: ClassVar[Counter[str]] = Counter()

    def do_GET(self) -> None:
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start, end = 0, len(data)
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if wanted:
            start = int(wanted.group(1))
            end = min(end, int(wanted.group(2)) + 1) if wanted.group(2) else end
        body = data[start:end]
        type(self).gets[self.path] += 1
        if re.search(self.damage, self.path) and self.gets[self.path] <= self.times:
            body = damaged(body)
        self.send_response(206 if wanted else 200)
        if wanted:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        path = self.root / self.path.lstrip("/")
        self.send_response(200 if path.is_file() else 404)
        self.send_header("Content-Length", str(path.stat().st_size if path.is_file() else 0))
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    shards_dir = write_uneven_shards(tmp_path)
    _Damaging.root, _Damaging.gets = tmp_path, Counter()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Damaging)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/shards", shards_dir
    httpd.shutdown()


def warnings_of(caplog) -> list[str]:
    return [
        r.getMessage().split(" did not match")[0]
        for r in caplog.records
        if r.name == "pipelines.io.shards.read"
    ]


def test_an_answer_damaged_once_is_read_again_and_the_batches_are_the_same(
    server, monkeypatch, caplog
):
    url, shards_dir = server
    monkeypatch.setattr(_Damaging, "damage", r"shard-00000[13]\.tar")  # tables, then blocks
    local = indices(PretrainingLoader(open_source(str(shards_dir)), CONFIG).epoch(DataPosition()))
    with caplog.at_level(logging.WARNING, logger="pipelines.io.shards.read"):
        remote = PretrainingLoader(open_source(url), CONFIG).epoch(DataPosition())
        assert indices(remote) == local
    train = f"{url}/seq128/train"
    assert warnings_of(caplog) == [
        f"{train}/shard-000001.tar: its block table shard-000001.tar.blocks.json",
        f"{train}/shard-000001.tar: samples 0–2 (bytes 0–2,048)",
        f"{train}/shard-000003.tar: its block table shard-000003.tar.blocks.json",
        f"{train}/shard-000003.tar: samples 0–4 (bytes 0–2,048)",
    ]
    assert "a fault in transit, not in the stored object" in caplog.text


def test_an_answer_damaged_twice_is_a_damaged_shard(server, monkeypatch):
    url, _ = server
    monkeypatch.setattr(_Damaging, "damage", r"shard-000001\.tar$")
    monkeypatch.setattr(_Damaging, "times", 2)
    loader = PretrainingLoader(open_source(url), CONFIG)
    with pytest.raises(ShardReadError) as error:
        list(loader.epoch(DataPosition()))
    assert re.fullmatch(
        rf"{re.escape(url)}/seq128/train/shard-000001\.tar: samples 0–2 \(bytes 0–2,048\) do "
        r"not match the manifest's sha256 \([0-9a-f]{16}… against [0-9a-f]{16}…\); none of them "
        r"was used\. The shard was changed or damaged after writing: rebuild it or restore it "
        r"from the source",
        str(error.value),
    )
    assert _Damaging.gets["/shards/seq128/train/shard-000001.tar"] == 2  # read, then once more


def test_a_local_shard_that_does_not_match_is_not_read_again(tmp_path, caplog):
    shards_dir = write_uneven_shards(tmp_path)
    shard = shards_dir / "seq128/train/shard-000001.tar"
    shard.write_bytes(damaged(shard.read_bytes()))
    loader = PretrainingLoader(open_source(str(shards_dir)), CONFIG)
    mismatch = r"shard-000001\.tar: samples 0–2 .* do not match"
    with (
        caplog.at_level(logging.WARNING, "pipelines.io.shards.read"),
        pytest.raises(ShardReadError, match=mismatch),
    ):
        list(loader.epoch(DataPosition()))
    assert warnings_of(caplog) == []


class _DamagingProxy(FaultProxy):
    """The loopback proxy, forwarding every request; the first GET of each shard's key is
    answered with one byte of its body flipped."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, rate=0.0, seed=0)
        self.damaged: Counter[str] = Counter()

    def _forward(self, request: Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
        status, reason, headers, body = super()._forward(request)
        path = request.target.split("?", 1)[0]
        if request.method == "GET" and path.endswith(".tar") and not self.damaged[path]:
            self.damaged[path] += 1
            body = damaged(body)
        return status, reason, headers, body


def test_an_s3_answer_damaged_once_is_read_again(tmp_path, s3_server, monkeypatch, caplog):
    shards_dir = write_uneven_shards(tmp_path)
    s3_server.bucket("transit")
    for path in sorted(shards_dir.rglob("*")):
        if path.is_file():
            key = f"shards/{path.relative_to(shards_dir).as_posix()}"
            s3_server.client.put_object(Bucket="transit", Key=key, Body=path.read_bytes())
    local = indices(PretrainingLoader(open_source(str(shards_dir)), CONFIG).epoch(DataPosition()))
    proxy = _DamagingProxy(s3_server.endpoint).start()
    try:
        for name, value in client_environment(proxy.endpoint).items():
            monkeypatch.setenv(name, value)
        with caplog.at_level(logging.WARNING, logger="pipelines.io.shards.read"):
            loader = PretrainingLoader(open_source("s3://transit/shards"), CONFIG)
            assert indices(loader.epoch(DataPosition())) == local
    finally:
        proxy.stop()
    assert sorted(proxy.damaged) == [
        f"/transit/shards/seq128/train/shard-{n:06d}.tar" for n in range(5)
    ]
    assert len(warnings_of(caplog)) == 5
