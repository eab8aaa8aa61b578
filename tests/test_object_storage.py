"""Reading dumps from and writing documents to S3, against a real S3 server on loopback.

moto's server speaks the S3 protocol over HTTP on 127.0.0.1; Beam's s3:// filesystem talks to
it exactly as to AWS (list, ranged reads with seek, multipart writes, rename, delete).
"""

from pathlib import Path

import pytest

from pipelines import wikipedia
from pipelines.beam.documents import read_manifest
from tests.conftest import s3_flags
from tests.dumpfiles import article, write_multistream

BUCKET = "corpus"


@pytest.fixture(scope="module")
def s3_server(s3_server):
    """The session's S3 server, with this module's bucket."""
    s3_server.bucket(BUCKET)
    return s3_server


def test_sample_dump_from_s3_gives_the_same_bytes_as_local(
    s3_server, sample_dump, tmp_path
) -> None:
    endpoint, client = s3_server
    client.upload_file(str(sample_dump), BUCKET, f"dumps/{sample_dump.name}")
    assert wikipedia.run(["--input", str(sample_dump), "--output", str(tmp_path / "local")]) == 0
    code = wikipedia.run(
        [
            "--input",
            f"s3://{BUCKET}/dumps/*.xml.bz2",
            "--output",
            f"s3://{BUCKET}/out/wiki",
            *s3_flags(endpoint),
        ]
    )
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
        [
            "--input",
            f"s3://{BUCKET}/multi/*-multistream.xml.bz2",
            "--output",
            f"s3://{BUCKET}/out/multi",
            "--split_mb",
            "0",
            *s3_flags(endpoint),
        ]
    )
    assert code == 0
    manifest = read_manifest(f"s3://{BUCKET}/out/multi")
    assert manifest.counts["documents"] == 20 and manifest.counts["units"] == 6


def upload_tree(client, local: Path, prefix: str) -> str:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(local)}")
    return f"s3://{BUCKET}/{prefix}"


# Slow (20 s): the default run reads and writes the examples stage remotely on gs://
# (tests/test_gcs.py), through the same Beam filesystem layer, and reads S3 in
# test_sample_dump_from_s3_gives_the_same_bytes_as_local and tests/test_corpus.py.
@pytest.mark.slow
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
    assert (
        examples.run(
            [
                "--documents",
                *map(str, sample_documents),
                "--vocab",
                str(sample_vocab),
                "--output",
                str(local),
                *flags,
            ]
        )
        == 0
    )
    assert (
        examples.run(
            [
                "--documents",
                *documents,
                "--vocab",
                vocab,
                "--output",
                f"s3://{BUCKET}/shards",
                *flags,
                *s3_flags(endpoint),
            ]
        )
        == 0
    )
    body = client.get_object(Bucket=BUCKET, Key="shards/manifest.json")["Body"].read()
    remote = ShardsManifest.from_json(body.decode())
    expected = ShardsManifest.from_json((local / "manifest.json").read_text())
    assert remote.all_shards() == expected.all_shards() and len(expected.all_shards()) >= 3
    assert remote.counts == expected.counts
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="shards/")["Contents"]}
    # The shards, their block tables, the card and the manifest, nothing else: the spill
    # files under _work are removed.
    assert keys == {"shards/README.md", "shards/manifest.json"} | {
        f"shards/{path}"
        for s in expected.all_shards()
        for path in (s.path, f"{s.path}.blocks.json")
    }


def test_an_output_naming_an_object_is_refused_and_the_object_kept(
    s3_server, tmp_path: Path, capsys
) -> None:
    from pipelines import books

    endpoint, client = s3_server
    client.put_object(Bucket=BUCKET, Key="notes/books", Body=b"a user's object")
    book = tmp_path / "book.txt"
    book.write_text("One sentence here. And another one there.\n")
    argv = ["--input", str(book), "--output", f"s3://{BUCKET}/notes/books", *s3_flags(endpoint)]
    with pytest.raises(SystemExit) as exited:
        books.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"bertkit books: error: s3://{BUCKET}/notes/books is an object, not a directory: the "
        "stage would write its files beside it, under the same name. Choose a new or empty "
        "--output\n"
    )
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="notes")["Contents"]]
    assert keys == ["notes/books"]
    assert client.get_object(Bucket=BUCKET, Key="notes/books")["Body"].read() == b"a user's object"
    client.delete_object(Bucket=BUCKET, Key="notes/books")  # the session's bucket: left as found
