"""The Reject record: a page, book or file that could not be turned into a document.

Rejects are data, not log lines: every stage writes them as JSON lines under
`DIR/_rejects/`, one object per rejected item with exactly these fields, and counts them per
reason in its manifest. `pyarrow.json.read_json(path, parse_options=…(explicit_schema=
REJECT_SCHEMA))` reads them with this schema.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow as pa

REJECTS_DIR = "_rejects"

REJECT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=True),  # document id when one is known
        pa.field("input", pa.string(), nullable=False),  # the input file
        pa.field("position", pa.string(), nullable=False),  # where in it, human-readable
        pa.field("reason", pa.string(), nullable=False),  # a stable code, counted in manifests
        pa.field("error", pa.string(), nullable=False),  # what went wrong, for a person
    ],
    metadata={"bertkit.record": "Reject"},
)


@dataclass(frozen=True, slots=True)
class Reject:
    id: str | None
    input: str
    position: str
    reason: str
    error: str

    def to_json_line(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True) + "\n"
