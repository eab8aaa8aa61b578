"""`bertkit books` on damaged or unusual input: file names, encodings, line ends, control
characters, NUL bytes, long lines; both formats read them the same way."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipelines import books
from pipelines.beam.documents import read_manifest
from schemas import REJECTS_DIR


def test_a_book_name_that_is_not_utf8_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "good.txt").write_text("The river ran north past the old town.\n")
    with open(os.fsencode(src) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"The lake froze over in winter.\n")
    for fmt in ("files", "lines"):
        out = tmp_path / f"out-{fmt}"
        with pytest.raises(SystemExit) as stop:
            books.main(["--input", f"{src}/*.txt", "--output", str(out), "--format", fmt])
        assert stop.value.code == 2
        assert capsys.readouterr().err == (
            f"bertkit books: error: {src}/caf\\xe9.txt: the file's name is not UTF-8, and the "
            "documents' ids, the rejects and the manifest name their input in UTF-8 text: "
            "rename it (e.g. convmv -f latin1 -t utf8 FILE) or leave it out of --input\n"
        )
        assert not out.exists()


def documents(directory: Path) -> dict[str, list[str]]:
    table = ds.dataset(directory).to_table().to_pylist() if directory.exists() else []
    return {row["id"]: row["sentences"] for row in table}


def rejects(out: Path) -> list[tuple[str, str, str, str]]:
    return sorted(
        (Path(r["input"]).name, r["position"], r["reason"], r["error"])
        for path in (out / REJECTS_DIR).glob("*.jsonl")
        for r in map(json.loads, path.read_text().splitlines())
    )


def run(tmp_path: Path, files: dict[str, bytes], *flags: str) -> tuple[int, Path]:
    (tmp_path / "in").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (tmp_path / "in" / name).write_bytes(data)
    out = tmp_path / "out"
    code = books.run(["--input", str(tmp_path / "in" / "*"), "--output", str(out), *flags])
    return code, out


ONE = "“Winston Smith,” she said, ‘his chin nuzzled into his breast’ — in the wind."
TWO = "Café owners in the naïve town said the façade was beautiful to them."


def test_one_cp1252_line_costs_only_that_line_its_utf8(tmp_path: Path) -> None:
    mixed = f"{ONE}\n\n{TWO}\n\n".encode() + b"Another paragraph with \x93cp1252 quotes\x94 here.\n"
    undefined = ONE.encode("cp1252") + b"\n\nA byte \x81 undefined in cp1252 and \x93quotes\x94.\n"
    code, out = run(tmp_path, {"mixed.txt": mixed, "undefined.txt": undefined})
    assert code == 0
    assert documents(out) == {
        "books/mixed": [ONE, TWO, "Another paragraph with “cp1252 quotes” here."],
        "books/undefined": [ONE, "A byte undefined in cp1252 and “quotes”."],
    }
    counts = read_manifest(str(out)).counts
    # Files with a line that was not UTF-8, those lines, and the undefined byte removed.
    assert (counts["decoded_with_fallback"], counts["lines_decoded_with_fallback"]) == (2, 3)
    assert counts["control_characters_removed"] == 1


def test_utf16_books_with_a_mark_are_read_and_without_one_refused_saying_how(
    tmp_path: Path,
) -> None:
    text = f"{ONE}\r\n\r\n{TWO}\r\n"
    code, out = run(
        tmp_path,
        {
            "le.txt": codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
            "be.txt": codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
            "nomark.txt": text.encode("utf-16-le"),
        },
    )
    assert code == 0
    assert documents(out) == {"books/le": [ONE, TWO], "books/be": [ONE, TWO]}
    assert read_manifest(str(out)).counts["decoded_from_utf16"] == 2
    assert rejects(out) == [
        (
            "nomark.txt",
            "file",
            "not_text",
            "looks like UTF-16LE text without a byte-order mark (a NUL at every other byte), "
            "which cannot be told from binary data for sure: convert it to UTF-8 first, e.g. "
            "iconv -f UTF-16LE -t UTF-8 FILE > FILE.utf8.txt",
        )
    ]


def test_a_stray_nul_is_removed_and_counted_wherever_it_is(tmp_path: Path) -> None:
    filler = "".join(f"Filler paragraph number {i} of the book.\n\n" for i in range(300))
    early = f"{ONE}\n\nA stray\0 byte here.\n\n{filler}".encode()
    late = f"{ONE}\n\n{filler}A stray\0 byte here.\n".encode()
    assert len(filler) > 8192
    code, out = run(tmp_path, {"early.txt": early, "late.txt": late})
    assert code == 0
    docs = documents(out)
    assert docs["books/early"][:2] == [ONE, "A stray byte here."]
    assert docs["books/late"][-1] == "A stray byte here."
    assert read_manifest(str(out)).counts["control_characters_removed"] == 2
    assert rejects(out) == []


LINES = {  # one sentence a line, in every shape the files format reads too
    "cr.txt": b"First one here.\rSecond one here.\r\rThird one here.\r",
    "bom.txt": b"\xef\xbb\xbfFirst one here.\nSecond one here.\n\nThird one here.\n",
    "utf16.txt": codecs.BOM_UTF16_LE
    + "First one here.\nSecond one here.\n\nThird one here.\n".encode("utf-16-le"),
    "ctrl.txt": b"First\0 one\x1b here."
    + b" " * 60
    + b"\nSecond\x0cone\there.\n\nThird\x7f one here.\x1a\n",
    "cp1252.txt": b"First one h\xe9re.\nSecond one here.\n\n\x93Third\x94 one here.\n",
}


def test_the_lines_format_reads_bytes_as_the_files_format_does(tmp_path: Path) -> None:
    code, out = run(tmp_path / "lines", LINES, "--format", "lines")
    assert code == 0
    first, third = {"cp1252": "First one hére."}, {"cp1252": "“Third” one here."}
    assert documents(out) == {
        f"bookcorpus/{name}/{number}": sentences
        for name in ("cr", "bom", "utf16", "ctrl", "cp1252")
        for number, sentences in enumerate(
            [
                [first.get(name, "First one here."), "Second one here."],
                [third.get(name, "Third one here.")],
            ]
        )
    }
    code, files_out = run(tmp_path / "files", LINES, "--min_paragraph_words", "0")
    assert code == 0
    assert documents(files_out) == {
        f"books/{name}": [
            first.get(name, "First one here."),
            "Second one here.",
            third.get(name, "Third one here."),
        ]
        for name in ("cr", "bom", "utf16", "ctrl", "cp1252")
    }
    for directory in (out, files_out):
        counts = read_manifest(str(directory)).counts
        assert counts["control_characters_removed"] == 4  # NUL, ESC, DEL, SUB; FF is a space
        assert (counts["decoded_with_fallback"], counts["lines_decoded_with_fallback"]) == (1, 2)
        assert counts["decoded_from_utf16"] == 1


def test_the_lines_format_refuses_what_the_files_format_refuses(tmp_path: Path) -> None:
    binary = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10
    code, out = run(tmp_path, {"empty.txt": b"", "binary.txt": binary}, "--format", "lines")
    assert code == 1  # no document, every input rejected
    assert rejects(out) == [
        (
            "binary.txt",
            "file",
            "not_text",
            "looks binary: 30 of its first 160 bytes are control characters (30 of them NUL), "
            "and text holds few or none",
        ),
        ("empty.txt", "file", "not_text", "file is empty"),
    ]


def test_the_lines_format_cuts_a_long_line_as_the_files_format_does(tmp_path: Path) -> None:
    long_line = ("word " * 4000).strip()  # 19,999 characters, no full stop
    data = f"Short one here.\n{long_line}\n".encode()
    code, out = run(tmp_path / "lines", {"para.txt": data}, "--format", "lines")
    assert code == 0
    cut = [("word " * 3276).strip(), ("word " * 724).strip()]
    assert documents(out) == {"bookcorpus/para/0": ["Short one here.", *cut]}
    assert read_manifest(str(out)).counts["sentences_cut"] == 1
    code, files_out = run(tmp_path / "files", {"para.txt": data.replace(b"\n", b"\n\n")})
    assert documents(files_out) == {"books/para": ["Short one here.", *cut]}
    assert read_manifest(str(files_out)).counts["sentences_cut"] == 1


DAMAGED_AT = "One here.\nTwo here.\nThree here.\n\nFour here.\nFive here.\nSix he"
DAMAGED = (
    codecs.BOM_UTF16_LE
    + DAMAGED_AT.encode("utf-16-le")
    + b"\x00\xdc"  # a lone low surrogate, inside line 7
    + "re.\nSeven here.\n".encode("utf-16-le")
)


@pytest.mark.parametrize("fmt", ["lines", "files"])
def test_damaged_utf16_fails_the_input_and_keeps_what_came_before(tmp_path: Path, fmt: str) -> None:
    good = b"A good book of one sentence here.\n"
    code, out = run(tmp_path, {"bad.txt": DAMAGED, "good.txt": good}, "--format", fmt)
    assert code == 1  # bad.txt could not be read to its end
    assert 2 + 2 * len(DAMAGED_AT) == 124  # the mark, then the text up to "Six he"
    assert rejects(out) == [
        (
            "bad.txt",
            "decompressed byte 124",
            "corrupt_input",
            f"cannot be read to its end: {tmp_path / 'in' / 'bad.txt'}: not UTF-16LE as its "
            "byte order mark says (illegal encoding): the file is damaged at decompressed "
            "byte 124",
        )
    ]
    manifest = read_manifest(str(out))
    assert [Path(f["input"]).name for f in manifest.failed_inputs] == ["bad.txt"]
    assert manifest.rejected == {"corrupt_input": 1}
    if fmt == "lines":  # every whole line before the damage, the document it ended included
        assert documents(out) == {
            "bookcorpus/bad/0": ["One here.", "Two here.", "Three here."],
            "bookcorpus/bad/1": ["Four here.", "Five here."],
            "bookcorpus/good/0": ["A good book of one sentence here."],
        }
        assert (manifest.counts["documents"], manifest.counts["sentences"]) == (3, 6)
        assert manifest.counts["decoded_from_utf16"] == 1
    else:  # a book not read to its end is no book, as a truncated .gz is
        assert documents(out) == {"books/good": ["A good book of one sentence here."]}
        assert (manifest.counts["documents"], manifest.counts["sentences"]) == (1, 1)
