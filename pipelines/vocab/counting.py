"""Step 1, CountWords: one documents file's sampled words counted into a spill file under
`OUTPUT/_work/words/` (schemas/vocab.py: WORD_COUNTS_SCHEMA); the spill files summed and
removed by step 2."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.beam import files
from pipelines.beam.progress import DOCUMENTS_COUNTED, TEXT_BYTES_COUNTED, StageCounters
from pipelines.io.vocabulary import VocabError
from pipelines.text.wordpiece import WordCounter
from pipelines.vocab.config import VocabConfig
from pipelines.vocab.sample import COUNT_BATCH_SENTENCES, SampleCounts, SamplePlan
from schemas.vocab import WORD_COUNTS_DIR, WORD_COUNTS_SCHEMA, WordCountColumn


def word_counts_path(output: str, unit: str) -> str:
    return files.join(output, WORD_COUNTS_DIR, f"{unit}.parquet")


def count_unit(
    plan: SamplePlan,
    config: VocabConfig,
    unit: str,
    path: str,
    counters: StageCounters | None = None,
) -> dict[str, Any]:
    """Count the words of one documents file's sampled documents into its spill file
    (written atomically: a retried bundle replaces it whole); return the unit's counts."""
    counter, counted = WordCounter(config.cased), SampleCounts()
    batch: list[str] = []
    for document in plan.documents(path):
        size = sum(len(s.encode("utf-8")) for s in document)
        counted.add(SampleCounts(1, len(document), size))
        batch.extend(document)
        if len(batch) >= COUNT_BATCH_SENTENCES:
            counter.add(batch)
            batch = []
        if counters is not None:
            counters.add(DOCUMENTS_COUNTED)
            counters.add(TEXT_BYTES_COUNTED, size)
    counter.add(batch)
    words = sorted(counter.counts)
    counted.distinct_words = len(words)
    table = pa.table(
        {
            WordCountColumn.WORD: pa.array(words, pa.string()),
            WordCountColumn.COUNT: pa.array([counter.counts[w] for w in words], pa.int64()),
        },
        schema=WORD_COUNTS_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    files.write_atomically(word_counts_path(config.output, unit), sink.getvalue().to_pybytes())
    if counters is not None:
        counters.flush()
    return {"unit": unit, **asdict(counted)}


def read_word_counts(path: str, data: bytes) -> tuple[list[str], list[int]]:
    """One spill file's words and counts, checked against WORD_COUNTS_SCHEMA."""
    table = pq.read_table(pa.BufferReader(data))
    if not table.schema.equals(WORD_COUNTS_SCHEMA, check_metadata=False):
        raise VocabError(f"{path}: not a word-count file of this bertkit version ({table.schema})")
    return (
        table.column(WordCountColumn.WORD).to_pylist(),
        table.column(WordCountColumn.COUNT).to_pylist(),
    )


# Spill files fetched at once while summing: on object storage each read is a round trip.
READ_THREADS = 16


def sum_word_counts(output: str, summaries: Sequence[dict[str, Any]]) -> Counter[str]:
    """Every unit's word counts added up, units in name order (files fetched by threads)."""
    paths = [
        word_counts_path(output, s["unit"]) for s in sorted(summaries, key=lambda s: s["unit"])
    ]
    total: Counter[str] = Counter()
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for path, data in zip(paths, pool.map(files.read_file, paths), strict=True):
            words, counts = read_word_counts(path, data)
            for word, count in zip(words, counts, strict=True):
                total[word] += count
    return total


def summary_counts(summary: dict[str, Any]) -> dict[str, int]:
    return {k: summary[k] for k in ("documents", "sentences", "text_bytes")}


def remove_work_dir(output: str) -> None:
    """Delete the word-count spill files (and `_work` itself, on a local disk)."""
    work = files.join(output, WORD_COUNTS_DIR.split("/")[0])
    files.delete(files.match(files.join(work, "**")))
    if files.exists(work):
        files.delete([work])
