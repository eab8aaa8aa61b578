"""`bertkit train` under torchrun on this machine, as the tests and benchmarks launch it: a
standalone rendezvous on loopback, a free port, Gloo on the CPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.s3server import free_port


def torchrun_trainer(processes: int) -> list[str]:
    """The command line up to the trainer's flags: torchrun with `processes` trainers."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(processes),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "-m",
        "trainer.train",
    ]


def torchrun_env() -> dict[str, str]:
    """One OpenMP thread a trainer (they share the cores), and this checkout importable."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
