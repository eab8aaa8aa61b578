"""Where `bertkit inspect --report` and `--parquet` write (pipelines/inspect/output_place.py):
a FIFO, a place inside what the command reads, a folder that cannot be written or a parent
that is a file is one line and exit 1 before anything is read; names are drawn as text, not
TeX math; a vocabulary whose files disagree is one line (issue 37 items 8 and 12).

"Before anything is read" is shown as tests/test_export_parquet.py shows it: a shard is moved
away, so a run that read the data would fail on it instead."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from pipelines.io.vocabulary import build_tokenizer
from schemas.documents import Document
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.vocab import TOKENIZER_FILE, VOCAB_FILE, VOCAB_METADATA_FILE, VocabMetadata
from tests.support.s3server import client_environment
from tests.test_inspect import TRAIN_SHARD, VOCAB, inspect
from tests.test_report import DOCUMENTS, shards_with_documents, write_documents

__all__ = ["shards_with_documents"]  # the fixture, shared with tests/test_report.py

ERROR = "bertkit inspect: error: "


def refused(capsys, shards: Path, *args: str) -> tuple[int, str]:
    """Run inspect with the train shard moved away; exit code and stderr."""
    (shards / TRAIN_SHARD).rename(shards / "moved")
    try:
        code, lines, err = inspect(capsys, *args)
    finally:
        (shards / "moved").rename(shards / TRAIN_SHARD)
    assert lines == []  # not even the vocabulary note --parquet prints before reading
    return code, err


def _alarm(signum, frame):
    raise TimeoutError("inspect waited on the FIFO")


@pytest.mark.parametrize("flag", ["--report", "--parquet"])
def test_a_fifo_is_refused_without_opening_it(
    flag: str, shards_with_documents: Path, tmp_path: Path, capsys
) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)  # before the fix the report's open() waited for a writer forever
    try:
        code, err = refused(
            capsys, shards_with_documents, str(shards_with_documents), flag, str(fifo)
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert (code, err) == (
        1,
        f"{ERROR}{flag} {fifo} is not a regular file (a FIFO, device or socket): nothing was "
        "read; name a file\n",
    )


def inside(flag: str, out: Path, place: Path, what: str) -> str:
    kind = "report" if flag == "--report" else "Parquet file"
    return (
        f"{ERROR}{flag} {out} is inside {place}, the {what} this command reads, whose stage "
        f"replaces only its own files: its next --overwrite run would refuse the {kind}; "
        "nothing was read, write it outside\n"
    )


def test_a_place_inside_what_is_read_is_refused(
    shards_with_documents: Path, tmp_path: Path, capsys
) -> None:
    shards = shards_with_documents
    documents, vocab = tmp_path / "documents", tmp_path / "vocab"
    shard = shards / "seq128" / "heldout" / "shard-000000.tar"
    cases = [
        # the documents directory the shards manifest names (../documents)
        ("--report", str(shards), documents / "r.html", documents, "documents directory"),
        # the vocabulary the manifest names
        ("--report", str(shards), vocab / "r.html", vocab, "vocabulary"),
        ("--parquet", str(shards), vocab / "x.parquet", vocab, "vocabulary"),
        # beside a single shard
        ("--report", str(shard), shard.parent / "r.html", shard.parent, "shard's directory"),
        # a shards directory: --parquet refuses it as --report always did
        ("--parquet", str(shards), shards / "x.parquet", shards, "shards directory"),
    ]
    for flag, target, out, place, what in cases:
        code, err = refused(capsys, shards, target, flag, str(out))
        assert (code, err) == (1, inside(flag, out, place, what)), (flag, target, out)
        assert not out.exists()
    # a documents directory given alone, and the --vocab it is read with
    alone = write_documents(tmp_path / "more", DOCUMENTS)
    code, _, err = inspect(
        capsys, str(alone), "--report", str(vocab / "r.html"), "--vocab", str(vocab)
    )
    assert (code, err) == (1, inside("--report", vocab / "r.html", vocab, "vocabulary"))


def test_a_place_inside_an_s3_shards_directory_is_refused(
    s3_server, shards_with_documents: Path, monkeypatch, capsys
) -> None:
    endpoint, client = s3_server
    bucket = s3_server.bucket("report-inside")
    for name, value in {**client_environment(endpoint), "NO_PROXY": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(name, value)
    manifest = json.loads((shards_with_documents / SHARDS_MANIFEST_NAME).read_text())
    manifest["inputs"], manifest["vocab"]["path"] = [], ""
    client.put_object(
        Bucket=bucket, Key=f"shards/{SHARDS_MANIFEST_NAME}", Body=json.dumps(manifest)
    )
    # no shard uploaded: a run that read the data would fail on the first one
    out = f"s3://{bucket}/shards/report.html"
    code, lines, err = inspect(capsys, f"s3://{bucket}/shards", "--report", out)
    assert (code, lines) == (1, [])
    assert err == (
        f"{ERROR}--report {out} is inside s3://{bucket}/shards, the shards directory this "
        "command reads, whose stage replaces only its own files: its next --overwrite run "
        "would refuse the report; nothing was read, write it outside\n"
    )
    listed = client.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == [f"shards/{SHARDS_MANIFEST_NAME}"]


@pytest.mark.parametrize("flag", ["--report", "--parquet"])
def test_a_parent_that_is_a_file_is_refused_first(
    flag: str, shards_with_documents: Path, tmp_path: Path, capsys
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    out = notes / "sub" / "out.html"
    code, err = refused(capsys, shards_with_documents, str(shards_with_documents), flag, str(out))
    assert (code, err) == (
        1,
        f"{ERROR}{flag} {out}: {notes} is a file, not a folder, so nothing can be written "
        "under it: nothing was read; name another place\n",
    )
    assert notes.read_text() == "mine\n"


@pytest.mark.parametrize("flag", ["--report", "--parquet"])
def test_a_read_only_place_is_refused_first(
    flag: str, shards_with_documents: Path, tmp_path: Path, capsys
) -> None:
    if os.geteuid() == 0:  # root writes through permissions: /sys is never writable
        folder = Path("/sys")
    else:
        folder = tmp_path / "read-only"
        folder.mkdir(mode=0o555)
    out = folder / "bertkit-out"
    code, err = refused(capsys, shards_with_documents, str(shards_with_documents), flag, str(out))
    assert code == 1
    assert err.startswith(f"{ERROR}{flag} {out}: {folder} cannot be written (")
    assert err.endswith("): nothing was read; name a place you can write to\n")
    assert err.count("\n") == 1 and not out.exists()


def test_names_are_drawn_as_text_not_math(tmp_path: Path, capsys) -> None:
    # `$\\nope$` is TeX math matplotlib cannot parse: before, the report ended in a ValueError;
    # the source names the bars, the directory names the legend of sentences per document.
    named = [
        Document(f"$\\nope$/{i}", "$\\nope$", "t", d.sentences) for i, d in enumerate(DOCUMENTS)
    ]
    first = write_documents(tmp_path / "$x^2$", named)
    second = write_documents(tmp_path / "$\\nope$", DOCUMENTS)
    for directory in (first, second):
        out = tmp_path / f"{directory.name}.html"
        code, lines, err = inspect(capsys, str(directory), "--report", str(out))
        assert (code, err) == (0, "")
        assert lines[-1].startswith(f"report: {out} (")


def test_a_vocabulary_whose_files_disagree_is_one_line(tmp_path: Path, capsys) -> None:
    import hashlib

    vocab = tmp_path / "vocab"
    vocab.mkdir()
    text = "".join(f"{t}\n" for t in VOCAB).encode()
    swapped = [*VOCAB[:5], VOCAB[6], VOCAB[5], *VOCAB[7:]]  # ids 5 and 6 exchanged
    tokenizer = build_tokenizer(swapped, cased=False).to_str().encode()
    (vocab / VOCAB_FILE).write_bytes(text)
    (vocab / TOKENIZER_FILE).write_bytes(tokenizer)
    specials = {t: VOCAB.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    metadata = VocabMetadata(
        vocab_size=len(VOCAB), cased=False, num_unused=0, special_tokens=specials, sample={},
        inputs=[], config={}, vocab_sha256=hashlib.sha256(text).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer).hexdigest(),
    )  # fmt: skip
    (vocab / VOCAB_METADATA_FILE).write_text(metadata.to_json())
    documents = write_documents(tmp_path / "documents", DOCUMENTS)
    out = tmp_path / "report.html"
    code, lines, err = inspect(capsys, str(documents), "--report", str(out), "--vocab", str(vocab))
    assert (code, lines) == (1, [])
    assert err == (
        f"{ERROR}{VOCAB_FILE} and {TOKENIZER_FILE} in {vocab} disagree: id 5 is "
        f"{VOCAB[5]!r} in {VOCAB_FILE} but {VOCAB[6]!r} in {TOKENIZER_FILE}; they come from "
        "different runs: rerun `bertkit vocab`\n"
    )
    assert not out.exists()
