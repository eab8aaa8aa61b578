"""Every way out of the trainer and its loader ends every process it started, within seconds,
with the right exit code (trainer/workers.py).

Each case is a real process tree: the trainer (or a program using the loader) with two loader
worker processes, started in a session of its own so that the test can tell whether anything
it started outlived it. What is measured is the time from the event (the error, the signal,
the program's return) to the exit of the whole tree; the bound is a hang detector, far above
what a correct exit takes."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.support.launch import python_command
from tests.test_train import TINY, metrics
from trainer.preemption import PREEMPTED_EXIT_CODE
from trainer.train import INTERRUPTED_EXIT_CODE
from trainer.workers import WorkerPool

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd()), "BERTKIT_PROGRESS": "0"}
HANG = 30.0  # seconds: a correct exit takes one or two (the tests print what each took)
FLAGS = [
    "--warmup-steps",
    "2",
    "--eval-every",
    "0",
    "--checkpoint-every",
    "1000",
    "--num-workers",
    "2",
]


def start(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        python_command("-c", textwrap.dedent(code), *args, sigint_default=True),
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def train_process(shards: Path, run_dir: Path, *extra: str, patch: str = "") -> subprocess.Popen:
    """`bertkit train` in a process of its own, after `patch` (code run first: a fault)."""
    code = f"""
        import sys
        import trainer.train
        {textwrap.indent(textwrap.dedent(patch), " " * 8).strip()}
        sys.exit(trainer.train.run(sys.argv[1:]))
    """
    return start(code, *TINY, "--shards", str(shards), "--output", str(run_dir), *FLAGS, *extra)


def session_alive(process: subprocess.Popen) -> bool:
    """Whether any process of the session `process` leads is still running (zombies aside)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        state, session = fields[0], int(fields[3])
        if session == process.pid and state != "Z":
            return True
    return False


def _piped(stdout: str | None, stderr: str | None) -> str:
    return stdout if stdout is not None else stderr or ""


def wait_for_exit(process: subprocess.Popen, since: float) -> tuple[int, str, float]:
    """(exit code, output, seconds from `since` until nothing of the session is left); the
    output is what the one pipe it was started with gave (stdout, or stderr alone)."""
    try:
        output = _piped(*process.communicate(timeout=HANG))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output = _piped(*process.communicate())
        raise AssertionError(f"still running {HANG:.0f} s later:\n{output[-3000:]}") from None
    while session_alive(process):
        if time.monotonic() - since > HANG:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"a process of the session outlived the command:\n{output}")
        time.sleep(0.05)
    took = time.monotonic() - since
    print(f"exited {process.returncode} in {took:.2f} s")
    return process.returncode, output, took


def wait_for_step(run_dir: Path, step: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0][-3000:]
        if (run_dir / "metrics.jsonl").exists() and step in metrics(run_dir):
            return
        time.sleep(0.02)
    raise AssertionError(f"no step {step}")


def damaged_copy(shards: Path, tmp_path: Path) -> Path:
    """The shards with four bytes changed in each train shard's first block (the issue's
    recipe): every worker meets a block whose sha256 does not match."""
    copy = tmp_path / "damaged"
    shutil.copytree(shards, copy)
    for shard in sorted((copy / "seq128" / "train").glob("*.tar")):
        with shard.open("r+b") as handle:
            handle.seek(700)
            handle.write(b"\x07\x07\x07\x07")
    return copy


def test_a_damaged_shard_read_by_a_worker_ends_the_run_with_one_line(sample_shards, tmp_path):
    process = train_process(
        damaged_copy(sample_shards, tmp_path), tmp_path / "run", "--max-steps", "50"
    )
    started = time.monotonic()
    code, output, _ = wait_for_exit(process, started)
    assert code == 1, output
    (line,) = [line for line in output.splitlines() if line.startswith("bertkit train: error:")]
    assert "do not match the manifest's sha256" in line and "shard-0000" in line
    assert "Caught ShardReadError" not in output and "Traceback" not in output


