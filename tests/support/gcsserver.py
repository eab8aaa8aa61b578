"""A real GCS endpoint for tests and benchmarks: gcp-storage-emulator on loopback, in its own
process.

Beam's gs:// filesystem and smart_open both talk to it through `STORAGE_EMULATOR_HOST`
(`client_environment`), with anonymous credentials: no Google account, no network, and no
wait on Google's credential look-up (pipelines/beam/__init__.py). Not a command of its own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from tests.support.s3server import await_server, free_port, stop_server

__all__ = ["client_environment", "gcs_emulator", "start_gcs_server", "stop_server"]


def client_environment(endpoint: str) -> dict[str, str]:
    """The variables that send google-cloud-storage clients (Beam's, smart_open's) to the
    emulator; the project is any name, since the emulator checks none."""
    return {"STORAGE_EMULATOR_HOST": endpoint, "GOOGLE_CLOUD_PROJECT": "bertkit-test"}


def storage_client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        credentials=AnonymousCredentials(),
        project="bertkit-test",
        client_options={"api_endpoint": endpoint},
    )


def start_gcs_server(timeout_s: float = 30) -> tuple[subprocess.Popen, str, Any]:
    """(process, endpoint URL, google-cloud-storage client) once the emulator answers; it is
    killed if it does not within `timeout_s`."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcp_storage_emulator",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    client = storage_client(endpoint)
    await_server(process, lambda: list(client.list_buckets()), timeout_s)
    return process, endpoint, client


@contextlib.contextmanager
def gcs_emulator(*buckets: str) -> Iterator[Any]:
    """The emulator with `buckets`, and this process's (and its children's) GCS clients
    pointed at it, anonymous, for the duration; yields a google-cloud-storage client."""
    from apache_beam.internal.gcp import auth

    from pipelines.beam import gcs_emulator_connects_anonymously

    process, endpoint, client = start_gcs_server()
    environment = client_environment(endpoint)
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        gcs_emulator_connects_anonymously()
        for bucket in buckets:
            client.create_bucket(bucket)
        yield client
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        auth._Credentials._credentials_init = False  # the next gs:// user looks again
        stop_server(process)
