"""A user sees bertkit's own lines and Beam's warnings that matter, nothing else.

Each command runs as a user runs it, in a process of its own, and its whole stderr is
compared. The gcp extra's Google clients are hidden (tests/support/without_modules.py), as
in the README's install, where Beam logs a notice about BigQuery when it is imported and
each worker process of a multi-process run printed its INFO lines.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.beam.worker_processes import module_of, worker_record
from pipelines.command.startup import BROKEN_PIPE_EXIT, exit_quietly_on_broken_pipe
from tests.support.without_modules import ROOT, environment

WITHOUT_GCP = ("apitools", "google.cloud", "google.api_core", "google.auth")
REJECTED_B = (
    "WARNING pipelines.beam.documents: rejected corpus/b (text_missing): no 'text' field "
    "(the record's keys: id, body): name the field that holds the text with --text-field\n"
)


def _core_environment(tmp_path: Path) -> dict[str, str]:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    return {**environment(shim, WITHOUT_GCP), "BERTKIT_PROGRESS": "0"}


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=tmp_path,
        env=_core_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"id": "a", "text": "One sentence here. Another sentence there."}\n'
        '{"id": "b", "body": "No text field."}\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("command", ["wikipedia", "corpus", "chain"])
def test_a_stages_help_through_bertkit_has_no_beam_notice(tmp_path: Path, command: str) -> None:
    done = _run(tmp_path, "-m", "bertkit", command, "--help")
    assert done.returncode == 0
    assert done.stdout.startswith(f"usage: bertkit {command} ")
    assert done.stderr == ""


def test_a_stage_run_through_bertkit_prints_its_own_lines_only(tmp_path: Path) -> None:
    done = _run(
        tmp_path, "-m", "bertkit", "corpus", "--input", str(_corpus(tmp_path)), "--output", "out"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == REJECTED_B
    assert done.stdout.startswith("out: 1 documents, 2 sentences")


def test_worker_processes_log_no_info_and_their_warnings_as_the_stages(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "-m",
        "bertkit",
        "corpus",
        "--input",
        str(_corpus(tmp_path)),
        "--output",
        "out",
        "--direct_num_workers",
        "2",
        "--direct_running_mode",
        "multi_processing",
    )
    assert done.returncode == 0, done.stderr
    # The same stderr as the one-process run: no INFO line of a worker, no notice.
    assert done.stderr == REJECTED_B
    assert done.stdout.startswith("out: 1 documents, 2 sentences")


def _beams_record(level: int, entry: str) -> logging.LogRecord:
    """A record as Beam's local job service logs a worker's (its LogEntry as text)."""
    return logging.LogRecord(
        "apache_beam.runners.portability.local_job_service",
        level,
        "local_job_service.py",
        367,
        "Worker: %s",
        (entry,),
        None,
    )


def test_a_workers_record_reads_as_the_stages_own() -> None:
    warning = _beams_record(
        logging.WARNING,
        "severity: WARN timestamp {   seconds: 1795798031   nanos: 400806903 } message: "
        '"rejected corpus/a (text_missing): no \\\'text\\\' field" instruction_id: "bundle_4" '
        f'log_location: "{ROOT}/pipelines/beam/documents.py:235" thread: "Thread-13" ',
    )
    assert worker_record(warning)
    assert (warning.name, warning.getMessage()) == (
        "pipelines.beam.documents",
        "rejected corpus/a (text_missing): no 'text' field",
    )
    failed = _beams_record(
        logging.ERROR,
        'severity: ERROR message: "it broke" trace: "Traceback (most recent call last):\\n  '
        'ValueError: x\\n" log_location: "/v/lib/python3.11/site-packages/apache_beam/'
        'runners/worker/sdk_worker.py:9" ',
    )
    assert worker_record(failed)
    assert failed.name == "apache_beam.runners.worker.sdk_worker"
    assert failed.getMessage() == "it broke\nTraceback (most recent call last):\n  ValueError: x"
    notice = _beams_record(
        logging.WARNING, 'severity: WARN message: "No semi_persistent_directory found:  User …"'
    )
    info = _beams_record(logging.INFO, 'severity: INFO message: "Control channel established."')
    assert not worker_record(notice) and not worker_record(info)
    assert module_of("/somewhere/else.py:3") is None


def _run_into_a_closed_pipe(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """Python `argv` with stdout a real pipe whose reader has gone before it writes."""
    reading, writing = os.pipe()
    os.close(reading)
    try:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=tmp_path,
            env=_core_environment(tmp_path),
            stdout=writing,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(writing)


def test_a_closed_pipe_ends_bertkit_quietly(tmp_path: Path) -> None:
    # A real pipe whose reader has gone before the command writes (`bertkit --help | head`
    # once head has exited).
    for argv in (["-m", "bertkit", "--help"], ["-m", "pipelines.inspect", "--help"]):
        done = _run_into_a_closed_pipe(tmp_path, *argv)
        assert "Traceback" not in done.stderr
        assert done.stderr == ""
        assert done.returncode in (0, BROKEN_PIPE_EXIT)  # argparse's help drops the error
    assert BROKEN_PIPE_EXIT == 141


def test_bertkit_help_read_by_head(tmp_path: Path) -> None:
    # The pipeline a user types: head reads two lines and exits.
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{sys.executable} -m bertkit --help | head -2"],
        cwd=tmp_path,
        env=_core_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout == "usage: bertkit COMMAND [flags]\n\n"
    assert done.stderr == ""
    assert done.returncode in (0, BROKEN_PIPE_EXIT)


def test_a_broken_pipe_that_is_not_stdout_is_an_error() -> None:
    with pytest.raises(BrokenPipeError), exit_quietly_on_broken_pipe():
        raise BrokenPipeError(32, "a socket of the command's own")


SCRIPTS = {
    "build.sh": "PROJECT REGION gs://BUCKET [REPOSITORY]",
    "run.sh": "PROJECT REGION gs://BUCKET STAGE name=value [name=value ...]",
    "run_chain.sh": "PROJECT REGION gs://BUCKET",
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_dataflow_script_gives_its_usage(script: str) -> None:
    path = f"infra/dataflow/{script}"
    usage = f"usage: {path} {SCRIPTS[script]}\n"

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([path, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)

    bare, helped, one = run(), run("--help"), run("my-project")
    assert (bare.returncode, bare.stdout, bare.stderr) == (2, "", usage)
    assert (helped.returncode, helped.stdout, helped.stderr) == (0, usage, "")
    assert (one.returncode, one.stderr) == (2, usage)
    stage = ("books", "input=gs://my-bucket/books/*.txt") if script == "run.sh" else ()
    wrong = run("my-project", "us-central1", "my-bucket", *stage)
    assert (wrong.returncode, wrong.stderr) == (
        2,
        f"{path}: BUCKET my-bucket: give the bucket as a gs:// URL (gs://my-bucket)\n",
    )


def test_inspect_read_by_head_ends_as_every_command_does(tmp_path: Path) -> None:
    # `bertkit inspect … | head`: inspect's own output (here a vocabulary's many lines after
    # a closed pipe) ends with the exit code of every bertkit command, nothing on stderr.
    from tests.test_inspect_vocab_checkpoints import write_tiny_vocabulary

    write_tiny_vocabulary(tmp_path / "vocab")
    for argv in (["-m", "bertkit", "inspect", "vocab"], ["-m", "pipelines.inspect", "vocab"]):
        done = _run_into_a_closed_pipe(tmp_path, *argv)
        assert (done.returncode, done.stderr) == (BROKEN_PIPE_EXIT, "")
