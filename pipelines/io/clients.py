"""One object-storage client per process and environment, for everything outside Beam that
reads or writes s3:// and gs:// (`storage.open_binary` through smart_open, `objects`).

smart_open builds a client for every object it opens unless it is handed one: on S3 a boto3
client, which costs about as much CPU per shard as reading the shard's bytes (`python -m
bench.loader`); on GCS a google-cloud-storage client, a new HTTP session and with it a new
connection, and an OAuth token fetched again outside an emulator (`python -m
bench.client_reuse`). Each client here is kept under the environment variables that choose
its endpoint, credentials and project as they were when it was built, and the pid: a client
never crosses a fork, nor outlives a change of those variables. Beam's s3:// filesystem
keeps its own the same way (pipelines/beam/s3_clients.py).
"""

from __future__ import annotations

import os
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

# Every variable boto3 reads to choose the endpoint, the credentials and how it trusts the
# endpoint: a process that changes one (a new secret, a session token refreshed) gets a new
# client. The key holds their values, as the environment does; nothing logs it.
S3_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_CA_BUNDLE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)
GCS_ENVIRONMENT = (
    "STORAGE_EMULATOR_HOST",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "CLOUDSDK_CORE_PROJECT",
)
GCS_ENDPOINT = "https://storage.googleapis.com"
CONNECT_SECONDS = 10.0
# The longest an http(s):// answer may go silent before the read fails (and is retried
# from its byte, pipelines/io/retry.py): botocore's and google-cloud-storage's default. The
# requests library under smart_open waits forever without one: a stalled server held a
# training run, and its SIGTERM, with it.
READ_SECONDS = 60.0
_S3_BUFFER_BYTES = 1 << 20  # smart_open's 128 KiB default splits each 1 MiB read in eight

_CLIENTS: dict[tuple[Any, ...], Any] = {}


def environment(names: tuple[str, ...]) -> tuple[str | None, ...]:
    """The values of `names` as now: a client built under other values is not reused."""
    return tuple(os.environ.get(name) for name in names)


def _kept(store: str, names: tuple[str, ...], build: Callable[[], Any]) -> Any:
    key = (store, os.getpid(), *environment(names))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = build()
    return client


def _build_s3() -> Any:
    import boto3

    return boto3.client("s3")


def gcs_unreachable() -> str | None:
    """One line when the Cloud Storage endpoint (STORAGE_EMULATOR_HOST, or Google's) takes
    no TCP connection within CONNECT_SECONDS: a port no one answers, a host that does not
    resolve, no network. google-cloud-storage would retry such a request for two minutes
    before failing; this says it at once. Not checked where a proxy carries the requests
    (the proxy, not the endpoint, takes the connection)."""
    endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or GCS_ENDPOINT
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    host = parsed.hostname or ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    proxies = urllib.request.getproxies_environment()
    proxied = proxies.get(parsed.scheme) or proxies.get("all")  # requests honours all_proxy too
    if proxied and not urllib.request.proxy_bypass_environment(host):
        return None
    try:
        socket.create_connection((host, port), timeout=CONNECT_SECONDS).close()
    except OSError as error:
        return (
            f"cannot reach the Cloud Storage endpoint {host}:{port} ({error}); check "
            "STORAGE_EMULATOR_HOST and the network"
        )
    return None


def _build_gcs() -> Any:
    from google.cloud import storage as gcs

    problem = gcs_unreachable()
    if problem:
        raise ConnectionError(problem)

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        project = os.environ.get("GOOGLE_CLOUD_PROJECT", "emulator")
        return gcs.Client(credentials=AnonymousCredentials(), project=project)
    return gcs.Client()


def s3_client() -> Any:
    """This process's boto3 S3 client for the AWS environment as now."""
    return _kept("s3", S3_ENVIRONMENT, _build_s3)


def gcs_client() -> Any:
    """This process's google-cloud-storage client for the GCS environment as now: anonymous
    where STORAGE_EMULATOR_HOST points at an emulator, the default credentials elsewhere.
    The caller checks that google-cloud-storage is installed (storage's missing-extra line)."""
    return _kept("gs", GCS_ENVIRONMENT, _build_gcs)


def transport_params(kind: str) -> dict[str, Any]:
    """smart_open's transport_params for a URL scheme: the kept client, on S3 reads of 1 MiB,
    and on http(s) the connect and read timeouts the object stores' clients have already."""
    if kind == "s3":
        return {"client": s3_client(), "buffer_size": _S3_BUFFER_BYTES}
    if kind == "gs":
        return {"client": gcs_client()}
    if kind in ("http", "https"):
        return {"timeout": (CONNECT_SECONDS, READ_SECONDS)}
    return {}
