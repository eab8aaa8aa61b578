"""A local stage's worker process that dies mid-run (`--direct_running_mode
multi_processing`) ends the stage: one line naming it, exit 1, every other process ended,
no manifest (pipelines/beam/worker_processes.py). Beam's driver waited for ever on the
bundle the dead worker held."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pipelines.beam.worker_processes import ending
from tests.support.launch import python_command
from tests.test_exits import session_alive, wait_for_exit
from tests.test_stage_signals import HANG, WORKERS, long_input


def worker_pids(driver: int) -> list[int]:
    """The pids of the worker processes `driver` started (children of any of its threads)."""
    found: list[int] = []
    for task in Path(f"/proc/{driver}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for child in map(int, children):
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"pipelines.beam.worker" in command:
                found.append(child)
    return found


def test_a_worker_killed_mid_run_ends_the_stage_with_one_line(tmp_path):
    output = tmp_path / "documents"
    command = ["-m", "bertkit", "wikipedia", "--input", long_input(tmp_path / "inputs")]
    process = subprocess.Popen(
        python_command(*command, "--output", str(output), *WORKERS),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        began = time.monotonic()
        while not (output.is_dir() and (workers := worker_pids(process.pid))):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() - began < HANG, "the stage never began its output"
            time.sleep(0.02)
        victim = workers[0]
        os.kill(victim, signal.SIGKILL)
        _, rest, took = wait_for_exit(process, time.monotonic())
    finally:
        if process.poll() is None or session_alive(process):
            os.killpg(process.pid, signal.SIGKILL)
    said = [line for line in rest.splitlines() if not line.startswith("wikipedia | ")]
    assert said == [
        f"bertkit wikipedia: error: worker process {victim} was killed by SIGKILL (out of "
        f"memory?), which stopped the stage: --output {output} is incomplete and has no "
        "manifest, so no stage reads it: rerun with --overwrite"
    ], rest
    assert process.returncode == 1
    assert took < 10.0
    assert not (output / "_manifest.json").exists()


@pytest.mark.parametrize(
    ("returncode", "said"),
    [
        (-signal.SIGKILL, "was killed by SIGKILL (out of memory?)"),
        (-signal.SIGSEGV, "was killed by SIGSEGV"),
        (1, "exited with status 1"),
        (0, "exited with status 0"),
    ],
)
def test_how_a_worker_ended_reads(returncode, said):
    assert ending(returncode) == said
