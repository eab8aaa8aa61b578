"""The example stage's graph, as two composite transforms that only wire labelled steps:

    documents files ─ TokenizeDocuments ─► (PartitionKey, spill file) ─ GroupPartitions ─►
    PairAndMask ─► (BucketKey, spill file) ─ GroupBuckets ─► OrderBuckets ─► shards
                                                               └─ pieces ─ JoinPieces ─► shards

Which steps fan out, and why: TokenizeDocuments has one unit per documents file (spread
over workers by a Reshuffle); PairAndMask one per (split, pass, partition), sized by
--work-partition-mb; OrderBuckets one per shuffle bucket, sized by --bucket-mb. Beam carries
only keys, paths and counts; the records move through spill files (pipelines/beam/spill.py).
"""

from __future__ import annotations

import apache_beam as beam

from pipelines.examples.config import ExamplesConfig
from pipelines.examples.pairing import BUCKET_COUNTS, PairAndMaskFn
from pipelines.examples.plan import Layout
from pipelines.examples.shards import PIECES, JoinPiecesFn, OrderBucketFn
from pipelines.examples.tokenize import SUMMARY, TokenizeDocumentsFn


class CreateExamples(beam.PTransform):
    """Documents files → examples in spill buckets (+ bucket counts and unit summaries)."""

    def __init__(
        self, config: ExamplesConfig, layout: Layout, units: list[tuple[str, str]]
    ) -> None:
        super().__init__()
        self._config = config
        self._layout = layout
        self._units = units

    def expand(self, pipeline):
        tokenized = (
            pipeline
            | "ListDocumentsFiles" >> beam.Create(self._units)
            | "SpreadFiles" >> beam.Reshuffle()
            | "TokenizeDocuments"
            >> beam.ParDo(TokenizeDocumentsFn(self._config, self._layout)).with_outputs(
                SUMMARY, main="spills"
            )
        )
        paired = (
            tokenized.spills
            | "GroupPartitions" >> beam.GroupByKey()
            | "PairAndMask"
            >> beam.ParDo(PairAndMaskFn(self._config, self._layout)).with_outputs(
                SUMMARY, BUCKET_COUNTS, main="spills"
            )
        )
        summaries = (tokenized[SUMMARY], paired[SUMMARY]) | "AllSummaries" >> beam.Flatten()
        return paired.spills, paired[BUCKET_COUNTS], summaries


class WriteShards(beam.PTransform):
    """Spilled examples → globally shuffled, equal shards; yields each ShardInfo as a dict."""

    def __init__(self, config: ExamplesConfig) -> None:
        super().__init__()
        self._config = config

    def expand(self, inputs):
        spills, bucket_counts = inputs
        counts = bucket_counts | "SumBucketCounts" >> beam.CombinePerKey(sum)
        ordered = (
            spills
            | "GroupBuckets" >> beam.GroupByKey()
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
