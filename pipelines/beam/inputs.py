"""What a stage reads, listed and checked before any work: the files `--input` names and the
documents directories `--documents` names.

- `expand_inputs`: globs → the files they match, each once. A glob without a directory
  (`'*.txt'`) matches in the working directory, as in a shell; a local file's own name is
  that file, even where it holds a glob character (`br[1].jsonl`); a file named twice, by
  overlapping globs or by two spellings (`in.jsonl`, `./in.jsonl`, `d/../in.jsonl`, a
  symbolic link, a hard link), is read once; local inputs that mix absolute and relative
  paths are all made absolute, so that they share a root their ids are taken under.
- `check_names`: two files whose documents would get one id (`a.txt` and `a.txt.gz`, one
  book; files of the same name under two object stores) are refused, naming both; so is a
  file whose name is not UTF-8 (`name_not_utf8`), which no id, reject or manifest can name.
- A `--documents` directory given twice under any spelling: pipelines/io/places.py.

A refusal is an `InputsError` (exit 2, one line), which `bertkit chain` re-words with its
own flag (`--books` for `--input`).
"""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.beam import files
from pipelines.io.places import same_place_key
from pipelines.io.shown import first_control, shown

_FLAG = "{flag}"


class InputsError(ValueError):
    """Inputs a stage refuses before any work. Its message names the flag as `{flag}`."""

    def __init__(self, template: str, flag: str = "--input") -> None:
        self.template = template
        super().__init__(template.replace(_FLAG, flag))

    def with_flag(self, flag: str) -> InputsError:
        """The same refusal, naming the flag `flag` (the chain's `--books`, …)."""
        return InputsError(self.template, flag)


def _local_pattern(pattern: str, absolute: bool) -> str:
    normal = os.path.abspath(pattern) if absolute else posixpath.normpath(pattern)
    if os.path.isfile(pattern):  # a file's own name, even one holding `[`, `*` or `?`
        normal = glob.escape(normal)
    first = normal.split("/", 1)[0]
    # Beam lists no directory for a glob whose first name is one ('a*', '**/*.txt')
    return f"./{normal}" if any(c in first for c in "*?[") or "/" not in normal else normal


def _file_key(path: str) -> str:
    """What every name of one file has in common: a local file's device and inode (a hard
    link's too), a URL's `same_place_key`."""
    if "://" in path:
        return same_place_key(path)
    try:
        status = os.stat(path)
    except OSError:  # gone since it was listed: its own reader says so
        return same_place_key(path)
    return f"{status.st_dev}:{status.st_ino}"


def expand_inputs(patterns: Sequence[str]) -> list[dict[str, Any]]:
    """Glob patterns → the sorted files they match, each once (see the module docstring),
    with sizes; InputsError for a pattern that matches nothing."""
    local = [pattern for pattern in patterns if "://" not in pattern]
    absolute = any(os.path.isabs(pattern) for pattern in local)
    found: dict[str, int] = {}
    places: set[str] = set()
    for pattern in patterns:
        query = pattern if "://" in pattern else _local_pattern(pattern, absolute)
        matches = files.match_sizes(query)
        if not matches:
            raise InputsError(
                f"{_FLAG} {pattern!r} matches no file: check the path, and quote a glob so "
                "that bertkit, not the shell, expands it"
            )
        for path, size in sorted(matches.items()):
            path = path.removeprefix("./") if query.startswith("./") else path
            if (key := _file_key(path)) not in places:
                places.add(key)
                found[path] = size
    return [{"path": path, "bytes": found[path]} for path in sorted(found)]


def common_root(paths: list[str]) -> str:
    """The deepest directory that holds every input (ids stay unique across folders); ''
    for relative paths under the working directory, or inputs on different stores."""
    scheme, sep, _ = paths[0].partition("://")
    prefix = scheme + sep if sep else ""
    if any(not p.startswith(prefix) for p in paths):
        return ""
    directories = [posixpath.dirname(p[len(prefix) :]) for p in paths]
    if len({directory.startswith("/") for directory in directories}) > 1:
        return ""
    return prefix + posixpath.commonpath(directories) if all(directories) else ""


def name_under(path: str, root: str) -> str:
    """A file's name in its documents' ids: its path under `root`, a relative path as it
    is under the working directory, else its base name.

    '/data/c4/en/part-0001.jsonl.zst' under '/data/c4' → 'en/part-0001.jsonl.zst'.
    """
    if root and path.startswith(root):
        return path[len(root) :].lstrip("/")
    if not root and "://" not in path and not path.startswith("/"):
        return path
    return posixpath.basename(path)


def name_not_utf8(path: str, flag: str = "--input") -> str | None:
    """The refusal of an input whose name is not UTF-8 (a Latin-1 `caf\xe9.txt`, which Python
    holds with a lone surrogate), with the name escaped; None for a UTF-8 name. The documents'
    ids, the rejects and the manifest name their input in UTF-8 text, so such a file could
    only fail the run halfway."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return (
            f"{shown}: the file's name is not UTF-8, and the documents' ids, the rejects and "
            "the manifest name their input in UTF-8 text: rename it (e.g. convmv -f latin1 "
            f"-t utf8 FILE) or leave it out of {flag}"
        )
    return None


def check_names(inputs: Sequence[dict[str, Any]], name_of: Callable[[str, str], str]) -> None:
    """Refuse an input whose name is not UTF-8 (`name_not_utf8`) or holds a control character
    (a newline in a book's name would forge a log line in its ids), and two input files whose
    documents would get the same ids: `name_of(path, root)` is the name a stage gives a
    file's documents (books: without its suffixes)."""
    paths = [item["path"] for item in inputs]
    if not paths:
        return
    for path in paths:
        if (refusal := name_not_utf8(path, _FLAG)) is not None:
            raise InputsError(refusal)
        if (control := first_control(path)) is not None:
            raise InputsError(
                f"{shown(path)}: the file's name holds a control character ({control}), which "
                "would break the ids, log lines and messages that name it: rename it or "
                f"leave it out of {_FLAG}"
            )
    root = common_root(paths)
    seen: dict[str, str] = {}
    for path in paths:
        name = name_of(path, root)
        if name in seen:
            raise InputsError(
                f"{_FLAG} names {seen[name]} and {path}, whose documents would share the ids "
                f"of {name!r} (two copies of one text, or files of one name in two places): "
                "give one of them, or rename one"
            )
        seen[name] = path
