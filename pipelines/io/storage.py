"""Reading bertkit artifacts from local paths and URLs: s3://, gs://, http(s)://.

Used by `bertkit inspect`, which must read what the stages wrote wherever it was published,
including plain HTTP servers that cannot list a directory: so a directory is only ever found
through its manifest, never by listing, and `locate` decides what a target is from its name:

    …/shard-000000.tar                  a shard
    …/manifest.json, …/_manifest.json   a shards or a documents manifest
    anything else                       a directory: DIR/manifest.json, then DIR/_manifest.json

Local paths are opened with `open()`, so they need nothing beyond the core install; URLs go
through smart_open (the `train` extra). s3:// uses boto3's default client, which honours the
standard environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, …); gs:// needs
google-cloud-storage (the `gcp` extra).

    python -c "from pipelines.io import storage; print(storage.locate('s3://bucket/shards'))"
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, NamedTuple

from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.manifest import MANIFEST_NAME
from schemas.shards import SHARD_DEPTH

_LOG = logging.getLogger(__name__)

REMOTE_SCHEMES = ("s3", "gs", "http", "https")
SHARD_SUFFIX = ".tar"
_FILE_SCHEME = "file://"
# 1 MiB copies keep memory flat when a file must be spooled to disk (see `open_seekable`).
_COPY_BYTES = 1 << 20

TargetKind = Literal["shard", "shards", "documents"]


class StorageError(OSError):
    """A file or URL could not be opened for a reason other than its absence."""


class NotATargetError(StorageError):
    """A path that exists but is not something bertkit reads (a shard, manifest or their
    directory)."""


@dataclass(frozen=True, slots=True)
class Location:
    """What a target is, decided from its name and which manifest exists.

    `url` is the shard itself, or the directory a manifest describes; `manifest_url` is the
    manifest (None for a single shard).
    """

    kind: TargetKind
    url: str
    manifest_url: str | None


# Credentials a URL may carry: user:password@ (HTTP basic auth) and the query parameters of
# presigned S3/GCS/Azure URLs and token-bearing links.
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
_SECRET_QUERY_RE = re.compile(
    r"(?i)([?&](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
    r"x-goog-credential|signature|sig|token|access_token|api_key|key|password)=)[^&\s'\"]+"
)
REDACTED = "***"


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***: for anything printed,
    logged or stored (a checkpoint, a manifest). Opening still uses the URL as given."""
    return _SECRET_QUERY_RE.sub(rf"\1{REDACTED}", _USERINFO_RE.sub(rf"\1{REDACTED}@", text))


def redact_values(values: dict[str, Any]) -> dict[str, Any]:
    """A config or record as stored (a checkpoint's flags, say): its strings redacted."""
    return {k: redact(v) if isinstance(v, str) else v for k, v in values.items()}


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URL credentials from every record it passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True


def scheme(url: str) -> str:
    """`s3`, `gs`, `http`, `https`, or "" for a local path."""
    head, separator, _ = url.partition("://")
    return head.lower() if separator and head.lower() in REMOTE_SCHEMES else ""


def is_remote(url: str) -> bool:
    return bool(scheme(url))


_ANY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(value: str) -> bool:
    """Whether `value` is a URL of any scheme (s3://, gs://, hdfs://, file://, …): a string
    that a local path must never be taken for (`Path('s3://b/r')` is the directory `s3:/b/r`)."""
    return bool(_ANY_URL.match(value))


def _local_path(url: str) -> str:
    """The local path of a path or file:// URL. Any other URL this module cannot read
    (hdfs://, ftp://, …) is refused: `open("hdfs://nn/x")` would read the local `hdfs:/nn/x`."""
    if url.startswith(_FILE_SCHEME):
        return url[len(_FILE_SCHEME) :]
    if is_url(url):
        kind = url.partition("://")[0]
        raise StorageError(
            f"{redact(url)}: bertkit reads local paths, file://, s3://, gs:// and http(s)://, "
            f"not {kind}://; a URL is never taken for a local path"
        )
    return url


def _is_url_path(value: str) -> bool:
    """A URL whose path is `/`-separated (any scheme but file://, which is a local path)."""
    return is_url(value) and not value.startswith(_FILE_SCHEME)


def join(base: str, relative: str) -> str:
    """`base`/`relative` for a local path or a URL (always `/` in URLs)."""
    if _is_url_path(base):
        return f"{base.rstrip('/')}/{relative.lstrip('/')}"
    return os.path.join(_local_path(base), relative)


def parent(url: str) -> str:
    """The directory holding `url`: `s3://b/a/x.tar` → `s3://b/a`."""
    if _is_url_path(url):
        head, _, path = url.partition("://")
        return f"{head}://{posixpath.dirname(path.rstrip('/'))}"
    return os.path.dirname(os.path.normpath(_local_path(url)))


