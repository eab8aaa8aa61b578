"""The paths a Beam stage is given, checked before any work (`path_problem`).

A stage declares which of its config's fields name paths (`StagePaths`); `parse_stage`
(pipelines/beam/runner.py) checks them once its flags are parsed. Each problem is one line
naming the flag, the path and the fix, exit 2, as argparse does for a bad flag: an
--output that is a file, lies inside an input, or cannot be written (a read-only file
system, a directory this user may not write); an output or input directory whose name holds
a glob character (Beam's listings would read it as one); an input directory that is a file; an input
file that is a directory, a FIFO, unreadable, a symbolic link loop or a link to nothing;
an input glob that reaches what the stage writes. Nothing has been read or written yet.
A command that writes several directories below its --output (`bertkit chain`) checks each
of them as the output is checked (`inner_output_problem`).
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from apache_beam.io.filesystem import FileSystem

from pipelines.beam import files
from pipelines.command import flags
from schemas import MANIFEST_NAME


@dataclass(frozen=True)
class StagePaths:
    """Which of a stage's config fields name paths, and what each must be."""

    output: str = "output"  # the directory the stage writes
    # Files or globs it reads (wikipedia and books --input; chain's --wikipedia, --books, …).
    input_files: str | tuple[str, ...] | None = None
    # Directories it reads, each with what belongs there (for the message when it is not);
    # a field that may be None (not given) is skipped then.
    input_dirs: tuple[tuple[str, str], ...] = ()
    # Examples of the names it writes under the output, for telling whether an input glob
    # reaches them (a glob that matches only other names may share a folder with it).
    writes: tuple[str, ...] = ()
    # The record it writes last, below the output: once there (and newer than the run's
    # start) the output is complete, whatever stops the command afterwards.
    record: str = MANIFEST_NAME


def path_problem(config: object, paths: StagePaths) -> str | None:
    """The first thing wrong with the paths a stage was given, as a message; None if none.

    Checked before any work, by type and place: local paths on disk (each input file is
    opened once, to know it can be read), remote ones (gs://, s3://, which have no files
    standing in for directories) by place alone. That a glob matches something, and what
    manifests say, the stages check afterwards.
    """
    output = getattr(config, paths.output)
    output_flag = flags.flag_name(paths.output)
    problem = _output_problem(output_flag, output)
    if problem:
        return problem
    input_fields = paths.input_files or ()
    for input_field in (input_fields,) if isinstance(input_fields, str) else input_fields:
        input_flag = flags.flag_name(input_field)
        for pattern in getattr(config, input_field):
            problem = _input_files_problem(input_flag, pattern) or _glob_holds(
                input_flag, pattern, output_flag, output, paths.writes
            )
            if problem:
                return problem
    for field, what in paths.input_dirs:
        input_flag = flags.flag_name(field)
        value = getattr(config, field)
        if value is None:  # an optional directory not given (chain's --vocab)
            continue
        for directory in value if isinstance(value, tuple) else (value,):
            problem = (
                _wildcard_problem(input_flag, directory)
                or _input_dir_problem(input_flag, directory, what)
                or _nested(input_flag, directory, output_flag, output)
            )
            if problem:
                return problem
    return None


Config = TypeVar("Config")


def _path_fields(paths: StagePaths) -> list[str]:
    inputs = paths.input_files or ()
    return [
        paths.output,
        *((inputs,) if isinstance(inputs, str) else inputs),
        *(field for field, _ in paths.input_dirs),
    ]


def placed_for_workers(config: Config, paths: StagePaths, runner: str) -> tuple[str | None, Config]:
    """Local paths as workers outside this process see them (a runner other than the local
    one): Dataflow's run in Google Cloud, where no local path can be read or written, so
    one is refused (the message, and `config` unchanged); the portable runner's external
    worker pool runs in the directory it was started from, so a relative path is made
    absolute here, where it was typed (the new config; what it records follows)."""
    changes: dict[str, str | tuple[str, ...]] = {}
    for field in _path_fields(paths):
        value = getattr(config, field)
        if value is None:  # an optional path not given
            continue
        values = value if isinstance(value, tuple) else (value,)
        local = [path for path in values if not _is_remote(path)]
        if local and "dataflow" in runner.lower():
            return (
                f"{flags.flag_name(field)} {local[0]} is on this machine, which Dataflow's "
                "workers cannot read or write: give a gs:// path"
            ), config
        placed = tuple(path if _is_remote(path) else os.path.abspath(path) for path in values)
        changes[field] = placed if isinstance(value, tuple) else placed[0]
    return None, dataclasses.replace(config, **changes)


