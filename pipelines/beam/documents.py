"""Writing a documents directory: Parquet files, rejects and the manifest.

Layout of `DIR` (schemas in `schemas/`):
    documents-<unit>-<part>.parquet   zstd Parquet, Document schema, written atomically
    _rejects/rejects-<unit>.jsonl     one Reject per line, only where a unit had rejects
    _manifest.json                    written last, after every unit has finished

Why one file per unit of work and no shuffle of documents: a unit (a dump split, a group of
book files) is fixed by the inputs alone, so each output file's bytes are too, whatever the
runner or worker count; and with no GroupByKey over documents, nothing holds more than one
row group in memory, so RSS stays flat however large the corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.beam import files
from pipelines.beam.progress import progress_shown
from pipelines.beam.runner import make_pipeline, report_submission, submitted_only
from pipelines.beam.stage_paths import StagePaths
from pipelines.command.flags import AT_LEAST_1, option
from pipelines.command.progress import Phase
from pipelines.io.hashing import HashingStream
from pipelines.io.recorded_paths import record_path
from schemas import (
    DOCUMENT_SCHEMA,
    DOCUMENTS_FILE_GLOB,
    MANIFEST_NAME,
    REJECTS_DIR,
    Document,
    DocumentsManifest,
    OutputFile,
    Reject,
    documents_table,
)
from schemas.checks import MAX_RECORD_BYTES
from schemas.duplicates import DUPLICATES_DIR
from schemas.versions import read_record

_LOG = logging.getLogger(__name__)
_METRICS_NAMESPACE = "bertkit"
# A row group holds at most 1000 documents or 8 MB of text, whichever comes first: the
# writer's memory stays flat (Wikipedia articles average ~25 kB of text, books ~500 kB) and
# readers can stream. A file rolls over at `max_file_text_bytes`.
ROWS_PER_GROUP = 1000
ROW_GROUP_TEXT_BYTES = 8 << 20
DEFAULT_MAX_FILE_TEXT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class DocumentStageFlags:
    """The flags every documents stage (wikipedia, books) shares; each adds its own."""

    input: tuple[str, ...] = option(
        help="input files or globs (repeatable): local, gs://, s3://", metavar="PATH"
    )
    output: str = option(help="output directory")
    overwrite: bool = option(
        False, help="replace the outputs and manifest of an earlier run in --output"
    )
    file_mb: int = option(
        256, help="start a new Parquet file after this many MB of text", bounds=AT_LEAST_1
    )

    @property
    def max_file_text_bytes(self) -> int:
        return round(self.file_mb * (1 << 20))


class FileUnitSizes:
    """The byte sizes of a stage that reads whole files in units (books, corpus), from its
    flags `unit_mb` and `max_line_kb`."""

    @property
    def unit_bytes(self) -> int:
        return round(self.unit_mb * (1 << 20))  # type: ignore[attr-defined]

    @property
    def max_line_bytes(self) -> int:
        return round(self.max_line_kb * (1 << 10))  # type: ignore[attr-defined]


_DOCUMENTS_FILE = r"documents-[0-9]+(?:-[0-9]+)*\.parquet"
_REJECTS_FILE = rf"{REJECTS_DIR}/rejects-[0-9]+(?:-[0-9]+)*\.jsonl"
# Every name a documents stage writes: the manifest, files per unit, their temporary names
# and the rejects. `--overwrite` deletes these and refuses a directory holding anything else.
DOCUMENTS_RUN_FILES = (
    rf"{re.escape(MANIFEST_NAME)}(?:\.tmp-[0-9a-f]{{32}})?|{_DOCUMENTS_FILE}"
    rf"|\.tmp-(?:[0-9]+(?:-[0-9]+)*\.)?[0-9a-f]{{32}}\.parquet|{_REJECTS_FILE}"
)


def _documents_listed(output_dir: str) -> files.Listed | None:
    """The documents, rejects and (a dedup's) duplicates files the `_manifest.json` in
    `output_dir` lists, and the stage that wrote it (a stage does not overwrite another's
    documents); None where there is none, or it is not a documents manifest. A
    kind of file an older manifest does not list (no `rejects_files`, no
    `duplicates_files`) is not checked."""
    if (
        record := files.read_own_record(output_dir, MANIFEST_NAME, DocumentsManifest.from_json)
    ) is None:
        return None
    manifest, fields = record
    kinds = [_DOCUMENTS_FILE]
    names = {output.name for output in manifest.files}
    recorded = manifest.config.get("duplicates_files")
    if "rejects_files" in fields:
        kinds.append(_REJECTS_FILE)
        names.update(manifest.rejects_files)
    if isinstance(recorded, list):
        kinds.append(rf"{DUPLICATES_DIR}/duplicates-[0-9]+(?:-[0-9]+)*\.parquet")
        names.update(str(name) for name in recorded)
    kinds_listed = "|".join(f"(?:{kind})" for kind in kinds)
    return files.Listed(kinds_listed, frozenset(names), manifest.stage)


# A documents stage's record of its outputs (`files.earlier_run_files`).
DOCUMENTS_LISTING = files.Listing(MANIFEST_NAME, _documents_listed)


# The `--documents` flag of the stages that read documents directories (vocab, examples),
# for `stage_paths.StagePaths`: its field, and what belongs there.
DOCUMENTS_DIRS = (
    "documents",
    f"documents directory written by `bertkit wikipedia` or `bertkit books`, the one holding "
    f"{MANIFEST_NAME}",
)


# What a documents stage's paths are, for `runner.parse_stage`: --input files, and examples
# of each kind of name it writes.
DOCUMENTS_STAGE_PATHS = StagePaths(
    input_files="input",
    writes=(
        "documents-00000-0000.parquet",
        "documents-00000-00000-0000.parquet",
        f".tmp-00000.{'0' * 32}.parquet",
        MANIFEST_NAME,
        f"{REJECTS_DIR}/rejects-00000.jsonl",
    ),
)


def prepare_output_dir(output_dir: str, overwrite: bool, stage: str) -> None:
    """Refuse to mix runs or to touch files no documents stage wrote (before any work)."""
    files.clear_earlier_run(
        output_dir, DOCUMENTS_RUN_FILES, overwrite, stage, listing=DOCUMENTS_LISTING
    )


class DocumentFileWriter:
    """Writes one unit's documents to `documents-<unit>-<part>.parquet`, atomically.

    Each file is written under a temporary name and renamed when complete, so a reader (or a
    retried bundle) never sees a partial file. Documents keep their input order. A runner
    may run a unit again after an attempt died mid-write: the temporary names carry the
    unit, so the new attempt deletes what the dead one left before it writes anything
    (tests/test_bundle_retries.py).
    """

    def __init__(
        self,
        output_dir: str,
        unit: str,
        max_file_text_bytes: int = DEFAULT_MAX_FILE_TEXT_BYTES,
    ) -> None:
        self._output_dir = output_dir
        self._unit = unit
        self._max_file_text_bytes = max_file_text_bytes
        self._rows: list[Document] = []
        self._row_text_bytes = 0
        self._files: list[OutputFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._sink: HashingStream | None = None
        self._temp_path = ""
        self._file_counts = Counter()
        files.delete(files.match(files.join(output_dir, f".tmp-{unit}.*.parquet")))

    def add(self, document: Document) -> None:
        text_bytes = document.text_bytes()
        self._rows.append(document)
        self._row_text_bytes += text_bytes
        self._file_counts["documents"] += 1
        self._file_counts["sentences"] += len(document.sentences)
        self._file_counts["text_bytes"] += text_bytes
        if len(self._rows) >= ROWS_PER_GROUP or self._row_text_bytes >= ROW_GROUP_TEXT_BYTES:
            self._flush_rows()
        if self._file_counts["text_bytes"] >= self._max_file_text_bytes:
            self._finish_file()

    def close(self) -> list[OutputFile]:
        self._finish_file()
        return self._files

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        if self._writer is None:
            temporary = f".tmp-{self._unit}.{uuid.uuid4().hex}.parquet"
            self._temp_path = files.join(self._output_dir, temporary)
            self._sink = HashingStream(files.create(self._temp_path))
            self._writer = pq.ParquetWriter(self._sink, DOCUMENT_SCHEMA, compression="zstd")
        self._writer.write_table(documents_table(self._rows), row_group_size=ROWS_PER_GROUP)
        self._rows = []
        self._row_text_bytes = 0

    def _finish_file(self) -> None:
        self._flush_rows()
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        self._sink.close()
        name = f"documents-{self._unit}-{len(self._files):04d}.parquet"
        final_path = files.join(self._output_dir, name)
        files.replace(self._temp_path, final_path)  # a retried bundle: the same bytes
        counts = self._file_counts
        self._files.append(
            OutputFile(
                name=name,
                documents=counts["documents"],
                sentences=counts["sentences"],
                text_bytes=counts["text_bytes"],
                bytes=self._sink.bytes,
                sha256=self._sink.hexdigest(),
            )
        )
        self._writer, self._sink, self._file_counts = None, None, Counter()


# A unit holds at most this many rejects in memory: more go to its rejects file as they come
# (a corpus whose every record lacks --text-field is rejected record by record, and the
# memory stays flat). Only the first LOGGED_REJECTS per unit are logged; all are counted.
HELD_REJECTS = 1000
LOGGED_REJECTS = 100


@dataclass
class UnitTally:
    """What happened to one unit of work; the manifest sums these over all units.

    With `output_dir`, rejects beyond HELD_REJECTS are appended to the unit's rejects file
    as they come; without it, all are held until `finish_unit` writes them.
    """

    unit: str
    counts: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    rejects: list[Reject] = field(default_factory=list)  # those not yet written
    failed_inputs: list[dict[str, str]] = field(default_factory=list)
    output_dir: str | None = None
    rejected: Counter = field(default_factory=Counter)
    _rejects_sink: Any = None

    @property
    def rejects_file(self) -> str:
        return f"{REJECTS_DIR}/rejects-{self.unit}.jsonl"

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] += amount

    def drop(self, reason: str, amount: int = 1) -> None:
        self.dropped[reason] += amount
        beam.metrics.Metrics.counter(_METRICS_NAMESPACE, f"dropped_{reason}").inc(amount)

    def reject(self, reject: Reject) -> None:
        self.rejects.append(reject)
        self.rejected[reject.reason] += 1
        beam.metrics.Metrics.counter(_METRICS_NAMESPACE, f"rejected_{reject.reason}").inc()
        total = sum(self.rejected.values())
        if total <= LOGGED_REJECTS:
            what = reject.id or f"{reject.input} {reject.position}"
            _LOG.warning("rejected %s (%s): %s", what, reject.reason, reject.error)
        elif total == LOGGED_REJECTS + 1:
            _LOG.warning(
                "unit %s: more than %d rejects; the rest are counted and written to %s, not logged",
                self.unit,
                LOGGED_REJECTS,
                self.rejects_file,
            )
        if self.output_dir is not None and len(self.rejects) >= HELD_REJECTS:
            self.write_rejects(self.output_dir)

    def write_rejects(self, output_dir: str) -> None:
        """Append the held rejects to the unit's rejects file (created on the first call: a
        retried unit starts it again)."""
        if self._rejects_sink is None:
            self._rejects_sink = files.create(files.join(output_dir, self.rejects_file))
        for reject in self.rejects:
            self._rejects_sink.write(reject.to_json_line().encode("utf-8"))
        self.rejects = []

    def fail_input(self, path: str, error: str, reason: str, position: str) -> None:
        """A whole input could not be read to its end: a reject, and a non-zero exit later."""
        self.failed_inputs.append({"input": path, "error": error})
        self.reject(Reject(id=None, input=path, position=position, reason=reason, error=error))
        _LOG.error("input not read to its end: %s", error)


def finish_unit(output_dir: str, tally: UnitTally, outputs: list[OutputFile]) -> dict[str, Any]:
    """Write the unit's rejects and return its summary (a small JSON-able dict)."""
    rejects_file = None
    if tally.rejected:
        rejects_file = tally.rejects_file
        tally.write_rejects(output_dir)
        tally._rejects_sink.close()
        tally._rejects_sink = None
    for output in outputs:
        tally.count("documents", output.documents)
        tally.count("sentences", output.sentences)
        tally.count("text_bytes", output.text_bytes)
    return {
        "unit": tally.unit,
        "files": [asdict(f) for f in outputs],
        "counts": dict(tally.counts),
        "dropped": dict(tally.dropped),
        "rejected": dict(tally.rejected),
        "failed_inputs": tally.failed_inputs,
        "rejects_file": rejects_file,
    }


