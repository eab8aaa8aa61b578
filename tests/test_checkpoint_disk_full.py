"""A checkpoint that cannot be written (a full disk) ends the run with one line and exit 1,
its temporary file removed and `latest` still naming the last whole checkpoint
(trainer/run/checkpoints.py).

No test can fill a disk without root, so the disk fills here by RLIMIT_FSIZE, in a process
of its own with SIGXFSZ ignored: a write past the limit then fails with EFBIG, which reaches
torch.save exactly as ENOSPC does: an OSError from the file's write, then torch's own
RuntimeError as it closes the archive (both checked by hand on a 1 MiB tmpfs)."""

from __future__ import annotations

import os
import subprocess
import textwrap

from tests.support.launch import python_command
from tests.test_train import TINY

LIMIT = 256 * 1024  # bytes: a tiny model's checkpoint is larger, everything else smaller


def run_limited(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        python_command(*args, file_size_limit=LIMIT),
        env={**os.environ, "OMP_NUM_THREADS": "1", "BERTKIT_PROGRESS": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_checkpoint_too_large_for_the_disk_is_removed_and_latest_kept(tmp_path):
    code = """
        import sys
        import torch
        from pathlib import Path
        from trainer.run.checkpoints import save_checkpoint
        directory = Path(sys.argv[1])
        save_checkpoint(directory, 1, {"w": torch.zeros(1000)}, 3)
        try:
            save_checkpoint(directory, 2, {"w": torch.zeros(1_000_000)}, 3)
        except OSError as error:
            print(type(error).__name__, error.errno, error)
    """
    directory = tmp_path / "checkpoints"
    done = run_limited(["-c", textwrap.dedent(code), str(directory)])
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"CheckpointWriteError 27 writing the checkpoint {directory}/step-00000002.pt failed "
        "(File too large): free space there, then rerun with --resume (latest still names "
        "step-00000001.pt)\n"
    )
    assert sorted(p.name for p in directory.iterdir()) == ["latest", "step-00000001.pt"]
    assert (directory / "latest").read_text() == "step-00000001.pt\n"


def test_a_full_disk_at_the_first_checkpoint_ends_training_in_one_line(sample_shards, tmp_path):
    run_dir = tmp_path / "run"
    flags = ["--max-steps", "4", "--checkpoint-every", "2", "--warmup-steps", "1"]
    flags += ["--eval-every", "0", "--num-workers", "0"]
    shards, output = ["--shards", str(sample_shards)], ["--output", str(run_dir)]
    done = run_limited(["-m", "bertkit", "train", *TINY, *shards, *output, *flags])
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"bertkit train: error: writing the checkpoint {run_dir}/checkpoints/step-00000002.pt "
        "failed (File too large): free space there, then rerun the same command"
    ], done.stderr
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    assert list((run_dir / "checkpoints").iterdir()) == []
