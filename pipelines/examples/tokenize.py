"""Step 1 of the graph: read each documents file row group by row group, tokenize every
sentence once, and scatter each document to its partner group's pairing step, once per
dupe pass (through spill files: Beam carries only their paths)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

import apache_beam as beam
import numpy as np

from pipelines.beam import files
from pipelines.beam.documents import UnitTally, finish_unit
from pipelines.beam.progress import DOCUMENTS_TOKENIZED, StageCounters
from pipelines.beam.spill import TokenizedDocument, pack_document
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import PartitionKey
from pipelines.examples.plan import Layout, split_of
from pipelines.examples.shuffle import RoutedSpillWriter, Routing
from pipelines.io.parquet import iter_row_groups
from pipelines.io.vocabulary import Vocabulary, load_vocab
from schemas import DocumentColumn, Reject

SUMMARY = "summary"  # the tagged output of unit summaries (counts, drops, rejects)
# A tokenizers Encoding holds ids, strings and offsets: ~100 bytes a token. Tokenizing ~4,000
# sentences per call keeps that near 10 MB and still feeds every tokenizer thread.
TOKENIZE_BATCH_SENTENCES = 4096


class TokenizeDocumentsFn(beam.DoFn):
    """(unit name, documents file) → (PartitionKey or route group, spill file) + the unit's
    summary."""

    def __init__(self, config: ExamplesConfig, layout: Layout, routing: Routing) -> None:
        self._config = config
        self._layout = layout
        self._routing = routing
        self._vocab: Vocabulary | None = None
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._vocab = load_vocab(self._config.vocab, files.READER)
        self._counters = StageCounters((DOCUMENTS_TOKENIZED,))

    def process(self, unit: tuple[str, str]) -> Iterator[Any]:
        name, path = unit
        config, layout = self._config, self._layout
        tally = UnitTally(name)
        writer = RoutedSpillWriter(
            files.join(config.work_dir, "documents"), name, config.spill_budget_mb << 20,
            self._routing,
        )
        for document in self._read_tokenized(path, tally):
            split = split_of(document.id, config.heldout_fraction)
            tally.counts[f"documents_{split}"] += 1
            record = pack_document(document, layout.id_width)
            for dupe_pass in range(config.dupe_factor):
                group = layout.group_of(config.seed, dupe_pass, split, document.id)
                writer.add(
                    PartitionKey(split, dupe_pass, layout.partition_of(split, group)), record
                )
        yield from writer.close()
        summary = finish_unit(config.output, tally, [])
        assert self._counters is not None
        self._counters.flush()
        yield beam.pvalue.TaggedOutput(SUMMARY, summary)

    def _read_tokenized(self, path: str, tally: UnitTally) -> Iterator[TokenizedDocument]:
        with files.open_raw(path) as source:
            columns = [DocumentColumn.ID, DocumentColumn.SENTENCES]
            for row_group, table in enumerate(iter_row_groups(source, columns)):
                ids = table.column(DocumentColumn.ID).to_pylist()
                sentences = table.column(DocumentColumn.SENTENCES).to_pylist()
                batch: list[tuple[str, list[str]]] = []
                batched = 0
                for doc_id, doc_sentences in zip(ids, sentences, strict=True):
                    batch.append((doc_id, doc_sentences))
                    batched += len(doc_sentences)
                    if batched >= TOKENIZE_BATCH_SENTENCES:
                        yield from self._tokenize(batch, path, row_group, tally)
                        batch, batched = [], 0
                yield from self._tokenize(batch, path, row_group, tally)

    def _tokenize(
        self, batch: list[tuple[str, list[str]]], path: str, row_group: int, tally: UnitTally
    ) -> Iterator[TokenizedDocument]:
        assert self._vocab is not None and self._counters is not None
        self._counters.add(DOCUMENTS_TOKENIZED, len(batch))
        flat = [sentence for _, doc_sentences in batch for sentence in doc_sentences]
        encoded = self._vocab.tokenizer.encode_batch_fast(flat, add_special_tokens=False)
        cursor = 0
        for doc_id, doc_sentences in batch:
            pieces = [e.ids for e in encoded[cursor : cursor + len(doc_sentences)]]
            cursor += len(doc_sentences)
            tally.counts["documents"] += 1
            tally.counts["sentences"] += len(doc_sentences)
            kept = [p for p in pieces if p]
            if len(kept) < len(pieces):
                # Google's script skips these too ("if tokens:").
                tally.drop("sentence_without_tokens", len(pieces) - len(kept))
            if not kept:
                tally.reject(_without_tokens(doc_id, path, row_group, len(pieces)))
                continue
            if len(kept) == 1:
                tally.counts["documents_with_one_sentence"] += 1
            lengths = np.fromiter((len(p) for p in kept), dtype=np.uint32, count=len(kept))
            tokens = np.fromiter(
                chain.from_iterable(kept), dtype=np.uint32, count=int(lengths.sum())
            )
            tally.counts["tokens"] += len(tokens)
            yield TokenizedDocument(doc_id, tokens, lengths)


def _without_tokens(doc_id: str, path: str, row_group: int, sentences: int) -> Reject:
    return Reject(
        id=doc_id,
        input=path,
        position=f"row group {row_group}",
        reason="document_without_tokens",
        error=f"{doc_id}: none of its {sentences} sentences has a token after BERT "
        "normalization (control characters only?)",
    )
