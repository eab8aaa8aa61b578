"""The one rule for reading a record written by another bertkit: same record, same major.

Every manifest and metadata file carries `record` and `schema_version`. A reader accepts any
minor version of its own major (minor versions only add fields) and refuses anything else
before it starts, saying what it found, what it reads and how to get a file it can read.
"""

from __future__ import annotations


def major(version: str) -> str:
    return version.split(".")[0]


def version_problem(
    where: str, found_record: str, found_version: str, record: str, version: str, remedy: str
) -> str | None:
    """None if a `found_record` at `found_version` can be read as `record` at `version`;
    else the message for the user."""
    if found_record == record and major(found_version) == major(version):
        return None
    return (
        f"{where}: a {found_record} record at schema {found_version}, this bertkit reads "
        f"{record} schema {version}; {remedy}"
    )
