"""Writing, listing and deleting objects on s3:// and gs:// (Beam-free): what the trainer
needs to keep a run directory on object storage (trainer/remote_run.py).

An object appears whole or not at all when its upload completes (S3 and GCS alike), so a
file written here is never seen half-written. s3:// uses the same boto3 client as reading
(storage._transport_params: the standard AWS_* environment); gs:// a google-cloud-storage
client (anonymous when STORAGE_EMULATOR_HOST points at an emulator).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pipelines.io import storage


def split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket, key) of an s3:// or gs:// URL."""
    kind = storage.scheme(url)
    if kind not in ("s3", "gs"):
        raise storage.StorageError(f"{url}: only s3:// and gs:// can be written")
    bucket, _, key = url.split("://", 1)[1].partition("/")
    return kind, bucket, key


def _gcs_bucket(name: str) -> Any:
    storage._require_gcs()
    from google.cloud import storage as gcs

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        project = os.environ.get("GOOGLE_CLOUD_PROJECT", "emulator")
        return gcs.Client(credentials=AnonymousCredentials(), project=project).bucket(name)
    return gcs.Client().bucket(name)


def _s3() -> Any:
    return storage._transport_params("s3")["client"]


def upload(local: Path, url: str) -> None:
    kind, bucket, key = split(url)
    if kind == "s3":
        _s3().upload_file(str(local), bucket, key)
    else:
        _gcs_bucket(bucket).blob(key).upload_from_filename(str(local))


def download(url: str, local: Path) -> None:
    kind, bucket, key = split(url)
    local.parent.mkdir(parents=True, exist_ok=True)
    if kind == "s3":
        _s3().download_file(bucket, key, str(local))
    else:
        _gcs_bucket(bucket).blob(key).download_to_filename(str(local))


def list_names(prefix_url: str) -> list[str]:
    """The names of every object under `prefix_url`/, relative to it, sorted."""
    kind, bucket, key = split(prefix_url.rstrip("/") + "/")
    if kind == "s3":
        pages = _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    else:
        keys = [blob.name for blob in _gcs_bucket(bucket).list_blobs(prefix=key)]
    return sorted(name[len(key) :] for name in keys)


def delete(url: str) -> None:
    kind, bucket, key = split(url)
    if kind == "s3":
        _s3().delete_object(Bucket=bucket, Key=key)
    else:
        _gcs_bucket(bucket).blob(key).delete()
