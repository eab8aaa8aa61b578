"""`bertkit inspect` on remote targets: shards and documents over HTTP (with and without
range requests) and over S3 from a real server on loopback (the local cases, and the
literal shards these use, are in tests/test_inspect.py)."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from functools import partial
from pathlib import Path

import pytest

from schemas.examples import SHARDS_MANIFEST_NAME
from tests.support.s3server import client_environment
from tests.test_inspect import (
    HELDOUT_SHARD,
    JSON_LINES,
    TRAIN_SHARD,
    TRAIN_STATS,
    inspect,
    write_shards,
    write_vocab,
)


@pytest.fixture
def shards_dir(tmp_path: Path) -> Path:
    """tests/test_inspect.py's literal shards, with their vocabulary."""
    vocab_dir = tmp_path / "vocab"
    return write_shards(tmp_path, str(vocab_dir), write_vocab(vocab_dir))


@pytest.fixture(scope="module")
def books_documents(sample_documents) -> Path:
    """The books stage's output on the embedded sample (extracted once, in conftest)."""
    return sample_documents[1]


# --------------------------------------------------------------------------- over HTTP


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # the test output stays readable
        pass


@pytest.fixture
def http_root(tmp_path: Path, monkeypatch):
    """A plain HTTP server on loopback serving tmp_path: no listing used, no Range support."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    handler = partial(_QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_shards_over_http(shards_dir: Path, http_root: str, capsys) -> None:
    local = inspect(capsys, str(shards_dir), "--stats")[1]
    code, lines, _ = inspect(capsys, f"{http_root}/shards/", "--json", "10")
    assert code == 0 and lines == JSON_LINES
    code, lines, _ = inspect(capsys, f"{http_root}/shards/{SHARDS_MANIFEST_NAME}", "--stats")
    assert code == 0
    assert (
        lines[1:] == local[1:]
        and lines[0] == f"shards directory {http_root}/shards (manifest.json)"
    )
    code, lines, _ = inspect(
        capsys, f"{http_root}/shards/{TRAIN_SHARD}", "--show", "1", "--vocab", f"{http_root}/vocab"
    )
    assert code == 0 and "  B  on {dog→the} {mat} . [SEP]" in lines
    code, _, err = inspect(capsys, f"{http_root}/missing")
    assert code == 1 and "neither manifest.json" in err


def test_tampered_shard_over_http(shards_dir: Path, http_root: str, capsys) -> None:
    shard = shards_dir / HELDOUT_SHARD
    shard.write_bytes(shard.read_bytes()[:-1024])  # drop the end-of-archive blocks
    code, lines, err = inspect(capsys, f"{http_root}/shards", "--json", "10")
    assert code == 1 and lines == JSON_LINES[:2]  # the train shard's; none of the cut block's
    assert err == (  # one reopen at the same byte tells a cut file from a dropped connection
        f"bertkit inspect: error: {http_root}/shards/{HELDOUT_SHARD}: ends after 1,024 bytes, "
        "the manifest records at least 2,048; the file is truncated: rebuild it or restore "
        "it from the source\n"
    )


def test_documents_over_http_without_range_requests(
    books_documents: Path, tmp_path: Path, http_root: str, capsys
) -> None:
    shutil.copytree(books_documents, tmp_path / "books")
    local = inspect(capsys, str(books_documents), "--stats")[1]
    code, lines, _ = inspect(capsys, f"{http_root}/books", "--stats")
    assert code == 0 and lines == local
    assert json.loads(inspect(capsys, f"{http_root}/books", "--json", "1")[1][0])["id"] == (
        "books/alice29"
    )


# --------------------------------------------------------------------------- over S3

BUCKET = "artifacts"


@pytest.fixture(scope="module")
def s3_endpoint(s3_server):
    """The session's S3 server (conftest), with this module's bucket."""
    s3_server.bucket(BUCKET)
    return s3_server


def test_shards_and_documents_over_s3(
    s3_endpoint, shards_dir: Path, books_documents: Path, monkeypatch, capsys
) -> None:
    endpoint, client = s3_endpoint
    # smart_open's default boto3 client reads the standard variables, as on a real machine.
    for name, value in {**client_environment(endpoint), "NO_PROXY": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(name, value)
    for root, prefix in ((shards_dir, "shards"), (books_documents, "books")):
        for path in root.rglob("*"):
            if path.is_file():
                client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(root)}")
    code, lines, _ = inspect(capsys, f"s3://{BUCKET}/shards", "--json", "10")
    assert code == 0 and lines == JSON_LINES
    code, lines, _ = inspect(
        capsys, f"s3://{BUCKET}/shards/{SHARDS_MANIFEST_NAME}", "--stats", "--split", "train"
    )
    assert code == 0 and lines[lines.index("examples 2 in 1 shard") :] == TRAIN_STATS
    code, lines, _ = inspect(capsys, f"s3://{BUCKET}/books", "--stats")
    assert code == 0
    assert "read:     4 documents, 6,340 sentences, 1,064,514 text bytes in 1 file" in lines
    code, _, err = inspect(capsys, f"s3://{BUCKET}/nothing/shard-000000.tar")
    assert code == 1 and f"s3://{BUCKET}/nothing/shard-000000.tar: no such shard" in err
