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
mappers write per route group of √keys keys, GroupPartitions/GroupBuckets then hold a
GroupRoutes step, one Regroup step per route group and the GroupByKey per key.
"""

from __future__ import annotations

import apache_beam as beam

from pipelines.beam import files
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.packing import PackSentencesFn
from pipelines.examples.pairing import BUCKET_COUNTS, PairAndMaskFn
from pipelines.examples.plan import Layout, Routes
from pipelines.examples.shards import PIECES, JoinPiecesFn, OrderBucketFn
from pipelines.examples.shuffle import GroupSpills
from pipelines.examples.tokenize import SUMMARY, TokenizeDocumentsFn
from schemas.shards import FULL_SENTENCES


class CreateExamples(beam.PTransform):
    """Documents files → examples in spill buckets (+ bucket counts and unit summaries)."""

    def __init__(
        self,
        config: ExamplesConfig,
        layout: Layout,
        routes: Routes,
        units: list[tuple[str, str]],
    ) -> None:
        super().__init__()
        self._config = config
        self._layout = layout
        self._routes = routes
        self._units = units

    def expand(self, pipeline):
        tokenized = (
            pipeline
            | "ListDocumentsFiles" >> beam.Create(self._units)
            | "SpreadFiles" >> beam.Reshuffle()
            | "TokenizeDocuments"
            >> beam.ParDo(
                TokenizeDocumentsFn(self._config, self._layout, self._routes.partitions)
            ).with_outputs(SUMMARY, main="spills")
        )
        # Sentence pairs (Google's), or full-sentence sequences (RoBERTa's): the same step
        # but for what it makes of a partner group.
        label, make = ("PairAndMask", PairAndMaskFn)
        if self._config.sequences == FULL_SENTENCES:
            label, make = ("PackSentences", PackSentencesFn)
        paired = (
            tokenized.spills
            | "GroupPartitions" >> _group_spills(self._config, "documents", self._routes.partitions)
            | label
            >> beam.ParDo(make(self._config, self._layout, self._routes.buckets)).with_outputs(
                SUMMARY, BUCKET_COUNTS, main="spills"
            )
        )
        summaries = (tokenized[SUMMARY], paired[SUMMARY]) | "AllSummaries" >> beam.Flatten()
        return paired.spills, paired[BUCKET_COUNTS], summaries


class WriteShards(beam.PTransform):
    """Spilled examples → globally shuffled, equal shards; yields each ShardInfo as a dict."""

    def __init__(self, config: ExamplesConfig, routes: Routes) -> None:
        super().__init__()
        self._config = config
        self._routes = routes

    def expand(self, inputs):
        spills, bucket_counts = inputs
        counts = bucket_counts | "SumBucketCounts" >> beam.CombinePerKey(sum)
        ordered = (
            spills
            | "GroupBuckets" >> _group_spills(self._config, "examples", self._routes.buckets)
            | "OrderBuckets"
            >> beam.ParDo(OrderBucketFn(self._config), beam.pvalue.AsDict(counts)).with_outputs(
                PIECES, main="shards"
            )
        )
        joined = (
            ordered[PIECES]
            | "GroupPieces" >> beam.GroupByKey()
            | "JoinPieces" >> beam.ParDo(JoinPiecesFn(self._config))
        )
        return (ordered.shards, joined) | "AllShards" >> beam.Flatten()


def _group_spills(config: ExamplesConfig, folder: str, routing) -> GroupSpills:
    """A regrouping's GroupByKey, with its regroup step where it takes two levels."""
    return GroupSpills(files.join(config.work_dir, folder), routing)
