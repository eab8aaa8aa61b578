"""Where `bertkit inspect --report` and `--parquet` may write: checked before anything is read.

One rule for both flags, so a fault in the place costs nothing and says so on one line: OUT
is not a directory, FIFO, device or socket (opening a FIFO to look for an earlier file would
wait for a writer forever); it is not inside a directory the command reads (the shards
directory, a single shard's, the documents directories its manifest names, the vocabulary):
that stage's `--overwrite` replaces only its own names and would then refuse the file; and a
local OUT's folder can be written (no parent that is a file, not read-only), tried by
creating and removing a file there, so a run does not read every shard to fail on a raw errno.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from pipelines.inspect.targets import InspectError, Target
from pipelines.io import storage
from pipelines.io.recorded_paths import resolve_path
from schemas.manifest import MANIFEST_NAME
from schemas.shards import ShardsManifest
from schemas.vocab import VOCAB_FILE

_KIND = {"report": "report", "parquet": "Parquet file"}


def check_output_place(flag: str, out: str, target: Target, vocab_dir: str | None) -> None:
    """Refuse (InspectError) an OUT that is not a file name, lies inside what the command
    reads, or whose local folder cannot be written."""
    where = storage.redact(out)
    for place, what in read_places(target, vocab_dir):
        if _inside(out, place):
            raise InspectError(
                f"--{flag} {where} is inside {storage.redact(place)}, the {what} this command "
                "reads, whose stage replaces only its own files: its next --overwrite run "
                f"would refuse the {_KIND[flag]}; nothing was read, write it outside"
            )
    if storage.is_remote(out):
        return
    try:
        mode = os.stat(out).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # a parent is a file: named below
    if mode is not None and stat.S_ISDIR(mode):
        raise InspectError(f"--{flag} {where} is a directory: give a file name in it")
    if mode is not None and not stat.S_ISREG(mode):
        raise InspectError(
            f"--{flag} {where} is not a regular file (a FIFO, device or socket): nothing was "
            "read; name a file"
        )
    _check_writable(flag, out)


def read_places(target: Target, vocab_dir: str | None) -> list[tuple[str, str]]:
    """The directories a report or an export reads, each with what it is."""
    places: list[tuple[str, str]] = []
    manifest_dir = storage.parent(target.manifest_url) if target.manifest_url else None
    if target.kind == "documents":
        places.append((target.url, "documents directory"))
    elif target.kind == "shards":
        places.append((target.url, "shards directory"))
    else:
        places.append((storage.parent(target.url), "shard's directory"))
        if manifest_dir is not None:
            places.append((manifest_dir, "shards directory"))
    manifest = target.manifest
    if isinstance(manifest, ShardsManifest) and manifest_dir is not None:
        for entry in manifest.inputs:
            path = str(entry.get("path", ""))
            if path:
                places.append(
                    (resolve_path(path, manifest_dir, MANIFEST_NAME), "documents directory")
                )
        recorded = str(manifest.vocab.get("path") or "")
        if recorded and vocab_dir is None:
            places.append((resolve_path(recorded, manifest_dir, VOCAB_FILE), "vocabulary"))
    if vocab_dir is not None:
        places.append((vocab_dir, "vocabulary"))
    return places


def _inside(out: str, place: str) -> bool:
    if storage.is_remote(out) != storage.is_remote(place):
        return False
    if storage.is_remote(out):
        return out.startswith(place.rstrip("/") + "/")
    folder = os.path.realpath(place)
    return os.path.realpath(out).startswith(folder.rstrip(os.sep) + os.sep)


def _check_writable(flag: str, out: str) -> None:
    """A file can be created in OUT's folder, or the folder can be made under its nearest
    existing ancestor."""
    where = storage.redact(out)
    folder = os.path.dirname(os.path.abspath(out))
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise InspectError(
            f"--{flag} {where}: {existing} is a file, not a folder, so nothing can be written "
            "under it: nothing was read; name another place"
        )
    try:
        handle, probe = tempfile.mkstemp(prefix=".bertkit-probe-", dir=existing)
    except OSError as error:
        why = os.strerror(error.errno or errno.EACCES).lower()
        raise InspectError(
            f"--{flag} {where}: {existing} cannot be written ({why}): nothing was read; "
            "name a place you can write to"
        ) from error
    os.close(handle)
    os.unlink(probe)
