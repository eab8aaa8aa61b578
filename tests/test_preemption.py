"""Preemption with real signals: the run stops after a step, writes a checkpoint there and
exits 75; `--resume` then gives the losses of a run never interrupted. One process got
SIGUSR1 (SLURM's early warning); a 2-process torchrun on Gloo got SIGTERM (what Kubernetes
and scancel send), which torchrun passes on to its workers' process groups: the loader's
workers leave it to the trainers (trainer/workers.py), which stop together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.support.torchrun import torchrun_trainer
from tests.test_train import TINY, metrics
from trainer.preemption import PREEMPTED_EXIT_CODE, StopRequest
from trainer.run.checkpoints import latest_checkpoint

STEPS = 16
FLAGS = [
    "--max-steps",
    str(STEPS),
    "--warmup-steps",
    "2",
    "--eval-every",
    "0",
    "--checkpoint-every",
    "100",
    "--num-workers",
    "1",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd()), "BERTKIT_PROGRESS": "0"}


def launch(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for_step(run_dir: Path, step: int, process: subprocess.Popen, timeout: float = 120):
    """Until metrics.jsonl records `step` (or the process ends, which fails the test)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0][-3000:]
        if (run_dir / "metrics.jsonl").exists() and step in metrics(run_dir):
            return
        time.sleep(0.02)
    raise AssertionError(f"no step {step} in {timeout} s")


def train_command(run_dir: Path, shards: Path, *extra: str, processes: int = 1) -> list[str]:
    launcher = [sys.executable, "-m", "trainer.train"]
    if processes > 1:
        launcher = [
            *torchrun_trainer(processes),
        ]
    return [*launcher, *TINY, "--shards", str(shards), "--output", str(run_dir), *FLAGS, *extra]


def losses(run_dir: Path) -> list[float]:
    return [metrics(run_dir)[step]["loss"] for step in range(1, STEPS + 1)]


def stop_then_resume(shards: Path, tmp_path: Path, sig: int, processes: int) -> tuple:
    extra = ["--global-batch-size", "64"] if processes > 1 else []
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    # The uninterrupted run goes on beside the one that is stopped (the tests' time halves on
    # two cores); its output goes to a file, so that no pipe left unread can hold it up.
    with (tmp_path / "whole.log").open("w") as log:
        reference = subprocess.Popen(
            train_command(whole, shards, *extra, processes=processes),
            env=ENV,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    process = None
    try:
        process = launch(train_command(parts, shards, *extra, processes=processes))
        wait_for_step(parts, 3, process)
        process.send_signal(sig)
        output, _ = process.communicate(timeout=120)
        assert reference.wait(timeout=300) == 0, (tmp_path / "whole.log").read_text()[-3000:]
    finally:
        for running in (reference, process):
            if running is not None and running.poll() is None:
                os.killpg(running.pid, signal.SIGKILL)
                running.wait()
    stopped = latest_checkpoint(parts / "checkpoints")
    step = int(stopped.stem.removeprefix("step-"))
    assert 3 <= step < STEPS, output[-3000:]
    assert sorted(metrics(parts)) == list(range(1, step + 1))  # every step up to it logged
    resumed = subprocess.run(
        train_command(parts, shards, *extra, "--resume", processes=processes),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert losses(parts) == losses(whole)
    return process.returncode, output, step, torch.load(stopped, weights_only=True)


# Slow (13 s): the default run has SIGUSR1 stopping trainers at a checkpoint and the job
# requeued with --resume (tests/test_launch_recipes.py, the Slurm script), a signal to the
# whole job stopping after a checkpoint (tests/test_exits.py), and resumes that give an
# uninterrupted run's losses (tests/test_train.py).
@pytest.mark.slow
def test_sigusr1_stops_one_process_at_a_step_and_resume_is_exact(sample_shards, tmp_path):
    code, output, step, checkpoint = stop_then_resume(sample_shards, tmp_path, signal.SIGUSR1, 1)
    assert code == PREEMPTED_EXIT_CODE, output[-3000:]
    assert (
        f"stopped by SIGUSR1 after step {step}, checkpoint written: rerun with --resume" in output
    )
    assert checkpoint[CheckpointKey.STEP] == step


# Slow (25 s): the default run has SIGTERM to torchrun stopping every rank at one step
# (tests/test_launch_recipes.py, the Kubernetes pod) and a 2-process run resumed exactly
# (tests/test_remote_run.py); this one checks both on one run.
@pytest.mark.slow
def test_sigterm_to_torchrun_stops_both_ranks_at_the_same_step(sample_shards, tmp_path):
    code, output, step, checkpoint = stop_then_resume(sample_shards, tmp_path, signal.SIGTERM, 2)
    assert checkpoint[CheckpointKey.WORLD_SIZE] == 2 and checkpoint[CheckpointKey.STEP] == step
    # Both ranks stopped after the same step: the data position is the step's global batch.
    assert checkpoint[CheckpointKey.DATA_POSITION] == {"epoch": 0, "global_batches": step}
    assert f"stopped by SIGTERM after step {step}" in output, output[-3000:]
    # The workers exit 75; torchrun itself ends on the signal it got (SignalException): 1.
    assert code == 1


def test_a_ctrl_c_swallowed_by_a_finalizer_is_still_noted(monkeypatch):
    """Python swallows an exception raised inside `__del__` ("Exception ignored in …"): a
    KeyboardInterrupt that lands there is lost. The stop request notes it all the same, and
    the loop raises it again after the step."""

    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while a finalizer runs

    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: swallowed.append(info.exc_type))
    # SIGINT as a terminal's foreground job has it, however pytest was started (a job run
    # in the background inherits it ignored).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with StopRequest() as request:
            Finalized()  # dropped at once: __del__ runs, its KeyboardInterrupt is swallowed
            assert request.interrupted
            with pytest.raises(KeyboardInterrupt):
                request.check_interrupted()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
        # A process started with Ctrl-C ignored (`nohup … &`) keeps ignoring it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with StopRequest() as request:
            signal.raise_signal(signal.SIGINT)
            assert not request.interrupted
    finally:
        signal.signal(signal.SIGINT, before)
    assert swallowed == [KeyboardInterrupt]  # what Python calls "Exception ignored in …"
