"""One boto3 client per process for Beam's s3:// filesystem, as `pipelines.io.storage` keeps
one for smart_open (pipelines/io/clients.py).

Beam's `S3FileSystem` makes a new `S3IO`, and with it a new boto3 session and client, for
every call: each open, exists, size, match, rename and delete loads botocore's S3 service
model again, which costs more CPU than a small file's transfer (`python -m bench.client_reuse`).
`share_s3_clients()` replaces the wrapper class Beam builds (`boto3_client.Client`) with a
subclass that builds the boto3 client once per process, S3 flags (`--s3_endpoint_url`, …)
and AWS environment, and hands it to every later wrapper; each wrapper keeps its own
download state, as before. boto3's clients are safe to share between threads; a forked
process builds its own (the key holds the pid).

An endpoint that cannot be reached at all (botocore's EndpointConnectionError, after
botocore's own retries) ends a call with `StoreUnreachable`, which Beam does not retry: its
backoff, seven tries from 5 s, kept a stage waiting for 8 minutes before its traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, S3Options
from apache_beam.utils.retry import PermanentException

from pipelines.io import clients

# The S3Options fields Beam's wrapper builds its client from (boto3_client.Client.__init__).
_OPTION_FIELDS = (
    "s3_access_key_id",
    "s3_secret_access_key",
    "s3_session_token",
    "s3_endpoint_url",
    "s3_disable_ssl",
    "s3_region_name",
    "s3_api_version",
    "s3_verify",
)


def _options_key(options: Any) -> tuple[Any, ...]:
    """The S3 settings a wrapper is built from: PipelineOptions or a dict, as Beam takes."""
    if isinstance(options, PipelineOptions):
        view = options.view_as(S3Options)
        return tuple(getattr(view, name) for name in _OPTION_FIELDS)
    return tuple(options.get(name) for name in _OPTION_FIELDS)


class StoreUnreachable(OSError, PermanentException):
    """The S3 endpoint (or, checked before any work, the Cloud Storage one) cannot be
    reached: said at once (Beam retries no PermanentException)."""


def _unreachable_errors() -> tuple[type[Exception], ...]:
    try:
        from botocore.exceptions import EndpointConnectionError
    except ImportError:
        return ()
    return (EndpointConnectionError,)


def _failing_fast(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method`, raising StoreUnreachable where Beam's wrapper wrapped a connection error."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as error:
            for cause in (error, error.__context__):  # Beam's wrapper raises from its own
                if isinstance(cause, _unreachable_errors()):
                    raise StoreUnreachable(
                        f"{cause}: check --s3_endpoint_url or AWS_ENDPOINT_URL, and the network"
                    ) from cause
            raise

    return call


def _sharing(base: type) -> type:
    built: dict[tuple[Any, ...], Any] = {}
    fresh_state: dict[str, Any] = {}  # a new wrapper's own attributes, less its client

    class SharedClient(base):  # type: ignore[misc, valid-type]
        """Beam's S3 wrapper over the process's boto3 client for these settings."""

        def __init__(self, options: Any) -> None:
            key = (os.getpid(), _options_key(options), clients.environment(clients.S3_ENVIRONMENT))
            client = built.get(key)
            if client is None or not fresh_state:
                super().__init__(options)
                built[key] = self.client
                fresh_state.update((k, v) for k, v in vars(self).items() if k != "client")
                return
            vars(self).update(fresh_state)
            self.client = client

    for name, method in vars(base).items():
        if callable(method) and not name.startswith("_"):
            setattr(SharedClient, name, _failing_fast(method))
    SharedClient.__name__ = SharedClient.__qualname__ = f"Shared{base.__name__}"
    SharedClient.shared_clients = built  # for tests: what is cached
    return SharedClient


def share_s3_clients() -> None:
    """Make Beam's s3:// filesystem reuse one boto3 client per process and settings; once,
    and nothing where boto3 (the aws extra) is not installed."""
    try:
        from apache_beam.io.aws import s3io
    except ImportError:  # Beam without its AWS modules: no s3:// filesystem
        return
    if not s3io.BOTO3_INSTALLED:  # no boto3: Beam refuses s3:// paths itself
        return
    wrapper = s3io.boto3_client
    if not hasattr(wrapper.Client, "shared_clients"):
        wrapper.Client = _sharing(wrapper.Client)
