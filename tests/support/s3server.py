"""A real S3 endpoint for benchmarks and tests: moto's server on loopback, in its own process.

bench.loader reads shards from it (the "bertkit S3" row), and the tests' s3_server fixture
(tests/conftest.py) starts it once per session: tests/support owns it because bench may
import tests/support, but no test imports bench. Not a command of its own.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import boto3

# moto accepts any credentials; these are what the clients and AWS_* variables use.
CREDENTIALS = {
    "aws_access_key_id": "test",
    "aws_secret_access_key": "test",
    "region_name": "us-east-1",
}


def client_environment(endpoint: str) -> dict[str, str]:
    """AWS_* variables that send every boto3 client made without arguments (smart_open's)
    to the server, with its credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": CREDENTIALS["region_name"],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_s3_server(timeout_s: float = 30) -> tuple[subprocess.Popen, str, Any]:
    """(process, endpoint URL, boto3 client) once the server answers; it is killed if it
    does not within `timeout_s`."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)
    await_server(process, client.list_buckets, timeout_s)
    return process, endpoint, client


def await_server(process: subprocess.Popen, probe: Callable[[], Any], timeout_s: float) -> None:
    """Wait until `probe()` succeeds against a server just started; stop the server and raise
    the probe's error if it does not within `timeout_s` or the process ends."""
    deadline = time.monotonic() + timeout_s
    while True:  # bounded wait for the server to answer
        try:
            probe()
            return
        except Exception:  # not up yet: connection refused, a 5xx while it starts, …
            if time.monotonic() > deadline or process.poll() is not None:
                stop_server(process)
                raise
            time.sleep(0.2)


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
