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

import json
import os
import re
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from apache_beam.io.filesystems import CompressionTypes, FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam.s3_clients import share_s3_clients
from pipelines.io import storage
from pipelines.io.storage import Reader
from schemas.checks import MAX_RECORD_BYTES

share_s3_clients()  # every Beam stage touches files through this module


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


def _matched(pattern: str) -> list[Any]:
    with warnings.catch_warnings():
        # An escaped bracket (`[[]`, as glob.escape writes it) is the same regular expression
        # in Beam's match, which Python reads right and warns about all the same.
        warnings.filterwarnings("ignore", "Possible nested set", FutureWarning)
        return FileSystems.match([pattern])[0].metadata_list


def match(pattern: str) -> list[str]:
    """Paths matching a glob (`*`, `**`), sorted."""
    return sorted(m.path for m in _matched(pattern))


def match_sizes(pattern: str) -> dict[str, int]:
    """Paths matching a glob, with their sizes in bytes."""
    return {m.path: m.size_in_bytes for m in _matched(pattern)}


def delete(paths: list[str]) -> None:
    if paths:
        FileSystems.delete(paths)


def read_file(path: str, max_bytes: int | None = None) -> bytes:
    """The file's bytes; with `max_bytes`, a larger file is refused (storage.read_bounded)."""
    with open_raw(path) as source:
        return storage.read_bounded(source, path, max_bytes)


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


# What `temporary_name` appends: a name ending so is an unfinished write, never an output.
_TEMPORARY_SUFFIX = re.compile(r"\.tmp-[0-9a-f]{32}$")


def write_atomically(path: str, data: bytes) -> None:
    """Write under a temporary name, then rename: readers never see a partial file."""
    temporary = temporary_name(path)
    written = False
    try:
        write_file(temporary, data)
        written = True
    finally:
        if not written and exists(temporary):  # a failed write leaves no half file behind
            delete([temporary])
    replace(temporary, path)


@dataclass(frozen=True, slots=True)
class Vouched:
    """Names a user may well have written themselves (`README.md`, `vocab.txt`), which are a
    stage's own only where its record, written last, vouches for them, or beside names only
    the stage writes (a run killed before its record): `check(output_dir)` gives the names
    the record in `output_dir` vouches for (none where it is absent or not the stage's),
    matching their sha256 where it records one."""

    names: frozenset[str]
    record: str
    check: Callable[[str], set[str]]


class Listed(NamedTuple):
    """What a stage's record lists: a name below its directory that matches `kinds` (a
    regular expression over the outputs the record lists) and is not in `names` is not one
    the run that wrote the record wrote."""

    kinds: str
    names: frozenset[str]
    stage: str | None = None  # the stage that wrote the record, where more than one writes it


@dataclass(frozen=True, slots=True)
class Listing:
    """A stage's record of its outputs, written last: `read(output_dir)` gives what the
    record there lists, or None where there is no record of the stage's (no run finished
    there, or one was killed before its record: then the names alone decide)."""

    record: str
    read: Callable[[str], Listed | None]


def read_own_record(
    output_dir: str, name: str, parse: Callable[[str], Any]
) -> tuple[Any, dict[str, Any]] | None:
    """The record `name` in `output_dir` as `parse` reads it, and its fields as written (to
    tell a field an older record lacks from an empty one); None where it is absent or not
    one (`parse` refused it): then it is not the stage's record."""
    path = join(output_dir, name)
    if not exists(path):  # asked first: gs:// says a missing object with its own error
        return None
    try:
        raw = read_file(path, MAX_RECORD_BYTES)
        return parse(raw.decode("utf-8")), json.loads(raw)
    except (OSError, ValueError, TypeError, KeyError):  # unreadable, or not one
        return None


def clear_earlier_run(*args: Any, **kwargs: Any) -> None:
    """`earlier_run_files`' checks, then delete what it returns."""
    delete(earlier_run_files(*args, **kwargs))


