"""Paths of the wrong type or place are refused before any work, with one line naming the
flag, the path and the fix, and exit 2: an --output that is a file, or
inside the inputs; an input directory that is a file; an input file that is a directory, a
FIFO, unreadable, or a glob matching nothing. Each case runs the command's real `main` and
checks that nothing under the test's directory changed."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bertkit import demo
from pipelines import books, vocab, wikipedia
from pipelines.examples import cli as examples

STAGES = {"wikipedia": wikipedia.main, "books": books.main}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a directory or a FIFO)."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


def refused(main: Callable[[list[str]], None], argv: list[str], capsys) -> str:
    """Run `main`, which must exit 2 with one line on stderr and no traceback; that line."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    return captured.err.rstrip("\n")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    """tmp_path as the working directory, holding inputs of every kind: relative paths keep
    the expected messages exact."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "dump.xml.bz2").write_bytes(b"only its path matters here")
    (tmp_path / "afile").write_bytes(b"a user's file")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "_manifest.json").write_bytes(b"{}")
    (tmp_path / "voc").mkdir()
    (tmp_path / "voc" / "vocab.txt").write_bytes(b"[PAD]\n")
    return tmp_path


def test_workers_outside_this_process_get_paths_they_can_reach(workdir, capsys) -> None:
    """Dataflow's workers cannot reach this machine: a local path is refused before any
    work. The portable runner's pool runs in its own directory: a relative path is made
    absolute where it was typed (tests/test_portable.py runs one)."""
    from pipelines.beam.documents import DOCUMENTS_STAGE_PATHS
    from pipelines.beam.stage_paths import placed_for_workers

    config = wikipedia.WikipediaConfig(input=("dumps/*.bz2", "gs://b/d/*.bz2"), output="out")
    assert placed_for_workers(config, DOCUMENTS_STAGE_PATHS, "PortableRunner") == (
        None,
        wikipedia.WikipediaConfig(
            input=(f"{workdir}/dumps/*.bz2", "gs://b/d/*.bz2"), output=f"{workdir}/out"
        ),
    )
    remote_output = wikipedia.WikipediaConfig(input=("dumps/a.bz2",), output="gs://b/out")
    assert placed_for_workers(remote_output, DOCUMENTS_STAGE_PATHS, "DataflowRunner") == (
        "--input dumps/a.bz2 is on this machine, which Dataflow's workers cannot read or "
        "write: give a gs:// path",
        remote_output,
    )
    from pipelines.chain import cli as chain_cli
    from pipelines.chain.config import ChainConfig

    chain = ChainConfig(output="gs://b/out", vocab="bert", wikipedia=("gs://b/dump/*.bz2",))
    assert placed_for_workers(chain, chain_cli._PATHS, "DataflowRunner")[0] == (
        "--vocab bert is on this machine, which Dataflow's workers cannot read or write: give a "
        "gs:// path"
    )  # the workers read it: the examples' plan
    placed = placed_for_workers(chain, chain_cli._PATHS, "PortableRunner")[1]
    assert placed.vocab == f"{workdir}/bert"
    dataflow = ["--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    (workdir / "book.txt").write_text("One sentence. Another.\n")
    argv = ["--input", "book.txt", "--output", "out", *dataflow]
    before = snapshot(workdir)
    assert refused(books.main, argv, capsys) == (
        "bertkit books: error: --output out is on this machine, which Dataflow's workers "
        "cannot read or write: give a gs:// path"
    )
    assert snapshot(workdir) == before


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize(
    ("input_", "output", "message"),
    [
        (
            "d/*",
            "afile",
            "--output afile is a file, not a directory: choose a new or empty directory",
        ),
        (
            "d/*",
            "afile/out",
            "--output afile/out: {root}/afile is a file, so it cannot hold a directory: choose a "
            "directory path",
        ),
        (
            "d/*",
            "d/out",
            "--output d/out is inside --input 'd/*' (the glob matches it or the files it will "
            "hold): choose an --output outside the inputs",
        ),
        (
            "d/**",
            "d/sub/out",
            "--output d/sub/out is inside --input 'd/**' (the glob matches it or the files it "
            "will hold): choose an --output outside the inputs",
        ),
        (
            "*/*.parquet",
            "out",
            "--output out is inside --input '*/*.parquet' (the glob matches it or the files it "
            "will hold): choose an --output outside the inputs",
        ),
        (
            "d/*.xml.bz2",
            "d",
            "--input 'd/*.xml.bz2' is inside --output d: choose an --output that does not hold "
            "the inputs",
        ),
        ("d", "out", "--input d is a directory: pass the files in it, e.g. --input 'd/*'"),
        ("d/", "out", "--input d/ is a directory: pass the files in it, e.g. --input 'd/*'"),
    ],
)
def test_documents_stages_refuse_wrong_paths_before_any_work(
    stage, input_, output, message, workdir, capsys
) -> None:
    before = snapshot(workdir)
    line = refused(STAGES[stage], ["--input", input_, "--output", output], capsys)
    assert line == f"bertkit {stage}: error: " + message.format(root=workdir)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_an_input_that_is_a_fifo_is_refused_it_would_never_end(stage, workdir, capsys) -> None:
    os.mkfifo(workdir / "d" / "pipe.xml.bz2")
    before = snapshot(workdir)
    line = refused(STAGES[stage], ["--input", "d/*.xml.bz2", "--output", "out"], capsys)
    assert line == (
        f"bertkit {stage}: error: --input d/pipe.xml.bz2 is not a regular file (a pipe, "
        "device or socket): pass files only"
    )
    assert snapshot(workdir) == before


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_glob_matching_nothing_names_it_and_the_fix(stage, workdir, capsys) -> None:
    before = snapshot(workdir)
    line = refused(STAGES[stage], ["--input", "none/*.txt", "--output", "out"], capsys)
    assert line == (
        f"bertkit {stage}: error: --input 'none/*.txt' matches no file: check the path, and "
        "quote a glob so that bertkit, not the shell, expands it"
    )
    assert snapshot(workdir) == before


def test_a_glob_matching_only_multistream_indexes_is_refused(workdir, capsys) -> None:
    (workdir / "d" / "enwiki-multistream-index.txt.bz2").write_bytes(b"")
    line = refused(wikipedia.main, ["--input", "d/*-index.txt.bz2", "--output", "out"], capsys)
    assert line == (
        "bertkit wikipedia: error: --input 'd/*-index.txt.bz2' matches only multistream index "
        "files: pass the dumps (…-multistream.xml.bz2); each index is read through its dump"
    )
    assert not (workdir / "out").exists()


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_an_unreadable_input_is_refused(stage, workdir, capsys, monkeypatch) -> None:
    # root reads a chmod-000 file, so the refusal the kernel gives other users is made here.
    real_open = os.open

    def open_refusing_the_dump(path, flags, *args, **kwargs):
        if str(path).endswith("dump.xml.bz2"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_refusing_the_dump)
    line = refused(STAGES[stage], ["--input", "d/*", "--output", "out"], capsys)
    monkeypatch.undo()
    assert line == (
        f"bertkit {stage}: error: --input d/dump.xml.bz2 cannot be read (Permission denied): "
        "fix its permissions or leave it out of --input"
    )
    assert not (workdir / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 file")
def test_an_input_without_read_permission_is_refused(workdir, capsys) -> None:
    (workdir / "d" / "dump.xml.bz2").chmod(0)
    line = refused(books.main, ["--input", "d/*", "--output", "out"], capsys)
    assert line == (
        "bertkit books: error: --input d/dump.xml.bz2 cannot be read (Permission denied): "
        "fix its permissions or leave it out of --input"
    )


def test_a_glob_beside_the_output_that_cannot_reach_its_files_is_accepted(workdir) -> None:
    (workdir / "d" / "book.txt").write_text("Only a short line of words in this little book.\n")
    # 'd/*.txt' matches neither d/out nor a name written in it: the output may sit there.
    assert books.run(["--input", "d/*.txt", "--output", "d/out"]) == 0
    assert sorted(p.name for p in (workdir / "d" / "out").iterdir()) == [
        "_manifest.json",
        "documents-00000-0000.parquet",
    ]


VOCAB_DIR = "vocabulary directory: `bertkit vocab`'s output or a released BERT's"
DOCUMENTS_DIR = (
    "documents directory written by `bertkit wikipedia` or `bertkit books`, the one holding "
    "_manifest.json"
)


@pytest.mark.parametrize(
    ("documents", "output", "message"),
    [
        (
            "docs",
            "afile",
            "--output afile is a file, not a directory: choose a new or empty directory",
        ),
        (
            "docs",
            "docs/",
            "--output docs/ is the --documents directory: write to a new directory beside it",
        ),
        (
            "docs",
            "docs/vocab",
            "--output docs/vocab is inside --documents docs: choose an --output outside it",
        ),
        (
            "docs",
            ".",
            "--documents docs is inside --output .: choose an --output that does "
            "not hold the inputs",
        ),
        (
            "docs/_manifest.json",
            "out",
            f"--documents docs/_manifest.json is a file, not a directory: pass the "
            f"{DOCUMENTS_DIR} (here perhaps docs)",
        ),
        ("afile", "out", f"--documents afile is a file, not a directory: pass the {DOCUMENTS_DIR}"),
        (
            "docs?",
            "out",
            "--documents docs?: a directory name with *, ? or [ would be read as a glob where "
            "the stage lists it, and reach other directories: choose a name without them",
        ),
    ],
)
def test_vocab_refuses_wrong_paths_before_any_work(
    documents, output, message, workdir, capsys
) -> None:
    before = snapshot(workdir)
    line = refused(vocab.main, ["--documents", documents, "--output", output], capsys)
    assert line == f"bertkit vocab: error: {message}"
    assert snapshot(workdir) == before


@pytest.mark.parametrize(
    ("documents", "vocabulary", "output", "message"),
    [
        (
            "docs",
            "voc",
            "afile",
            "--output afile is a file, not a directory: choose a new or empty directory",
        ),
        (
            "docs",
            "voc",
            "docs/shards",
            "--output docs/shards is inside --documents docs: choose an --output outside it",
        ),
        (
            "docs",
            "voc",
            "./voc",
            "--output ./voc is the --vocab directory: write to a new directory beside it",
        ),
        (
            "docs",
            "voc/vocab.txt",
            "out",
            f"--vocab voc/vocab.txt is a file, not a directory: pass the {VOCAB_DIR} "
            "(here perhaps voc)",
        ),
    ],
)
def test_examples_refuses_wrong_paths_before_any_work(
    documents, vocabulary, output, message, workdir, capsys
) -> None:
    before = snapshot(workdir)
    argv = ["--documents", documents, "--vocab", vocabulary, "--output", output]
    line = refused(examples.main, argv, capsys)
    assert line == f"bertkit examples: error: {message}"
    assert snapshot(workdir) == before


def test_demo_into_a_file_stops_at_the_first_stage(workdir, capsys) -> None:
    before = snapshot(workdir)
    with pytest.raises(SystemExit) as exited:
        demo.main(["--output", "afile", "--train-steps", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"bertkit wikipedia: error: --output afile/documents/wikipedia: {workdir}/afile is a "
        "file, so it cannot hold a directory: choose a directory path\n"
        "bertkit demo: stopped at step 1/6 Wikipedia (exit 2); the steps after it did not run\n"
    )
    assert snapshot(workdir) == before


def test_the_demo_stops_at_the_first_step_that_fails(workdir, capsys) -> None:
    """It went on to the vocabulary and examples of documents that were not there, and
    ended with "Done. Look inside"."""
    (workdir / "out" / "documents").mkdir(parents=True)
    (workdir / "out" / "documents" / "books").write_text("a user's file")
    with pytest.raises(SystemExit) as exited:
        demo.main(["--output", "out", "--train-steps", "0"])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert err.splitlines()[-2:] == [
        "bertkit books: error: --output out/documents/books is a file, not a directory: choose "
        "a new or empty directory",
        "bertkit demo: stopped at step 2/6 Books (exit 2); the steps after it did not run",
    ]
    assert "Done" not in out and "3/6" not in out
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["documents"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [
                "train",
                "--shards",
                "shards",
                "--output",
                "afile",
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ],
            "bertkit train: error: --output afile is a file: give a run directory",
        ),
        (
            ["export-hf", "checkpoints", "--output", "afile"],
            "bertkit export-hf: error: afile is a file: pass a directory as --output",
        ),
        (
            [
                "train",
                "--shards",
                "shards",
                "--output",
                "shards/run",
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ],
            "bertkit train: error: --output shards/run is inside the shards directory shards: "
            "write the run beside the data, e.g. --output runs/NAME",
        ),
        (
            [
                "train",
                "--shards",
                "shards/manifest.json",
                "--output",
                "shards",
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ],
            "bertkit train: error: --output shards is inside the shards directory shards: "
            "write the run beside the data, e.g. --output runs/NAME",
        ),
        (
            [
                "train",
                "--shards",
                "s3://b/shards",
                "--output",
                "s3://b/shards/run",
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ],
            "bertkit train: error: --output s3://b/shards/run is inside the shards directory "
            "s3://b/shards: write the run beside the data, e.g. --output runs/NAME",
        ),
        (
            [
                "train",
                "--shards",
                "gs://b/data/manifest.json",
                "--output",
                "gs://b/data/",
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ],
            "bertkit train: error: --output gs://b/data/ is inside the shards directory "
            "gs://b/data: write the run beside the data, e.g. --output runs/NAME",
        ),
        (  # a typo in --shards is said as such, not as an --output beside its parent
            ["train", "--shards", "shards/tarin", "--output", "shards/run", "--max-steps", "1"],
            "bertkit train: error: shards/tarin: no such file or directory; give a shards or "
            "documents directory, its manifest.json / _manifest.json, or a shard-*.tar",
        ),
        (
            ["export-hf", "nowhere", "--output", "out"],
            "bertkit export-hf: error: nowhere does not exist: pass a checkpoint file or directory",
        ),
        (
            ["export-hf", "run/checkpoints", "--output", "out"],
            "bertkit export-hf: error: run/checkpoints is a directory without a `latest` file, "
            "so it holds no complete checkpoint: pass a checkpoint file (step-NNNNNNNN.pt), a "
            "checkpoint directory or a run directory (its checkpoints/latest) instead",
        ),
        (
            ["export-hf", "run/checkpoints/step-00000002.pt", "--output", "run/checkpoints/hf"],
            "bertkit export-hf: error: --output run/checkpoints/hf is inside the checkpoint "
            "directory run/checkpoints: write the export beside the run, not into it",
        ),
    ],
)
def test_trainer_commands_refuse_an_output_that_is_a_file(argv, message, workdir, capsys) -> None:
    from bertkit import cli

    (workdir / "shards").mkdir()
    (workdir / "run" / "checkpoints").mkdir(parents=True)
    (workdir / "run" / "checkpoints" / "step-00000002.pt").write_bytes(b"only its path")
    if "run/checkpoints/hf" in argv:  # a run's checkpoint directory: `latest` names one
        (workdir / "run" / "checkpoints" / "latest").write_text("step-00000002.pt\n")
    before = snapshot(workdir)
    assert refused(cli.main, argv, capsys) == message
    assert snapshot(workdir) == before


def test_an_unreadable_documents_directory_is_refused(workdir, capsys, monkeypatch) -> None:
    real_listdir = os.listdir

    def listdir_refusing_docs(path="."):
        if str(path) == "docs":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir_refusing_docs)
    line = refused(vocab.main, ["--documents", "docs", "--output", "out"], capsys)
    monkeypatch.undo()
    assert line == (
        "bertkit vocab: error: --documents docs cannot be read (Permission denied): fix its "
        "permissions"
    )
    assert not (workdir / "out").exists()