def test_an_error_in_the_step_ends_the_workers(sample_shards, tmp_path):
    patch = """
        real_step = trainer.train.train_step
        def failing_step(run, sums):
            if run.step == 3:
                1 / 0
            return real_step(run, sums)
        trainer.train.train_step = failing_step
    """
    process = train_process(sample_shards, tmp_path / "run", "--max-steps", "50", patch=patch)
    wait_for_step(tmp_path / "run", 3, process)
    code, output, _ = wait_for_exit(process, time.monotonic())
    assert code == 1, output
    assert "ZeroDivisionError: division by zero" in output


def test_a_full_disk_at_checkpoint_time_ends_the_run(sample_shards, tmp_path):
    patch = """
        import errno
        def no_space(directory, step, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device", str(directory))
        trainer.train.save_checkpoint = no_space
    """
    process = train_process(
        sample_shards, tmp_path / "run", "--max-steps", "50", "--checkpoint-every", "4", patch=patch
    )
    code, output, _ = wait_for_exit(process, time.monotonic())
    assert code == 1, output
    assert (
        f"bertkit train: error: [Errno 28] No space left on device: '{tmp_path}/run/checkpoints'"
        in output
    )


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        ([signal.SIGINT], INTERRUPTED_EXIT_CODE),  # to the trainer alone, not its workers
        ([signal.SIGTERM], PREEMPTED_EXIT_CODE),
        ([signal.SIGTERM] * 3, PREEMPTED_EXIT_CODE),  # the scheduler insists
    ],
    ids=["SIGINT", "SIGTERM", "three SIGTERMs"],
)
def test_a_signal_to_the_trainer_ends_every_process(sample_shards, tmp_path, signals, expected):
    run_dir = tmp_path / "run"
    process = train_process(sample_shards, run_dir, "--max-steps", "10000")
    wait_for_step(run_dir, 3, process)
    started = time.monotonic()
    for number in signals:
        process.send_signal(number)
        time.sleep(0.05)
    code, output, _ = wait_for_exit(process, started)
    assert code == expected, output


def test_a_failure_after_a_stop_signal_exits_with_the_error(sample_shards, tmp_path):
    """SIGTERM asks for a stop after the step; the step then fails: the failure wins (exit 1,
    not 75: there is no checkpoint of that step to resume from), and promptly."""
    patch = """
        import time
        real_step = trainer.train.train_step
        def failing_step(run, sums):
            if run.step == 3:
                print("step 4 started", flush=True)
                time.sleep(1.0)
                raise OSError("the shard server went away")
            return real_step(run, sums)
        trainer.train.train_step = failing_step
    """
    process = train_process(sample_shards, tmp_path / "run", "--max-steps", "50", patch=patch)
    while process.stdout.readline() not in ("step 4 started\n", ""):
        pass
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code, output, _ = wait_for_exit(process, started)
    assert code == 1, output
    assert "bertkit train: error: the shard server went away" in output


def test_a_signal_to_the_whole_job_stops_the_trainer_after_a_checkpoint(sample_shards, tmp_path):
    """SLURM's scancel signals every process of the job, workers included: the workers leave
    it to the trainer, which checkpoints and exits 75; then nothing is left."""
    run_dir = tmp_path / "run"
    process = train_process(sample_shards, run_dir, "--max-steps", "10000")
    wait_for_step(run_dir, 3, process)
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)
    code, output, _ = wait_for_exit(process, started)
    assert code == PREEMPTED_EXIT_CODE, output
    assert (run_dir / "checkpoints" / "latest").exists()


LOADER_PROGRAM = """
    import sys
    from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
    loader = PretrainingLoader(open_source(sys.argv[1], "train", None),
                               LoaderConfig(16, num_workers=2))
    batches = loader.batches(DataPosition())
    for _ in range(4):
        batch = next(batches)
    print("done", flush=True)
"""


