"""The pieces every case of the fault suite (tests/test_faults.py) and every row of the fault
campaign (bench/faults.py) use: the sample's inputs and the commands run on them, running a
command to its end or killing it (after a delay, or right before its N-th rename:
tests/support/killpoint.py), and comparing what a run left with an undisturbed run's, file
by file (`Tally` counts it all). Not a command.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def repo_python() -> str:
    """bertkit runs with the project's own venv, wherever the campaign is launched from."""
    venv_python = REPO_ROOT / ".venv" / "bin" / "python"
    return str(venv_python) if venv_python.exists() else sys.executable


def kill_process_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


DUMP_GLOB = str(REPO_ROOT / "data" / "wikipedia" / "*.xml.bz2")
BOOKS_GLOB = str(REPO_ROOT / "data" / "books" / "*.txt")
# 8,000 tokens as in the demo; examples at 128 tokens, one pass, shards of 2,000: 4 train
# shards and 1 held-out on the sample, written in about a second.
VOCAB_FLAGS = ["--vocab-size", "8000"]
EXAMPLES_FLAGS = [
    "--max-seq-length",
    "128",
    "--dupe-factor",
    "1",
    "--heldout-fraction",
    "0.05",
    "--samples-per-shard",
    "2000",
]
TWO_WORKERS = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
# A tiny BERT for a few seconds: dropout on (its RNG must resume too), one loader worker (it
# replays its stream on resume), a checkpoint every 4 steps and all of them kept, so what a
# killed run left can be compared with the reference's checkpoint at the same step.
TRAIN_FLAGS = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--lr",
    "2e-3",
    "--warmup-steps",
    "2",
    "--max-steps",
    "16",
    "--log-every",
    "1",
    "--eval-every",
    "8",
    "--eval-batches",
    "2",
    "--num-workers",
    "1",
    "--shuffle-buffer",
    "200",
    "--checkpoint-every",
    "4",
    "--keep-checkpoints",
    "100",
    "--no-tensorboard",
]
POLL_S = 0.002
RUN_TIMEOUT_S = 600


# --- Inputs and commands -------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """The fault-free documents, vocabulary and shards the later stages read."""

    wikipedia: Path
    books: Path
    vocab: Path
    shards: Path


def stage_argv(stage: str, inputs: Inputs, output: str) -> list[str]:
    """`bertkit STAGE …` on the sample, always with --overwrite (see the module doc)."""
    documents = [str(inputs.wikipedia), str(inputs.books)]
    if stage == "wikipedia":
        return ["wikipedia", "--input", DUMP_GLOB, "--output", output, "--overwrite"]
    if stage == "books":
        return ["books", "--input", BOOKS_GLOB, "--output", output, "--overwrite"]
    if stage == "vocab":
        return ["vocab", "--documents", *documents, "--output", output, *VOCAB_FLAGS, "--overwrite"]
    if stage in ("examples", "examples-2w"):
        workers = TWO_WORKERS if stage == "examples-2w" else []
        return [
            "examples",
            "--documents",
            *documents,
            "--vocab",
            str(inputs.vocab),
            "--output",
            output,
            *EXAMPLES_FLAGS,
            *workers,
            "--overwrite",
        ]
    raise ValueError(f"unknown stage {stage!r}")


def train_argv(shards: str, output: Path, *extra: str) -> list[str]:
    return ["train", "--shards", shards, "--output", str(output), *TRAIN_FLAGS, *extra]


def command(argv: list[str]) -> list[str]:
    """The child process for `bertkit ARGV`."""
    return [repo_python(), "-m", "bertkit", *argv]


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    # One thread per process keeps the tiny model's arithmetic (and so its losses)
    # identical from run to run on a busy machine.
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", **(extra or {})}


def prepare_inputs(directory: Path) -> Inputs:
    """Fault-free wikipedia, books, vocab and examples runs into `directory`."""
    shutil.rmtree(directory, ignore_errors=True)
    inputs = Inputs(
        directory / "documents" / "wikipedia",
        directory / "documents" / "books",
        directory / "vocab",
        directory / "shards",
    )
    for stage, output in (
        ("wikipedia", inputs.wikipedia),
        ("books", inputs.books),
        ("vocab", inputs.vocab),
        ("examples", inputs.shards),
    ):
        run_to_end(command(stage_argv(stage, inputs, str(output))), check=True)
    return inputs


