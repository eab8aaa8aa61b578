"""Whole-file reads and writes through Beam's FileSystems (local, gs://, s3://).

Every stage reads and writes its small files (manifests, vocabularies, spill files, shards)
through these, so a file is never passed through Beam's compression guessing (which reads a
truncated `.gz` without complaint) and an output is either complete or absent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from apache_beam.io.filesystems import CompressionTypes, FileSystems


class OutputDirectoryError(ValueError):
    """The output directory is not safe to write into."""


def read_file(path: str) -> bytes:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as source:
        return source.read()


def write_file(path: str, data: bytes) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as sink:
        sink.write(data)


def write_atomically(path: str, data: bytes) -> None:
    """Write under a temporary name, then rename: readers never see a partial file."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    write_file(temporary, data)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temporary], [path])


def clear_earlier_run(output_dir: str, patterns: Iterable[str], overwrite: bool) -> None:
    """Refuse to mix runs: files matching `patterns` mean an earlier run is in `output_dir`.

    With `overwrite` they are deleted, and the new run starts clean.
    """
    existing = [
        m.path
        for pattern in patterns
        for m in FileSystems.match([FileSystems.join(output_dir, pattern)])[0].metadata_list
    ]
    if existing and not overwrite:
        raise OutputDirectoryError(
            f"{output_dir} already holds {len(existing)} files of an earlier run "
            f"(e.g. {existing[0]}); choose a new --output or pass --overwrite to replace them"
        )
    if existing:
        FileSystems.delete(existing)
