"""The stage's graph: `DeduplicateDocuments`, documents files → the same files without
duplicates, a summary per unit.

    documents files ─ HashDocuments ─ GroupPartitions ─ FindEdges ─┐  (paths of spill files)
    documents files ─ KeyFiles ─────────────────────── JoinRemovals ┴─ WriteKept ─► summaries

HashDocuments writes each document's exact key and band keys, with the document, to spill
files per partition of the keys; FindEdges reads one partition, groups it by bucket and
writes the edges it finds to spill files per documents file; WriteKept reads its file's
edges and keeps the least per removed row (buckets.py). No step holds more than one
partition's records, one bucket's `keep` earliest members, one row group, or one file's
removed rows: memory is bounded however many documents there are, and no step needs a view
of the whole corpus (no union-find), so every step spreads over workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import (
    DocumentsInput,
    UnitTally,
    WriteManifest,
    build_manifest,
    finish_unit,
)
from pipelines.beam.progress import StageCounters
from pipelines.beam.runner import spread_over_workers
from pipelines.dedup.buckets import (
    WORK_DIR,
    BucketWriter,
    partition_edges,
    partitions,
    remove_work_dir,
    removed_rows,
    write_edges,
)
from pipelines.dedup.config import DedupConfig
from pipelines.dedup.units import DedupUnit, duplicates_name, iter_document_keys, rewrite_unit
from schemas import DocumentsManifest

DOCUMENTS_HASHED = "dedup_documents_hashed"
DOCUMENTS_REWRITTEN = "dedup_documents_rewritten"
# A unit summary's name of its duplicates file (the manifest lists them in its config).
DUPLICATES_FILE = "duplicates_file"


class _HashDocumentsFn(beam.DoFn):
    """A documents file → its members, keyed by exact key and by band, in spill files per
    partition of the keys (buckets.py); outputs (partition, spill file) per file."""

    def __init__(self, config: DedupConfig, work_dir: str, partitions: int) -> None:
        self._config = config
        self._work_dir = work_dir
        self._partitions = partitions
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_HASHED,))

    def process(self, unit: DedupUnit) -> Iterator[tuple[int, str]]:
        config, counters = self._config, self._counters
        assert counters is not None
        unit = DedupUnit(*unit)
        bands, rows = config.bands_rows
        writer = BucketWriter(self._work_dir, unit.name, self._partitions)
        for keys in iter_document_keys(
            unit, config.ngram, config.num_perm, config.seed, bands, rows
        ):
            writer.add(True, *keys.exact)
            for key, member in keys.bands:
                writer.add(False, key, member)
            counters.add(DOCUMENTS_HASHED)
        counters.flush()
        yield from writer.close()


class _FindEdgesFn(beam.DoFn):
    """A partition's spill files → its buckets' edges, in spill files per documents file;
    outputs ((directory, file), spill file) per file."""

    def __init__(self, work_dir: str, threshold: float) -> None:
        self._work_dir = work_dir
        self._threshold = threshold

    def process(self, item: tuple[int, Iterable[str]]) -> Iterator[tuple[tuple[int, int], str]]:
        partition, paths = item
        edges = partition_edges(paths, partition, self._threshold)
        yield from write_edges(self._work_dir, partition, edges)


class _WriteKeptFn(beam.DoFn):
    """A documents file and its edge spill files → its kept documents and duplicates; a
    summary."""

    def __init__(self, inputs: list[DocumentsInput], output_dir: str, config: DedupConfig):
        self._inputs = inputs
        self._output_dir = output_dir
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_REWRITTEN,))

    def process(self, item: tuple[tuple[int, int], dict[str, list]]) -> Iterator[dict]:
        _, joined = item
        (unit,) = joined["unit"]
        unit = DedupUnit(*unit)
        removed = removed_rows(joined["edges"])
        tally = UnitTally(unit.name)
        outputs = rewrite_unit(
            unit, removed, self._inputs, self._output_dir, self._config.max_file_text_bytes, tally
        )
        assert self._counters is not None
        self._counters.add(DOCUMENTS_REWRITTEN, tally.counts["input_documents"])
        self._counters.flush()
        summary = finish_unit(self._output_dir, tally, outputs)
        if sum(tally.dropped.values()):
            summary[DUPLICATES_FILE] = duplicates_name(unit.name)
        yield summary


class DeduplicateDocuments(beam.PTransform):
    """Documents files → their documents without exact and near duplicates, written under
    `output_dir`; outputs one summary per unit (for the manifest). The buckets and edges
    go through spill files under `output_dir/_work/` (buckets.py), which
    `WriteDedupManifest` removes."""

    def __init__(
        self,
        inputs: list[DocumentsInput],
        units: list[DedupUnit],
        output_dir: str,
        config: DedupConfig,
    ) -> None:
        super().__init__()
        self._inputs = inputs
        self._units = [tuple(unit) for unit in units]
        self._output_dir = output_dir
        self._config = config
        documents = sum(item.manifest.counts.get("documents", 0) for item in inputs)
        self._partitions = partitions(documents, config.bands_rows[0], config.num_perm)

    def expand(self, pbegin):
        work_dir = files.join(self._output_dir, WORK_DIR)
        units = pbegin | "ListDocumentsFiles" >> beam.Create(self._units, reshuffle=False)
        edge_files = (
            spread_over_workers(units, "SpreadFiles")
            | "HashDocuments"
            >> beam.ParDo(_HashDocumentsFn(self._config, work_dir, self._partitions))
            | "GroupPartitions" >> beam.GroupByKey()
            | "FindEdges" >> beam.ParDo(_FindEdgesFn(work_dir, self._config.threshold))
        )
        by_file = units | "KeyFiles" >> beam.Map(lambda unit: ((unit[0], unit[1]), unit))
        return (
            {"unit": by_file, "edges": edge_files}
            | "JoinRemovals" >> beam.CoGroupByKey()
            | "WriteKept" >> beam.ParDo(_WriteKeptFn(self._inputs, self._output_dir, self._config))
        )


class WriteDedupManifest(WriteManifest):
    """Unit summaries → `DIR/_manifest.json`, after every unit has finished: a documents
    manifest whose config lists the `_duplicates/` files too (`duplicates_files`), so a
    reader that cannot list a directory (plain HTTP) finds them."""

    empty_input = True

    def manifest(self, summaries: list[dict[str, Any]]) -> DocumentsManifest:
        listed = sorted(s[DUPLICATES_FILE] for s in summaries if DUPLICATES_FILE in s)
        config = {**self._config, "duplicates_files": listed}
        manifest = build_manifest(self._stage, self._inputs, config, summaries)
        remove_work_dir(self._output_dir)  # every unit has read its spill files
        return manifest
