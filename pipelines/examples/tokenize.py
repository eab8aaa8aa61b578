"""Step 1 of the graph: read each documents file row group by row group, tokenize every
sentence once, and scatter each document to its partner group's pairing step, once per
dupe pass (through spill files: Beam carries only their paths)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import numpy as np

from pipelines.beam import files
from pipelines.beam.documents import UnitTally, finish_unit
from pipelines.beam.progress import DOCUMENTS_TOKENIZED, StageCounters
from pipelines.beam.spill import TokenizedDocument, pack_document
from pipelines.bert.sentence_cuts import cut_sentence
from pipelines.bert.words_once import encode_in_calls, encode_words_once, splits_at_spaces
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import PartitionKey
from pipelines.examples.plan import Layout, split_of
from pipelines.examples.shuffle import RoutedSpillWriter, Routing
from pipelines.io.parquet import iter_row_groups
from pipelines.io.vocabulary import Vocabulary, load_vocab
from schemas import DocumentColumn, Reject

SUMMARY = "summary"  # the tagged output of unit summaries (counts, drops, rejects)
# A tokenizers Encoding holds ids, strings and offsets: ~100 bytes a token, and the call ~90
# bytes a character of its text. A call never takes more than 1 M characters (a document of
# long sentences, or a million of them, goes in several calls), so it never holds more than
# ~100 MB however long the document. A BERT tokenizer sees each distinct word of a window
# of documents once (pipelines/bert/words_once.py): the larger the window, the fewer words
# it sees again, and the more memory the window's words take as Python strings with their
# codes (~12 bytes a character of its text; docs/bad-input.md).
TOKENIZE_BATCH_SENTENCES = 4096
TOKENIZE_CALL_CHARS = 1 << 20
TOKENIZE_WINDOW_CHARS = 1 << 22


class TokenizeDocumentsFn(beam.DoFn):
    """(unit name, documents file) → (PartitionKey or route group, spill file) + the unit's
    summary."""

    def __init__(self, config: ExamplesConfig, layout: Layout, routing: Routing) -> None:
        self._config = config
        self._layout = layout
        self._routing = routing
        self._vocab: Vocabulary | None = None
        self._words_once = False
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._vocab = load_vocab(self._config.vocab, files.READER, self._config.cased)
        self._words_once = splits_at_spaces(self._vocab.tokenizer)
        self._counters = StageCounters((DOCUMENTS_TOKENIZED,))

    def process(self, unit: tuple[str, str]) -> Iterator[Any]:
        name, path = unit
        config, layout = self._config, self._layout
        tally = UnitTally(name)
        writer = RoutedSpillWriter(
            files.join(config.work_dir, "documents"),
            name,
            config.spill_budget_mb << 20,
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
                    if self._words_once:  # a window of characters
                        batched += sum(map(len, doc_sentences))
                        full = batched >= TOKENIZE_WINDOW_CHARS
                    else:  # sentences enough for every tokenizer thread
                        batched += len(doc_sentences)
                        full = batched >= TOKENIZE_BATCH_SENTENCES
                    if full:
                        yield from self._tokenize(batch, path, row_group, tally)
                        batch, batched = [], 0
                yield from self._tokenize(batch, path, row_group, tally)

    def _tokenize(
        self, batch: list[tuple[str, list[str]]], path: str, row_group: int, tally: UnitTally
    ) -> Iterator[TokenizedDocument]:
        assert self._vocab is not None and self._counters is not None
        self._counters.add(DOCUMENTS_TOKENIZED, len(batch))
        pieces: list[str] = []
        per_sentence: list[int] = []  # pieces of each sentence (1 unless it was cut)
        for _, doc_sentences in batch:
            for sentence in doc_sentences:
                cut = cut_sentence(sentence)
                pieces.extend(cut)
                per_sentence.append(len(cut))
        if self._words_once:
            tokens, lengths = encode_words_once(
                self._vocab.tokenizer, pieces, TOKENIZE_WINDOW_CHARS, TOKENIZE_CALL_CHARS
            )
        else:
            tokens, lengths = encode_in_calls(
                self._vocab.tokenizer, pieces, TOKENIZE_BATCH_SENTENCES, TOKENIZE_CALL_CHARS
            )
        sentence_at = piece_at = token_at = 0
        for doc_id, doc_sentences in batch:
            sentences = len(doc_sentences)
            counts = per_sentence[sentence_at : sentence_at + sentences]
            sentence_at += sentences
            piece_lengths = lengths[piece_at : piece_at + sum(counts)]
            piece_at += len(piece_lengths)
            tally.counts["documents"] += 1
            tally.counts["sentences"] += sentences
            if len(piece_lengths) == sentences:  # no sentence was cut
                with_tokens = int(np.count_nonzero(piece_lengths))
            else:
                tally.counts["sentences_cut"] += sum(1 for c in counts if c > 1)
                owner = np.repeat(np.arange(sentences), counts)
                per_owner = np.bincount(owner, weights=piece_lengths, minlength=sentences)
                with_tokens = int(np.count_nonzero(per_owner))
            if with_tokens < sentences:
                # Google's script skips these too ("if tokens:").
                tally.drop("sentence_without_tokens", sentences - with_tokens)
            if not with_tokens:
                tally.reject(_without_tokens(doc_id, path, row_group, sentences))
                continue
            if with_tokens == 1:
                tally.counts["documents_with_one_sentence"] += 1
            count = int(piece_lengths.sum())
            document_tokens = tokens[token_at : token_at + count]
            token_at += count
            tally.counts["tokens"] += count
            yield TokenizedDocument(doc_id, document_tokens, piece_lengths[piece_lengths > 0])


def _without_tokens(doc_id: str, path: str, row_group: int, sentences: int) -> Reject:
    return Reject(
        id=doc_id,
        input=path,
        position=f"row group {row_group}",
        reason="document_without_tokens",
        error=f"{doc_id}: none of its {sentences} sentences has a token after BERT "
        "normalization (control characters only?)",
    )
