"""The one rule for reading a record written by another bertkit: same record, same major.

Every manifest and metadata file carries `record` and `schema_version`. A reader accepts any
minor version of its own major (minor versions only add fields), and of the older majors its
record class lists in `READABLE_MAJORS` (a reader that still knows the old layout), and
refuses anything else before it starts, saying what it found, what it reads and how to get
a file it can read.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

Record = TypeVar("Record")


def major(version: str) -> str:
    return version.split(".")[0]


def version_problem(
    where: str,
    found_record: str,
    found_version: str,
    record: str,
    version: str,
    remedy: str,
    readable_majors: tuple[str, ...] = (),
) -> str | None:
    """None if a `found_record` at `found_version` can be read as `record` at `version` (or
    at one of `readable_majors`); else the message for the user."""
    majors = {major(version), *readable_majors}
    if found_record == record and major(found_version) in majors:
        return None
    return (
        f"{where}: a {found_record} record at schema {found_version}, this bertkit reads "
        f"{record} schema {version}; {remedy}"
    )


def read_record(
    record_class: type[Record],
    text: str,
    where: str,
    remedy: str,
    error: type[Exception] = ValueError,
) -> Record:
    """Parse a manifest or metadata file into `record_class` and check its record and version
    against the class's own; anything else raises `error` naming `where` and the remedy."""
    try:
        record: Any = record_class.from_json(text)  # type: ignore[attr-defined]
    except (ValueError, TypeError, KeyError, AttributeError) as problem:  # RecordError too
        raise error(
            f"{where}: not a valid {record_class.__name__} ({type(problem).__name__}: "
            f"{problem}); {remedy}"
        ) from problem
    defaults = {f.name: f.default for f in dataclasses.fields(record_class)}  # type: ignore[arg-type]
    problem = version_problem(
        where,
        record.record,
        record.schema_version,
        defaults["record"],
        defaults["schema_version"],
        remedy,
        getattr(record_class, "READABLE_MAJORS", ()),
    )
    if problem:
        raise error(problem)
    return record
