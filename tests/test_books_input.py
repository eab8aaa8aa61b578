"""`bertkit books` on damaged or unusual input: file names, encodings, line ends, control
characters, NUL bytes, long lines; both formats read them the same way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines import books


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
