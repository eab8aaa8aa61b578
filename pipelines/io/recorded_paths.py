"""How a manifest or checkpoint records the path of another artifact, and how it is read back.

One rule for every link bertkit writes (a shards manifest's `vocab.path` and `inputs[].path`,
vocab.json's and a dedup manifest's `inputs[].path`, a checkpoint's `vocab.path` and
`data.manifest`), so an output tree keeps working when it is copied, moved, reached through a
symlink, or read from another working directory:

    written  a local artifact is recorded relative to the manifest's own directory when the
             two share a directory below the filesystem's root (`../vocab`); one elsewhere
             (`/data/vocab` beside `/scratch/shards`, or any local path beside a manifest on
             object storage) as an absolute path; a URL (s3://, gs://, http(s)://) as given
    read     a relative path is looked up relative to the manifest's directory first; where
             nothing is there, as recorded, relative to the working directory: what manifests
             written before this rule hold (`out/demo/vocab`, typed in the directory the
             stage ran in)

A manifest's directory is taken as given, never through `realpath`: `../vocab` beside
`link/shards` is `link/vocab` even when `link/shards` is a symlink into another tree, so a
tree is read as the user sees it, whichever of its parts are symlinks.

    >>> record_path("out/demo/vocab", "out/demo/shards")
    '../vocab'
    >>> resolve_path("../vocab", "copy/shards", "vocab.txt")   # if copy/vocab/vocab.txt exists
    'copy/vocab'
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable

from pipelines.io import storage
from pipelines.io.retry import exists_with_retries

_FILE_SCHEME = "file://"


def record_path(target: str, manifest_dir: str) -> str:
    """What a manifest written into `manifest_dir` records for `target` (both as given on the
    command line: relative to the working directory, absolute, or URLs)."""
    if storage.is_url(target) and not target.startswith(_FILE_SCHEME):
        return target
    local = os.path.abspath(_local(target))
    if storage.is_url(manifest_dir) and not manifest_dir.startswith(_FILE_SCHEME):
        return local  # a bucket cannot hold a path to this machine's files: only where it is
    base = os.path.abspath(_local(manifest_dir))
    try:
        shared = os.path.commonpath([local, base])
    except ValueError:  # on different drives (Windows): no relative path joins them
        return local
    if os.path.dirname(shared) == shared:  # only the filesystem's root in common
        return local
    return os.path.relpath(local, base)


def resolve_path(
    recorded: str,
    manifest_dir: str,
    marker: str,
    exists: Callable[[str], bool] = exists_with_retries,
) -> str:
    """Where to read an artifact a manifest in `manifest_dir` recorded as `recorded`.

    `marker` is a file the artifact holds (`vocab.txt`, `_manifest.json`): a relative path is
    taken relative to the manifest when the marker is there, else as recorded when it is there
    (an older manifest's working-directory path), else relative to the manifest again, so a
    caller's "not found" names where the artifact belongs. `exists` answers for a file path,
    a remote one's faults retried (a Beam stage passes its filesystems' own)."""
    if storage.is_url(recorded) or os.path.isabs(recorded):
        return recorded
    beside = join_relative(manifest_dir, recorded)
    if _holds(beside, marker, exists) or not _holds(recorded, marker, exists):
        return beside
    return recorded


def rebase_path(recorded: str, from_dir: str, to_dir: str, marker: str) -> str:
    """A path that a manifest in `from_dir` recorded, as a record in `to_dir` writes it (a
    checkpoint copying its shards manifest's vocabulary)."""
    return record_path(resolve_path(recorded, from_dir, marker), to_dir)


def join_relative(directory: str, relative: str) -> str:
    """`directory`/`relative` with `..` taken away lexically (never through a symlink's
    target), a URL's kept below its bucket or host: `s3://b/x/shards` + `../../../v` is
    `s3://b/v`."""
    if storage.is_url(directory) and not directory.startswith(_FILE_SCHEME):
        head, _, rest = directory.partition("://")
        host, _, path = rest.partition("/")
        joined = posixpath.normpath(posixpath.join("/", path, relative))
        return f"{head}://{host}{joined}"
    return os.path.normpath(os.path.join(_local(directory), relative))


def _holds(directory: str, marker: str, exists: Callable[[str], bool]) -> bool:
    """Whether the artifact is there: its marker file, or the file itself where the path
    names it (`--vocab …/vocab.txt`)."""
    path = directory if storage.basename(directory) == marker else storage.join(directory, marker)
    try:
        return exists(path)
    except OSError:  # a FIFO or directory in the marker's place, an unreachable URL
        return False


def _local(path: str) -> str:
    return path[len(_FILE_SCHEME) :] if path.startswith(_FILE_SCHEME) else path
