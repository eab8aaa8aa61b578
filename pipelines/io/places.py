"""One place under several spellings: `same_place_key` gives what `d`, `d/`, `d/../d`, a
symbolic link to `d` (local), or `s3://b//d/./` (a URL) have in common, and
`repeated_place` finds a flag's value that names the place of an earlier one (a documents
directory given twice to a stage, one shards source twice in a mix)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence


def same_place_key(path: str) -> str:
    """What two spellings of one file or directory have in common: a local path's real path
    (symbolic links and `..` resolved), a URL with its `//`, `.` and `..` segments and
    trailing slashes gone."""
    if "://" not in path:
        return os.path.realpath(path)
    scheme, rest = path.split("://", 1)
    bucket, _, inside = rest.partition("/")
    normal = posixpath.normpath("/" + inside.lstrip("/")).lstrip("/")
    return f"{scheme.lower()}://{bucket}/{normal}".rstrip("/")


def repeated_place(
    values: Sequence[str],
    flag: str = "--documents",
    noun: str = "directory",
    key: Callable[[str], str] = same_place_key,
) -> str | None:
    """`FLAG V is given twice` or `FLAG V is the same NOUN as FLAG EARLIER` for the first of
    `values` whose `key` is an earlier one's; None when each names a place of its own."""
    seen: dict[str, str] = {}
    for value in values:
        place = key(value)
        if place in seen:
            earlier = seen[place]
            if earlier.rstrip("/") == value.rstrip("/"):
                return f"{flag} {value} is given twice"
            return f"{flag} {value} is the same {noun} as {flag} {earlier}"
        seen[place] = value
    return None
