"""The vocabulary stage's graph and its two steps (DoFns), each a call into the Beam-free
modules beside it: CountWords (counting.py), spread over every worker, and LearnPieces
(learning.py, writing.py), on one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.planned import Planned
from pipelines.beam.progress import (
    DOCUMENTS_COUNTED,
    PIECES_LEARNED,
    TEXT_BYTES_COUNTED,
    StageCounters,
)
from pipelines.beam.runner import spread_over_workers
from pipelines.io.vocabulary import VocabError
from pipelines.vocab.config import VocabConfig
from pipelines.vocab.counting import count_unit, remove_work_dir, sum_word_counts, summary_counts
from pipelines.vocab.learning import learn_vocab
from pipelines.vocab.sample import SampleCounts, SamplePlan
from pipelines.vocab.writing import write_vocab
from schemas.vocab import VOCAB_METADATA_FILE


class _CountWordsFn(beam.DoFn):
    """(unit name, documents file) → the unit's counts, its words in a spill file."""

    def __init__(self, plan: SamplePlan, config: VocabConfig) -> None:
        self._plan = plan
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_COUNTED, TEXT_BYTES_COUNTED))

    def process(self, unit: tuple[str, str]) -> Iterator[dict[str, Any]]:
        yield count_unit(self._plan, self._config, *unit, counters=self._counters)


class _LearnPiecesFn(beam.DoFn):
    """Every unit's summary → the vocabulary files, written on one worker; `_work` deleted."""

    def __init__(self, plan: SamplePlan, config: VocabConfig) -> None:
        self._plan = plan
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters((PIECES_LEARNED,))

    def process(self, _: Any, summaries: list[dict[str, Any]]) -> Iterator[str]:
        config = self._config
        counted = SampleCounts()
        for summary in summaries:
            counted.add(SampleCounts(**summary_counts(summary)))
        word_counts = sum_word_counts(config.output, summaries)
        counted.distinct_words = len(word_counts)
        try:
            trained = learn_vocab(word_counts, config, self._counters)
        except VocabError:
            # A refusal of the flags or the sample: a retry would refuse again, so the word
            # counts go (any other failure keeps them for the runner's retry of this step).
            remove_work_dir(config.output)
            raise
        if self._counters is not None:
            self._counters.flush()
        write_vocab(self._plan, counted, config, trained)
        remove_work_dir(config.output)
        yield files.join(config.output, VOCAB_METADATA_FILE)


def add_vocab_steps(
    pipeline: beam.Pipeline, planned: Planned[SamplePlan], config: VocabConfig
) -> beam.PCollection:
    """The stage's graph: documents files ─ CountWords ─► unit summaries ─ LearnPieces (one
    worker, the summaries as a side input) ─► the vocabulary files; returns the path of
    vocab.json once written (for a step that must wait for the vocabulary).

    The sample plan is given (`bertkit vocab`) or made by the workers once the documents
    are written (`bertkit chain`: pipelines/beam/planned.py). Its steps are labelled at the
    pipeline's top level, as Dataflow shows them and as tests/test_dataflow.py checks which
    of them shuffle.
    """
    files_listed = planned.items(pipeline, "ListDocumentsFiles", SamplePlan.units)
    summaries = spread_over_workers(files_listed, "SpreadFiles") | "CountWords" >> planned.pardo(
        lambda plan: _CountWordsFn(plan, config)
    )
    return (
        pipeline
        | "LearnTrigger" >> beam.Create([None])
        | "LearnPieces"
        >> planned.pardo(lambda plan: _LearnPiecesFn(plan, config), beam.pvalue.AsList(summaries))
    )
