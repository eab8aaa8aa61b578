"""Reading dumps from and writing documents to S3, against a real S3 server on loopback.

moto's server speaks the S3 protocol over HTTP on 127.0.0.1; Beam's s3:// filesystem talks to
it exactly as to AWS (list, ranged reads with seek, multipart writes, rename, delete).
"""

import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from pipelines import wikipedia
from pipelines.documents_io import read_manifest
from tests.dumpfiles import article, write_multistream

BUCKET = "corpus"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
        region_name="us-east-1",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:  # bounded wait for the server to answer
        try:
            client.create_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.2)
    yield endpoint, client
    server.terminate()
    server.wait(timeout=10)


def s3_flags(endpoint: str) -> list[str]:
    return ["--s3_endpoint_url", endpoint, "--s3_access_key_id", "test",
            "--s3_secret_access_key", "test", "--s3_region_name", "us-east-1"]  # fmt: skip


def test_sample_dump_from_s3_gives_the_same_bytes_as_local(
    s3_server, sample_dump, tmp_path
) -> None:
    endpoint, client = s3_server
    client.upload_file(str(sample_dump), BUCKET, f"dumps/{sample_dump.name}")
    assert wikipedia.run(["--input", str(sample_dump), "--output", str(tmp_path / "local")]) == 0
    code = wikipedia.run(
        ["--input", f"s3://{BUCKET}/dumps/*.xml.bz2", "--output", f"s3://{BUCKET}/out/wiki",
         *s3_flags(endpoint)]
    )  # fmt: skip
    assert code == 0
    remote = read_manifest(f"s3://{BUCKET}/out/wiki")
    local = read_manifest(str(tmp_path / "local"))
    assert remote.counts == local.counts and remote.counts["documents"] == 97
    assert [(f.name, f.sha256) for f in remote.files] == [(f.name, f.sha256) for f in local.files]
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="out/wiki/")["Contents"]}
    assert keys == {"out/wiki/_manifest.json", "out/wiki/documents-00000-00000-0000.parquet"}


def test_multistream_splits_read_with_ranged_s3_reads(s3_server, tmp_path: Path) -> None:
    endpoint, client = s3_server
    pages = [article(i) for i in range(1, 21)]
    dump = write_multistream(tmp_path, "testwiki-20260101-pages-articles", pages, per_stream=4)
    index = dump.with_name("testwiki-20260101-pages-articles-multistream-index.txt.bz2")
    for path in (dump, index):
        client.upload_file(str(path), BUCKET, f"multi/{path.name}")
    code = wikipedia.run(
        ["--input", f"s3://{BUCKET}/multi/*-multistream.xml.bz2",
         "--output", f"s3://{BUCKET}/out/multi", "--split_mb", "0", *s3_flags(endpoint)]
    )  # fmt: skip
    assert code == 0
    manifest = read_manifest(f"s3://{BUCKET}/out/multi")
    assert manifest.counts["documents"] == 20 and manifest.counts["units"] == 6


def upload_tree(client, local: Path, prefix: str) -> str:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(local)}")
    return f"s3://{BUCKET}/{prefix}"


def test_examples_from_and_to_s3_give_the_same_shards_as_local(
    s3_server, sample_documents, sample_vocab, tmp_path
) -> None:
    from pipelines import examples
    from schemas import ShardsManifest

    endpoint, client = s3_server
    documents = [upload_tree(client, d, f"examples-in/{d.name}") for d in sample_documents]
    vocab = upload_tree(client, sample_vocab, "examples-in/vocab")
    flags = ["--dupe-factor", "1", "--samples-per-shard", "3000", "--heldout-fraction", "0.05"]
    local = tmp_path / "local"
    assert examples.run(
        ["--documents", *map(str, sample_documents), "--vocab", str(sample_vocab),
         "--output", str(local), *flags]
    ) == 0  # fmt: skip
    assert examples.run(
        ["--documents", *documents, "--vocab", vocab, "--output", f"s3://{BUCKET}/shards",
         *flags, *s3_flags(endpoint)]
    ) == 0  # fmt: skip
    body = client.get_object(Bucket=BUCKET, Key="shards/manifest.json")["Body"].read()
    remote = ShardsManifest.from_json(body.decode())
    expected = ShardsManifest.from_json((local / "manifest.json").read_text())
    assert remote.all_shards() == expected.all_shards() and len(expected.all_shards()) >= 3
    assert remote.counts == expected.counts
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="shards/")["Contents"]}
    # The shards and the manifest, nothing else: the spill files under _work are removed.
    assert keys == {"shards/manifest.json"} | {f"shards/{s.path}" for s in expected.all_shards()}
