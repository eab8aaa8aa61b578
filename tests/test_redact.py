"""URL credentials are redacted from everything printed, logged or stored.

The rule (pipelines/io/storage.py): userinfo up to the last `@` before the host's path (or an
`ID:SECRET@` whose secret holds `/`), and every query and fragment value except under a short
list of harmless names; a fragment's values only where it holds parameters (a bare fragment
is a place in a page).
"""

import pytest

from pipelines.io.storage import redact, redact_values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # userinfo ends at the last `@` before the host: a password may hold `@`
        ("http://user:pa@ss@host/shards", "http://***@host/shards"),
        (
            "open http://u:p@ss@w@rd@h:8080/s.tar: not found",
            "open http://***@h:8080/s.tar: not found",
        ),
        ("http://u:p%40ss@h:80/a", "http://***@h:80/a"),
        ("https://token@h/s.tar", "https://***@h/s.tar"),
        # an AWS secret key holds `/`: smart_open's s3://ID:SECRET@bucket/key
        ("s3://AKIAEXAMPLE:wJalr/K7MDENG+bPxR@bucket/shards", "s3://***@bucket/shards"),
        # a port is not a secret, and an `@` in a path is not userinfo
        ("http://h:8080/runs/model@v2/x.tar", "http://h:8080/runs/model@v2/x.tar"),
        ("s3://bucket/model@v2/manifest.json", "s3://bucket/model@v2/manifest.json"),
        # every query value but a harmless name's, whatever the secret's name
        (
            "https://h/s.tar?apikey=A&api_key=B&auth=C&client_secret=D&password=E&sig=F&key=G",
            "https://h/s.tar?apikey=***&api_key=***&auth=***&client_secret=***&password=***"
            "&sig=***&key=***",
        ),
        ("https://h/s.tar?md5=9f2c&expires=1700000000", "https://h/s.tar?md5=***&expires=***"),
        (
            "https://h/m.json?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F1"
            "&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=ab12",
            "https://h/m.json?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
            "&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=***",
        ),
        ("s3://b/x.tar?versionId=3Lg&x=1", "s3://b/x.tar?versionId=3Lg&x=***"),
        ("gs://b/x?sig=zz&token=t", "gs://b/x?sig=***&token=***"),
        # a fragment's values too, and a bare query value; a bare fragment is a page's anchor
        ("https://h/s.tar#token=abc", "https://h/s.tar#token=***"),
        ("https://h/s.tar?0123abcd#frag", "https://h/s.tar?***#frag"),
        (
            "see https://cloud.google.com/storage/docs/use-soft-delete#turn-off-soft-delete",
            "see https://cloud.google.com/storage/docs/use-soft-delete#turn-off-soft-delete",
        ),
        ("https://u:p@h/s.tar?sig=1#token=2", "https://***@h/s.tar?sig=***#token=***"),
        # quoted, and as requests names a URL in its errors: the path and query alone
        (
            "could not open 'https://h/s?sig=abc' (Max retries exceeded with url: "
            "/shards/manifest.json?X-Amz-Signature=abc&X-Amz-Date=1 (Caused by x))",
            "could not open 'https://h/s?sig=***' (Max retries exceeded with url: "
            "/shards/manifest.json?X-Amz-Signature=***&X-Amz-Date=1 (Caused by x))",
        ),
        # nothing else changes
        ("s3://bucket/shards/manifest.json", "s3://bucket/shards/manifest.json"),
        ("/data/user@host/shards", "/data/user@host/shards"),
        ("step 10, loss 7.25: ok", "step 10, loss 7.25: ok"),
    ],
)
def test_redact_hides_every_url_credential_and_nothing_else(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # redacting twice changes nothing


def test_redact_values_reaches_strings_inside_lists_and_dicts() -> None:
    config = {
        "shards": "http://user:pa@ss@h/shards",
        "documents": ["s3://b/docs?sig=1", "local/docs"],
        "nested": {"vocab": ("https://h/v?token=2",), "steps": 3},
        "lr": 1e-4,
    }
    assert redact_values(config) == {
        "shards": "http://***@h/shards",
        "documents": ["s3://b/docs?sig=***", "local/docs"],
        "nested": {"vocab": ("https://h/v?token=***",), "steps": 3},
        "lr": 1e-4,
    }


SECRET_URL = "s3://AKIAXX:sec/retKEY@bkt/out/vocab"


def test_a_beam_stage_names_a_credential_url_without_its_secret(capsys, caplog) -> None:
    """The stages' one line, the log lines Beam writes about the paths it retries, and the
    traceback of an error no line was made for (pipelines/beam/runner.py's stage_main)."""
    import logging

    from pipelines.beam import files
    from pipelines.beam.runner import stage_main

    def refused(argv):
        logging.getLogger("apache_beam.io.s3").warning("Retry %s/vocab.json", SECRET_URL)
        raise files.OutputDirectoryError(f"{SECRET_URL} is not a directory")

    def failed(argv):
        raise RuntimeError(f"exists() operation failed for {SECRET_URL}/vocab.json")

    for run, code in ((refused, 2), (failed, 1)):
        with pytest.raises(SystemExit) as exited:
            stage_main(run, [], "bertkit examples")
        assert exited.value.code == code
        err = capsys.readouterr().err
        assert "sec/retKEY" not in err and "AKIAXX" not in err
        assert "s3://***@bkt/out/vocab" in err
    assert "Retry s3://***@bkt/out/vocab/vocab.json" in caplog.text
    assert "sec/retKEY" not in caplog.text
    assert err.endswith(
        "RuntimeError: exists() operation failed for s3://***@bkt/out/vocab/vocab.json\n"
    )