def basename(url: str) -> str:
    return posixpath.basename(url.rstrip("/")) if _is_url_path(url) else os.path.basename(url)


def open_binary(url: str) -> BinaryIO:
    """Open a local path or a URL for reading bytes.

    Raises FileNotFoundError when the file (or bucket) does not exist, StorageError when it
    exists but cannot be read (no credentials, no network, a missing extra).
    """
    kind = scheme(url)
    if not kind:
        return open(_local_path(url), "rb")  # the caller closes it
    if kind == "gs":
        _require_gcs()
    smart_open = _smart_open()
    try:
        return smart_open.open(url, "rb", transport_params=_transport_params(kind))
    except FileNotFoundError:
        raise
    except _credentials_errors() as error:
        raise StorageError(
            f"{url}: no credentials for {kind}:// ({error}); set them the usual way "
            "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE for s3://, "
            "GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login` "
            "for gs://)"
        ) from error
    except _gcs_not_found() as error:
        raise FileNotFoundError(f"{url}: not found ({error})") from error
    except OSError as error:  # smart_open wraps S3 ClientErrors; requests' errors are OSErrors
        if _is_not_found(error):
            raise FileNotFoundError(f"{url}: not found ({error})") from error
        raise StorageError(f"{url}: cannot be read: {error}") from error


def read_bytes(url: str, max_bytes: int | None = None) -> bytes:
    """The file's bytes; with `max_bytes`, a larger file is refused after reading just past
    the bound (a manifest or a vocabulary that names `/dev/zero` cannot fill the memory)."""
    with open_binary(url) as source:
        return read_bounded(source, url, max_bytes)


def read_bounded(source: BinaryIO, url: str, max_bytes: int | None) -> bytes:
    if max_bytes is None:
        return source.read()
    parts, got = [], 0
    while got <= max_bytes:  # network streams may return short reads
        more = source.read(max_bytes + 1 - got)
        if not more:
            return b"".join(parts)
        parts.append(more)
        got += len(more)
    raise StorageError(
        f"{url}: over {max_bytes:,} bytes, more than a file of this kind ever holds; it is "
        "not what bertkit wrote there: check the path, or rebuild the file"
    )


def read_exactly(stream: BinaryIO, size: int, chunk_bytes: int = 0) -> bytes:
    """`size` bytes, fewer only where the stream ends (network streams return short reads):
    reads of at least `chunk_bytes`, so exactly `size` with the default 0."""
    parts = []
    got = 0
    while got < size:
        part = stream.read(max(size - got, chunk_bytes))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def read_text(url: str, max_bytes: int | None = None) -> str:
    return read_bytes(url, max_bytes).decode("utf-8")


def exists(url: str) -> bool:
    """Whether `url` names a readable file (never a directory: HTTP cannot tell them apart)."""
    if not is_remote(url):
        return os.path.isfile(_local_path(url))
    try:
        with open_binary(url):
            return True
    except FileNotFoundError:
        return False


def open_seekable(url: str) -> BinaryIO:
    """A seekable file for random-access readers (Parquet reads its footer first).

    Local files, S3 and GCS objects seek with ranged reads. An HTTP server that ignores Range
    requests (Python's http.server, some static hosts) cannot, so its file is spooled to a
    temporary file on disk first, streamed in 1 MiB copies: memory stays flat either way.
    """
    source = open_binary(url)
    if not is_remote(url):
        return source
    try:
        if source.seekable():
            source.seek(-1, io.SEEK_END)  # a ranged read: the server shows whether it can
            source.seek(0)
            return source
    except io.UnsupportedOperation:
        pass
    except OSError as error:
        source.close()
        raise StorageError(f"{url}: cannot be read: {error}") from error
    source.close()
    _LOG.info("%s: the server does not answer Range requests; copying to a temporary file", url)
    spooled = tempfile.TemporaryFile()  # noqa: SIM115 (returned: the caller closes it)
    with open_binary(url) as source:
        shutil.copyfileobj(source, spooled, _COPY_BYTES)
    spooled.seek(0)
    return spooled  # type: ignore[return-value]


class Reader(NamedTuple):
    """How a Beam-free reader opens files. `READER` (this module) serves everything outside
    Beam; a Beam stage passes `pipelines.beam.files.READER`, so the filesystem flags its
    runner was given (`--s3_endpoint_url`, …) apply to what it reads too."""

    open: Callable[[str], BinaryIO]  # the bytes as stored (never decompressed by suffix)
    read_bytes: Callable[..., bytes]  # (url, max_bytes=None)
    exists: Callable[[str], bool]
    join: Callable[[str, str], str]


READER = Reader(open_binary, read_bytes, exists, join)


