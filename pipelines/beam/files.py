"""Files as the Beam stages see them: Beam's FileSystems (local, gs://, s3://), in one place.

Every stage reads its inputs and writes its outputs (documents, vocabularies, manifests,
spill files, shards) through these functions and no other module calls `FileSystems`, so:
a file is never passed through Beam's compression guessing (which reads a truncated `.gz`
without complaint); an output is either complete or absent (`write_atomically`); and the
filesystem options a runner was given (`--s3_endpoint_url`, a Dataflow worker's GCS
credentials) apply to every byte a stage touches. Readers outside Beam (the trainer,
`inspect`, `export-hf`) use `pipelines.io.storage` instead and never import Beam.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import BinaryIO

from apache_beam.io.filesystems import CompressionTypes, FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.io.storage import Reader


class OutputDirectoryError(ValueError):
    """The output directory is not safe to write into."""


def configure(options: PipelineOptions) -> None:
    """Apply a run's filesystem flags (S3 endpoint, GCS project, …) to this process."""
    FileSystems.set_options(options)


def join(base: str, *names: str) -> str:
    return FileSystems.join(base, *names)


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def open_raw(path: str) -> BinaryIO:
    """The file's bytes as stored: never decompressed by suffix (see the module docstring)."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def create(path: str) -> BinaryIO:
    """A new file for writing, stored as written (a `.gz` name is not compressed for you)."""
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def match(pattern: str) -> list[str]:
    """Paths matching a glob (`*`, `**`), sorted."""
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def match_sizes(pattern: str) -> dict[str, int]:
    """Paths matching a glob, with their sizes in bytes."""
    return {m.path: m.size_in_bytes for m in FileSystems.match([pattern])[0].metadata_list}


def delete(paths: list[str]) -> None:
    if paths:
        FileSystems.delete(paths)


def read_file(path: str) -> bytes:
    with open_raw(path) as source:
        return source.read()


def _join_two(base: str, name: str) -> str:
    return FileSystems.join(base, name)


# For Beam-free readers (the vocabulary, dumps, book files) called inside a stage.
READER = Reader(open_raw, read_file, exists, _join_two)


def write_file(path: str, data: bytes) -> None:
    with create(path) as sink:
        sink.write(data)


def replace(temporary: str, path: str) -> None:
    """Rename `temporary` to `path`, replacing it: a retried bundle writes the same bytes."""
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temporary], [path])


def temporary_name(path: str) -> str:
    return f"{path}.tmp-{uuid.uuid4().hex}"


def write_atomically(path: str, data: bytes) -> None:
    """Write under a temporary name, then rename: readers never see a partial file."""
    temporary = temporary_name(path)
    write_file(temporary, data)
    replace(temporary, path)


def clear_earlier_run(
    output_dir: str, patterns: Iterable[str], overwrite: bool, remove: bool = True
) -> None:
    """Refuse to mix runs: files matching `patterns` mean an earlier run is in `output_dir`.

    With `overwrite` they are deleted (unless `remove` is False: a stage that replaces each
    of its files atomically keeps the old ones readable until then), and the run goes on.
    """
    existing = [path for pattern in patterns for path in match(join(output_dir, pattern))]
    if existing and not overwrite:
        raise OutputDirectoryError(
            f"{output_dir} is not empty: it holds {len(existing)} files of an earlier run "
            f"(e.g. {existing[0]}); choose a new --output or pass --overwrite to replace them"
        )
    if remove:
        delete(existing)
