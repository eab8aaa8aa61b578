"""The chain on gs://, against a real GCS server on loopback (gcp-storage-emulator).

Beam's gs:// filesystem (google-cloud-storage) and smart_open's reach the emulator through
STORAGE_EMULATOR_HOST, anonymously, exactly as they reach Google: list, ranged reads,
resumable uploads, rename (copy + delete). Every Beam stage (wikipedia, books, vocab,
examples) reads and writes gs:// here (the examples stage's spill files too, under its
output's _work/), `inspect` and the trainer stream the shards, and every data file is
byte-identical to the local run of the same flags (the session's sample fixtures in conftest).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from pipelines import books, examples, vocab, wikipedia
from pipelines.beam.documents import DOCUMENTS_LISTING, DOCUMENTS_RUN_FILES, read_manifest
from pipelines.beam.files import OutputDirectoryError, earlier_run_files
from pipelines.inspect import cli as inspect_cli
from schemas import ShardsManifest
from schemas.shards import block_table_path
from schemas.vocab import TOKENIZER_FILE, VOCAB_FILE, VOCAB_METADATA_FILE
from tests.conftest import DATA_DIR
from tests.support.gcsserver import gcs_emulator
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source

BUCKET = "corpus"
# The flags of conftest's sample_shards: the local run to compare with.
EXAMPLE_FLAGS = [
    "--max-seq-length",
    "128",
    "--dupe-factor",
    "2",
    "--heldout-fraction",
    "0.05",
    "--samples-per-shard",
    "2000",
]


@pytest.fixture(scope="module")
def gcs():
    """The emulator, and this process's (and its children's) clients pointed at it."""
    with gcs_emulator(BUCKET) as client:
        yield client


def upload(client, local: Path, prefix: str) -> str:
    bucket = client.bucket(BUCKET)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        bucket.blob(f"{prefix}/{path.relative_to(local)}").upload_from_filename(str(path))
    return f"gs://{BUCKET}/{prefix}"


def download(client, prefix: str) -> dict[str, bytes]:
    """Every object under gs://BUCKET/prefix/, by its name below the prefix."""
    return {
        blob.name[len(prefix) + 1 :]: blob.download_as_bytes()
        for blob in client.list_blobs(BUCKET, prefix=prefix + "/")
    }


def local_files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def test_wikipedia_reads_a_dump_and_writes_documents_on_gcs(gcs, sample_documents) -> None:
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    gcs.bucket(BUCKET).blob(f"dumps/{dump.name}").upload_from_filename(str(dump))
    code = wikipedia.run(
        ["--input", f"gs://{BUCKET}/dumps/*.xml.bz2", "--output", f"gs://{BUCKET}/wiki"]
    )
    assert code == 0
    remote, local = download(gcs, "wiki"), local_files(sample_documents[0])
    assert sorted(remote) == sorted(local)
    data = [name for name in local if name.endswith(".parquet")]
    assert data and all(remote[name] == local[name] for name in data)  # byte-identical
    manifest = read_manifest(f"gs://{BUCKET}/wiki")  # through Beam's gs:// filesystem
    assert manifest.files == read_manifest(str(sample_documents[0])).files
    assert manifest.counts["documents"] == 97


def test_books_reads_book_files_and_writes_documents_on_gcs(gcs, sample_documents) -> None:
    bucket = gcs.bucket(BUCKET)
    for book in sorted((DATA_DIR / "books").glob("*.txt")):
        bucket.blob(f"books/{book.name}").upload_from_filename(str(book))
    code = books.run(["--input", f"gs://{BUCKET}/books/*.txt", "--output", f"gs://{BUCKET}/bk"])
    assert code == 0
    remote, local = download(gcs, "bk"), local_files(sample_documents[1])
    assert sorted(remote) == sorted(local)
    data = [name for name in local if name.endswith(".parquet")]
    assert data and all(remote[name] == local[name] for name in data)  # byte-identical
    manifest = read_manifest(f"gs://{BUCKET}/bk")
    assert manifest.files == read_manifest(str(sample_documents[1])).files
    assert manifest.counts["documents"] == 4  # the four books of data/books


