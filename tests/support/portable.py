"""A cluster-shaped Beam engine on loopback: Beam's portable job service and a separate
external worker pool, each its own process, as a cluster runs them (used by the tests and by
anyone checking a change before paying for Dataflow).

    with portable_engine() as flags:        # ["--runner", "PortableRunner", …]
        wikipedia.run(["--input", …, "--output", …, *flags])

The job service (`local_job_service_main`) receives the job and runs it on Beam's portable
runner; the worker pool (`worker_pool_main`) starts an SDK worker process per request, with
this Python first on its PATH so the workers import the same bertkit and Beam. Not a
command of its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.s3server import await_server, free_port, stop_server


def _listening(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


@contextlib.contextmanager
def portable_engine(timeout_s: float = 60) -> Iterator[list[str]]:
    """Start the job service and the worker pool; yield the flags that send a stage to them."""
    job_port, pool_port = free_port(), free_port()
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    job_service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apache_beam.runners.portability.local_job_service_main",
            "--port",
            str(job_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    worker_pool = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apache_beam.runners.worker.worker_pool_main",
            "--service_port",
            str(pool_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    try:
        await_server(job_service, lambda: _listening(job_port), timeout_s)
        await_server(worker_pool, lambda: _listening(pool_port), timeout_s)
        yield [
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            f"localhost:{job_port}",
            "--environment_type",
            "EXTERNAL",
            "--environment_config",
            f"localhost:{pool_port}",
        ]
    finally:
        stop_server(worker_pool)
        stop_server(job_service)
