"""A stage's `--overwrite` deletes only the outputs its earlier run's record lists: a file
named as the stage names its outputs (a `shard-000099.tar`, a `documents-00099-0000.parquet`,
a rejects or duplicates file) beside a record that does not list it is refused, with or
without --overwrite, before anything is deleted, in every stage and in the chain. Where
there is no record (a run killed before writing it), the names alone decide, as before."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import books, chain, corpus, dedup, examples, vocab
from pipelines.beam import files
from pipelines.beam.documents import DOCUMENTS_LISTING, DOCUMENTS_RUN_FILES
from schemas import MANIFEST_NAME
from tests.conftest import s3_flags

WORDS = "the cat sat on a mat while dogs ran over green hills and birds sang in tall trees"
FLAGS = ["--vocab-size", "200", "--max-seq-length", "32", "--dupe-factor", "1"]


def refusal(out: Path, stage: str, name: str, record: str, more: int = 0) -> str:
    also = f" and {more} more files" if more else ""
    return (
        f"{out} holds {name}{also}, named as a `bertkit {stage}` output but not listed in "
        f"{record}, the earlier run's record of what it wrote there (a file of yours, or of "
        f"another run): nothing was deleted. Move {'them' if more else 'it'}, or choose a new "
        "or empty --output"
    )


def files_below(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A chain's outputs from two books and six corpus records (documents, vocab, shards),
    and a dedup of its corpus documents in `dedup/`."""
    root = tmp_path_factory.mktemp("listed")
    words = WORDS.split()
    records = [
        {
            "id": f"d{d}",
            "text": " ".join(" ".join(words[d : d + 8]).capitalize() + "." for _ in "ab"),
        }
        for d in range(6)
    ]
    (root / "in").mkdir()
    (root / "in" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for book in range(2):
        paragraphs = [" ".join(words[i : i + 9]).capitalize() + "." for i in range(book, book + 8)]
        (root / "in" / f"book{book}.txt").write_text("\n\n".join(paragraphs) + "\n")
    argv = [*inputs(root), "--output", str(root / "out"), *FLAGS]
    assert chain.run(argv) == 0
    assert (
        dedup.run(
            ["--documents", str(root / "out/documents/corpus"), "--output", str(root / "dedup")]
        )
        == 0
    )
    return root


def inputs(root: Path) -> list[str]:
    return ["--corpus", str(root / "in" / "a.jsonl"), "--books", f"{root}/in/*.txt"]


@pytest.fixture
def copy(made: Path, tmp_path: Path) -> Path:
    shutil.copytree(made, tmp_path / "c")
    return tmp_path / "c"


def plant(directory: Path, name: str, like: str) -> None:
    """A copy of one of the run's files under a name the stage could have written."""
    (directory / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(directory / like, directory / name)


def test_an_unlisted_shard_and_block_table_are_refused_before_anything_is_deleted(copy, capsys):
    out = copy / "out" / "shards"
    plant(out, "seq32/train/shard-000099.tar", "seq32/train/shard-000000.tar")
    plant(
        out, "seq32/train/shard-000099.tar.blocks.json", "seq32/train/shard-000000.tar.blocks.json"
    )
    before = files_below(out)
    argv = ["--documents", str(copy / "out/documents/books"), "--vocab", str(copy / "out/vocab")]
    for overwrite in ([], ["--overwrite"]):
        assert (
            examples.run([*argv, "--output", str(out), "--max-seq-length", "32", *overwrite]) == 2
        )
        assert capsys.readouterr().err == (
            "bertkit examples: "
            + refusal(out, "examples", "seq32/train/shard-000099.tar", "manifest.json", 1)
            + "\n"
        )
        assert files_below(out) == before


def test_the_chain_refuses_an_unlisted_output_in_any_of_its_directories(made, copy, capsys):
    out = copy / "out"
    plant(out / "shards", "_rejects/rejects-mine.jsonl", "manifest.json")
    plant(out / "documents/books", "documents-00099-0000.parquet", "documents-00000-0000.parquet")
    before = files_below(out)
    assert chain.run([*inputs(copy), "--output", str(out), *FLAGS, "--overwrite"]) == 2
    error = capsys.readouterr().err
    assert (
        refusal(out / "documents/books", "books", "documents-00099-0000.parquet", MANIFEST_NAME)
        in error
    )
    assert files_below(out) == before
    (out / "documents/books/documents-00099-0000.parquet").unlink()
    assert chain.run([*inputs(copy), "--output", str(out), *FLAGS, "--overwrite"]) == 2
    assert (
        refusal(out / "shards", "examples", "_rejects/rejects-mine.jsonl", "manifest.json")
        in capsys.readouterr().err
    )
    (out / "shards/_rejects/rejects-mine.jsonl").unlink()
    assert chain.run([*inputs(copy), "--output", str(out), *FLAGS, "--overwrite"]) == 0
    assert sorted(files_below(out)) == sorted(files_below(made / "out"))


def test_a_documents_stage_and_dedup_refuse_unlisted_documents_rejects_and_duplicates(copy):
    out = copy / "out" / "documents" / "books"
    plant(out, "_rejects/rejects-00007.jsonl", MANIFEST_NAME)
    before = files_below(out)
    argv = ["--input", f"{copy}/in/*.txt", "--output", str(out), "--overwrite"]
    with pytest.raises(files.OutputDirectoryError) as refused:
        books.run(argv)
    assert str(refused.value) == refusal(
        out, "books", "_rejects/rejects-00007.jsonl", MANIFEST_NAME
    )
    assert files_below(out) == before
    deduplicated = copy / "dedup"
    plant(deduplicated, "_duplicates/duplicates-009-00000.parquet", MANIFEST_NAME)
    argv = ["--documents", str(copy / "out/documents/corpus"), "--output", str(deduplicated)]
    with pytest.raises(files.OutputDirectoryError) as refused:
        dedup.run([*argv, "--overwrite"])
    assert str(refused.value) == refusal(
        deduplicated, "dedup", "_duplicates/duplicates-009-00000.parquet", MANIFEST_NAME
    )
    assert (deduplicated / "_duplicates/duplicates-009-00000.parquet").is_file()


def test_without_its_record_a_killed_run_s_outputs_go_by_their_names(copy) -> None:
    out = copy / "out" / "documents" / "books"
    plant(out, "documents-00099-0000.parquet", "documents-00000-0000.parquet")
    (out / MANIFEST_NAME).unlink()  # as a run killed before its record leaves them
    assert books.run(["--input", f"{copy}/in/*.txt", "--output", str(out), "--overwrite"]) == 0
    assert sorted(files_below(out)) == [MANIFEST_NAME, "documents-00000-0000.parquet"]


def test_a_manifest_that_lists_no_kind_of_file_leaves_that_kind_unchecked(copy) -> None:
    out = copy / "out" / "documents" / "books"
    recorded = json.loads((out / MANIFEST_NAME).read_text())
    listed = DOCUMENTS_LISTING.read(str(out))
    assert listed is not None and listed.names == {"documents-00000-0000.parquet"}
    rejects, duplicates = "_rejects/rejects-00007.jsonl", "_duplicates/duplicates-0-0.parquet"
    assert re.fullmatch(listed.kinds, rejects)  # checked: this manifest lists its rejects
    assert not re.fullmatch(listed.kinds, duplicates)  # not a dedup's: no duplicates_files
    del recorded["rejects_files"]  # as an older manifest, which named no rejects files
    (out / MANIFEST_NAME).write_text(json.dumps(recorded))
    older = DOCUMENTS_LISTING.read(str(out))
    assert older is not None and not re.fullmatch(older.kinds, rejects)
    (out / MANIFEST_NAME).write_text("{not json")
    assert DOCUMENTS_LISTING.read(str(out)) is None


def stage_argv(copy: Path, stage: str) -> tuple[Path, list[str]]:
    """A stage's output in `copy` and its flags but --output."""
    books_documents, vocabulary = str(copy / "out/documents/books"), str(copy / "out/vocab")
    return {
        "examples": (
            copy / "out/shards",
            ["--documents", books_documents, "--vocab", vocabulary, "--max-seq-length", "32"],
        ),
        "vocab": (copy / "out/vocab", ["--documents", books_documents, "--vocab-size", "200"]),
        "dedup": (copy / "dedup", ["--documents", str(copy / "out/documents/corpus")]),
        "books": (copy / "out/documents/books", ["--input", f"{copy}/in/*.txt"]),
    }[stage]


RUN = {"examples": examples.run, "vocab": vocab.run, "dedup": dedup.run, "books": books.run}


@pytest.mark.parametrize("stage", sorted(RUN))
def test_a_symbolic_link_in_the_output_is_refused_and_nothing_through_it_is_touched(
    copy: Path, stage: str, capsys
) -> None:
    precious = copy / "precious"
    (precious / "sub").mkdir(parents=True)
    (precious / "sub" / "x.txt").write_text("keep\n")
    out, argv = stage_argv(copy, stage)
    (out / "_work").symlink_to(precious)  # a scratch disk for the spill files, say
    expected = (
        f"{out} holds _work, a symbolic link: `bertkit {stage}` writes none, and would write "
        "or delete through it in a directory it did not make: nothing was deleted. Choose a "
        "new or empty --output, or remove the link"
    )
    for overwrite in ([], ["--overwrite"]):
        try:
            code = RUN[stage]([*argv, "--output", str(out), *overwrite])
        except files.OutputDirectoryError as refused:  # the stages' runner prints it
            assert str(refused) == expected
        else:  # examples prints it itself
            assert (code, capsys.readouterr().err) == (2, f"bertkit examples: {expected}\n")
    assert (precious / "sub" / "x.txt").read_text() == "keep\n"


def test_a_documents_stage_does_not_overwrite_another_stage_s_documents(copy: Path) -> None:
    out = copy / "out" / "documents" / "books"
    before = files_below(out)
    argv = ["--input", str(copy / "in" / "a.jsonl"), "--output", str(out)]
    for overwrite in ([], ["--overwrite"]):
        with pytest.raises(files.OutputDirectoryError) as refused:
            corpus.run([*argv, *overwrite])
        assert str(refused.value) == (
            f"{out} is a documents directory written by `bertkit books`, which `bertkit corpus` "
            "does not overwrite: nothing was deleted. Choose a new or empty --output"
        )
    assert files_below(out) == before


def test_a_folder_marker_in_a_bucket_is_no_file_of_anyone_s(s3_server) -> None:
    bucket = s3_server.bucket("listed-markers")
    s3_server.client.put_object(Bucket=bucket, Key="console/out/", Body=b"")
    output = f"s3://{bucket}/console/out"
    files.configure(PipelineOptions(s3_flags(s3_server.endpoint)))
    assert files.earlier_run_files(output, DOCUMENTS_RUN_FILES, False, "corpus") == []
    s3_server.client.put_object(Bucket=bucket, Key="console/out/mine.txt", Body=b"x")
    with pytest.raises(
        files.OutputDirectoryError, match=re.escape("holds mine.txt, which `bertkit corpus`")
    ):
        files.earlier_run_files(output, DOCUMENTS_RUN_FILES, True, "corpus")
