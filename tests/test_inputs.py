"""What the documents stages read, listed before any work (pipelines/beam/inputs.py): a glob
in the working directory, one file under several spellings, absolute and relative paths
together, and files whose documents would share ids; a directory given twice to examples."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipelines import books, corpus
from pipelines.beam.inputs import (
    InputsError,
    check_names,
    common_root,
    expand_inputs,
    name_under,
)
from pipelines.books.reading import book_name
from pipelines.examples.config import ExamplesConfigError
from pipelines.examples.plan import read_documents_inputs
from pipelines.io.places import repeated_place

ROOT = Path(__file__).resolve().parents[1]
STORY = "The river ran north past the old town.\n\nIn winter the lake froze over at last.\n"


def ids(directory: Path) -> list[str]:
    return sorted(ds.dataset(directory).to_table(columns=["id"]).column("id").to_pylist())


@pytest.fixture
def books_here(tmp_path: Path, monkeypatch) -> Path:
    """a.txt in the working directory, sub/a.txt below it (5 and 9 words a paragraph)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text(STORY)
    (tmp_path / "sub" / "a.txt").write_text(STORY.replace("river", "road"))
    return tmp_path


def test_a_glob_without_a_directory_matches_in_the_working_directory(books_here) -> None:
    size = len(STORY)
    assert expand_inputs(["*.txt"]) == [{"path": "a.txt", "bytes": size}]
    assert expand_inputs(["a*", "sub/*.txt"]) == [
        {"path": "a.txt", "bytes": size},
        {"path": "sub/a.txt", "bytes": size - 1},
    ]


def test_one_file_under_several_spellings_is_read_once(books_here) -> None:
    os.symlink(books_here / "a.txt", books_here / "link.txt")
    os.link(books_here / "a.txt", books_here / "hard.txt")
    spellings = ["a.txt", "./a.txt", "sub/../a.txt", "link.txt", "hard.txt", "*.txt"]
    assert [item["path"] for item in expand_inputs(spellings)] == ["a.txt"]


def test_absolute_and_relative_inputs_are_all_made_absolute(books_here) -> None:
    found = expand_inputs([str(books_here / "a.txt"), "sub/a.txt"])
    paths = [item["path"] for item in found]
    assert paths == [str(books_here / "a.txt"), str(books_here / "sub" / "a.txt")]
    assert common_root(paths) == str(books_here)


def test_names_under_the_working_directory_keep_their_folders() -> None:
    assert common_root(["a.txt", "sub/a.txt"]) == ""
    assert [name_under(p, "") for p in ("a.txt", "sub/a.txt")] == ["a.txt", "sub/a.txt"]
    assert common_root(["gs://b/x/a.txt", "/d/a.txt"]) == ""
    assert name_under("gs://b/x/a.txt", "") == "a.txt"
    assert common_root(["books/a.txt", "books/x/b.txt"]) == "books"


def test_books_of_one_name_in_two_folders_get_two_ids(books_here) -> None:
    assert books.run(["--input", "a.txt", "sub/a.txt", "--output", "out"]) == 0
    assert ids(books_here / "out") == ["books/a", "books/sub/a"]
    assert books.run(["--input", "*.txt", "--output", "one"]) == 0
    assert ids(books_here / "one") == ["books/a"]


def test_files_whose_documents_would_share_ids_are_refused_naming_both(books_here) -> None:
    (books_here / "a.txt.gz").write_bytes(gzip.compress(STORY.encode()))
    with pytest.raises(InputsError) as refused:
        check_names(expand_inputs(["a.txt*"]), book_name)
    assert str(refused.value) == (
        "--input names a.txt and a.txt.gz, whose documents would share the ids of 'a' (two "
        "copies of one text, or files of one name in two places): give one of them, or "
        "rename one"
    )
    assert str(refused.value.with_flag("--books")).startswith("--books names a.txt and")
    # The corpus keeps suffixes in its ids: a.jsonl and a.jsonl.gz are two files.
    (books_here / "a.jsonl").write_text('{"text": "One two three four five."}\n')
    (books_here / "a.jsonl.gz").write_bytes(gzip.compress(b'{"text": "Six seven eight."}\n'))
    assert corpus.run(["--input", "a.jsonl*", "--output", "c"]) == 0
    assert ids(books_here / "c") == ["corpus/a.jsonl.gz:1", "corpus/a.jsonl:1"]


