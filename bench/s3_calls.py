"""Beam's s3:// filesystem calls with a boto3 client per call (Beam's own) and one shared.

    python -m bench.s3_calls                     # 40 objects of 4 KiB, 5 repeats
    python -m bench.s3_calls --objects 100 --bytes 65536 --repeats 3

A loopback S3 server (moto, in its own process) holds --objects objects. Each Beam stage
touches its files through `pipelines.beam.files`, whose calls go to Beam's `S3FileSystem`;
this runs the calls a stage makes for one input file (exists, a match for its size, an open
and read of every byte), for every object, in two rows interleaved in each repeat so that a
change of load on the machine hits both alike:

  per call    Beam's own wrapper: a new boto3 session and client for every call
  shared      `pipelines.beam.s3_clients`: one boto3 client per process and S3 settings

For each row, the median over --repeats of this process's CPU milliseconds per object and
objects per wall second; the server's own CPU is not counted. The last line is the ratio.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from apache_beam.io.aws import s3io
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from tests.support.s3server import CREDENTIALS, start_s3_server, stop_server

BUCKET = "bench-s3-calls"


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


def measure(urls: list[str], shared: bool) -> tuple[float, float]:
    """(CPU ms per object, objects per wall second) of one pass over `urls`."""
    with beam_wrapper(shared):
        cpu, wall = time.process_time(), time.perf_counter()
        touch_every_object(urls)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return 1000 * cpu / len(urls), len(urls) / wall


def summary(rows: dict[str, list[tuple[float, float]]], objects: int, size: int) -> list[str]:
    """The table: each row's median CPU ms per object and objects per second, then the ratio
    of the medians' CPU."""
    repeats = len(rows["shared"])
    lines = [
        f"Beam's S3 filesystem: exists + match + read of {objects} objects of {size} B, "
        f"loopback moto (median of {repeats})",
        f"{'row':<10} {'CPU ms/object':>14} {'objects/s':>10}",
    ]
    medians = {}
    for name, runs in rows.items():
        medians[name] = statistics.median(cpu for cpu, _ in runs)
        objects_per_s = statistics.median(rate for _, rate in runs)
        lines.append(f"{name:<10} {medians[name]:>14.1f} {objects_per_s:>10.1f}")
    ratio = medians["per call"] / medians["shared"]
    return [*lines, f"shared uses {ratio:.1f}x less CPU per object"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=40)
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    process, endpoint, client = start_s3_server()
    try:
        client.create_bucket(Bucket=BUCKET)
        urls = []
        for index in range(args.objects):
            client.put_object(Bucket=BUCKET, Key=f"in/{index:05d}", Body=b"x" * args.bytes)
            urls.append(f"s3://{BUCKET}/in/{index:05d}")
        files.configure(
            PipelineOptions(
                s3_endpoint_url=endpoint,
                s3_access_key_id=CREDENTIALS["aws_access_key_id"],
                s3_secret_access_key=CREDENTIALS["aws_secret_access_key"],
                s3_region_name=CREDENTIALS["region_name"],
            )
        )
        rows: dict[str, list[tuple[float, float]]] = {"per call": [], "shared": []}
        measure(urls[:2], shared=True)  # the first client and connection, outside the rows
        for _ in range(args.repeats):
            for name in rows:
                rows[name].append(measure(urls, shared=name == "shared"))
    finally:
        stop_server(process)
    print("\n".join(summary(rows, args.objects, args.bytes)))


if __name__ == "__main__":
    main()
