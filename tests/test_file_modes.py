"""Files bertkit writes under a temporary name and renames into place get the user's umask,
as a plain `open()` gives them: `export-hf`'s model.safetensors (safetensors writes 0600) and
the data report (tempfile.mkstemp's 0600) beside the other files, not readable by the owner
alone."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.inspect.report import write_output
from pipelines.io import storage
from tests.test_export import write_checkpoint
from trainer.export import export_hf


@pytest.fixture
def umask(request) -> Iterator[int]:
    """The process's umask set to the test's parameter, and restored after it."""
    earlier = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(earlier)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002], indirect=True)
def test_current_umask_is_read_without_changing_it(umask: int) -> None:
    assert storage.current_umask() == umask
    assert os.umask(umask) == umask  # still what the test set


@pytest.mark.parametrize(
    ("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)], indirect=["umask"]
)
def test_every_exported_file_has_the_umask_s_mode(
    umask: int, expected: int, sample_vocab: Path, tmp_path: Path
) -> None:
    checkpoint = write_checkpoint(tmp_path / "checkpoints", sample_vocab)
    written = export_hf(checkpoint, tmp_path / "hf")
    modes = {Path(p).name: mode(Path(p)) for p in written}
    assert modes == {
        "model.safetensors": expected,
        "vocab.txt": expected,
        "tokenizer.json": expected,
        "tokenizer_config.json": expected,
        "special_tokens_map.json": expected,
        "config.json": expected,
    }


@pytest.mark.parametrize(
    ("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)], indirect=["umask"]
)
def test_the_report_page_has_the_umask_s_mode(umask: int, expected: int, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_output(str(page), b"<html></html>")
    assert (page.read_bytes(), mode(page)) == (b"<html></html>", expected)