def test_vocab_and_examples_read_and_write_gcs_and_match_local_bytes(
    gcs, sample_documents, sample_vocab, sample_shards
) -> None:
    documents = [upload(gcs, d, f"documents/{d.name}") for d in sample_documents]
    output = f"gs://{BUCKET}/vocab"
    assert vocab.run(["--documents", *documents, "--output", output, "--vocab-size", "8000"]) == 0
    remote, local = download(gcs, "vocab"), local_files(sample_vocab)
    assert sorted(remote) == [TOKENIZER_FILE, VOCAB_METADATA_FILE, VOCAB_FILE]
    assert remote[VOCAB_FILE] == local[VOCAB_FILE]
    assert remote[TOKENIZER_FILE] == local[TOKENIZER_FILE]

    code = examples.run(
        [
            "--documents",
            *documents,
            "--vocab",
            output,
            "--output",
            f"gs://{BUCKET}/shards",
            *EXAMPLE_FLAGS,
        ]
    )
    assert code == 0
    remote, local = download(gcs, "shards"), local_files(sample_shards)
    expected = ShardsManifest.from_json(local["manifest.json"].decode())
    shards = [shard.path for shard in expected.all_shards()]
    assert len(shards) >= 8
    files = [*shards, *(block_table_path(path) for path in shards)]
    # The shards, their block tables, the card and the manifest, nothing else: the spill
    # files under _work/ were written to gs:// and removed when the stage finished.
    assert sorted(remote) == sorted(["README.md", "manifest.json", *files])
    assert all(remote[path] == local[path] for path in files)
    manifest = ShardsManifest.from_json(remote["manifest.json"].decode())
    assert manifest.all_shards() == expected.all_shards() and manifest.counts == expected.counts


def test_inspect_and_the_trainer_stream_shards_from_gcs(
    gcs, sample_shards, sample_vocab, capsys
) -> None:
    url = upload(gcs, sample_shards, "streamed")
    # The manifest records its vocabulary relative to itself (../../sample-vocab0/vocab): the
    # tree's layout on the bucket keeps the link (never above the bucket: gs://…/sample-vocab0).
    vocab_url = upload(gcs, sample_vocab, f"{sample_vocab.parent.name}/vocab")
    assert inspect_cli.run([str(sample_shards), "--stats"]) == 0
    local = capsys.readouterr().out.replace(str(sample_shards), "DIR")
    assert inspect_cli.run([url, "--stats"]) == 0
    remote = capsys.readouterr().out.replace(url, "DIR")
    assert remote.replace(vocab_url, "VOCAB") == local.replace(str(sample_vocab), "VOCAB")

    def first_batches(spec: str) -> list[dict[str, torch.Tensor]]:
        loader = PretrainingLoader(open_source(spec), LoaderConfig(64, seed=7))
        batches = []
        for batch in loader.epoch(DataPosition()):
            batches.append(batch)
            if len(batches) == 3:
                return batches
        raise AssertionError("fewer than 3 batches")

    for remote, local in zip(first_batches(url), first_batches(str(sample_shards)), strict=True):
        assert remote.keys() == local.keys()
        assert all(torch.equal(remote[key], local[key]) for key in local)


def test_no_google_credentials_are_looked_up(gcs) -> None:
    """The emulator needs none: no process may wait on Google's credential look-up."""
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in os.environ
    from apache_beam.internal.gcp import auth

    assert auth.get_service_credentials(None) is None  # answered at once, anonymously


