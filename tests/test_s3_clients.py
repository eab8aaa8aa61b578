"""Beam's s3:// filesystem over one boto3 client per process and S3 settings
(pipelines/beam/s3_clients.py), against the loopback S3 server."""

from __future__ import annotations

import time

import pytest
from apache_beam.io.aws import s3io
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import books
from pipelines.beam import files
from pipelines.beam.runner import stage_main
from tests.conftest import s3_flags
from tests.support.s3server import client_environment, free_port


def wrapper(endpoint: str) -> s3io.boto3_client.Client:
    return s3io.boto3_client.Client(options=PipelineOptions(s3_flags(endpoint)))


def test_wrappers_of_the_same_settings_share_one_client_and_keep_their_own_downloads(
    s3_server,
) -> None:
    first, second = wrapper(s3_server.endpoint), wrapper(s3_server.endpoint)
    assert first is not second and first.client is second.client
    first._download_pos = 7  # one wrapper's download state is its own
    assert second._download_pos == 0 and second._download_stream is None
    assert wrapper("http://127.0.0.1:9").client is not first.client  # other flags


def test_a_dict_of_the_same_settings_shares_the_client_and_other_environments_do_not(
    s3_server, monkeypatch
) -> None:
    options = PipelineOptions(s3_flags(s3_server.endpoint))
    shared = wrapper(s3_server.endpoint).client
    assert s3io.boto3_client.Client(options=options.get_all_options()).client is shared
    monkeypatch.setenv("AWS_REGION", "eu-west-3")  # another environment: another client
    assert wrapper(s3_server.endpoint).client is not shared
    monkeypatch.delenv("AWS_REGION")
    assert wrapper(s3_server.endpoint).client is shared


def test_beam_file_calls_on_s3_build_one_client(s3_server, monkeypatch) -> None:
    """write (create + rename), exists, match, open and delete through pipelines.beam.files:
    the objects are right, and one boto3 session and client was built for all the calls
    (Beam's own wrapper builds one a call)."""
    bucket = s3_server.bucket("s3-clients")
    files.configure(PipelineOptions(s3_flags(s3_server.endpoint)))
    s3io.boto3_client.Client.shared_clients.clear()
    sessions = []
    session_class = s3io.boto3_client.boto3.session.Session

    def counted_session(*args, **kwargs):
        sessions.append(args)
        return session_class(*args, **kwargs)

    monkeypatch.setattr(s3io.boto3_client.boto3.session, "Session", counted_session)
    url = f"s3://{bucket}/dir/a.txt"
    files.write_atomically(url, b"hello")
    assert files.exists(url) and files.match_sizes(f"s3://{bucket}/dir/*") == {url: 5}
    assert files.read_file(url) == b"hello"
    files.delete([url])
    assert not files.exists(url)
    assert len(sessions) == 1


def test_an_s3_endpoint_no_one_answers_ends_a_stage_at_once_in_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    """Beam retried each call seven times from 5 s (8 minutes) before a traceback."""
    port = free_port()  # nothing listens there
    for name, value in client_environment(f"http://127.0.0.1:{port}").items():
        monkeypatch.setenv(name, value)
    argv = ["--input", "s3://b/in/*.txt", "--output", str(tmp_path / "out")]
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        stage_main(books.run, argv, "bertkit books")
    assert (exited.value.code, time.monotonic() - started < 60) == (1, True)
    assert capsys.readouterr().err == (
        f'bertkit books: error: Could not connect to the endpoint URL: "http://127.0.0.1:{port}'
        '/b?list-type=***&prefix=***&encoding-type=***": check --s3_endpoint_url or '
        "AWS_ENDPOINT_URL, and the network\n"
    )
    assert not (tmp_path / "out").exists()


def test_the_trainer_s_s3_client_follows_every_credential_variable(s3_server, monkeypatch) -> None:
    """pipelines/io/clients.py keeps one boto3 client per environment: a secret, a session
    token, a credentials or config file or a CA bundle changed in the process gets a client
    built with the new one, and the environment as it was gets its client back."""
    from pipelines.io import clients

    for name, value in client_environment(s3_server.endpoint).items():
        monkeypatch.setenv(name, value)
    changed = ["AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"]
    for name in [*changed, "AWS_CA_BUNDLE"]:
        monkeypatch.delenv(name, raising=False)
    first = clients.s3_client()
    assert clients.s3_client() is first
    seen = [first]
    for name, value in [
        ("AWS_SECRET_ACCESS_KEY", "rotated"),
        ("AWS_SESSION_TOKEN", "token"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
        ("AWS_CONFIG_FILE", "/nonexistent/config"),
        ("AWS_CA_BUNDLE", "/nonexistent/ca.pem"),
    ]:
        monkeypatch.setenv(name, value)
        client = clients.s3_client()
        assert all(client is not other for other in seen), name
        seen.append(client)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    for name in [*changed, "AWS_CA_BUNDLE"]:
        monkeypatch.delenv(name)
    assert clients.s3_client() is first