def build_manifest(
    stage: str,
    inputs: list[dict[str, Any]],
    config: dict[str, Any],
    unit_summaries: Iterable[dict[str, Any]],
) -> DocumentsManifest:
    """Sum the unit summaries, in unit order, into the directory's manifest."""
    counts: Counter = Counter()
    dropped: Counter = Counter()
    rejected: Counter = Counter()
    outputs, failed, rejects_files = [], [], []
    units = 0
    for summary in sorted(unit_summaries, key=lambda s: s["unit"]):
        units += 1
        counts.update(summary["counts"])
        dropped.update(summary["dropped"])
        rejected.update(summary["rejected"])
        outputs.extend(OutputFile(**f) for f in summary["files"])
        failed.extend(summary["failed_inputs"])
        if summary["rejects_file"]:
            rejects_files.append(summary["rejects_file"])
    counts["units"] = units
    counts["files"] = len(outputs)
    counts["rejected"] = sum(rejected.values())
    return DocumentsManifest(
        stage=stage,
        inputs=inputs,
        config=config,
        counts=dict(sorted(counts.items())),
        dropped=dict(sorted(dropped.items())),
        rejected=dict(sorted(rejected.items())),
        failed_inputs=failed,
        files=outputs,
        rejects_files=rejects_files,
    )


