"""bench/s3_calls.py's own checks; tests/test_s3_clients.py runs the shared client against
the loopback S3 server."""

from bench.s3_calls import summary, touch_every_object


def test_the_table_gives_the_medians_and_their_ratio() -> None:
    rows = {
        "per call": [(600.0, 1.5), (640.0, 1.4), (700.0, 1.2)],
        "shared": [(8.0, 50.0), (10.0, 48.0), (9.0, 40.0)],
    }
    assert summary(rows, 40, 4096) == [
        "Beam's S3 filesystem: exists + match + read of 40 objects of 4096 B, loopback moto "
        "(median of 3)",
        "row         CPU ms/object  objects/s",
        "per call            640.0        1.4",
        "shared                9.0       48.0",
        "shared uses 71.1x less CPU per object",
    ]


def test_every_object_is_checked_sized_and_read(tmp_path) -> None:
    urls = []
    for index, data in enumerate((b"abc", b"defgh")):
        path = tmp_path / f"{index:05d}"
        path.write_bytes(data)
        urls.append(str(path))
    assert touch_every_object(urls) == 8