# --- Running and killing ---------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    returncode: int
    seconds: float
    output: str  # stdout and stderr, for the report when a run fails

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run_to_end(cmd: list[str], env: dict[str, str] | None = None, check: bool = False) -> Finished:
    start = time.monotonic()
    done = subprocess.run(
        cmd,
        cwd=REPO_ROOT,
        env=env or child_environment(),
        timeout=RUN_TIMEOUT_S,
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    finished = Finished(done.returncode, time.monotonic() - start, done.stdout + done.stderr)
    if check and finished.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({finished.returncode}):\n{finished.output}")
    return finished


def run_and_kill(
    cmd: list[str],
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    env: dict[str, str] | None = None,
) -> Finished:
    """Start `cmd` in a session of its own and SIGKILL its whole process group `after_s`
    seconds in, or as soon as `when()` is true, whichever comes first. `killed` says whether
    the kill found it running (a command may finish first)."""
    start = time.monotonic()
    log = open(os.devnull, "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env or child_environment(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        while process.poll() is None:
            elapsed = time.monotonic() - start
            if (after_s is not None and elapsed >= after_s) or (when is not None and when()):
                kill_process_group(process.pid)
                break
            if elapsed > RUN_TIMEOUT_S:
                kill_process_group(process.pid)
                raise TimeoutError(f"{' '.join(cmd)} ran past {RUN_TIMEOUT_S} s")
            time.sleep(POLL_S)
        returncode = process.wait()
        _wait_for_group_gone(process.pid)
    finally:
        log.close()
    return Finished(returncode, time.monotonic() - start, "")


def _wait_for_group_gone(pgid: int, timeout_s: float = 30) -> None:
    """The killed command's workers (Beam's, the loader's) are gone before the rerun."""
    kill_process_group(pgid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise RuntimeError(f"process group {pgid} outlived SIGKILL for {timeout_s} s")


def killpoint_command(argv: list[str], before_rename: int) -> list[str]:
    """`bertkit ARGV`, SIGKILLed right before its N-th rename (tests/support/killpoint.py); 0: never."""
    return [repo_python(), "-m", "tests.support.killpoint", str(before_rename), "--", *argv]


def reference_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[Finished, int]:
    """An undisturbed run of `bertkit ARGV`: (the run, how many files it renamed into place)."""
    finished = run_to_end(killpoint_command(argv, 0), env, check=True)
    counts = [line for line in finished.output.splitlines() if line.startswith("renames: ")]
    return finished, int(counts[-1].split()[-1])


# --- Comparing directories -------------------------------------------------------------------

Snapshot = dict[str, tuple[int, str]]  # relative path → (bytes, sha256)


def snapshot(directory: Path) -> Snapshot:
    """Every file under `directory` (none if it does not exist), by relative path."""
    if not directory.exists():
        return {}
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {p.relative_to(directory).as_posix(): digest(p.read_bytes()) for p in files}


def digest(data: bytes) -> tuple[int, str]:
    return len(data), hashlib.sha256(data).hexdigest()


@dataclass
class Tally:
    """One row of the table."""

    row: str
    faults: int = 0
    finished_first: int = 0  # kills that found the command already finished
    runs: int = 0
    recovered: int = 0
    files: int = 0
    bytes: int = 0
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count_kill(self, killed: Finished, where: str) -> None:
        """A kill is a fault injected; a command that finished first is counted apart; any
        other exit before the kill is a mismatch."""
        if killed.killed:
            self.faults += 1
        elif killed.returncode == 0:
            self.finished_first += 1
        else:
            self.mismatches.append(f"{where}: exited {killed.returncode} before the kill")

    def rerun_ok(self, rerun: Finished, where: str) -> bool:
        """Count the rerun after a fault; one that failed is a mismatch."""
        self.runs += 1
        if rerun.returncode != 0:
            self.mismatches.append(
                f"{where}: the rerun exited {rerun.returncode}: "
                f"{rerun.output.strip().splitlines()[-1:]}"
            )
        return rerun.returncode == 0

    def compare_trees(self, expected: Snapshot, actual: Snapshot, where: str) -> bool:
        """The same names, no others, each with the same bytes."""
        problems = [f"{where}: {name} missing" for name in sorted(expected.keys() - actual.keys())]
        problems += [
            f"{where}: {name} is not in the reference"
            for name in sorted(actual.keys() - expected.keys())
        ]
        self.mismatches += problems
        same = self._compare_common(expected, actual, f"{where}: {{}} differs from the reference")
        return same and not problems

    def check_left_behind(self, expected: Snapshot, left: Snapshot, where: str) -> bool:
        """What a killed run left: a file under one of the reference's names is complete."""
        return self._compare_common(
            expected, left, f"{where}: {{}} left incomplete or wrong by the kill"
        )

    def _compare_common(self, expected: Snapshot, actual: Snapshot, message: str) -> bool:
        """Count and compare the files under names both snapshots have."""
        ok = True
        for name in sorted(expected.keys() & actual.keys()):
            self.files += 1
            self.bytes += expected[name][0]
            if actual[name] != expected[name]:
                self.mismatches.append(message.format(name))
                ok = False
        return ok


def kill_stage(
    tally: Tally,
    argv: list[str],
    output: Path,
    reference: Snapshot,
    after_s: float | None = None,
    when: Callable[[], bool] | None = None,
    fresh: bool = True,
    before_rename: int | None = None,
) -> tuple[Finished, Snapshot, Finished]:
    """One trial: the command killed (in an empty `output` when `fresh`) after `after_s`,
    when `when()`, or right before its `before_rename`-th rename; what it left checked
    (returned); the same command rerun, and its output compared with `reference`."""
    if fresh:
        shutil.rmtree(output, ignore_errors=True)
    where = f"{tally.row} kill {tally.runs + 1}"
    cmd = command(argv) if before_rename is None else killpoint_command(argv, before_rename)
    killed = run_and_kill(cmd, after_s=after_s, when=when)
    tally.count_kill(killed, where)
    left = snapshot(output)
    tally.check_left_behind(reference, left, where)
    rerun = run_to_end(command(argv))
    if tally.rerun_ok(rerun, where) and tally.compare_trees(reference, snapshot(output), where):
        tally.recovered += 1
    return killed, left, rerun