def _is_remote(path: str) -> bool:
    return "://" in path


def _has_wildcard(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _wildcard_problem(flag: str, directory: str) -> str | None:
    """A directory whose name holds a glob character: every listing of it (Beam's `match`)
    would read the character as a wildcard, and reach other directories' files."""
    if not _has_wildcard(directory):
        return None
    return (
        f"{flag} {directory}: a directory name with *, ? or [ would be read as a glob where "
        "the stage lists it, and reach other directories: choose a name without them"
    )


def _output_problem(flag: str, output: str) -> str | None:
    problem = _wildcard_problem(flag, output)
    if problem or _is_remote(output):
        return problem
    path = Path(output)
    if path.exists() and not path.is_dir():
        return f"{flag} {output} is a file, not a directory: choose a new or empty directory"
    nearest = path.absolute()  # the output, or the nearest directory that would hold it
    for parent in path.absolute().parents:
        if nearest.exists():
            break
        nearest = parent
        if parent.exists() and not parent.is_dir():
            return (
                f"{flag} {output}: {parent} is a file, so it cannot hold a directory: "
                "choose a directory path"
            )
    return _unwritable(flag, output, nearest)


def inner_output_problem(flag: str, output: str, inner: str, what: str) -> str | None:
    """A directory a command writes below its `output` (the chain's documents/<stage>,
    vocab, shards), checked as the output itself is: a file at it, or at a directory on its
    way there (`documents` for documents/books), would stop the job only once it first
    writes there, after the work before it. `what` names what goes there ("the chain's
    shards")."""
    if _is_remote(inner):
        return None
    top, path = Path(output).absolute(), Path(inner).absolute()
    on_the_way = [path, *path.parents[: len(path.parents) - len(top.parents) - 1]]
    for place in reversed(on_the_way):  # the outermost first: the file the user made
        if place.exists() and not place.is_dir():
            shown = os.path.join(output, os.path.relpath(place, top))
            return (
                f"{flag} {output}: {shown} is a file, not a directory, and {what} go in "
                f"{inner}: move the file or choose another {flag}"
            )
    nearest = next(place for place in (*on_the_way, top, *top.parents) if place.exists())
    return _unwritable(flag, inner, nearest)


def _unwritable(flag: str, output: str, directory: Path) -> str | None:
    """Whether this user may create files in `directory` (root may, unless its file system
    is read-only: the kernel's access check says both)."""
    if os.access(directory, os.W_OK | os.X_OK):
        return None
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
        return (
            f"{flag} {output} cannot be written ({os.strerror(errno.EROFS)}): choose an "
            f"{flag} on a writable file system"
        )
    where = "" if directory == Path(output).absolute() else f" in {directory}"
    return (
        f"{flag} {output} cannot be written ({os.strerror(errno.EACCES)}{where}): fix its "
        f"permissions or choose another {flag}"
    )


def _input_files_problem(flag: str, pattern: str) -> str | None:
    """A local input that is a directory, not a regular file (a FIFO would never end), or
    that cannot be opened. A glob matching nothing is the stage's own message."""
    if _is_remote(pattern):
        return None
    # Beam's match leaves out a link that leads nowhere: said here rather than as a file
    # left out in silence, or as "matches no file" when it is the only one.
    links = sorted(glob.glob(pattern, recursive=True)) if _has_wildcard(pattern) else [pattern]
    for path in links:
        problem = _link_problem(flag, path)
        if problem:
            return problem
    # A glob's directories (a Spark `table.parquet/` beside `other.parquet`) are not read: said
    # rather than left out in silence. A `**` glob reads every file below, not the folders.
    folders = [path for path in links if os.path.isdir(path) and "**" not in pattern]
    if _has_wildcard(pattern) and folders and not os.path.isfile(pattern):
        below = f"{os.path.dirname(pattern) or '.'}/**"
        return (
            f"{flag} {pattern!r} matches the directory {folders[0]}, whose files it does not "
            f"read: narrow the glob to files (e.g. by their suffix), or give '{below}' to "
            "read every file below"
        )
    if not _has_wildcard(pattern) and os.path.isdir(pattern):
        return (
            f"{flag} {pattern} is a directory: pass the files in it, "
            f"e.g. {flag} '{pattern.rstrip('/')}/*'"
        )
    for path in files.match(pattern):
        try:
            mode = os.stat(path).st_mode
            if stat.S_ISDIR(mode):
                return f"{flag} {pattern} matches the directory {path}: pass files only"
            if not stat.S_ISREG(mode):
                return (
                    f"{flag} {path} is not a regular file (a pipe, device or socket): "
                    "pass files only"
                )
            os.close(os.open(path, os.O_RDONLY))
        except OSError as error:
            return (
                f"{flag} {path} cannot be read ({error.strerror}): fix its permissions or "
                f"leave it out of {flag}"
            )
    return None


def _link_problem(flag: str, path: str) -> str | None:
    """A symbolic link (or a path through one) that leads to no file: a loop, or a link to
    something that does not exist."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return (
                f"{flag} {path} is a symbolic link loop (following its links leads back to "
                f"them, never to a file): fix the link or leave it out of {flag}"
            )
        if error.errno == errno.ENOENT and os.path.islink(path):
            return (
                f"{flag} {path} is a symbolic link to {os.readlink(path)}, which does not "
                f"exist: fix the link or leave it out of {flag}"
            )
    return None


def _input_dir_problem(flag: str, directory: str, what: str) -> str | None:
    if _is_remote(directory):
        return None
    if not os.path.exists(directory):
        # A missing directory: the stage says what should be there; a link that leads
        # nowhere is said here.
        return _link_problem(flag, directory)
    if not os.path.isdir(directory):
        parent = os.path.dirname(directory.rstrip("/"))
        return f"{flag} {directory} is a file, not a directory: pass the {what}" + (
            f" (here perhaps {parent})" if parent else ""
        )
    try:
        os.listdir(directory)
    except OSError as error:
        return f"{flag} {directory} cannot be read ({error.strerror}): fix its permissions"
    return None


def _segments(path: str) -> list[str]:
    """A path or glob as its names, for comparing places: when local, absolute and with the
    symlinks of its literal part resolved, so two spellings of a directory compare equal."""
    if _is_remote(path):
        return path.rstrip("/").split("/")
    names = os.path.abspath(path).split("/")
    literal = next((i for i, name in enumerate(names) if _has_wildcard(name)), len(names))
    return os.path.realpath("/".join(names[:literal]) or "/").split("/") + names[literal:]


def _glob_holds(
    input_flag: str, pattern: str, output_flag: str, output: str, writes: tuple[str, ...]
) -> str | None:
    """The output is inside an input glob: the glob matches the output directory, or a file
    the stage writes there (`writes`), so a rerun would read this run's output as input."""
    if _is_remote(pattern) != _is_remote(output):
        return None
    names, inner = _segments(pattern), _segments(output)
    literal = next((i for i, name in enumerate(names) if _has_wildcard(name)), len(names) - 1)
    if names[:literal][: len(inner)] == inner:
        return (
            f"{input_flag} {pattern!r} is inside {output_flag} {output}: choose an "
            f"{output_flag} that does not hold the inputs"
        )
    with warnings.catch_warnings():  # an escaped bracket `[[]` (files.match says why)
        warnings.filterwarnings("ignore", "Possible nested set", FutureWarning)
        matcher = re.compile(FileSystem.translate_pattern("/".join(names)))
    directory = "/".join(inner)
    if any(matcher.match(path) for path in (directory, *(f"{directory}/{n}" for n in writes))):
        return (
            f"{output_flag} {output} is inside {input_flag} {pattern!r} (the glob matches it "
            f"or the files it will hold): choose an {output_flag} outside the inputs"
        )
    return None


def _nested(input_flag: str, directory: str, output_flag: str, output: str) -> str | None:
    """The output and an input directory are the same, or one holds the other."""
    if _is_remote(directory) != _is_remote(output):
        return None
    inner, outer = _segments(output), _segments(directory)
    if inner == outer:
        return (
            f"{output_flag} {output} is the {input_flag} directory: write to a new "
            "directory beside it"
        )
    if inner[: len(outer)] == outer:
        return (
            f"{output_flag} {output} is inside {input_flag} {directory}: choose an "
            f"{output_flag} outside it"
        )
    if outer[: len(inner)] == inner:
        return (
            f"{input_flag} {directory} is inside {output_flag} {output}: choose an "
            f"{output_flag} that does not hold the inputs"
        )
    return None