class WriteManifest(beam.PTransform):
    """Unit summaries → `DIR/_manifest.json`, after every unit has finished. A stage whose
    manifest holds more than `build_manifest` gives overrides `manifest`; one whose graph may
    yield no summary at all sets `empty_input`, and its manifest is then written from none."""

    empty_input = False

    def __init__(
        self, output_dir: str, stage: str, inputs: list[dict[str, Any]], config: dict[str, Any]
    ) -> None:
        super().__init__()
        self._output_dir = output_dir
        self._stage = stage
        self._inputs = inputs
        self._config = config

    def expand(self, unit_summaries):
        # Every unit yields one summary, and a stage has a unit at least (its --input must
        # match a file): no default for an empty input is needed, nor the side input and
        # bundles Beam would run to make one, but where `empty_input` says there may be none.
        collect = beam.CombineGlobally(beam.combiners.ToListCombineFn())
        if not self.empty_input:
            collect = collect.without_defaults()
        return (
            unit_summaries
            | "CollectSummaries" >> collect
            | "WriteManifestFile" >> beam.Map(self._write)
        )

    def manifest(self, summaries: list[dict[str, Any]]) -> DocumentsManifest:
        return build_manifest(self._stage, self._inputs, self._config, summaries)

    def _write(self, summaries: list[dict[str, Any]]) -> str:
        manifest = self.manifest(summaries)
        path = files.join(self._output_dir, MANIFEST_NAME)
        # What an attempt that died writing the manifest left (all units are done by now).
        files.delete(files.match(f"{path}.tmp-*"))
        files.write_atomically(path, manifest.to_json().encode("utf-8"))  # whole or absent
        return path