def _command(module: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTKIT_PROGRESS": "0"}
    command = [sys.executable, "-m", module, *argv]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_refusals_are_one_line_naming_the_command_s_flag(books_here) -> None:
    (books_here / "a.txt.bz2").write_bytes(b"")
    done = _command("pipelines.books", "--input", "a.txt*", "--output", "o", cwd=books_here)
    assert (done.returncode, done.stderr) == (
        2,
        "bertkit books: error: --input names a.txt and a.txt.bz2, whose documents would share "
        "the ids of 'a' (two copies of one text, or files of one name in two places): give "
        "one of them, or rename one\n",
    )
    assert not (books_here / "o").exists()
    flags = ["--books", "*.text", "--output", "chain", "--vocab-size", "500"]
    done = _command("pipelines.chain", *flags, cwd=books_here)
    assert (done.returncode, done.stderr) == (
        2,
        "bertkit chain: error: --books '*.text' matches no file: check the path, and quote a glob so "
        "that bertkit, not the shell, expands it\n",
    )


def test_a_directory_given_twice_under_any_spelling_is_refused(tmp_path) -> None:
    (tmp_path / "docs").mkdir()
    twice = [str(tmp_path / "docs"), f"{tmp_path}/docs/../docs/"]
    assert repeated_place(twice) == (
        f"--documents {twice[1]} is the same directory as --documents {twice[0]}"
    )
    assert repeated_place([twice[0], twice[0] + "/"]) == f"--documents {twice[0]}/ is given twice"
    assert repeated_place(["s3://b/docs", "s3://b/other"]) is None
    with pytest.raises(ExamplesConfigError) as refused:
        read_documents_inputs(twice)  # `bertkit examples --documents`, before any manifest
    assert str(refused.value) == (
        f"--documents {twice[1]} is the same directory as --documents {twice[0]}: its "
        "documents would make examples twice; name each directory once"
    )


def test_a_file_s_own_name_holding_glob_characters_is_that_file(books_here) -> None:
    (books_here / "br[1].txt").write_text(STORY)
    (books_here / "br1.txt").write_text("Another story.\n")
    assert expand_inputs(["br[1].txt"]) == [{"path": "br[1].txt", "bytes": len(STORY)}]
    assert expand_inputs(["br[[]1].txt"]) == [{"path": "br[1].txt", "bytes": len(STORY)}]
    assert expand_inputs(["br?.txt"]) == [{"path": "br1.txt", "bytes": 15}]
    done = _command("pipelines.books", "--input", "br[[]1].txt", "--output", "o", cwd=books_here)
    assert (done.returncode, done.stderr) == (0, "")  # and no warning about the bracket
    assert ids(books_here / "o") == ["books/br[1]"]


def test_a_glob_matching_a_directory_is_refused_and_double_star_reads_below(books_here) -> None:
    (books_here / "sub.txt").mkdir()  # a Spark-style folder named as a file
    (books_here / "sub.txt" / "part-0.txt").write_text(STORY)
    done = _command("pipelines.books", "--input", "*.txt", "--output", "o", cwd=books_here)
    assert (done.returncode, done.stderr) == (
        2,
        "bertkit books: error: --input '*.txt' matches the directory sub.txt, whose files it "
        "does not read: narrow the glob to files (e.g. by their suffix), or give './**' to "
        "read every file below\n",
    )
    assert [item["path"] for item in expand_inputs(["sub.txt/**"])] == ["sub.txt/part-0.txt"]
    (books_here / "a.txt").unlink()
    (books_here / "sub" / "a.txt").unlink()
    done = _command("pipelines.books", "--input", "**/*.txt", "--output", "o", cwd=books_here)
    assert done.returncode == 0, done.stderr  # a `**` glob reads the files below its folders
    assert ids(books_here / "o") == ["books/part-0"]  # named under their common folder


def test_a_book_whose_name_holds_a_newline_is_refused_before_any_work(books_here) -> None:
    (books_here / "a\nERROR forged.txt").write_text(STORY)
    done = _command("pipelines.books", "--input", "a*.txt", "--output", "o", cwd=books_here)
    assert (done.returncode, done.stderr) == (
        2,
        "bertkit books: error: a\\nERROR forged.txt: the file's name holds a control character "
        "(U+000A at character 2), which would break the ids, log lines and messages that name "
        "it: rename it or leave it out of --input\n",
    )
    assert not (books_here / "o").exists()
