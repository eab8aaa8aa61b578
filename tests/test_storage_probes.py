"""A probe for a file on object storage ("is the vocabulary beside the manifest?") that meets a
network fault is tried again, not taken for an answer nor let through as a traceback.

Against moto's S3 on loopback behind tests/support/faultproxy.py, which cuts the answer of the
probed key's GETs halfway through their body, at most `max_in_a_row` times in a row: boto does
not retry a cut error answer (urllib3's ProtocolError reaches the caller), so before
`exists_with_retries` a trainer streaming its shards from S3 died at its first checkpoint,
where it looked for the shards' vocabulary (the slow fault campaign's training run found it).
"""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace

import pytest
from urllib3.exceptions import ProtocolError

from pipelines.io import storage
from pipelines.io.retry import RetryPolicy, exists_with_retries
from tests.support.faultproxy import FaultProxy
from tests.support.s3server import client_environment, free_port
from trainer.recipe import shards_vocab_dir

BUCKET = "probes"
QUICK = RetryPolicy(attempts=3, backoff_s=0.01)


@pytest.fixture
def s3(s3_server):
    s3_server.bucket(BUCKET)
    s3_server.client.put_object(Bucket=BUCKET, Key="there/vocab.txt", Body=b"[PAD]\n")
    return s3_server


def cutting(s3, monkeypatch, in_a_row: int) -> FaultProxy:
    """A proxy that cuts every GET answer, `in_a_row` times for each key in a row, with the
    clients of this process pointed at it."""
    proxy = FaultProxy(
        s3.endpoint,
        rate=1.0,
        seed=0,
        faults=("cut",),
        max_in_a_row=in_a_row,
        only=lambda method, _target: method == "GET",
    ).start()
    for name, value in client_environment(proxy.endpoint).items():
        monkeypatch.setenv(name, value)
    return proxy


def test_a_cut_answer_is_tried_again_and_the_probe_answers(s3, monkeypatch, caplog):
    missing, present = f"s3://{BUCKET}/nothing/vocab.txt", f"s3://{BUCKET}/there/vocab.txt"
    proxy = cutting(s3, monkeypatch, in_a_row=1)
    try:
        with caplog.at_level(logging.WARNING, logger="pipelines.io.retry"):
            assert exists_with_retries(missing, QUICK) is False
            assert exists_with_retries(present, QUICK) is True
        with pytest.raises(ProtocolError):  # what the probe alone lets through
            storage.exists(missing)
    finally:
        proxy.stop()
    (warning,) = caplog.messages  # the 404's body cut once; the 200's body is never read
    assert warning.startswith(f"{missing}: look for failed (ProtocolError: ")
    assert warning.endswith("retry 1 of 2 in 0.0 s")


def test_a_probe_that_never_gets_through_says_where_and_how_often(s3, monkeypatch):
    missing = f"s3://{BUCKET}/nothing/vocab.txt"
    proxy = cutting(s3, monkeypatch, in_a_row=3)
    try:
        with pytest.raises(OSError, match=r"could not look for it after 3 attempts \(Protocol"):
            exists_with_retries(missing, QUICK)
    finally:
        proxy.stop()


def test_the_trainer_finds_the_shards_vocabulary_through_cut_answers(s3, monkeypatch, tmp_path):
    """The shards' manifest on S3 records its vocabulary as `../vocab`, which is neither beside
    it nor in the working directory: both probes meet a cut answer first, and the answer is
    the path beside the manifest (where `bertkit train` then says it is missing)."""
    monkeypatch.chdir(tmp_path)
    manifest_url = f"s3://{BUCKET}/run/shards/manifest.json"
    source = SimpleNamespace(
        manifest=SimpleNamespace(vocab={"path": "../vocab"}), manifest_url=manifest_url
    )
    proxy = cutting(s3, monkeypatch, in_a_row=1)
    try:
        assert shards_vocab_dir(source) == f"s3://{BUCKET}/run/vocab"
    finally:
        proxy.stop()
    assert proxy.counts[("cut", "GET")] == 1  # the local probe of ../vocab is no GET


def test_a_local_path_is_asked_once(tmp_path, caplog):
    fifo = tmp_path / "vocab.txt"
    os.mkfifo(fifo)
    with caplog.at_level(logging.WARNING, logger="pipelines.io.retry"):
        assert exists_with_retries(str(tmp_path / "missing.txt"), QUICK) is False
        with pytest.raises(storage.NotAFileError, match="named pipe"):
            exists_with_retries(str(fifo), QUICK)
    assert caplog.messages == []


def test_an_endpoint_no_one_answers_is_one_storage_error(monkeypatch) -> None:
    """botocore's EndpointConnectionError is not an OSError: it went up as a traceback from
    `inspect` and `train` (before any step) instead of their one line."""
    port = free_port()  # nothing listens there
    for name, value in client_environment(f"http://127.0.0.1:{port}").items():
        monkeypatch.setenv(name, value)
    with pytest.raises(storage.StorageError) as raised:
        storage.exists("s3://b/shards/manifest.json")
    assert str(raised.value) == (
        "s3://b/shards/manifest.json: cannot be read: Could not connect to the endpoint URL: "
        f'"http://127.0.0.1:{port}/b/shards/manifest.json"; check the storage endpoint '
        "(AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST) and the network"
    )