class DocumentsInputError(ValueError):
    """A documents directory the next stage cannot read: no manifest, or changed files."""


@dataclass(frozen=True, slots=True)
class DocumentsInput:
    """One documents directory, as its manifest describes it."""

    directory: str
    manifest: DocumentsManifest
    manifest_sha256: str

    @property
    def text_bytes(self) -> int:
        return sum(f.text_bytes for f in self.manifest.files)

    def summary(self, manifest_dir: str) -> dict[str, Any]:
        """The directory as a manifest written into `manifest_dir` records it: its path by
        pipelines/io/recorded_paths.py's rule, its stage, sha256 and counts."""
        return {
            "path": record_path(self.directory, manifest_dir),
            "stage": self.manifest.stage,
            "manifest_sha256": self.manifest_sha256,
            "documents": sum(f.documents for f in self.manifest.files),
            "text_bytes": self.text_bytes,
        }


def documents_units(inputs: list[DocumentsInput]) -> list[tuple[str, str]]:
    """(unit name, documents file): one unit of work per file, for a stage that reads
    documents (vocab, examples); the name is fixed by the inputs' order and the manifests."""
    return [
        (f"d{d:03d}-f{f:05d}", files.join(i.directory, output.name))
        for d, i in enumerate(inputs)
        for f, output in enumerate(i.manifest.files)
    ]