def test_reads_and_writes_outside_beam_share_one_client(gcs, tmp_path, monkeypatch) -> None:
    """storage.open_binary (smart_open's reads: the trainer's shards, inspect) and
    objects.upload/download (a run directory on gs://) build one google-cloud-storage client
    for the process, however many objects they touch; smart_open alone builds one an
    object."""
    from google.cloud import storage as gcs_library

    from pipelines.io import clients, objects, storage

    built = []

    class Counted(gcs_library.Client):
        def __init__(self, *args, **kwargs):
            built.append(kwargs.get("project"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gcs_library, "Client", Counted)
    monkeypatch.setattr(clients, "_CLIENTS", {})
    local = tmp_path / "a.bin"
    local.write_bytes(b"first")
    for name in ("one", "two"):
        objects.upload(local, f"gs://{BUCKET}/shared/{name}")
    for name in ("one", "two"):
        with storage.open_binary(f"gs://{BUCKET}/shared/{name}") as source:
            assert source.read() == b"first"
    objects.download(f"gs://{BUCKET}/shared/two", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == b"first"
    assert built == [os.environ["GOOGLE_CLOUD_PROJECT"]]


def test_an_output_naming_an_object_is_refused_by_the_stages_and_the_trainer(gcs, tmp_path) -> None:
    from pipelines.beam import files
    from pipelines.io import objects
    from trainer.run.checkpoints import CheckpointError
    from trainer.run.remote import RemoteRun

    local = tmp_path / "a.bin"
    local.write_bytes(b"mine")
    objects.upload(local, f"gs://{BUCKET}/taken/name")
    objects.upload(local, f"gs://{BUCKET}/taken/name-2/x")
    url = f"gs://{BUCKET}/taken/name"
    with pytest.raises(files.OutputDirectoryError, match=r"^gs://\S+/taken/name is an object"):
        files.earlier_run_files(url, r"x", overwrite=True, stage="books")
    with pytest.raises(CheckpointError, match=r"^--output gs://\S+/taken/name is an object"):
        RemoteRun.open(url, keep=2).prepare(resume=False, overwrite=True)
    assert objects.object_problem(f"gs://{BUCKET}/taken/name-2", "--output") is None
    # A bucket is no object: an --output at its root was a ValueError from Beam's GCS paths.
    for root in (f"gs://{BUCKET}", f"gs://{BUCKET}/"):
        assert f"{root.rstrip('/')}/taken/name" in files.earlier_run_files(
            root, r".*", overwrite=True, stage="books", remove=True
        )
    assert objects.list_names(f"gs://{BUCKET}/taken") == ["name", "name-2/x"]
    for name in ("taken/name", "taken/name-2/x"):  # the module's bucket: left as found
        objects.delete(f"gs://{BUCKET}/{name}")


def test_overwrite_on_gcs_refuses_a_shard_its_manifest_does_not_list(
    gcs, sample_documents, sample_vocab, sample_shards, capsys
) -> None:
    output = upload(gcs, sample_shards, "listed")
    planted = "seq128/train/shard-000099.tar"
    gcs.bucket(BUCKET).blob(f"listed/{planted}").upload_from_string(b"a user's own")
    before = download(gcs, "listed")
    argv = ["--documents", *map(str, sample_documents), "--vocab", str(sample_vocab)]
    assert examples.run([*argv, "--output", output, *EXAMPLE_FLAGS, "--overwrite"]) == 2
    assert capsys.readouterr().err.startswith(
        f"bertkit examples: {output} holds {planted}, named as a `bertkit examples` output but not listed in "
        "manifest.json, the earlier run's record of what it wrote there"
    )
    assert download(gcs, "listed") == before  # nothing was deleted


def test_a_killed_run_s_files_without_a_record_go_by_their_names_on_gcs(gcs) -> None:
    name = "documents-00000-0000.parquet"
    gcs.bucket(BUCKET).blob(f"killed/{name}").upload_from_string(b"a killed run's")
    output = f"gs://{BUCKET}/killed"
    with pytest.raises(OutputDirectoryError) as refused:
        earlier_run_files(output, DOCUMENTS_RUN_FILES, False, "corpus", listing=DOCUMENTS_LISTING)
    assert str(refused.value) == (
        f"{output} is not empty: it holds 1 files of an earlier `bertkit corpus` run (e.g. "
        f"{name}); choose a new --output or pass --overwrite to replace them"
    )
    found = earlier_run_files(
        output, DOCUMENTS_RUN_FILES, True, "corpus", listing=DOCUMENTS_LISTING
    )
    assert found == [f"{output}/{name}"]
