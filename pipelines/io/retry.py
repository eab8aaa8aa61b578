"""Reading from storage that sometimes fails: retries with backoff, and streams that resume.

A shard streamed from object storage or HTTP meets dropped connections, 5xx answers and
timeouts over a long run. `RetryPolicy` says how often and how patiently to try again;
`ResumingStream` reopens its URL after a transient error and reads on from the byte where it
broke, so the caller sees one unbroken stream; errors that retrying cannot mend (a missing
file, a corrupt shard) go straight through.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from pipelines.io import storage
from pipelines.io.shards import ShardReadError

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Transient read errors (a dropped connection, a 5xx, a timeout) are retried this way."""

    attempts: int = 5
    backoff_s: float = 1.0  # doubled after each failure
    max_backoff_s: float = 30.0


def _transient_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError

        errors.append(BotoCoreError)
    except ImportError:
        pass
    try:
        from urllib3.exceptions import HTTPError

        errors.append(HTTPError)
    except ImportError:
        pass
    return tuple(errors)


_TRANSIENT = _transient_errors()


def open_with_retries(url: str, policy: RetryPolicy) -> BinaryIO:
    return retry(lambda: storage.open_binary(url), url, policy, "open")


def exists_with_retries(url: str, policy: RetryPolicy = RetryPolicy()) -> bool:
    """storage.exists with a remote probe's dropped connection, 5xx or cut answer tried
    again: a probe that meets one says neither "there" nor "not there" (a cut 404 reaches the
    caller as urllib3's ProtocolError, which boto does not retry). A local path is asked once:
    its errors are no network fault."""
    if not storage.is_remote(url):
        return storage.exists(url)
    return retry(lambda: storage.exists(url), url, policy, "look for")


def retry(action: Callable[[], Any], url: str, policy: RetryPolicy, what: str) -> Any:
    delay = policy.backoff_s
    for attempt in range(1, policy.attempts + 1):
        try:
            return action()
        except (FileNotFoundError, ShardReadError, storage.NotAFileError):
            raise  # not transient: retrying cannot help
        except _TRANSIENT as error:
            if attempt == policy.attempts:
                raise ShardReadError(
                    f"{url}: could not {what} it after {policy.attempts} attempts "
                    f"({type(error).__name__}: {error}); check the storage and the network, "
                    "then resume from the last checkpoint"
                ) from error
            _LOG.warning(
                "%s: %s failed (%s: %s); retry %d of %d in %.1f s",
                url,
                what,
                type(error).__name__,
                error,
                attempt,
                policy.attempts - 1,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, policy.max_backoff_s)
    raise AssertionError("unreachable")


class ResumingStream:
    """A read-only stream that reopens its URL after a transient error and reads on.

    A broken connection surfaces as an exception or as an early end of the stream; with the
    manifest's byte count both are caught. After reopening, the bytes already delivered are
    skipped (by seeking where the stream can, else by reading), so the caller sees one
    unbroken stream.

    A server that ignores Range requests (Python's http.server, some static hosts) answers a
    ranged GET with 200 and the whole body: smart_open's seek then raises
    io.UnsupportedOperation. That is no network fault and is not retried: the stream is
    reopened once and read through, the bytes before the wanted offset read and dropped in
    1 MiB pieces (memory stays flat), and every later reopen of this stream reads through too.
    """

    def __init__(self, url: str, size: int | None, policy: RetryPolicy, start: int = 0) -> None:
        """Bytes [start, size) of `url` (to its end when `size` is None); no read goes past
        `size`, so a manifest's byte count bounds what a reader takes from a file."""
        self._url, self._size, self._policy = url, size, policy
        self._stream: BinaryIO | None = None
        self.position = start
        self._ended_at: int | None = None  # where the stream last ended early
        self._reads_through = False  # the server ignores Range: skip by reading

    def _reopen(self) -> BinaryIO:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        stream = storage.open_binary(self._url)
        if self.position and stream.seekable() and not self._reads_through:
            try:
                stream.seek(self.position)
            except io.UnsupportedOperation:  # a 200 with the whole body to a Range request
                stream.close()
                self._reads_through = True
                _LOG.info(
                    "%s: the server answers a Range request with the whole file; reading "
                    "through to byte %s instead",
                    storage.redact(self._url),
                    f"{self.position:,}",
                )
                stream = storage.open_binary(self._url)
            else:
                self._stream = stream
                return stream
        if self.position:
            _skip(stream, self.position)
        self._stream = stream
        return stream

    def read(self, size: int = -1) -> bytes:
        if self._size is not None:
            left = self._size - self.position
            size = left if size < 0 else min(size, left)
            if size <= 0:
                return b""

        def attempt() -> bytes:
            stream = self._stream or self._reopen()
            try:
                data = stream.read(size)
                if not data and self._size is not None and self.position < self._size:
                    self._ended_early()
            except BaseException:
                self._stream = None  # reopen on the next attempt
                raise
            return data

        data = retry(attempt, self._url, self._policy, "read")
        self.position += len(data)
        return data

    def _ended_early(self) -> None:
        """A stream that ends before the size the manifest records: a dropped connection
        (retried) or a truncated file. A local file, or a remote one that ends at the same
        byte again after reopening, is truncated: that is not retried."""
        if not storage.is_remote(self._url) or self._ended_at == self.position:
            raise ShardReadError(
                f"{self._url}: ends after {self.position:,} bytes, the manifest records at "
                f"least {self._size:,}; the file is truncated: rebuild it or restore it "
                "from the source"
            )
        self._ended_at = self.position
        raise ConnectionError(f"the stream ended after {self.position:,} of {self._size:,} bytes")

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self) -> ResumingStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _skip(stream: BinaryIO, size: int) -> None:
    """Read `size` bytes and drop them, 1 MiB at a time; ConnectionError (retried) if the
    stream ends first."""
    left = size
    while left:
        skipped = stream.read(min(left, 1 << 20))
        if not skipped:
            stream.close()
            raise ConnectionError(f"ended after {size - left:,} of the {size:,} bytes skipped")
        left -= len(skipped)


def range_opener(url: str, policy: RetryPolicy) -> Callable[[int, int], ResumingStream]:
    """`(start, end) → ResumingStream` over `url`: what `read_verified_samples` reads a
    shard's blocks through."""
    return lambda start, end: ResumingStream(url, end, policy, start)
