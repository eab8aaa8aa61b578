"""Writing, listing and deleting objects on s3:// and gs:// (Beam-free): what the trainer
needs to keep a run directory on object storage (trainer/run/remote.py).

An object appears whole or not at all when its upload completes (S3 and GCS alike), so a
file written here is never seen half-written. s3:// uses the same boto3 client as reading
(pipelines/io/clients.py: one per process, from the standard AWS_* environment); gs:// the
same google-cloud-storage client as reading (anonymous when STORAGE_EMULATOR_HOST points at
an emulator).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pipelines.io import clients, storage

# What S3 and GCS answer for a bucket or an object that is not there.
_S3_MISSING = {"404", "NoSuchBucket", "NoSuchKey", "NotFound"}


def split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket, key) of an s3:// or gs:// URL."""
    kind = storage.scheme(url)
    if kind not in ("s3", "gs"):
        raise storage.StorageError(f"{url}: only s3:// and gs:// can be written")
    bucket, _, key = url.split("://", 1)[1].partition("/")
    return kind, bucket, key


def _client_errors() -> tuple[type[Exception], ...]:
    """The errors the installed cloud clients raise for a failed request."""
    errors: list[type[Exception]] = []
    with contextlib.suppress(ImportError):
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    with contextlib.suppress(ImportError):
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError

        errors += [GoogleAPICallError, GoogleAuthError]
    return tuple(errors)


def _is_missing(error: Exception) -> bool:
    code = getattr(error, "response", None)
    if isinstance(code, dict):  # botocore's ClientError
        return str(code.get("Error", {}).get("Code")) in _S3_MISSING
    return getattr(error, "code", None) == 404  # google.api_core's NotFound


@contextlib.contextmanager
def _request(action: str, url: str) -> Iterator[None]:
    """A client's error as the IO layer's: FileNotFoundError when the bucket or the object
    is not there, StorageError (an OSError) for anything else, with what and where."""
    try:
        yield
    except _client_errors() as error:
        where = storage.redact(url)
        if _is_missing(error):
            raise FileNotFoundError(
                f"{action} {where}: no such bucket or object ({error})"
            ) from error
        raise storage.StorageError(f"{action} {where}: {error}") from error


def _gcs_bucket(name: str) -> Any:
    storage._require_gcs()
    return clients.gcs_client().bucket(name)


def _s3() -> Any:
    return clients.s3_client()


def upload(local: Path, url: str) -> None:
    kind, bucket, key = split(url)
    with _request("writing", url):
        if kind == "s3":
            _s3().upload_file(str(local), bucket, key)
        else:
            _gcs_bucket(bucket).blob(key).upload_from_filename(str(local))


def download(url: str, local: Path) -> None:
    kind, bucket, key = split(url)
    local.parent.mkdir(parents=True, exist_ok=True)
    with _request("reading", url):
        if kind == "s3":
            _s3().download_file(bucket, key, str(local))
        else:
            _gcs_bucket(bucket).blob(key).download_to_filename(str(local))


def list_names(prefix_url: str) -> list[str]:
    """The names of every object under `prefix_url`/, relative to it, sorted."""
    return sorted(list_sizes(prefix_url))


def list_sizes(prefix_url: str) -> dict[str, int]:
    """Every object under `prefix_url`/, by its name relative to it, with its size in bytes:
    one listing request per 1,000 objects (S3's page; GCS's JSON API pages the same way)."""
    kind, bucket, key = split(prefix_url.rstrip("/") + "/")
    with _request("listing", prefix_url):
        if kind == "s3":
            pages = _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
            found = [(o["Key"], o["Size"]) for page in pages for o in page.get("Contents", [])]
        else:
            found = [(b.name, b.size) for b in _gcs_bucket(bucket).list_blobs(prefix=key)]
    return {name[len(key) :]: int(size) for name, size in found}


def missing_bucket(url: str) -> str | None:
    """What to say when the storage answers that the bucket of `url` (s3:// or gs://) does
    not exist (S3's 404 to a HeadBucket, GCS's 404 to a bucket lookup); None for any other
    answer, or none: a bucket this client may not look at, or cannot reach, is not missing.
    One request; asked only once something was not found, to say why."""
    kind, bucket, _ = split(url)
    try:
        with _request("looking for the bucket of", url):
            if kind == "s3":
                _s3().head_bucket(Bucket=bucket)
                return None
            if _gcs_bucket(bucket).exists():
                return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    endpoint = "AWS_ENDPOINT_URL" if kind == "s3" else "STORAGE_EMULATOR_HOST"
    return (
        f"the bucket {kind}://{bucket} does not exist: check its name (and {endpoint}, where "
        "it is set, for the storage that holds it)"
    )


def object_problem(url: str, flag: str) -> str | None:
    """A message when `url`, a directory to write under, is itself an object: its files
    would go beside that object, under the same name, as `url`/NAME."""
    kind, bucket, key = split(url.rstrip("/"))
    if not key:
        return None
    with _request("looking at", url):
        if kind == "s3":
            found = _s3().list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents")
            there = bool(found) and found[0]["Key"] == key
        else:
            there = _gcs_bucket(bucket).blob(key).exists()
    if not there:
        return None
    return (
        f"{flag} {storage.redact(url)} is an object, not a directory: the files would go "
        "beside it, under the same name. Choose a new or empty " + flag
    )


