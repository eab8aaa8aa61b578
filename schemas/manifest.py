"""The manifest of a documents directory (`DIR/_manifest.json`), written last.

The leading underscore (like Hadoop's `_SUCCESS`, Spark's `_metadata`) is what lets Parquet
readers take the directory as is: `pyarrow.dataset.dataset(DIR)` and Spark skip `_`- and
`.`-prefixed names, so neither the manifest nor `_rejects/` is mistaken for data.

A directory without a manifest is incomplete: the next stage refuses it. The manifest holds
no timestamps or host names, so the same inputs and config give the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from schemas.checks import RecordError, load_json, need_int, need_relative_path, need_sha256
from schemas.documents import DOCUMENT_SCHEMA_VERSION

MANIFEST_NAME = "_manifest.json"


@dataclass(frozen=True, slots=True)
class OutputFile:
    """One written file, checkable by size and sha256."""

    name: str  # relative to the output directory
    documents: int
    sentences: int
    text_bytes: int  # UTF-8 bytes of the sentences
    bytes: int  # size of the file itself
    sha256: str


@dataclass(slots=True)
class DocumentsManifest:
    stage: str  # "wikipedia" or "books"
    # A stage's source files as matched ({"path": …, "bytes": …}, sorted by path); a dedup
    # manifest's documents directories, relative to this one's (docs/formats.md).
    inputs: list[dict[str, Any]]
    config: dict[str, Any]
    counts: dict[str, int]  # documents, sentences, text_bytes, input units, …
    dropped: dict[str, int]  # drop reason → count (filtered on purpose, not errors)
    rejected: dict[str, int]  # reject reason → count (see _rejects/)
    failed_inputs: list[dict[str, str]]  # inputs not read to their end: {"input", "error"}
    files: list[OutputFile]
    rejects_files: list[str] = field(default_factory=list)
    record: str = "Document"
    schema_version: str = DOCUMENT_SCHEMA_VERSION
    bertkit_version: str = "0.1.0"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DocumentsManifest:
        raw = load_json(text)
        raw["files"] = [OutputFile(**f) for f in raw["files"]]
        manifest = cls(**raw)
        manifest.validate()
        return manifest

    def validate(self) -> None:
        """Types, ranges and names of every field a reader relies on (schemas/checks.py)."""
        for index, output in enumerate(self.files):
            where = f"files[{index}]"
            need_relative_path(output.name, f"{where}.name")
            if "/" in output.name:
                raise RecordError(f"{where}.name is {output.name!r}: a file of this directory")
            for name in ("documents", "sentences", "text_bytes", "bytes"):
                need_int(getattr(output, name), f"{where}.{name}")
            need_sha256(output.sha256, f"{where}.sha256")
        for index, name in enumerate(self.rejects_files):
            need_relative_path(name, f"rejects_files[{index}]")
