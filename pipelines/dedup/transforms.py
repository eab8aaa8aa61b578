"""The stage's graph: `DeduplicateDocuments`, documents files → the same files without
duplicates, a summary per unit.

    documents files ─ HashDocuments ─┬─ exact keys ─ GroupExactCopies ─ LinkExactCopies ─┐
                                     └─ band keys ─ GroupBands ─ VerifyCandidates ────────┤
    ┌─────────────────────────────────────────────────────────────────────────────────────┘
    └─ EarliestEdge (per removed document) ─ ByFile ─┬─ JoinRemovals ─ WriteKept ─► summaries
    documents files ─ KeyFiles ──────────────────────┘

No step holds more than one bucket's `keep` earliest members, one row group, or one file's
removed rows: memory is bounded however many documents there are, and no step needs a view
of the whole corpus (no union-find), so every step spreads over workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import DocumentsInput, UnitTally, build_manifest, finish_unit
from pipelines.beam.progress import StageCounters
from pipelines.beam.runner import spread_over_workers
from pipelines.dedup.candidates import Edge, Member, exact_edges, near_edges
from pipelines.dedup.config import DedupConfig
from pipelines.dedup.units import DedupUnit, duplicates_name, iter_document_keys, rewrite_unit
from schemas import MANIFEST_NAME

DOCUMENTS_HASHED = "dedup_documents_hashed"
DOCUMENTS_REWRITTEN = "dedup_documents_rewritten"
_EXACT = "exact"
# A unit summary's name of its duplicates file (the manifest lists them in its config).
DUPLICATES_FILE = "duplicates_file"


class _HashDocumentsFn(beam.DoFn):
    """A documents file → (band key, member) per band, and (exact key, member) tagged."""

    def __init__(self, config: DedupConfig) -> None:
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_HASHED,))

    def process(self, unit: DedupUnit) -> Iterator[Any]:
        config, counters = self._config, self._counters
        assert counters is not None
        bands, rows = config.bands_rows
        for keys in iter_document_keys(
            DedupUnit(*unit), config.ngram, config.num_perm, config.seed, bands, rows
        ):
            yield beam.pvalue.TaggedOutput(_EXACT, (keys.exact[0], tuple(keys.exact[1])))
            for key, member in keys.bands:
                yield key, tuple(member)
            counters.add(DOCUMENTS_HASHED)
        counters.flush()


def _link_exact_copies(item: tuple[bytes, Iterable[tuple]]) -> Iterator[tuple]:
    _, members = item
    for priority, edge in exact_edges(_Members(members)):
        yield priority, tuple(edge)


class _VerifyCandidatesFn(beam.DoFn):
    def __init__(self, threshold: float) -> None:
        self._threshold = threshold

    def process(self, item: tuple[bytes, Iterable[tuple]]) -> Iterator[tuple]:
        _, members = item
        for priority, edge in near_edges(_Members(members), self._threshold):
            yield priority, tuple(edge)


class _Members:
    """A bucket's grouped values as Members, iterable as often as the runner's values are."""

    def __init__(self, values: Iterable[tuple]) -> None:
        self._values = values

    def __iter__(self) -> Iterator[Member]:
        return (Member(*value) for value in self._values)


class _WriteKeptFn(beam.DoFn):
    """A documents file and its removed rows → its kept documents and duplicates; a summary."""

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
        removed = {row: Edge(*edge) for row, edge in joined["removed"]}
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


def _by_file(item: tuple[tuple[int, int, int], tuple]) -> tuple[tuple[int, int], tuple]:
    (directory, file, row), edge = item
    return (directory, file), (row, edge)


class DeduplicateDocuments(beam.PTransform):
    """Documents files → their documents without exact and near duplicates, written under
    `output_dir`; outputs one summary per unit (for the manifest)."""

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

    def expand(self, pbegin):
        units = pbegin | "ListDocumentsFiles" >> beam.Create(self._units, reshuffle=False)
        keys = spread_over_workers(units, "SpreadFiles") | "HashDocuments" >> beam.ParDo(
            _HashDocumentsFn(self._config)
        ).with_outputs(_EXACT, main="bands")
        exact = (
            keys[_EXACT]
            | "GroupExactCopies" >> beam.GroupByKey()
            | "LinkExactCopies" >> beam.FlatMap(_link_exact_copies)
        )
        near = (
            keys.bands
            | "GroupBands" >> beam.GroupByKey()
            | "VerifyCandidates" >> beam.ParDo(_VerifyCandidatesFn(self._config.threshold))
        )
        removed = (
            (exact, near)
            | "AllEdges" >> beam.Flatten()
            | "EarliestEdge" >> beam.CombinePerKey(min)
            | "ByFile" >> beam.Map(_by_file)
        )
        by_file = units | "KeyFiles" >> beam.Map(lambda unit: ((unit[0], unit[1]), unit))
        return (
            {"unit": by_file, "removed": removed}
            | "JoinRemovals" >> beam.CoGroupByKey()
            | "WriteKept" >> beam.ParDo(_WriteKeptFn(self._inputs, self._output_dir, self._config))
        )


class WriteDedupManifest(beam.PTransform):
    """Unit summaries → `DIR/_manifest.json`, after every unit has finished: a documents
    manifest whose config lists the `_duplicates/` files too (`duplicates_files`), so a
    reader that cannot list a directory (plain HTTP) finds them."""

    def __init__(
        self, output_dir: str, stage: str, inputs: list[dict[str, Any]], config: dict[str, Any]
    ) -> None:
        super().__init__()
        self._output_dir = output_dir
        self._stage = stage
        self._inputs = inputs
        self._config = config

    def expand(self, unit_summaries):
        return (
            unit_summaries
            | "CollectSummaries" >> beam.combiners.ToList()
            | "WriteManifestFile" >> beam.Map(self._write)
        )

    def _write(self, summaries: list[dict[str, Any]]) -> str:
        listed = sorted(s[DUPLICATES_FILE] for s in summaries if DUPLICATES_FILE in s)
        config = {**self._config, "duplicates_files": listed}
        manifest = build_manifest(self._stage, self._inputs, config, summaries)
        path = files.join(self._output_dir, MANIFEST_NAME)
        files.delete(files.match(f"{path}.tmp-*"))  # what an attempt that died left
        files.write_atomically(path, manifest.to_json().encode("utf-8"))
        return path