@pytest.mark.parametrize(
    ("input_", "output", "message"),
    [
        (
            "gs://b/dumps/*",
            "gs://b/dumps/wiki",
            "--output gs://b/dumps/wiki is inside --input 'gs://b/dumps/*' (the glob matches it "
            "or the files it will hold): choose an --output outside the inputs",
        ),
        (
            "s3://b/d/**.parquet",
            "s3://b/d/x/out",
            "--output s3://b/d/x/out is inside --input 's3://b/d/**.parquet' (the glob matches "
            "it or the files it will hold): choose an --output outside the inputs",
        ),
        (
            "gs://b/out/books/*.txt",
            "gs://b/out/",
            "--input 'gs://b/out/books/*.txt' is inside --output gs://b/out/: choose an --output "
            "that does not hold the inputs",
        ),
        (  # a listing of g/b? would reach g/b1/: --overwrite deleted a sibling's objects
            "s3://b/in/*.xml.bz2",
            "s3://b/g/b?",
            "--output s3://b/g/b?: a directory name with *, ? or [ would be read as a glob "
            "where the stage lists it, and reach other directories: choose a name without them",
        ),
        (
            "gs://b/in/*.xml.bz2",
            "gs://b/g/a[1]",
            "--output gs://b/g/a[1]: a directory name with *, ? or [ would be read as a glob "
            "where the stage lists it, and reach other directories: choose a name without them",
        ),
        ("gs://b/dumps/*.xml.bz2", "gs://b/dumps/wiki", None),
        ("gs://b/dumps/*", "gs://b/wiki", None),
        ("gs://b/dumps/*", "s3://b/dumps/wiki", None),
    ],
)
def test_remote_paths_are_checked_by_place(input_, output, message) -> None:
    from pipelines.beam.documents import DOCUMENTS_STAGE_PATHS
    from pipelines.beam.stage_paths import path_problem

    config = wikipedia.WikipediaConfig(input=(input_,), output=output)
    assert path_problem(config, DOCUMENTS_STAGE_PATHS) == message


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize(
    ("input_", "message"),
    [
        (
            "d/loop.xml.bz2",
            "--input d/loop.xml.bz2 is a symbolic link loop (following its links leads back to "
            "them, never to a file): fix the link or leave it out of --input",
        ),
        (
            "d/*.xml.bz2",  # beside a good file, which Beam's match would read alone
            "--input d/loop.xml.bz2 is a symbolic link loop (following its links leads back to "
            "them, never to a file): fix the link or leave it out of --input",
        ),
        (
            "d/gone.xml.bz2",
            "--input d/gone.xml.bz2 is a symbolic link to nowhere.xml.bz2, which does not "
            "exist: fix the link or leave it out of --input",
        ),
    ],
)
def test_a_link_that_leads_to_no_file_is_named_for_what_it_is(
    stage, input_, message, workdir, capsys
) -> None:
    (workdir / "d" / "loop.xml.bz2").symlink_to("loop.xml.bz2")
    if "gone" in input_:
        (workdir / "d" / "gone.xml.bz2").symlink_to("nowhere.xml.bz2")
    line = refused(STAGES[stage], ["--input", input_, "--output", "out"], capsys)
    assert line == f"bertkit {stage}: error: " + message
    assert not (workdir / "out").exists()
