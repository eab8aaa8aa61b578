"""The trainer's loader on shards it reads remotely: brace patterns, http(s) through a
server that fails now and then, and s3:// from a real server on loopback (the rest of the
loader's tests are in tests/test_data.py, whose sample shards these use too)."""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest

from pipelines.io.shards import ShardReadError
from schemas.examples import SHARDS_MANIFEST_NAME
from tests.test_data import SHARD_SIZES, indices, write_uneven_shards
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, RetryPolicy, open_source


def test_brace_patterns_find_the_manifest_or_count(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    pattern = str(shards_dir / "seq128/train/shard-{000000..000004}.tar")
    source = open_source(pattern)
    assert [s.samples for s in source.shards] == SHARD_SIZES
    assert source.shards[0].info is not None and source.max_seq_length == 128
    (shards_dir / SHARDS_MANIFEST_NAME).unlink()
    counted = open_source(pattern)
    assert [s.samples for s in counted.shards] == SHARD_SIZES and counted.manifest is None


# --------------------------------------------------------------------------- remote shards


class _FlakyHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files; the first GET of each shard fails with 503, the second is cut short."""

    attempts: ClassVar[Counter[str]] = Counter()
    broken = False

    def do_GET(self) -> None:
        if self.path.endswith(".tar"):
            type(self).attempts[self.path] += 1
            attempt = self.attempts[self.path]
            if self.broken or attempt == 1:
                self.send_error(503, "try again")
                return
            if attempt == 2:
                body = Path(self.translate_path(self.path)).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])  # then the connection closes
                self.close_connection = True
                return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky_server(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    shards_dir = write_uneven_shards(tmp_path)
    _FlakyHandler.attempts = Counter()
    _FlakyHandler.broken = False

    def handler(*args, **kwargs):
        return _FlakyHandler(*args, directory=str(tmp_path), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{shards_dir.name}", shards_dir
    server.shutdown()


def test_http_shards_survive_a_503_and_a_dropped_connection(flaky_server):
    url, shards_dir = flaky_server
    policy = RetryPolicy(attempts=4, backoff_s=0.01)
    remote = PretrainingLoader(
        open_source(url), LoaderConfig(5, num_workers=2, shuffle_buffer=7, retry=policy)
    )
    local = PretrainingLoader(
        open_source(str(shards_dir)), LoaderConfig(5, num_workers=2, shuffle_buffer=7)
    )
    assert indices(remote.epoch(DataPosition())) == indices(local.epoch(DataPosition()))
    # Every shard got a 503, then a body cut in half, then was read on from where it broke.
    assert len(_FlakyHandler.attempts) == 5 and min(_FlakyHandler.attempts.values()) >= 3


def test_http_shard_that_keeps_failing_is_named(flaky_server):
    url, _ = flaky_server
    _FlakyHandler.broken = True
    loader = PretrainingLoader(
        open_source(url),
        LoaderConfig(5, shuffle=False, retry=RetryPolicy(attempts=3, backoff_s=0.01)),
    )
    with pytest.raises(
        ShardReadError, match=r"shard-000000\.tar: could not (open|read) it after 3 attempts"
    ):
        list(loader.epoch(DataPosition()))


def test_s3_shards_stream_from_a_real_server(tmp_path, s3_server, monkeypatch):
    for name, value in [
        ("AWS_ENDPOINT_URL", s3_server.endpoint),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ]:
        monkeypatch.setenv(name, value)
    bucket = s3_server.bucket("trainer-data")
    shards_dir = write_uneven_shards(tmp_path)
    for path in shards_dir.rglob("*"):
        if path.is_file():
            key = f"shards/{path.relative_to(shards_dir)}"
            s3_server.client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    config = LoaderConfig(4, world_size=2, rank=1, num_workers=2)
    remote = PretrainingLoader(open_source(f"s3://{bucket}/shards"), config)
    local = PretrainingLoader(open_source(str(shards_dir)), config)
    assert indices(remote.epoch(DataPosition(3))) == indices(local.epoch(DataPosition(3)))
    pattern = f"s3://{bucket}/shards/seq128/train/shard-{{000000..000004}}.tar"
    assert open_source(pattern).samples == 35
