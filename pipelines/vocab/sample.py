"""The sample a vocabulary is trained on: which documents, fixed by the manifests and the flags
before any work, and what counting read of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pipelines.beam import files
from pipelines.beam.documents import DocumentsInput, documents_units, read_documents_input
from pipelines.io.hashing import keyed_fraction
from pipelines.io.parquet import iter_row_groups
from pipelines.io.places import repeated_place
from pipelines.io.vocabulary import VocabError
from schemas.documents import DocumentColumn

# Sentences handed to the word counter at once: a few hundred kB of text.
COUNT_BATCH_SENTENCES = 1000
_MIB = 1 << 20


def document_hash(seed: int, document_id: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, id): the sample's coin for one document."""
    return keyed_fraction(str(seed), document_id)


@dataclass(frozen=True, slots=True)
class SamplePlan:
    """Which documents the vocabulary is trained on, fixed by the manifests and the flags
    before any work: every worker decides each document the same way."""

    inputs: tuple[DocumentsInput, ...]
    sample_mb: float
    seed: int

    @classmethod
    def open(cls, documents_dirs: Sequence[str], sample_mb: float, seed: int) -> SamplePlan:
        """Each directory's manifest, checked; sorted, so flag order does not matter."""
        directories = sorted(d.rstrip("/") or d for d in documents_dirs)
        repeated = repeated_place(directories)
        if repeated:
            raise VocabError(
                f"{repeated}: its text would be counted twice; name each directory once"
            )
        return cls(tuple(read_documents_input(d) for d in directories), sample_mb, seed)

    @property
    def total_text_bytes(self) -> int:
        return sum(i.text_bytes for i in self.inputs)

    @property
    def budget_bytes(self) -> int:
        return int(self.sample_mb * _MIB)

    @property
    def expected_bytes(self) -> int:
        return min(self.budget_bytes, self.total_text_bytes)

    @property
    def fraction(self) -> float:
        """The share of documents (by the hash) to keep; 1.0 reads everything."""
        return min(1.0, self.budget_bytes / max(1, self.total_text_bytes))

    def keeps(self, document_id: str) -> bool:
        fraction = self.fraction
        return fraction >= 1.0 or document_hash(self.seed, document_id) < fraction

    def units(self) -> list[tuple[str, str]]:
        return documents_units(list(self.inputs))

    def documents(self, path: str) -> Iterator[list[str]]:
        """The sentences of each sampled document of one documents file, in file order.
        Only one Parquet row group (≤ 8 MB of text) is in memory at a time."""
        columns = [DocumentColumn.ID, DocumentColumn.SENTENCES]
        with files.open_raw(path) as f:
            for table in iter_row_groups(f, columns):
                ids = table.column(DocumentColumn.ID).to_pylist()
                sentences = table.column(DocumentColumn.SENTENCES)
                for row, document_id in enumerate(ids):
                    if self.keeps(document_id):
                        yield sentences[row].as_py()

    def describe(self, counted: SampleCounts) -> dict[str, Any]:
        """The sample's recipe and size, for vocab.json."""
        return {
            "seed": self.seed,
            "sample_mb": self.sample_mb,
            "selection": "blake2b-64(key=str(seed), document id) / 2**64 < fraction",
            "fraction": self.fraction,
            "budget_bytes": self.budget_bytes,
            "total_text_bytes": self.total_text_bytes,
            **asdict(counted),
        }


@dataclass(slots=True)
class SampleCounts:
    """What counting read: one unit's, or (summed) the whole sample's."""

    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    distinct_words: int = 0  # in the unit; summed over units, in the whole sample

    def add(self, other: SampleCounts) -> None:
        self.documents += other.documents
        self.sentences += other.sentences
        self.text_bytes += other.text_bytes


def iter_sample_texts(
    documents_dirs: Sequence[str], sample_mb: float, seed: int = 0
) -> Iterator[list[str]]:
    """Batches of the sampled sentences, file by file: the text `bertkit vocab` counts
    words in, for benchmarks that hand the same sample to HF's trainer."""
    plan = SamplePlan.open(documents_dirs, sample_mb, seed)
    batch: list[str] = []
    for _, path in plan.units():
        for document in plan.documents(path):
            batch.extend(document)
            if len(batch) >= COUNT_BATCH_SENTENCES:
                yield batch
                batch = []
    if batch:
        yield batch
