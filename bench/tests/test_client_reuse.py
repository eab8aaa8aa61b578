"""bench/client_reuse.py's own checks; tests/test_s3_clients.py and tests/test_gcs.py run
the shared clients against the loopback servers."""

from bench.client_reuse import summary, touch_every_object


def test_the_table_gives_the_medians_and_their_ratios() -> None:
    rows = {
        "s3 per call": [(600.0, 1.5), (640.0, 1.4), (700.0, 1.2)],
        "s3 shared": [(8.0, 50.0), (10.0, 48.0), (9.0, 40.0)],
        "gs per object": [(4.0, 200.0), (5.0, 190.0), (4.4, 210.0)],
        "gs shared": [(2.0, 400.0), (2.2, 390.0), (2.4, 380.0)],
    }
    assert summary(rows, 40, 4096) == [
        "40 objects of 4096 B on loopback servers (median of 3)",
        "row             CPU ms/object  objects/s",
        "s3 per call             640.0        1.4",
        "s3 shared                 9.0       48.0",
        "gs per object             4.4      200.0",
        "gs shared                 2.2      390.0",
        "s3: shared uses 71.1x less CPU per object",
        "gs: shared uses 2.0x less CPU per object",
    ]


def test_every_object_is_checked_sized_and_read(tmp_path) -> None:
    urls = []
    for index, data in enumerate((b"abc", b"defgh")):
        path = tmp_path / f"{index:05d}"
        path.write_bytes(data)
        urls.append(str(path))
    assert touch_every_object(urls) == 8
