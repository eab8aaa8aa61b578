"""Ctrl-C and SIGTERM stop a Beam stage with one line and a shell's exit status (130, 143),
its output left without a manifest, and nothing it started left running
(pipelines/command/interruption.py).

Each case is a real `bertkit wikipedia` process, in a session of its own so that the test
sees every process it started, on an input far longer than the test waits (`long_input`).
The signal goes out when the first progress line shows the stage reading."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pipelines.command.interruption import StageStop
from tests.support.launch import python_command
from tests.test_exits import session_alive

DUMP = next((Path(__file__).resolve().parent.parent / "data" / "wikipedia").glob("*.xml.bz2"))
HANG = 30.0  # seconds: a stop takes well under one; this only catches a hang
WORKERS = ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")


def long_input(folder: Path) -> str:
    """An input that takes a minute or more to read: 20 copies of the real sample's dump
    (a hard link to an input is that input, read once), as a glob."""
    folder.mkdir()
    for index in range(20):
        shutil.copyfile(DUMP, folder / f"dump-{index:02d}.xml.bz2")
    return f"{folder}/*.xml.bz2"


@pytest.mark.parametrize(
    ("number", "to_group", "extra"),
    [
        pytest.param(signal.SIGINT, False, (), id="SIGINT"),
        # The in-process runner's SIGTERM: SIGINT's path with another name (slow tier).
        pytest.param(signal.SIGTERM, False, (), id="SIGTERM", marks=pytest.mark.slow),
        # Ctrl-C: the terminal signals the whole job
        pytest.param(signal.SIGINT, True, WORKERS, id="SIGINT-workers"),
        # `kill PID`: the driver alone
        pytest.param(signal.SIGTERM, False, WORKERS, id="SIGTERM-workers"),
    ],
)
def test_a_signal_stops_a_stage_with_one_line(tmp_path, number, to_group, extra):
    output = tmp_path / "documents"
    command = ["-m", "bertkit", "wikipedia", "--input", long_input(tmp_path / "inputs")]
    process = subprocess.Popen(
        python_command(*command, "--output", str(output), *extra, sigint_default=True),
        env={**os.environ, "BERTKIT_PROGRESS": "1"},
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        first = process.stderr.readline()
        assert first.startswith("wikipedia | read "), first
        # Stopped part-way: once its workers have begun the output (on a loaded machine the
        # first progress line can come before their first write).
        began = time.monotonic()
        while not output.is_dir():
            assert time.monotonic() - began < HANG, "the stage never began its output"
            time.sleep(0.02)
        sent = time.monotonic()
        if to_group:
            os.killpg(process.pid, number)
        else:
            process.send_signal(number)
        rest = process.communicate(timeout=HANG)[1]
        while session_alive(process):
            assert time.monotonic() - sent < HANG, "a worker outlived the stage"
            time.sleep(0.05)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None or session_alive(process):
            os.killpg(process.pid, signal.SIGKILL)
    print(f"ended in {took:.2f} s")
    said = [line for line in rest.splitlines() if not line.startswith("wikipedia | ")]
    name = signal.Signals(number).name
    assert said == [
        f"bertkit wikipedia: interrupted ({name}): --output {output} is incomplete and has "
        "no manifest, so no stage reads it: rerun with --overwrite"
    ], rest
    assert process.returncode == 128 + number
    assert took < 5.0
    assert not (output / "_manifest.json").exists()


# The command's own start-up; `bertkit`'s, whose extras check imported pyarrow before any
# handler was there (a traceback, or a silent 143); a stage worker's, which its driver ends
# so while it starts: the status alone, the driver says why.
SLOW = "'tests.support.slow_import'"
STARTS = {  # the program, and whether it says the line
    "import": (f"from pipelines.command.startup import import_command as i; i({SLOW})", True),
    "bertkit": (  # as the console script runs it: the whole process
        "import bertkit.cli, sys; assert 'pyarrow' not in sys.modules; "
        f"bertkit.cli.COMMANDS['train'] = ({SLOW}, ''); sys.argv[1:] = ['train']; "
        "bertkit.cli.main()",
        True,
    ),
    "worker": (
        f"from pipelines.command.startup import import_command as i; i({SLOW}, quiet=True)",
        False,
    ),
}


@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_imports_is_one_line(number, start):
    """Importing a stage takes seconds; a signal then is one line and the shell's status
    too (pipelines/command/startup.py)."""
    code, says = STARTS[start]
    process = subprocess.Popen(
        python_command("-c", code, sigint_default=True),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr.readline() == "importing\n"
        process.send_signal(number)
        rest = process.communicate(timeout=HANG)[1]
    finally:
        if process.poll() is None:
            process.kill()
    name = signal.Signals(number).name
    said = f"bertkit: interrupted ({name}) while starting; nothing was done\n" if says else ""
    assert rest == said
    assert process.returncode == 128 + number


def test_a_signal_to_a_remote_launch_says_what_became_of_its_job(monkeypatch):
    """A remote runner's job is not this process: the line is remote_job's, which cancels
    it first (tests/test_remote_stop.py)."""
    from pipelines.beam import remote_job, runner

    monkeypatch.setattr(runner, "_stage_output", ("--output", "gs://b/docs"))
    monkeypatch.setattr(runner, "_stage_local", False)
    said: list[tuple[str, tuple[str, str]]] = []
    monkeypatch.setattr(remote_job, "stopped", lambda *args: said.append(args) or "line")
    assert runner.interrupted_message("SIGINT") == "line"
    assert said == [("SIGINT", ("--output", "gs://b/docs"))]


def test_a_stage_stopped_before_its_first_write_needs_no_overwrite(monkeypatch, tmp_path):
    from pipelines.beam import runner

    monkeypatch.setattr(runner, "_stage_record", ("_manifest.json", 0.0))  # none written
    output = tmp_path / "documents"
    monkeypatch.setattr(runner, "_stage_output", ("--output", str(output)))
    monkeypatch.setattr(runner, "_stage_local", True)
    assert runner.interrupted_message("SIGTERM") == (
        f"interrupted (SIGTERM) before it wrote anything: --output {output} was not begun"
    )
    output.mkdir()
    assert runner.interrupted_message("SIGTERM") == (
        f"interrupted (SIGTERM): --output {output} is incomplete and has no manifest, so no "
        "stage reads it: rerun with --overwrite"
    )


def test_a_stage_stopped_after_its_record_says_its_output_is_complete(monkeypatch, tmp_path):
    """A signal in the clean-up after the record was written said "incomplete and has no
    manifest" of an output every later stage accepts; an earlier run's record (vocab keeps
    its files until it replaces them) is no sign of this run's."""
    import os

    from pipelines.beam import runner

    output = tmp_path / "vocab"
    output.mkdir()
    record = output / "vocab.json"
    record.write_text("{}")
    os.utime(record, (1000.0, 1000.0))  # an earlier run's
    monkeypatch.setattr(runner, "_stage_output", ("--output", str(output)))
    monkeypatch.setattr(runner, "_stage_local", True)
    monkeypatch.setattr(runner, "_stage_record", ("vocab.json", 2000.0))
    assert runner.interrupted_message("SIGINT") == (
        f"interrupted (SIGINT): --output {output} is incomplete and has no manifest, so no "
        "stage reads it: rerun with --overwrite"
    )
    os.utime(record, (2000.5, 2000.5))  # this run's
    assert runner.interrupted_message("SIGINT") == (
        f"interrupted (SIGINT) after it finished: --output {output} is complete (vocab.json "
        "written); only its clean-up was cut short"
    )


def test_after_a_stop_the_threads_it_caught_say_nothing_and_later_ones_are_heard(monkeypatch):
    """Beam's thread of a worker process the stop ended may notice it after the stage's
    line, once the stage has restored its hooks ("Exception in thread run_worker: ...
    Worker subprocess exited with return code -15" once followed the line in a full run)."""
    heard: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: heard.append(args.thread.name))
    noticed = threading.Event()

    def notice_late() -> None:
        noticed.wait(10)
        raise RuntimeError("Worker subprocess exited with return code -15")

    caught = threading.Thread(target=notice_late, name="caught")
    caught.start()
    stop = StageStop()
    stop.ending = True  # as stage_main says its line: the handler raises nothing more
    with stop:
        stop._stop(signal.SIGTERM, None)
    noticed.set()
    caught.join(10)
    later = threading.Thread(target=lambda: 1 / 0, name="later")
    later.start()
    later.join(10)
    assert heard == ["later"]


def test_without_a_stop_the_stage_gives_back_the_hook_it_found(monkeypatch):
    def hook(args: threading.ExceptHookArgs) -> None:
        raise AssertionError("not called")

    monkeypatch.setattr(threading, "excepthook", hook)
    with StageStop():
        pass
    assert threading.excepthook is hook