def delete(url: str) -> None:
    kind, bucket, key = split(url)
    with _request("deleting", url):
        if kind == "s3":
            _s3().delete_object(Bucket=bucket, Key=key)
        else:
            _gcs_bucket(bucket).blob(key).delete()


def delete_if(url: str, version: str) -> bool:
    """Delete `url` only if the object there is still `version` (S3's If-Match on the ETag,
    GCS's if_generation_match): True if it was deleted, or was already gone; False if it is
    another version now, which stays."""
    kind, bucket, key = split(url)
    try:
        with _request("deleting", url):
            if kind == "s3":
                _s3().delete_object(Bucket=bucket, Key=key, IfMatch=version)
            else:
                _gcs_bucket(bucket).blob(key).delete(if_generation_match=int(version))
    except FileNotFoundError:  # gone already (or a retry after the delete landed)
        return True
    except storage.StorageError as error:
        if _is_precondition_failure(error.__cause__):
            return False
        raise
    return True


def create(url: str, data: bytes) -> str | None:
    """Write `data` to `url` only if no object is there (S3's If-None-Match: *, GCS's
    if_generation_match=0): the new object's version (`replace` takes it) if this call
    created it, None if one was already there. The storage decides, so of two writers
    racing for the name exactly one wins."""
    kind, bucket, key = split(url)
    try:
        with _request("creating", url):
            if kind == "s3":
                answer = _s3().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return str(answer["ETag"])
            blob = _gcs_bucket(bucket).blob(key)
            blob.upload_from_string(data, if_generation_match=0)
            return str(blob.generation)
    except storage.StorageError as error:
        if _is_precondition_failure(error.__cause__):
            return None
        raise


def replace(url: str, data: bytes, version: str) -> str | None:
    """Write `data` to `url` only if the object there is still `version` (S3's If-Match on
    the ETag, GCS's if_generation_match): the new version, or None if the object changed or
    is gone. A compare-and-swap: of a renewal and a takeover racing, exactly one wins."""
    kind, bucket, key = split(url)
    try:
        with _request("replacing", url):
            if kind == "s3":
                answer = _s3().put_object(Bucket=bucket, Key=key, Body=data, IfMatch=version)
                return str(answer["ETag"])
            blob = _gcs_bucket(bucket).blob(key)
            blob.upload_from_string(data, if_generation_match=int(version))
            return str(blob.generation)
    except FileNotFoundError:  # deleted since: no longer the version we hold
        return None
    except storage.StorageError as error:
        if _is_precondition_failure(error.__cause__):
            return None
        raise


def is_refused(error: BaseException) -> bool:
    """Whether an error of this module is the storage refusing these credentials the request
    (403 or 401: AccessDenied, Forbidden), rather than a fault that trying again may mend."""
    cause = error.__cause__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        code = str(response.get("Error", {}).get("Code"))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return code in ("AccessDenied", "AllAccessDisabled", "403", "401") or status in (401, 403)
    return getattr(cause, "code", None) in (401, 403)  # google.api_core's Forbidden


def _is_precondition_failure(error: BaseException | None) -> bool:
    response = getattr(error, "response", None)
    if isinstance(response, dict):  # botocore: 412, or 409 for a concurrent conditional write
        code = str(response.get("Error", {}).get("Code"))
        return code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
    return getattr(error, "code", None) == 412  # google.api_core's PreconditionFailed


def put(url: str, data: bytes) -> None:
    kind, bucket, key = split(url)
    with _request("writing", url):
        if kind == "s3":
            _s3().put_object(Bucket=bucket, Key=key, Body=data)
        else:
            _gcs_bucket(bucket).blob(key).upload_from_string(data)


def get(url: str, limit: int) -> bytes:
    """An object's bytes, at most `limit` + 1 of them (the caller refuses a longer one)."""
    kind, bucket, key = split(url)
    with _request("reading", url):
        if kind == "s3":
            body = _s3().get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit}")["Body"]
            return body.read(limit + 1)
        return _gcs_bucket(bucket).blob(key).download_as_bytes(start=0, end=limit)


class Versioned(NamedTuple):
    """An object as read: its bytes, its version (S3's ETag, GCS's generation: what
    `replace` and `delete_if` name) and when the storage says it was written, in seconds
    since the epoch by the storage's clock (None where the storage gave no time)."""

    data: bytes
    version: str
    modified: float | None


def get_versioned(url: str, limit: int) -> Versioned:
    """An object's bytes (at most `limit` + 1, as `get`), its version and its time."""
    kind, bucket, key = split(url)
    with _request("reading", url):
        if kind == "s3":
            answer = _s3().get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit}")
            data = answer["Body"].read(limit + 1)
            return Versioned(data, str(answer["ETag"]), _seconds(answer.get("LastModified")))
        blob = _gcs_bucket(bucket).get_blob(key)
        if blob is None:
            raise FileNotFoundError(f"reading {storage.redact(url)}: no such object")
        # The bytes of that generation, not of a newer one written between the two requests.
        generation = blob.generation
        data = blob.download_as_bytes(start=0, end=limit, if_generation_match=generation)
        return Versioned(data, str(generation), _seconds(blob.updated))


def _seconds(moment: object) -> float | None:
    """A client's timezone-aware datetime as seconds since the epoch; None for anything else."""
    if isinstance(moment, datetime.datetime) and moment.tzinfo is not None:
        return moment.timestamp()
    return None