def locate(path_or_url: str) -> Location:
    """Decide what a target is; FileNotFoundError, with what was tried, if it is not there."""
    target = path_or_url.rstrip("/") if len(path_or_url) > 1 else path_or_url
    name = basename(target)
    if name.endswith(SHARD_SUFFIX):
        if not exists(target):
            raise FileNotFoundError(f"{path_or_url}: no such shard")
        return Location("shard", target, None)
    if name in (SHARDS_MANIFEST_NAME, MANIFEST_NAME):
        if not exists(target):
            raise FileNotFoundError(f"{path_or_url}: no such manifest")
        kind: TargetKind = "shards" if name == SHARDS_MANIFEST_NAME else "documents"
        return Location(kind, parent(target), target)
    if not is_remote(target) and os.path.exists(_local_path(target)):
        if not os.path.isdir(_local_path(target)):
            raise NotATargetError(
                f"{path_or_url} is a file but neither a shard (shard-*{SHARD_SUFFIX}) nor a "
                f"manifest ({SHARDS_MANIFEST_NAME}, {MANIFEST_NAME}); give a shards or "
                "documents directory, its manifest, or a shard"
            )
    elif not is_remote(target):
        raise FileNotFoundError(
            f"{path_or_url}: no such file or directory; give a shards or documents directory, "
            f"its {SHARDS_MANIFEST_NAME} / {MANIFEST_NAME}, or a shard-*{SHARD_SUFFIX}"
        )
    for manifest_name, kind in ((SHARDS_MANIFEST_NAME, "shards"), (MANIFEST_NAME, "documents")):
        manifest_url = join(target, manifest_name)
        if exists(manifest_url):
            return Location(kind, target, manifest_url)  # type: ignore[arg-type]
    raise FileNotFoundError(
        f"{path_or_url}: neither {SHARDS_MANIFEST_NAME} (a shards directory) nor "
        f"{MANIFEST_NAME} (a documents directory) is there. A directory without its manifest "
        "is incomplete, since every stage writes it last: rerun the stage that makes it, or "
        f"give a single shard-*{SHARD_SUFFIX}"
    )


def shard_manifest(shard_url: str) -> tuple[str, str]:
    """Where the manifest listing a shard would be, and the shard's path relative to it.

    `…/out/seq128/train/shard-000000.tar` → `…/out/manifest.json`, `seq128/train/shard-000000.tar`
    """
    names = []
    directory = shard_url
    for _ in range(SHARD_DEPTH):
        names.append(basename(directory))
        directory = parent(directory)
    return join(directory, SHARDS_MANIFEST_NAME), "/".join(reversed(names))


# One boto3 client per process and S3 environment: smart_open makes a new client for every
# file otherwise, which costs about as much CPU per shard as reading the shard's bytes
# (`python -m bench.loader`). Keyed by pid too, since a client must not cross a fork.
_S3_CLIENTS: dict[tuple[Any, ...], Any] = {}
_S3_ENVIRONMENT = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID",
                   "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION")  # fmt: skip
_S3_BUFFER_BYTES = 1 << 20  # smart_open's 128 KiB default splits each 1 MiB read in eight


def _transport_params(kind: str) -> dict[str, Any]:
    if kind != "s3":
        return {}
    key = (os.getpid(), *(os.environ.get(name) for name in _S3_ENVIRONMENT))
    client = _S3_CLIENTS.get(key)
    if client is None:
        import boto3

        client = _S3_CLIENTS[key] = boto3.client("s3")
    return {"client": client, "buffer_size": _S3_BUFFER_BYTES}


def _smart_open() -> Any:
    try:
        import smart_open
    except ImportError as error:
        raise StorageError(
            "reading URLs needs smart_open: pip install 'bertkit[train]' (or smart-open)"
        ) from error
    return smart_open


def _require_gcs() -> None:
    try:
        import google.cloud.storage  # noqa: F401 (only checks that it is installed)
    except ImportError as error:
        raise StorageError(
            "gs:// URLs need google-cloud-storage, which is not installed: "
            "pip install 'bertkit[gcp]'"
        ) from error


def _is_not_found(error: OSError) -> bool:
    backend = getattr(error, "backend_error", None)  # smart_open's S3 ClientError
    if backend is not None:
        code = str(getattr(backend, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("NoSuchKey", "NoSuchBucket", "404", "NotFound")
    response = getattr(error, "response", None)  # requests.HTTPError
    return getattr(response, "status_code", None) in (404, 410)


def _credentials_errors() -> tuple[type[Exception], ...]:
    """Missing-credential errors of the installed cloud clients: expected in the field."""
    errors: list[type[Exception]] = []
    try:
        from botocore.exceptions import NoCredentialsError, PartialCredentialsError

        errors += [NoCredentialsError, PartialCredentialsError]
    except ImportError:
        pass
    try:
        from google.auth.exceptions import DefaultCredentialsError

        errors.append(DefaultCredentialsError)
    except ImportError:
        pass
    return tuple(errors)


def _gcs_not_found() -> tuple[type[Exception], ...]:
    try:
        from google.api_core.exceptions import NotFound
    except ImportError:
        return ()
    return (NotFound,)
