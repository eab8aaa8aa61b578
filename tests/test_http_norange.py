"""Shards on an HTTP server without Range support, and presigned URLs.

Python's http.server answers every GET with 200 and the whole file, whatever Range it was
asked for: a reader that must start inside a shard reads through to its byte instead of
seeking, once, without a retry. A URL with a query names one object: its directory is
its path's, and a manifest's shards are never derived from a signed URL.
"""

from __future__ import annotations

import http.server
import sys
import threading
from functools import partial
from pathlib import Path
from typing import ClassVar

import pytest

from pipelines.io import storage
from pipelines.io.retry import ResumingStream, RetryPolicy, range_opener
from pipelines.io.shards import block_table_file, encode_shard, read_verified_samples
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.shards import ShardsManifest, block_table_path
from tests.test_inspect import JSON_LINES, TRAIN_SHARD, inspect, write_shards, write_vocab

# samples of 150 kB in blocks of two: three blocks, at bytes 0, 300,544 and 601,088, so the
# second is past what smart_open buffers from its first GET (a seek there needs a request)
FIVE = [(f"{i:012d}", bytes([65 + i]) * 150_000) for i in range(5)]
SHARD = "seq128/train/shard-000000.tar"


class _NoRangeHandler(http.server.SimpleHTTPRequestHandler):
    """http.server as it is (Range ignored: 200 and the whole body), recording each GET."""

    requests: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        self.requests.append((self.path, self.headers.get("Range")))
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    """A reader that has what it needs closes the connection mid-body, as it should: the
    server's ConnectionResetError then is no failure, and not printed as one."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def http_root(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    _NoRangeHandler.requests = []
    server = _QuietServer(("127.0.0.1", 0), partial(_NoRangeHandler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_blocks_inside_a_shard_are_read_through_without_a_retry(tmp_path, http_root) -> None:
    shard_path = tmp_path / "shards" / SHARD
    shard_path.parent.mkdir(parents=True)
    data, inline = encode_shard(SHARD, FIVE, block_samples=2)
    table_bytes, entry = block_table_file(inline)  # as the writer lays them out
    shard_path.write_bytes(data)
    Path(block_table_path(str(shard_path))).write_bytes(table_bytes)
    url = f"{http_root}/shards/{SHARD}"
    # one attempt: a server that ignores Range is no network fault to retry
    policy = RetryPolicy(attempts=1)
    opener, tables = range_opener(url, policy), range_opener(block_table_path(url), policy)
    assert list(read_verified_samples(opener, url, entry, 3, 2, tables)) == FIVE[3:5]
    shard, table = f"/shards/{SHARD}", f"/shards/{SHARD}.blocks.json"
    assert _NoRangeHandler.requests == [
        (table, None),  # the block table, from its first byte
        (shard, None),  # smart_open's first GET, then the seek to the second block's byte
        (shard, "bytes=300544-"),  # answered 200 with the whole shard
        (shard, None),  # read through: bytes 0–300,543 dropped
    ]


def test_a_reopen_after_a_read_through_reads_through_again(tmp_path, http_root) -> None:
    data = bytes(range(256)) * 4000  # 1,024,000 bytes
    (tmp_path / "file.bin").write_bytes(data)
    url = f"{http_root}/file.bin"
    with ResumingStream(url, 900_000, RetryPolicy(attempts=1), start=400_000) as stream:
        assert stream.read(1000) == data[400_000:401_000]
        stream._stream.close()  # a dropped connection: the next read reopens at 401,000
        stream._stream = None
        assert stream.read(-1) == data[401_000:900_000]
    assert _NoRangeHandler.requests == [
        ("/file.bin", None),
        ("/file.bin", "bytes=400000-"),
        ("/file.bin", None),
        ("/file.bin", None),  # no second Range request: this server does not answer them
    ]


def test_the_trainer_resumes_inside_a_shard_on_a_server_without_range(tmp_path, http_root) -> None:
    """The trainer's own read (trainer.data.read_samples) of samples 5–8 of an 11-sample
    shard in blocks of two: it starts at the third block's byte, on a server that cannot
    seek there."""
    from tests.test_data import make_example, write_uneven_shards
    from trainer.data import Segment, read_samples
    from trainer.source import open_source

    shards_dir = write_uneven_shards(tmp_path, [11])
    samples = [(f"{i:012d}", make_example(i).encode(2)) for i in range(11)]
    data, inline = encode_shard(SHARD, samples, block_samples=2)
    table_bytes, entry = block_table_file(inline)
    (shards_dir / SHARD).write_bytes(data)
    (shards_dir / block_table_path(SHARD)).write_bytes(table_bytes)
    manifest = ShardsManifest.from_json((shards_dir / SHARDS_MANIFEST_NAME).read_text())
    manifest.outputs["seq128"].splits["train"].shards = [entry]
    (shards_dir / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    source = open_source(f"{http_root}/shards")
    segment = Segment(source.shards[0], 5, 4)
    read = list(read_samples([segment], RetryPolicy(attempts=1)))  # one try: no retry needed
    assert [(sample.index, sample.data) for sample in read] == [
        (i, samples[i][1]) for i in range(5, 9)
    ]
    assert _NoRangeHandler.requests[-2:] == [
        (f"/shards/{SHARD}", f"bytes={inline.blocks[2].offset}-"),
        (f"/shards/{SHARD}", None),
    ]


# --------------------------------------------------------------------------- presigned URLs

SIGNED = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=5ec12e7"


def test_a_url_path_is_read_without_its_query() -> None:
    url = f"https://h/shards/seq128/train/shard-000000.tar?{SIGNED}"
    assert storage.basename(url) == "shard-000000.tar"
    assert storage.parent(url) == "https://h/shards/seq128/train"
    assert storage.join(f"https://h/shards?{SIGNED}", "manifest.json") == (
        "https://h/shards/manifest.json"
    )
    assert storage.shard_manifest(url) == (
        "https://h/shards/manifest.json",
        "seq128/train/shard-000000.tar",
    )
    assert storage.query_of(url) == f"?{SIGNED}" and storage.query_of("/a/b?c.tar") == ""


@pytest.mark.parametrize("target", ["shards/manifest.json", "shards", "shards/"])
def test_a_presigned_manifest_url_is_one_clear_line(
    tmp_path, http_root, capsys, target: str
) -> None:
    write_shards(tmp_path, str(tmp_path / "vocab"), write_vocab(tmp_path / "vocab"))
    given = f"{http_root}/{target}?{SIGNED}"
    code, lines, err = inspect(capsys, given)
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {http_root}/{target}?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Signature=***: a URL with a query names one object (a presigned URL's "
        "signature signs that object alone), and a manifest's shards and block tables are "
        "other objects beside it, which its query cannot sign. Give the directory itself: "
        "s3://BUCKET/… or gs://BUCKET/… with credentials from the environment, or an "
        "http(s):// directory the server serves without a per-object signature "
        "(user:password@ works)\n"
    )
    assert _NoRangeHandler.requests == []  # nothing fetched from a path with the query in it


def test_a_presigned_shard_url_is_read_alone(tmp_path, http_root, capsys) -> None:
    write_shards(tmp_path, str(tmp_path / "vocab"), write_vocab(tmp_path / "vocab"))
    code, lines, _ = inspect(capsys, f"{http_root}/shards/{TRAIN_SHARD}?{SIGNED}", "--json", "10")
    assert code == 0 and lines == JSON_LINES[:2]
    assert {path for path, _ in _NoRangeHandler.requests} == {f"/shards/{TRAIN_SHARD}?{SIGNED}"}
