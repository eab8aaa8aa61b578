"""The example stage's graph, as two composite transforms that only wire labelled steps:

    documents files ─ TokenizeDocuments ─► (PartitionKey, spill file) ─ GroupPartitions ─►
    PairAndMask ─► (BucketKey, spill file) ─ GroupBuckets ─► OrderBuckets ─► shards
                                                               └─ pieces ─ JoinPieces ─► shards

(PackSentences in PairAndMask's place with --sequences full-sentences.)

Which steps fan out, and why: TokenizeDocuments has one unit per documents file (spread
over workers by a Reshuffle); PairAndMask one per (split, pass, partition), sized by
--work-partition-mb; OrderBuckets one per shuffle bucket, sized by --bucket-mb. Beam carries
only keys, paths and counts; the records move through spill files (pipelines/beam/spill.py).
On a large corpus each regrouping takes two levels (pipelines/examples/shuffle.py): the
mappers write per route group (sized by the planner), GroupPartitions/GroupBuckets then hold
a GroupRoutes step, Regroup steps (each one route group's files from a share of the mappers)
and the GroupByKey per key. In `bertkit chain` the plan is made inside the job
(pipelines/beam/planned.py), so both take that shape whatever it chooses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.planned import Planned
from pipelines.beam.runner import spread_over_workers
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.packing import PackSentencesFn
from pipelines.examples.pairing import BUCKET_COUNTS, PairAndMaskFn
from pipelines.examples.shards import PIECES, JoinPiecesFn, OrderBucketFn
from pipelines.examples.shuffle import GroupSpills, RegroupFn, Routing
from pipelines.examples.stage_plan import ExamplesPlan
from pipelines.examples.tokenize import SUMMARY, TokenizeDocumentsFn
from schemas.shards import FULL_SENTENCES


class CreateExamples(beam.PTransform):
    """Documents files → examples in spill buckets (+ bucket counts and unit summaries)."""

    def __init__(self, config: ExamplesConfig, planned: Planned[ExamplesPlan]) -> None:
        super().__init__()
        self._config = config
        self._planned = planned

    def expand(self, pipeline):
        config, planned = self._config, self._planned
        files_listed = planned.items(pipeline, "ListDocumentsFiles", lambda plan: plan.units)
        tokenized = spread_over_workers(
            files_listed, "SpreadFiles"
        ) | "TokenizeDocuments" >> planned.pardo(
            lambda plan: TokenizeDocumentsFn(config, plan.layout, plan.routes.partitions)
        ).with_outputs(SUMMARY, main="spills")
        # Sentence pairs (Google's), or full-sentence sequences (RoBERTa's): the same step
        # but for what it makes of a partner group.
        label, make = ("PairAndMask", PairAndMaskFn)
        if config.sequences == FULL_SENTENCES:
            label, make = ("PackSentences", PackSentencesFn)
        paired = (
            tokenized.spills
            | "GroupPartitions" >> _group_spills(config, "documents", planned, "partitions")
            | label
            >> planned.pardo(
                lambda plan: make(config, plan.layout, plan.routes.buckets)
            ).with_outputs(SUMMARY, BUCKET_COUNTS, main="spills")
        )
        summaries = (tokenized[SUMMARY], paired[SUMMARY]) | "AllSummaries" >> beam.Flatten()
        return paired.spills, paired[BUCKET_COUNTS], summaries


class WriteShards(beam.PTransform):
    """Spilled examples → globally shuffled, equal shards; yields each ShardInfo as a dict."""

    def __init__(self, config: ExamplesConfig, planned: Planned[ExamplesPlan]) -> None:
        super().__init__()
        self._config = config
        self._planned = planned

    def expand(self, inputs):
        config, planned = self._config, self._planned
        spills, bucket_counts = inputs
        counts = bucket_counts | "SumBucketCounts" >> beam.CombinePerKey(sum)
        ordered = (
            spills
            | "GroupBuckets" >> _group_spills(config, "examples", planned, "buckets")
            | "OrderBuckets"
            >> beam.ParDo(OrderBucketFn(config), beam.pvalue.AsDict(counts)).with_outputs(
                PIECES, main="shards"
            )
        )
        joined = (
            ordered[PIECES]
            | "GroupPieces" >> beam.GroupByKey()
            | "JoinPieces" >> beam.ParDo(JoinPiecesFn(config))
        )
        return (ordered.shards, joined) | "AllShards" >> beam.Flatten()


class _RegroupOrPassFn(beam.DoFn):
    """A regrouping's middle step when its levels are known only inside the job: the
    second level's regroup step (`RegroupFn`), or, on one level, (key, [spill files]) →
    (key, spill file) for the GroupByKey after it (which then groups what it grouped)."""

    def __init__(self, directory: str, routing: Routing) -> None:
        self._routing = routing
        self._regroup = RegroupFn(directory, routing) if routing.two_level else None

    def process(self, element: tuple[Any, list[str]]) -> Iterator[tuple[Any, str]]:
        if self._regroup is not None:
            yield from self._regroup.process(element)
            return
        key, paths = element
        for path in paths:
            yield key, path


class _GroupSpillsLater(beam.PTransform):
    """`GroupSpills` whose levels the plan made inside the job decides: always the
    two-level graph, whose regroup step passes the files on where one level was chosen."""

    def __init__(self, directory: str, planned: Planned[ExamplesPlan], which: str) -> None:
        super().__init__()
        self._directory = directory
        self._planned = planned
        self._which = which

    def expand(self, spills):
        directory, which = self._directory, self._which
        return (
            spills
            | "GroupRoutes" >> beam.GroupByKey()
            | "Regroup"
            >> self._planned.pardo(
                lambda plan: _RegroupOrPassFn(directory, getattr(plan.routes, which))
            )
            | "GroupByKey" >> beam.GroupByKey()
        )


def _group_spills(
    config: ExamplesConfig, folder: str, planned: Planned[ExamplesPlan], which: str
) -> beam.PTransform:
    """A regrouping's GroupByKey, with its regroup step where it takes two levels."""
    directory = files.join(config.work_dir, folder)
    if planned.made_later:
        return _GroupSpillsLater(directory, planned, which)
    return GroupSpills(directory, getattr(planned.plan.routes, which))