@pytest.mark.parametrize(
    ("ending", "expected"),
    [
        ("", 0),  # returns holding the generator (the program)
        ("raise SystemExit(3)", 3),
        ("raise RuntimeError('the caller failed')", 1),
        ("del batches\nimport gc; gc.collect()\nimport time; time.sleep(30)", None),
    ],
    ids=["returns holding it", "exits", "raises", "drops it"],
)
def test_a_program_that_leaves_the_loader_open_exits(sample_shards, ending, expected):
    process = start(LOADER_PROGRAM + textwrap.indent(ending, "    "), str(sample_shards))
    assert process.stdout.readline() == "done\n"
    started = time.monotonic()
    if expected is None:  # dropping the generator ends the workers while the program runs on
        while len(children(process.pid)) > 0:
            assert time.monotonic() - started < HANG, "the workers outlived the generator"
            time.sleep(0.05)
        print(f"workers ended {time.monotonic() - started:.2f} s after the generator dropped")
        process.kill()
        process.communicate()
        return
    code, output, _ = wait_for_exit(process, started)
    assert code == expected, output


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()]


def test_close_ends_the_workers_and_the_loader_reads_on(sample_shards):
    """`close()` in the middle of an epoch ends its workers at once; the loader can start a
    new epoch afterwards, and the context manager closes it too."""
    from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source

    source = open_source(str(sample_shards), "train", None)
    others = set(children(os.getpid()))  # the session's servers, say

    def workers() -> int:
        return len(set(children(os.getpid())) - others)

    with PretrainingLoader(source, LoaderConfig(16, num_workers=2)) as loader:
        epoch = loader.epoch(DataPosition())
        first = next(epoch)
        assert workers() == 2
        loader.close()
        assert workers() == 0
        with pytest.raises(StopIteration):
            next(epoch)
        second = loader.epoch(DataPosition())
        assert next(second)["sample_index"].tolist() == first["sample_index"].tolist()
        assert workers() == 2
    assert workers() == 0
    next(loader.epoch(DataPosition()))  # a generator dropped at once takes its workers along
    assert workers() == 0


def test_an_error_on_one_rank_of_two_ends_the_whole_job(sample_shards, tmp_path):
    """torchrun, two trainers on Gloo with two loader workers each: rank 1 fails in its
    fourth step; rank 0, waiting in the gradients' all-reduce, gets the closed connection,
    and torchrun ends with the failure; nothing of the job is left."""
    from tests.support.s3server import free_port

    patch = """
        import os
        real_step = trainer.train.train_step
        def failing_step(run, sums):
            if run.step == 3 and os.environ["RANK"] == "1":
                raise RuntimeError("rank 1 failed")
            return real_step(run, sums)
        trainer.train.train_step = failing_step
    """
    script = tmp_path / "failing_rank.py"
    script.write_text(
        "import sys\nimport trainer.train\n"
        + textwrap.dedent(patch)
        + "sys.exit(trainer.train.run(sys.argv[1:]))\n"
    )
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(free_port()),
            str(script),
            *TINY,
            "--shards",
            str(sample_shards),
            "--output",
            str(run_dir),
            *FLAGS,
            "--max-steps",
            "1000",
            "--global-batch-size",
            "32",
        ],
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_step(run_dir, 3, process)
    code, output, _ = wait_for_exit(process, time.monotonic())
    assert code == 1, output
    assert "RuntimeError: rank 1 failed" in output


class _Counting(torch.utils.data.IterableDataset):
    def __iter__(self):
        number = 0
        while True:
            yield number
            number += 1
            time.sleep(0.01)


def _take_the_lock_and_die(event) -> None:
    event._cond.acquire()  # inside Event.is_set(), as a worker checks it
    os._exit(0)


