"""An output that cannot be written, said in one line naming --output and the OS's words:
a read-only one before any work (exit 2), a disk that fills mid-run
(exit 1, as for an input not read to its end), never Beam's traceback.

The file systems are real: a tmpfs mounted read-only, or of a few kB, in a private mount
namespace (`unshare -rm`, which needs no root: permissions would not stop root, a read-only
mount does). /dev/full gives a real ENOSPC where no namespace can be made."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import books
from pipelines.beam import runner
from pipelines.beam.runner import stage_main, write_failure, write_failure_message

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA = PROJECT_ROOT / "data"


def _can_mount_privately() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(
    not _can_mount_privately(),
    reason="no private mount namespace (unshare -rm) for a real read-only or full file system",
)


def run_on_tmpfs(mount_options: str, directory: Path, *argv: str) -> subprocess.CompletedProcess:
    """`bertkit ARGV` with a fresh tmpfs (`mount_options`) on `directory`, seen by it alone."""
    directory.mkdir(exist_ok=True)
    script = 'mount -t tmpfs -o "$0" tmpfs "$1" && shift && exec "$@"'
    return subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            script,
            mount_options,
            str(directory),
            sys.executable,
            "-m",
            "bertkit",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PROJECT_ROOT,
        check=False,
    )


def stage_argv(stage: str, output: Path, sample_documents, sample_vocab) -> list[str]:
    wiki, book = sample_documents
    return {
        "wikipedia": ["wikipedia", "--input", str(next((DATA / "wikipedia").glob("*.bz2")))],
        "books": ["books", "--input", str(DATA / "books" / "*.txt")],
        "vocab": ["vocab", "--documents", str(wiki), str(book), "--vocab-size", "2000"],
        "examples": ["examples", "--documents", str(wiki), str(book), "--vocab", str(sample_vocab)],
    }[stage] + ["--output", str(output)]


STAGES = ["wikipedia", "books", "vocab", "examples"]


@needs_mount
@pytest.mark.parametrize("stage", STAGES)
def test_a_read_only_output_is_refused_before_any_work(
    stage, tmp_path, sample_documents, sample_vocab
) -> None:
    output = tmp_path / "ro" / "out"
    argv = stage_argv(stage, output, sample_documents, sample_vocab)
    done = run_on_tmpfs("ro,size=64k", tmp_path / "ro", *argv)
    assert done.returncode == 2
    assert done.stderr == (
        f"bertkit {stage}: error: --output {output} cannot be written (Read-only file system): "
        "choose an --output on a writable file system\n"
    )


@needs_mount
@pytest.mark.parametrize("stage", STAGES)
def test_a_disk_that_fills_mid_run_is_one_line_not_a_traceback(
    stage, tmp_path, sample_documents, sample_vocab
) -> None:
    output = tmp_path / "small" / "out"
    argv = stage_argv(stage, output, sample_documents, sample_vocab)
    done = run_on_tmpfs("size=16k", tmp_path / "small", *argv)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"bertkit {stage}: error: writing --output {output} failed (No space left on device): "
        "free space there or choose another --output, then rerun with --overwrite"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod-555 directory")
def test_an_output_in_a_directory_without_write_permission_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "in.txt").write_text("A book of one line with enough words in it.\n")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    with pytest.raises(SystemExit) as exited:
        books.main(["--input", str(tmp_path / "in.txt"), "--output", str(locked / "out")])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"bertkit books: error: --output {locked / 'out'} cannot be written (Permission denied "
        f"in {locked}): fix its permissions or choose another --output\n"
    )


def real_enospc() -> OSError:
    """The error a write to a full disk gives, from the kernel (/dev/full)."""
    with pytest.raises(OSError) as raised, open("/dev/full", "wb", buffering=0) as full:
        full.write(b"x")
    assert raised.value.errno == errno.ENOSPC
    return raised.value


def as_beam_raises_it(error: OSError) -> RuntimeError:
    """Beam's re-raise of a DoFn's OSError: a RuntimeError naming the step, raised while the
    OSError is handled (apache_beam/runners/common.py, _reraise_augmented)."""
    try:
        try:
            raise error
        except OSError:
            raise RuntimeError(  # noqa: B904 - Beam raises it so: the OSError is its context
                f"OSError: {error} [while running 'ExtractWikipedia/ExtractDocuments']"
            )
    except RuntimeError as wrapped:
        return wrapped


def test_a_full_disk_is_found_behind_beams_error_or_in_its_text() -> None:
    enospc = real_enospc()
    assert write_failure(as_beam_raises_it(enospc)) is enospc
    # From a worker process only the text comes back.
    text_only = RuntimeError(
        "Pipeline failed: Traceback (most recent call last):\n  ...\nOSError: [Errno 28] No "
        "space left on device [while running 'CountWords']\n"
    )
    found = write_failure(text_only)
    assert (type(found), found.errno, found.strerror) == (
        OSError,
        errno.ENOSPC,
        "No space left on device",
    )
    assert write_failure(RuntimeError("OSError: [Errno 30] Read-only file system")).errno == (
        errno.EROFS
    )
    # Errors of reading are not the output's: they go on up as they are.
    assert write_failure(as_beam_raises_it(FileNotFoundError(2, "No such file"))) is None
    assert write_failure(RuntimeError("OSError: [Errno 5] Input/output error")) is None


@pytest.mark.parametrize(
    ("number", "message"),
    [
        (
            errno.ENOSPC,
            "writing --output out/wiki failed (No space left on device): free space "
            "there or choose another --output, then rerun with --overwrite",
        ),
        (
            errno.EDQUOT,
            "writing --output out/wiki failed (Disk quota exceeded): free space "
            "there or choose another --output, then rerun with --overwrite",
        ),
        (
            errno.EROFS,
            "writing --output out/wiki failed (Read-only file system): choose an "
            "--output on a writable file system, then rerun with --overwrite",
        ),
    ],
)
def test_the_line_names_the_output_and_the_os_words(number, message) -> None:
    failure = OSError(number, os.strerror(number))
    assert write_failure_message(failure, ("--output", "out/wiki")) == message


def test_stage_main_says_a_full_disk_in_one_line_with_exit_1(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(runner, "_stage_output", ("--output", str(tmp_path / "out")))

    def run_that_fills_the_disk(argv):
        raise as_beam_raises_it(real_enospc())

    with pytest.raises(SystemExit) as exited:
        stage_main(run_that_fills_the_disk, [], "bertkit wikipedia")
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        f"bertkit wikipedia: error: writing --output {tmp_path / 'out'} failed (No space left "
        "on device): free space there or choose another --output, then rerun with --overwrite\n"
    )


def test_stage_main_says_any_other_error_with_its_traceback(monkeypatch, capsys) -> None:
    def run_with_a_bug(argv):
        raise as_beam_raises_it(OSError(errno.EIO, "Input/output error"))

    with pytest.raises(SystemExit) as exited:
        stage_main(run_with_a_bug, [], "bertkit wikipedia")
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith(
        "RuntimeError: OSError: [Errno 5] Input/output error [while running "
        "'ExtractWikipedia/ExtractDocuments']\n"
    )


def test_beams_logged_traceback_of_a_full_disk_is_held_back() -> None:
    held = logging.LogRecord("apache_beam.runners.common", logging.ERROR, "", 0, "x", (), None)
    error = as_beam_raises_it(real_enospc())
    held.exc_info = (RuntimeError, error, None)
    assert runner._hold_back_write_failures(held) is False
    worker = logging.LogRecord(
        "apache_beam.runners.portability.local_job_service",
        logging.ERROR,
        "",
        0,
        "Worker: ... message: \"OSError: [Errno 28] No space left on device [while running 'X']",
        (),
        None,
    )
    assert runner._hold_back_write_failures(worker) is False
    other = logging.LogRecord("apache_beam", logging.ERROR, "", 0, "KeyError: 'x'", (), None)
    assert runner._hold_back_write_failures(other) is True
