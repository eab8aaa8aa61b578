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
import time
from collections.abc import Iterator
from pathlib import Path

from bench.s3server import free_port, stop_server


def _wait_for_port(port: int, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:  # bounded wait for the service to listen
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"a Beam service did not start on port {port} (exit {process.poll()})"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def portable_engine(timeout_s: float = 60) -> Iterator[list[str]]:
    """Start the job service and the worker pool; yield the flags that send a stage to them."""
    job_port, pool_port = free_port(), free_port()
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                   f"{os.environ.get('PATH', '')}"}  # fmt: skip
    job_service = subprocess.Popen(
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
         "--port", str(job_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
    )  # fmt: skip
    worker_pool = subprocess.Popen(
        [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
         "--service_port", str(pool_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
    )  # fmt: skip
    try:
        _wait_for_port(job_port, job_service, timeout_s)
        _wait_for_port(pool_port, worker_pool, timeout_s)
        yield [
            "--runner", "PortableRunner", "--job_endpoint", f"localhost:{job_port}",
            "--environment_type", "EXTERNAL", "--environment_config", f"localhost:{pool_port}",
        ]  # fmt: skip
    finally:
        stop_server(worker_pool)
        stop_server(job_service)