def test_closing_a_pool_returns_when_a_dead_worker_held_torch_s_done_event_lock():
    """A worker ended by the stop signal can die holding the lock of torch's "workers done"
    event; torch's shutdown then waited for it forever (a full test run hung there). Here a
    process takes that lock and dies with it: closing the pool still returns, promptly."""
    pool = WorkerPool(_Counting(), workers=1, seed=0)
    assert next(pool) == 0
    event = pool._iterator._workers_done_event
    holder = multiprocessing.get_context("fork").Process(
        target=_take_the_lock_and_die, args=(event,)
    )
    holder.start()
    holder.join(10)
    assert holder.exitcode == 0
    closer = threading.Thread(target=pool.close, daemon=True)
    started = time.monotonic()
    closer.start()
    closer.join(30)
    assert not closer.is_alive(), "WorkerPool.close() waited on a lock a dead process held"
    assert time.monotonic() - started < 10
    assert not any(process.is_alive() for process in pool.processes)


class _Tensors(torch.utils.data.IterableDataset):
    """Tensors, which a worker passes to the trainer through a socket in multiprocessing's
    temporary folder."""

    def __iter__(self):
        number = 0
        while True:
            yield torch.full((4,), number)
            number += 1


class _Unpicklable(torch.utils.data.IterableDataset):
    def __iter__(self):
        while True:
            yield threading.Lock()


def next_within(pool: WorkerPool, seconds: float):
    """`next(pool)`, or an AssertionError if it has not returned in `seconds`."""
    result: dict = {}

    def read() -> None:
        try:
            result["batch"] = next(pool)
        except RuntimeError as error:  # handed to the test's thread
            result["error"] = error

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(seconds)
    if reader.is_alive():
        pool.close()
        raise AssertionError(f"no batch and no error in {seconds:.0f} s: the reader hangs")
    if "error" in result:
        raise result["error"]
    return result["batch"]


def test_a_pool_after_a_closed_one_still_gets_its_batches():
    """Closing a pool once removed the trainer's multiprocessing folder (a forked worker
    inherits its path): the next pool's workers could not make the socket that passes a
    tensor, and the trainer waited for their batches for ever (a full test run hung there)."""
    temp_dir = multiprocessing.util.get_temp_dir()
    for _ in range(2):
        pool = WorkerPool(_Tensors(), workers=2, seed=0)
        try:
            assert next_within(pool, HANG).tolist() == [0, 0, 0, 0]
        finally:
            pool.close()
        assert os.path.isdir(temp_dir)


def test_closing_a_pool_whose_workers_are_still_starting_raises_nothing(monkeypatch):
    """A worker still starting when its pool closes (before its SIGTERM handler is set up)
    dies of close()'s SIGTERM; torch's SIGCHLD watch took that for a failed worker and raised
    "DataLoader worker (pid N) is killed by signal: Terminated" inside close() (seen once in
    a full test run). The pool now takes its workers off that watch before it signals them,
    as torch's own shutdown does."""
    from torch.utils.data._utils import worker

    real = worker._worker_loop

    def slow_start(*args, **kwargs):  # before torch sets the worker's signal handlers
        time.sleep(HANG)  # ended by close()'s SIGTERM long before
        real(*args, **kwargs)

    monkeypatch.setattr(worker, "_worker_loop", slow_start)
    pool = WorkerPool(_Tensors(), workers=2, seed=0)
    time.sleep(1.0)  # both forked, inside slow_start
    pool.close()
    assert [p.exitcode for p in pool.processes] == [-signal.SIGTERM] * 2


def test_a_batch_a_worker_cannot_send_ends_the_read_with_the_reason(capfd):
    """multiprocessing prints an object its queue cannot send and drops it; the reader then
    waited for ever. The worker now stops, and the reader gets torch's error within seconds."""
    pool = WorkerPool(_Unpicklable(), workers=1, seed=0)
    try:
        with pytest.raises(
            RuntimeError,
            match=r"DataLoader worker \(pid \d+\) exited unexpectedly with exit code 1",
        ):
            next_within(pool, HANG)
    finally:
        pool.close()
    assert (
        "could not send a batch to the trainer (TypeError: cannot pickle '_thread.lock' object);"
        " the worker stops" in capfd.readouterr().err
    )
