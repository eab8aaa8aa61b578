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
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, NamedTuple

from pipelines.io import clients
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


class NotAFileError(StorageError):
    """A local path that exists but is not a regular file (a FIFO, a directory, a device):
    refused at once, never read (a FIFO would block for ever) nor retried as a network fault."""


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


# Credentials a URL may carry, and how they are found in any text (an error message, a flag):
#   userinfo  everything from `scheme://` to the last `@` before the first `/`, as urllib3 splits
#             `http://user:pa@ss@host/` (a password may hold `@`); or, where the part before
#             the first `@` is `ID:SECRET` and the secret holds `/` (an AWS secret key in
#             smart_open's `s3://ID:SE/CRET@bucket/key`), up to that `@`. A port (`host:8080/`)
#             is not taken for a secret.
#   query and fragment  every value, except under the names in `_HARMLESS_QUERY_NAMES`. An
#             allowlist, not a list of names that look secret: a secret travels under names
#             nobody can list (nginx secure_link's `md5=`, CloudFront's `Policy=`, `code=`,
#             `s=`), and a redacted harmless value costs only a less specific message.
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*?(?=:?(?:[\s'\"<>]|$))")
# A URL's path and query without its scheme and host, as urllib3 and requests name a URL in
# their errors ("Max retries exceeded with url: /shards/manifest.json?X-Amz-Signature=…").
_PATH_QUERY_IN_TEXT = re.compile(r"(?<![\w:/.])(/[^\s?#'\"<>]*)\?([^\s#'\"<>]*)")
_SLASHED_SECRET = re.compile(r"[^/:@]+:(?!\d{1,5}(?:[/?#]|$))[^@]*@")
_HARMLESS_QUERY_NAMES = frozenset(
    {
        "x-amz-algorithm",
        "x-amz-date",
        "x-amz-expires",
        "x-amz-signedheaders",
        "x-goog-algorithm",
        "x-goog-date",
        "x-goog-expires",
        "x-goog-signedheaders",
        "versionid",
        "generation",
        "alt",
    }
)
REDACTED = "***"


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***: for anything printed,
    logged or stored (a checkpoint, a manifest). Opening still uses the URL as given.

    `http://user:pa@ss@h/s.tar?versionId=3&sig=x#token=y`
    → `http://***@h/s.tar?versionId=3&sig=***#token=***`

    A fragment of parameters (`#access_token=…`, as OAuth's implicit flow sends one) is
    redacted as a query is; a bare fragment is a place in a page (`…/use-soft-delete#name`, in
    Beam's warnings) and is kept.
    """
    text = _URL_IN_TEXT.sub(lambda found: _redact_url(found.group()), text)
    return _PATH_QUERY_IN_TEXT.sub(
        lambda found: f"{found.group(1)}?{_redact_parameters(found.group(2))}", text
    )


def _redact_url(url: str) -> str:
    head, _, rest = url.partition("://")
    path_start = rest.find("/")
    at = rest.rfind("@", 0, path_start if path_start >= 0 else len(rest))
    if at >= 0:
        rest = f"{REDACTED}{rest[at:]}"
    elif slashed := _SLASHED_SECRET.match(rest):
        rest = f"{REDACTED}@{rest[slashed.end() :]}"
    address, hash_mark, fragment = rest.partition("#")
    address, question_mark, query = address.partition("?")
    if "=" in fragment:
        fragment = _redact_parameters(fragment)
    return f"{head}://{address}{question_mark}{_redact_parameters(query)}{hash_mark}{fragment}"


def _redact_parameters(parameters: str) -> str:
    """`name=value&…` with every value but a harmless name's replaced; a bare `value` too."""
    redacted = []
    for part in parameters.split("&"):
        name, equals, _ = part.partition("=")
        if not part or (equals and name.lower() in _HARMLESS_QUERY_NAMES):
            redacted.append(part)
        else:
            redacted.append(f"{name}={REDACTED}" if equals else REDACTED)
    return "&".join(redacted)


def redact_values(values: Any) -> Any:
    """A config or record as stored (a checkpoint's flags, say): every string in it redacted,
    inside lists, tuples and dicts too (`--documents URL URL`)."""
    if isinstance(values, str):
        return redact(values)
    if isinstance(values, dict):
        return {key: redact_values(value) for key, value in values.items()}
    if isinstance(values, list):
        return [redact_values(value) for value in values]
    if isinstance(values, tuple):
        return tuple(redact_values(value) for value in values)
    return values


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


def query_of(url: str) -> str:
    """A remote URL's `?query` and `#fragment` as given ("" for none, and for local paths,
    whose `?` and `#` are characters of a name)."""
    if not is_remote(url):
        return ""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[cut:]


def _address(url: str) -> str:
    """A URL without its query and fragment: what its path is read from. The query names one
    object (a presigned URL's signature signs that object alone), so nothing derived from a
    URL (its directory, a file beside it) carries it."""
    query = query_of(url)
    return url[: len(url) - len(query)] if query else url


def join(base: str, relative: str) -> str:
    """`base`/`relative` for a local path or a URL (always `/` in URLs; a URL's query is
    not carried over: see `_address`)."""
    if _is_url_path(base):
        return f"{_address(base).rstrip('/')}/{relative.lstrip('/')}"
    return os.path.join(_local_path(base), relative)


def parent(url: str) -> str:
    """The directory holding `url`: `s3://b/a/x.tar` → `s3://b/a` (`https://h/a/x.tar?sig=…`
    → `https://h/a`: the directory of the URL's path, not of its query)."""
    if _is_url_path(url):
        head, _, path = _address(url).partition("://")
        return f"{head}://{posixpath.dirname(path.rstrip('/'))}"
    return os.path.dirname(os.path.normpath(_local_path(url)))


def basename(url: str) -> str:
    """The last name of a URL's path (`https://h/a/x.tar?sig=…` → `x.tar`) or of a path."""
    if _is_url_path(url):
        return posixpath.basename(_address(url).rstrip("/"))
    return os.path.basename(url)


def open_binary(url: str) -> BinaryIO:
    """Open a local path or a URL for reading bytes.

    Raises FileNotFoundError when the file (or bucket) does not exist, StorageError when it
    exists but cannot be read (no credentials, no network, a missing extra).
    """
    kind = scheme(url)
    if not kind:
        return _open_regular_file(_local_path(url))
    if kind == "gs":
        _require_gcs()
    smart_open = _smart_open()
    try:
        return smart_open.open(url, "rb", transport_params=clients.transport_params(kind))
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
    except _unreachable_errors() as error:  # botocore's and google-api-core's own, not OSErrors
        raise StorageError(
            f"{url}: cannot be read: {error}; check the storage endpoint "
            "(AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST) and the network"
        ) from error
    except OSError as error:  # smart_open wraps S3 ClientErrors; requests' errors are OSErrors
        if _is_not_found(error):
            raise FileNotFoundError(f"{url}: not found ({error})") from error
        raise StorageError(f"{url}: cannot be read: {error}") from error


_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _not_a_file(path: str, mode: int) -> NotAFileError:
    kind = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return NotAFileError(
        f"{path} is {kind}, not a regular file: bertkit reads what it wrote only from regular "
        "files; put the file bertkit wrote there"
    )


def _open_regular_file(path: str) -> BinaryIO:
    """A local file opened for reading, refused unless it is a regular file: checked before
    opening (a FIFO is never opened, so nothing waits on a writer) and again on what was
    opened (O_NONBLOCK: a FIFO swapped in between does not block the open either)."""
    mode = os.stat(path).st_mode  # FileNotFoundError as open() would raise it
    if not stat.S_ISREG(mode):
        raise _not_a_file(path, mode)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise _not_a_file(path, mode)
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")  # the caller closes it


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
        more = source.read(min(max_bytes + 1 - got, _MAX_READ_BYTES))
        if not more:
            return b"".join(parts)
        parts.append(more)
        got += len(more)
    raise StorageError(
        f"{url}: over {max_bytes:,} bytes, more than a file of this kind ever holds; it is "
        "not what bertkit wrote there: check the path, or rebuild the file"
    )


# The most one read asks a stream for. A file object allocates what a read asks for before it
# reads, so a size taken from a file (a tar header's 8^12 - 1 bytes, a manifest's shard size)
# must never be asked for at once: memory grows with the bytes that arrive, never with a claim.
_MAX_READ_BYTES = 8 << 20


def read_exactly(stream: BinaryIO, size: int, chunk_bytes: int = 0) -> bytes:
    """`size` bytes, fewer only where the stream ends (network streams return short reads):
    reads of at least `chunk_bytes`, so exactly `size` with the default 0, each at most 8 MiB
    (or `chunk_bytes`) however large `size` is."""
    parts = []
    got = 0
    while got < size:
        part = stream.read(min(max(size - got, chunk_bytes), max(chunk_bytes, _MAX_READ_BYTES)))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def read_text(url: str, max_bytes: int | None = None) -> str:
    return read_bytes(url, max_bytes).decode("utf-8")


def exists(url: str) -> bool:
    """Whether `url` names a readable file (never a directory: HTTP cannot tell them apart).
    A local path that is there but is not a regular file raises NotAFileError: "not there"
    would be the wrong words for a FIFO or a directory in a file's place."""
    if not is_remote(url):
        path = _local_path(url)
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        if not stat.S_ISREG(mode):
            raise _not_a_file(path, mode)
        return True
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


def current_umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux's
    /proc/self/status); elsewhere set and restored at once, as os.umask alone can tell it."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):  # no /proc (macOS), or a kernel before 4.7: ask os.umask
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def give_default_mode(path: str | os.PathLike[str]) -> None:
    """Give a file written under a temporary name the mode `open()` would have given it,
    0o666 less the umask (0644 under the usual 022). A file from tempfile.mkstemp, or from a
    library that writes through one (safetensors' save_file), is 0600 whatever the umask,
    and renamed into place it keeps that: a teammate could not read it."""
    os.chmod(path, 0o666 & ~current_umask())


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
    if query_of(target) and not name.endswith(SHARD_SUFFIX):
        raise NotATargetError(
            f"{redact(path_or_url)}: a URL with a query names one object (a presigned URL's "
            "signature signs that object alone), and a manifest's shards and block tables are "
            "other objects beside it, which its query cannot sign. Give the directory "
            "itself: s3://BUCKET/… or gs://BUCKET/… with credentials from the environment, "
            "or an http(s):// directory the server serves without a per-object signature "
            "(user:password@ works)"
        )
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
    if scheme(target) in ("s3", "gs"):
        from pipelines.io.objects import missing_bucket  # objects imports this module

        if problem := missing_bucket(target):
            raise FileNotFoundError(f"{redact(path_or_url)}: {problem}")
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


def _unreachable_errors() -> tuple[type[Exception], ...]:
    """The installed cloud clients' errors for a store they cannot reach or that keeps
    failing (an endpoint down, retries run out), which are not OSErrors."""
    errors: list[type[Exception]] = []
    try:
        from botocore.exceptions import BotoCoreError

        errors.append(BotoCoreError)
    except ImportError:
        pass
    try:
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import TransportError

        errors += [GoogleAPIError, TransportError]
    except ImportError:
        pass
    return tuple(errors)


def _gcs_not_found() -> tuple[type[Exception], ...]:
    try:
        from google.api_core.exceptions import NotFound
    except ImportError:
        return ()
    return (NotFound,)