def earlier_run_files(
    output_dir: str,
    ours: str,
    overwrite: bool,
    stage: str,
    remove: bool = True,
    vouched: Vouched | None = None,
    rewritten: bool = True,
    listing: Listing | None = None,
) -> list[str]:
    """Check `output_dir` before any work: empty, or holding only an earlier run of `stage`
    (and, in object storage, not an object itself);
    return what to delete (`clear_earlier_run` deletes it; a command with several outputs
    checks them all before it deletes anything in any).

    `ours` is a regular expression over a file's path below `output_dir` that matches every
    name the stage writes (its outputs, manifest, rejects and temporary names) and nothing
    else. A file it does not match is refused, with or without --overwrite, and nothing is
    deleted: bertkit never deletes what it did not write. The stage's own files need
    --overwrite, and are then deleted (unless `remove` is False: a stage that replaces each
    of its files atomically keeps the old ones readable until then; the temporary files of
    an unfinished write, which no rerun would ever replace, are deleted all the same). A
    name in `vouched.names` is the stage's only where its record vouches for it (`Vouched`).
    `rewritten` False: this run writes nothing there again (a chain's step it skips), so
    --overwrite deletes the earlier files, and the refusal says so. With a `listing`, an
    output beside the stage's record that the record does not list (a `shard-000099.tar` of
    the user's among a run's twelve shards) is refused too: only a run killed before its
    record leaves outputs no record lists, and then there is no record.
    """
    within = output_dir.split("://", 1)[-1].strip("/")
    if "://" in output_dir and "/" in within and exists(output_dir.rstrip("/")):  # not a bucket
        raise OutputDirectoryError(
            f"{output_dir} is an object, not a directory: the stage would write its files "
            "beside it, under the same name. Choose a new or empty --output"
        )
    if links := _links(output_dir):
        raise OutputDirectoryError(
            f"{output_dir} holds {_and_more(links)}, a symbolic link: `bertkit {stage}` writes "
            "none, and would write or delete through it in a directory it did not make: "
            "nothing was deleted. Choose a new or empty --output, or remove the link"
        )
    # An object store's folder marker (a key ending in "/", as a console makes) is no file.
    present = [path for path in match(join(output_dir, "**")) if not path.endswith("/")]
    relative = [_relative(output_dir, path) for path in present]
    listed = listing.read(output_dir) if listing and present else None
    if listed is not None and listed.stage not in (None, stage):
        raise OutputDirectoryError(
            f"{output_dir} is a documents directory written by `bertkit {listed.stage}`, which "
            f"`bertkit {stage}` does not overwrite: nothing was deleted. Choose a new or empty "
            "--output"
        )
    foreign = sorted(name for name in relative if not re.fullmatch(ours, name))
    if foreign:
        raise OutputDirectoryError(
            f"{output_dir} holds {_and_more(foreign)}, which `bertkit {stage}` does not "
            "write: nothing was deleted. Choose a new or empty --output, or move those files"
        )
    common = {name for name in relative if vouched and name in vouched.names}
    # Beside names only the stage writes (its shards, spill files, temporary names), the
    # common ones are a run's that was killed before its record: a rerun replaces them.
    alone = common and len(common) == len(relative)
    if vouched and alone and (unknown := sorted(common - vouched.check(output_dir))):
        raise OutputDirectoryError(
            f"{output_dir} holds {unknown[0]}, which no {vouched.record} of a `bertkit {stage}` "
            "run beside it vouches for (a file of yours, or of a run killed before it "
            "finished): nothing was deleted. Choose a new or empty --output, or move it"
        )
    if listing and listed is not None and (unlisted := _unlisted(relative, listed)):
        raise OutputDirectoryError(
            f"{output_dir} holds {_and_more(unlisted)}, named as a `bertkit {stage}` output "
            f"but not listed in {listing.record}, the earlier run's record of what it wrote "
            "there (a file of yours, or of another run): nothing was deleted. Move "
            f"{'them' if len(unlisted) > 1 else 'it'}, or choose a new or empty --output"
        )
    if present and not overwrite:
        raise OutputDirectoryError(
            f"{output_dir} is not empty: it holds {len(present)} files of an earlier "
            f"`bertkit {stage}` run (e.g. {min(relative)}); choose a new --output or pass "
            f"--overwrite to {'replace' if rewritten else 'delete'} them"
        )
    return present if remove else [p for p in present if _TEMPORARY_SUFFIX.search(p)]


def _links(output_dir: str) -> list[str]:
    """Symbolic links below a local `output_dir` (which Beam's match does not enter)."""
    if "://" in output_dir or not os.path.isdir(output_dir):
        return []
    found = []
    for root, folders, names in os.walk(output_dir):
        found += [
            _relative(output_dir, os.path.join(root, name))
            for name in folders + names
            if os.path.islink(os.path.join(root, name))
        ]
    return sorted(found)


def _unlisted(relative: list[str], listed: Listed) -> list[str]:
    return sorted(
        name for name in relative if re.fullmatch(listed.kinds, name) and name not in listed.names
    )


def _and_more(names: list[str]) -> str:
    return names[0] + (f" and {len(names) - 1} more files" if len(names) > 1 else "")


def _relative(directory: str, path: str) -> str:
    if "://" in directory:
        return path[len(directory.rstrip("/")) + 1 :]
    return os.path.relpath(path, os.path.abspath(directory)).replace(os.sep, "/")