def read_documents_input(directory: str) -> DocumentsInput:
    """Read and check a documents directory's manifest, and that its files are all there."""
    manifest_path = files.join(directory, MANIFEST_NAME)
    if not files.exists(manifest_path):
        present = files.match(files.join(directory, "*"))
        state = "is empty or does not exist" if not present else "has no " + MANIFEST_NAME
        raise DocumentsInputError(
            f"documents directory {directory} {state}: it is not a finished documents "
            "directory; run `bertkit wikipedia`, `books`, `corpus` or `dedup` with --output "
            f"{directory} "
            "(the manifest is written last, when the stage has finished)"
        )
    raw = files.read_file(manifest_path, MAX_RECORD_BYTES)
    manifest = read_record(
        DocumentsManifest,
        raw.decode("utf-8"),
        manifest_path,
        "rerun the documents stage with this version",
        DocumentsInputError,
    )
    # One listing per directory (not one request per file) checks the files are complete.
    listing = files.match_sizes(files.join(directory, DOCUMENTS_FILE_GLOB))
    sizes = {path.rsplit("/", 1)[-1]: size for path, size in listing.items()}
    for output in manifest.files:
        if sizes.get(output.name) != output.bytes:
            found = "missing" if output.name not in sizes else f"{sizes[output.name]} bytes"
            raise DocumentsInputError(
                f"{files.join(directory, output.name)} is {found}, its manifest says "
                f"{output.bytes} bytes: the directory was changed after it was written; "
                "rerun the documents stage"
            )
    return DocumentsInput(directory, manifest, hashlib.sha256(raw).hexdigest())


def read_manifest(output_dir: str) -> DocumentsManifest:
    data = files.read_file(files.join(output_dir, MANIFEST_NAME), MAX_RECORD_BYTES)
    return DocumentsManifest.from_json(data.decode("utf-8"))


def json_config(config: Any) -> dict[str, Any]:
    """A config (a dataclass, or the dict a stage records of it) as a JSON-safe dict (for the
    manifest)."""
    values = config if isinstance(config, dict) else asdict(config)
    return json.loads(json.dumps(values, default=str))


def report(output_dir: str) -> int:
    """Print what the run produced; 1 if an input could not be read to its end."""
    manifest = read_manifest(output_dir)
    counts = manifest.counts
    print(
        f"{output_dir}: {counts.get('documents', 0)} documents, "
        f"{counts.get('sentences', 0)} sentences, {counts.get('text_bytes', 0)} bytes of text "
        f"in {counts.get('files', 0)} files; dropped {manifest.dropped or {}}; "
        f"rejected {manifest.rejected or {}}"
    )
    for failure in manifest.failed_inputs:
        print(f"error: {failure['error']}", file=sys.stderr)
    if manifest.failed_inputs:
        print(
            f"{len(manifest.failed_inputs)} input(s) could not be read to the end; everything "
            f"read before each fault is kept, details in {output_dir}/_rejects/",
            file=sys.stderr,
        )
        return 1
    return 0


def run_documents_pipeline(
    options: PipelineOptions,
    stage: str,
    extract: beam.PTransform,
    inputs: list[dict[str, Any]],
    config: Any,
    output_dir: str,
    progress: Sequence[Phase] = (),
) -> int:
    """Run `extract` (inputs → unit summaries) then the manifest; return the exit code.
    A local run shows `progress` on stderr while it works (pipelines/beam/progress.py)."""
    with progress_shown(options, stage, progress), make_pipeline(options) as pipeline:
        (
            pipeline
            | f"Extract{stage.title()}" >> extract
            | "WriteManifest" >> WriteManifest(output_dir, stage, inputs, json_config(config))
        )
    if submitted_only(options):
        manifest_url = files.join(output_dir, MANIFEST_NAME)
        return report_submission(pipeline, options, manifest_url, f"bertkit {stage}")
    return report(output_dir)
