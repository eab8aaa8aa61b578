"""The Beam stages on a cluster-shaped engine: Beam's portable job service and a separate
external worker pool, each its own process on loopback (tests/support/portable.py). The documents
and shards are byte-identical to the in-process run of the same flags (conftest's sample
fixtures): this is how to check a change before paying for Dataflow. A launch with
--no_wait_until_finish returns at submission with the job's id; the job then finishes on
its own and writes its manifest last.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from pipelines import books, examples, vocab, wikipedia
from pipelines.command.progress import PROGRESS_ENV, format_bytes
from schemas.manifest import MANIFEST_NAME
from tests.conftest import DATA_DIR
from tests.support.portable import portable_engine

# The flags of conftest's sample_shards.
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
def engine():
    with portable_engine() as flags:
        yield flags


def files_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def data_files(directory: Path) -> dict[str, bytes]:
    """Everything but the manifests, which record the output path."""
    return {k: v for k, v in files_of(directory).items() if "manifest" not in k}


def test_wikipedia_on_the_portable_engine_gives_the_local_bytes(engine, sample_documents, tmp_path):
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    out = tmp_path / "wiki"
    assert wikipedia.run(["--input", str(dump), "--output", str(out), *engine]) == 0
    assert data_files(out) == data_files(sample_documents[0])
    assert sorted(files_of(out)) == sorted(files_of(sample_documents[0]))


def progress_lines(stderr: str, stage: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{stage} | ")]


def test_books_on_the_portable_engine_gives_the_local_bytes(
    engine, sample_documents, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    out = tmp_path / "books"
    pattern = str(DATA_DIR / "books" / "*.txt")  # conftest's sample_documents, on the engine
    assert books.run(["--input", pattern, "--output", str(out), *engine]) == 0
    documents = data_files(out)
    assert documents and documents == data_files(sample_documents[1])
    assert sorted(files_of(out)) == sorted(files_of(sample_documents[1]))
    # The pool's workers cannot reach the driver while the job runs (pipelines/beam/
    # progress.py says why): one line says so instead of a silent wait.
    assert progress_lines(capsys.readouterr().err, "books") == [
        "books | no progress line on PortableRunner with workers outside this process: its "
        "job service reports counters only when the job has ended (--environment_type "
        "LOOPBACK runs the workers here and shows it)"
    ]


def test_relative_paths_are_where_they_were_typed_not_in_the_pool_s_directory(
    engine, sample_documents, tmp_path, monkeypatch
) -> None:
    """The worker pool runs in the directory it was started from (here the tests'): a
    relative --input or --output meant the pool's, and a run replaced an earlier run there
    without --overwrite while the driver looked for the manifest in its own."""
    pool_directory = Path.cwd()
    books_dir = tmp_path / "in"
    books_dir.mkdir()
    for book in (DATA_DIR / "books").glob("*.txt"):
        (books_dir / book.name).write_bytes(book.read_bytes())
    monkeypatch.chdir(tmp_path)
    name = f"books-{tmp_path.name}"
    assert books.run(["--input", "in/*.txt", "--output", name, *engine]) == 0
    assert data_files(tmp_path / name) == data_files(sample_documents[1])
    assert not (pool_directory / name).exists()
    manifest = json.loads((tmp_path / name / MANIFEST_NAME).read_text())
    assert [i["path"] for i in manifest["inputs"]] == sorted(
        str(p) for p in books_dir.glob("*.txt")
    )


def test_loopback_workers_on_the_job_service_show_the_progress_line(
    engine, sample_documents, tmp_path, capsys, monkeypatch
) -> None:
    """The same job service with the SDK workers in this process (LOOPBACK): they publish
    their counts to the driver's folder as local workers do, and the line ends with the
    totals of every book."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    loopback = [*engine[: engine.index("--environment_type")], "--environment_type", "LOOPBACK"]
    out = tmp_path / "books"
    pattern = str(DATA_DIR / "books" / "*.txt")
    assert books.run(["--input", pattern, "--output", str(out), *loopback]) == 0
    assert data_files(out) == data_files(sample_documents[1])
    lines = progress_lines(capsys.readouterr().err, "books")
    size = sum(p.stat().st_size for p in (DATA_DIR / "books").glob("*.txt"))
    assert lines and re.fullmatch(
        rf"books \| read {re.escape(format_bytes(size, size))} 100% \| files 4 \| documents 4"
        r" \| documents/s [0-9.]+ \| done in \d+:\d\d:\d\d",
        lines[-1],
    ), lines


def test_vocab_on_the_portable_engine_gives_the_local_files(
    engine, sample_documents, sample_vocab, tmp_path
) -> None:
    out = tmp_path / "vocab"
    documents = [str(d) for d in sample_documents]
    flags = ["--vocab-size", "8000", *engine]  # conftest's sample_vocab, on the engine
    assert vocab.run(["--documents", *documents, "--output", str(out), *flags]) == 0
    assert sorted(files_of(out)) == sorted(files_of(sample_vocab))  # no _work left behind
    for name in ("vocab.txt", "tokenizer.json"):
        assert (out / name).read_bytes() == (sample_vocab / name).read_bytes()
    ours, local = (json.loads((d / "vocab.json").read_text()) for d in (out, sample_vocab))
    assert ours["config"].pop("output") == str(out)
    local["config"].pop("output")
    assert ours == local


def test_examples_on_the_portable_engine_give_the_local_shards(
    engine, sample_documents, sample_vocab, sample_shards, tmp_path
) -> None:
    out = tmp_path / "shards"
    documents = [str(d) for d in sample_documents]
    assert (
        examples.run(
            [
                "--documents",
                *documents,
                "--vocab",
                str(sample_vocab),
                "--output",
                str(out),
                *EXAMPLE_FLAGS,
                *engine,
            ]
        )
        == 0
    )
    assert data_files(out) == data_files(sample_shards) and len(data_files(out)) >= 8


def test_a_launch_that_does_not_wait_returns_the_job_id(engine, sample_documents, tmp_path, capsys):
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    out = tmp_path / "wiki"
    code = wikipedia.run(
        ["--input", str(dump), "--output", str(out), *engine, "--no_wait_until_finish"]
    )
    assert code == 0
    line = capsys.readouterr().out
    assert re.fullmatch(
        rf"bertkit wikipedia: job \S+ submitted to PortableRunner; it runs on without this "
        rf"command\. Its manifest appears at {re.escape(str(out / MANIFEST_NAME))} when it "
        r"has finished\n",
        line,
    ), line
    deadline = time.monotonic() + 120
    while not (out / MANIFEST_NAME).exists():  # the job goes on after the command returned
        assert time.monotonic() < deadline, "the job did not finish within 120 s"
        time.sleep(0.5)
    assert data_files(out) == data_files(sample_documents[0])
