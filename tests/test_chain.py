"""`bertkit chain`: dump and books to shards in one Beam job, byte for byte what the four
commands write (conftest's sample fixtures are those commands, run with the same flags), on
the in-process runner, on two worker processes and on the portable engine; its flags, and
its refusals before any work."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import pytest

from pipelines import chain
from pipelines.chain.config import (
    ChainConfig,
    documents_config,
    examples_config,
    vocab_config,
)
from pipelines.command import flags
from tests.conftest import DATA_DIR
from tests.support.portable import portable_engine

# conftest's sample_vocab and sample_shards flags.
SAMPLE_FLAGS = [
    "--vocab-size",
    "8000",
    "--max-seq-length",
    "128",
    "--dupe-factor",
    "2",
    "--heldout-fraction",
    "0.05",
    "--samples-per-shard",
    "2000",
]
WORKERS = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]


def chain_argv(output: Path, *extra: str) -> list[str]:
    """The sample's inputs exactly as conftest's fixtures name them."""
    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    books = DATA_DIR / "books" / "*.txt"
    return ["--wikipedia", str(dump), "--books", str(books), "--output", str(output), *extra]


def files_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def unwrapped(data: bytes) -> bytes:
    """The dataset card wraps its commands by their length, which the paths change."""
    return re.sub(rb" \\\n +", b" ", data)


def run_and_take(output: Path, *extra: str) -> dict[str, bytes]:
    """Run the chain into `output`, return every file it wrote and remove them (so that
    the next run writes to the same paths, which its manifests record)."""
    assert chain.run(chain_argv(output, *SAMPLE_FLAGS, *extra)) == 0
    written = files_of(output)
    shutil.rmtree(output)
    return written


@pytest.fixture(scope="module")
def chain_output(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The chain on the sample, in process: (the --output it ran with, its files)."""
    output = tmp_path_factory.mktemp("chain") / "out"
    return output, run_and_take(output)


def test_the_chain_writes_what_the_four_commands_write(
    chain_output, sample_documents, sample_vocab, sample_shards
) -> None:
    output, written = chain_output
    # Each directory against the same command's; a manifest or card records its own path
    # and its inputs' paths (the flags as typed, the links relative to the manifest: see
    # docs/formats.md), so the chain's paths are put in the fixtures' place first.
    places = {
        "documents/wikipedia": sample_documents[0],
        "documents/books": sample_documents[1],
        "vocab": sample_vocab,
        "shards": sample_shards,
    }
    for folder, expected_dir in places.items():
        expected = files_of(expected_dir)
        ours = {k.removeprefix(folder + "/"): v for k, v in written.items() if k.startswith(folder)}
        assert sorted(ours) == sorted(expected), folder
        for name, data in ours.items():
            for chain_folder, fixture_dir in places.items():
                data = data.replace(str(output / chain_folder).encode(), str(fixture_dir).encode())
                link = os.path.relpath(output / chain_folder, output / folder)
                fixture_link = os.path.relpath(fixture_dir, expected_dir)
                data = data.replace(f'"{link}"'.encode(), f'"{fixture_link}"'.encode())
            assert unwrapped(data) == unwrapped(expected[name]), f"{folder}/{name}"
    assert len(written) == 27 and sum(name.endswith(".tar") for name in written) == 9


def test_two_worker_processes_write_the_same_bytes(chain_output) -> None:
    output, written = chain_output
    assert run_and_take(output, *WORKERS) == written


def test_two_level_regroupings_planned_inside_the_job_write_the_same_bytes(chain_output) -> None:
    output, written = chain_output
    assert run_and_take(output, "--shuffle-levels", "2") == written


def test_the_portable_engine_writes_the_same_bytes(chain_output) -> None:
    output, written = chain_output
    with portable_engine() as engine:
        assert run_and_take(output, *engine) == written


def parsed(*argv: str):
    parser = flags.parser_for(ChainConfig, "bertkit chain", None)
    return flags.config_from(ChainConfig, parser.parse_args(["--output", "out", *argv]))


def test_each_flag_reaches_its_stage_with_its_own_default() -> None:
    config = parsed("--books", "b/*.txt", "--corpus", "c.jsonl", "--books-min-paragraph-words", "7")
    wiki, books, corpus = (documents_config(config, s) for s in ("wikipedia", "books", "corpus"))
    assert (wiki.input, books.input, corpus.input) == ((), ("b/*.txt",), ("c.jsonl",))
    assert (wiki.min_paragraph_words, books.min_paragraph_words) == (5, 7)
    assert (corpus.min_paragraph_words, corpus.text_field) == (3, "text")
    assert (books.output, corpus.output) == ("out/documents/books", "out/documents/corpus")
    vocab, examples = vocab_config(config), examples_config(config)
    assert vocab.documents == examples.documents == ("out/documents/books", "out/documents/corpus")
    assert (vocab.seed, examples.seed, examples.vocab) == (0, 12345, "out/vocab")
    config = parsed("--books", "b", "--seed", "9", "--vocab-seed", "3", "--max-seq-length", "64")
    assert (vocab_config(config).seed, examples_config(config).seed) == (3, 9)
    assert examples_config(config).max_seq_lengths == (64,)
    # Every field of every stage is reachable (the chain wires input, output, documents…).
    names = {f.name for f in dataclasses.fields(ChainConfig)}
    assert {"wikipedia_split_mb", "books_format", "corpus_text_field", "vocab_seed"} <= names
    assert {"sample_mb", "bucket_mb", "overwrite", "output"} <= names


def test_without_an_input_it_stops_before_any_work(tmp_path, capsys) -> None:
    assert chain.run(["--output", str(tmp_path / "out")]) == 2
    assert "no input: pass --wikipedia DUMP" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "flag", "stage"),
    [
        (("--corpus-text-field", "body"), "--corpus-text-field", "corpus"),
        (("--wikipedia-min-paragraph-words", "3"), "--wikipedia-min-paragraph-words", "wikipedia"),
    ],
)
def test_a_flag_of_a_stage_without_inputs_is_refused(flags, flag, stage, tmp_path, capsys) -> None:
    argv = ["--books", "b/*.txt", *flags, "--output", str(tmp_path / "out")]
    assert chain.run(argv) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: {flag} shapes the {stage} stage, which runs only with --{stage} "
        f"inputs, and none are given: drop it or give --{stage}\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_foreign_file_in_any_output_is_refused_before_anything_is_deleted(
    tmp_path, capsys
) -> None:
    output = tmp_path / "out"
    earlier = output / "documents" / "wikipedia" / "_manifest.json"  # an earlier run's
    earlier.parent.mkdir(parents=True)
    earlier.write_text("{}")
    foreign = output / "shards" / "notes.txt"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("mine")
    assert chain.run(chain_argv(output, "--overwrite")) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: {output / 'shards'} holds notes.txt, which `bertkit examples` does "
        "not write: nothing was deleted. Choose a new or empty --output, or move those files\n"
    )
    assert earlier.read_text() == "{}" and foreign.read_text() == "mine"
