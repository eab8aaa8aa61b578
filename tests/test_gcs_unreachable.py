"""A Cloud Storage endpoint that takes no connection is said at once, in one line: before,
google-cloud-storage retried each request for two minutes, and a Beam stage then ended in a
traceback."""

from __future__ import annotations

import socket
import time

import pytest

from pipelines import books
from pipelines.beam.runner import stage_main
from pipelines.io import clients, storage
from tests.support.s3server import free_port
from trainer.run.remote import RemoteRun


@pytest.fixture
def nobody(monkeypatch) -> int:
    """STORAGE_EMULATOR_HOST at a port nothing listens on, no proxy, no kept client."""
    port = free_port()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(clients, "_CLIENTS", {})
    return port


def refused(port: int) -> str:
    return (
        f"cannot reach the Cloud Storage endpoint 127.0.0.1:{port} ([Errno 111] Connection "
        "refused); check STORAGE_EMULATOR_HOST and the network"
    )


def test_the_endpoint_is_named_with_or_without_a_scheme(nobody, monkeypatch) -> None:
    assert clients.gcs_unreachable() == refused(nobody)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"127.0.0.1:{nobody}")
    assert clients.gcs_unreachable() == refused(nobody)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"127.0.0.1:{listening.getsockname()[1]}")
        assert clients.gcs_unreachable() is None


def test_behind_a_proxy_the_proxy_takes_the_connection(nobody, monkeypatch) -> None:
    for variable in ("http_proxy", "ALL_PROXY"):  # requests takes either
        monkeypatch.setenv(variable, f"http://127.0.0.1:{nobody}")
        assert clients.gcs_unreachable() is None
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert clients.gcs_unreachable() == refused(nobody)
        monkeypatch.delenv(variable)
        monkeypatch.delenv("no_proxy")


def test_a_beam_stage_says_it_in_one_line_before_any_work(nobody, tmp_path, capsys) -> None:
    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another.\n")
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        stage_main(books.run, ["--input", str(book), "--output", "gs://b/out"], "bertkit books")
    assert (exited.value.code, time.monotonic() - started < 60) == (1, True)
    assert capsys.readouterr().err == f"bertkit books: error: {refused(nobody)}\n"


def test_inspect_and_train_read_and_write_through_the_same_line(nobody) -> None:
    with pytest.raises(storage.StorageError) as raised:
        storage.open_binary("gs://b/shards/manifest.json")
    assert str(raised.value) == f"gs://b/shards/manifest.json: cannot be read: {refused(nobody)}"
    with pytest.raises(ConnectionError) as raised:
        RemoteRun.open("gs://b/run", keep=2).prepare(resume=False, overwrite=False)
    assert str(raised.value) == refused(nobody)
