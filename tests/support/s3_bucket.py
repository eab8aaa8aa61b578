"""A test module's bucket on the session's S3 server (tests/conftest.py's `s3_server`), this
process's clients pointed at it, and what a prefix holds: shared by the modules that train
and export onto S3."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.s3server import client_environment


def bucket_fixture(bucket: str) -> Callable[..., Any]:
    """A fixture giving a boto3 client, with `bucket` made and the AWS_* variables set."""

    @pytest.fixture
    def s3(s3_server, monkeypatch):
        s3_server.bucket(bucket)
        for name, value in client_environment(s3_server.endpoint).items():
            monkeypatch.setenv(name, value)
        return s3_server.client

    return s3


def objects_under(client, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object below `prefix/`, by its name under the prefix, with its bytes."""
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    return {
        o["Key"][len(prefix) + 1 :]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in found
    }
