"""Object-storage clients built for every call against one kept per process, on loopback
servers: Beam's s3:// filesystem, and gs:// reads outside Beam.

    python -m bench.client_reuse                     # 40 objects of 4 KiB, 5 repeats
    python -m bench.client_reuse --objects 100 --bytes 65536 --repeats 3

Two servers, each holding --objects objects: moto's S3 and gcp-storage-emulator's GCS, each
in its own process. Four rows, each pair interleaved in every repeat so that a change of
load on the machine hits both alike:

  s3 per call    what a Beam stage does with an input file (exists, a match for its size, an
                 open and read of every byte, through `pipelines.beam.files`) with Beam's
                 own S3 wrapper: a new boto3 session and client for every call
  s3 shared      the same with `pipelines.beam.s3_clients`: one boto3 client per process
  gs per object  a read of every object through smart_open with its own default, a new
                 google-cloud-storage client (an HTTP session) for every object
  gs shared      the same through `pipelines.io.storage.open_binary` (the trainer's shards,
                 `inspect`): one client per process (`pipelines/io/clients.py`)

For each row, the median over --repeats of this process's CPU milliseconds per object and
objects per wall second; the servers' own CPU is not counted. On Google's endpoint a new
GCS client also fetches an OAuth token and opens a TLS connection, which the emulator
(anonymous, plain HTTP) does not show.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import smart_open
from apache_beam.io.aws import s3io
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.io import storage
from tests.support.gcsserver import gcs_emulator
from tests.support.s3server import CREDENTIALS, start_s3_server, stop_server

BUCKET = "bench-client-reuse"
Row = list[tuple[float, float]]  # (CPU ms per object, objects per second), one per repeat


@contextmanager
def beam_wrapper(shared: bool) -> Iterator[None]:
    """Beam's S3 wrapper class for the block: bertkit's shared one, or Beam's own."""
    installed = s3io.boto3_client.Client
    s3io.boto3_client.Client = installed if shared else installed.__mro__[1]
    try:
        yield
    finally:
        s3io.boto3_client.Client = installed


def touch_every_object(urls: list[str]) -> int:
    """What a stage does with each input file; returns the bytes read."""
    read = 0
    for url in urls:
        assert files.exists(url)
        size = files.match_sizes(url)[url]
        assert len(files.read_file(url)) == size, url
        read += size
    return read


def read_every_object(urls: list[str], shared: bool) -> int:
    """Each object's bytes, through storage's kept client or smart_open's own; the bytes."""
    read = 0
    for url in urls:
        opened = storage.open_binary(url) if shared else smart_open.open(url, "rb")
        with opened as source:
            read += len(source.read())
    return read


def measure(urls: list[str], calls: Callable[[list[str]], int]) -> tuple[float, float]:
    """(CPU ms per object, objects per wall second) of one pass of `calls` over `urls`."""
    cpu, wall = time.process_time(), time.perf_counter()
    calls(urls)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return 1000 * cpu / len(urls), len(urls) / wall


def s3_rows(objects: int, size: int, repeats: int) -> dict[str, Row]:
    process, endpoint, client = start_s3_server()
    try:
        client.create_bucket(Bucket=BUCKET)
        urls = []
        for index in range(objects):
            client.put_object(Bucket=BUCKET, Key=f"in/{index:05d}", Body=b"x" * size)
            urls.append(f"s3://{BUCKET}/in/{index:05d}")
        files.configure(
            PipelineOptions(
                s3_endpoint_url=endpoint,
                s3_access_key_id=CREDENTIALS["aws_access_key_id"],
                s3_secret_access_key=CREDENTIALS["aws_secret_access_key"],
                s3_region_name=CREDENTIALS["region_name"],
            )
        )
        rows: dict[str, Row] = {"s3 per call": [], "s3 shared": []}
        touch_every_object(urls[:2])  # the first client and connection, outside the rows
        for _ in range(repeats):
            for name in rows:
                with beam_wrapper(shared=name == "s3 shared"):
                    rows[name].append(measure(urls, touch_every_object))
        return rows
    finally:
        stop_server(process)


def gcs_rows(objects: int, size: int, repeats: int) -> dict[str, Row]:
    with gcs_emulator(BUCKET) as client:
        bucket = client.bucket(BUCKET)
        urls = []
        for index in range(objects):
            bucket.blob(f"in/{index:05d}").upload_from_string(b"x" * size)
            urls.append(f"gs://{BUCKET}/in/{index:05d}")
        rows: dict[str, Row] = {"gs per object": [], "gs shared": []}
        for shared in (False, True):  # the first client and connection, outside the rows
            read_every_object(urls[:2], shared)
        for _ in range(repeats):
            for name in rows:
                shared = name == "gs shared"
                rows[name].append(measure(urls, lambda u, s=shared: read_every_object(u, s)))
        return rows


def summary(rows: dict[str, Row], objects: int, size: int) -> list[str]:
    """The table: each row's median CPU ms per object and objects per second, then, for
    each store, how many times less CPU per object the shared client takes."""
    repeats = len(next(iter(rows.values())))
    lines = [
        f"{objects} objects of {size} B on loopback servers (median of {repeats})",
        f"{'row':<14} {'CPU ms/object':>14} {'objects/s':>10}",
    ]
    medians = {}
    for name, runs in rows.items():
        medians[name] = statistics.median(cpu for cpu, _ in runs)
        objects_per_s = statistics.median(rate for _, rate in runs)
        lines.append(f"{name:<14} {medians[name]:>14.1f} {objects_per_s:>10.1f}")
    for store, alone in (("s3", "s3 per call"), ("gs", "gs per object")):
        if alone in medians:
            ratio = medians[alone] / medians[f"{store} shared"]
            lines.append(f"{store}: shared uses {ratio:.1f}x less CPU per object")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.client_reuse", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", type=int, default=40)
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rows = s3_rows(args.objects, args.bytes, args.repeats)
    rows.update(gcs_rows(args.objects, args.bytes, args.repeats))
    print("\n".join(summary(rows, args.objects, args.bytes)))


if __name__ == "__main__":
    main()
