"""Step 2 of the graph: in each pairing step, every document's sentence pairs and masks,
per partner group, drawn from the document's own generator; each example gets a random
place in the global shuffle and goes to the spill bucket that place falls in."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np

from pipelines.beam import files
from pipelines.beam.documents import UnitTally, finish_unit
from pipelines.beam.progress import DOCUMENTS_PAIRED, EXAMPLES_MADE, StageCounters
from pipelines.beam.spill import TokenizedDocument, pack_example, unpack_documents
from pipelines.bert.draws import RandomStream, document_stream
from pipelines.bert.masking import MaskedInput, MaskingConfig, mask_batch
from pipelines.bert.pairs import SentencePair, create_pairs, pair_input_ids
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import BucketKey, PartitionKey
from pipelines.examples.plan import Layout
from pipelines.examples.shuffle import RoutedSpillWriter, Routing
from pipelines.examples.tokenize import SUMMARY
from pipelines.io.vocabulary import load_vocab
from schemas import PretrainingExample, Reject
from schemas.examples import NOT_NEXT
from schemas.shards import STATIC, split_dir

BUCKET_COUNTS = "bucket_counts"  # the tagged output of (BucketKey, examples) counts
# A document's examples are built and masked this many tokens at a time (at most; 8,192
# examples at 128): masking holds ~10 numpy arrays of its tokens, ~100 MB here, however long
# the document. Any document of fewer examples is masked in one batch, as it always was (the
# sample's longest, 117,290 tokens, makes ~1,000 at 128).
MASK_BATCH_TOKENS = 1 << 20
_NOTHING = np.zeros(0, dtype=np.int64)  # the positions and labels of an unmasked input


class _Others(Sequence):
    """The documents of a group but one, without copying the list per document."""

    def __init__(self, documents: list, skip: int) -> None:
        self._documents = documents
        self._skip = skip

    def __len__(self) -> int:
        return len(self._documents) - 1

    def __getitem__(self, index):  # type: ignore[override]
        return self._documents[index + (index >= self._skip)]


@dataclass(slots=True)
class GroupStep:
    """One partner group in one pass: its documents and where their examples go."""

    members: list[TokenizedDocument]  # sorted by id
    lengths: list[list[int]]  # sentence lengths per member
    dupe_pass: int
    split: str
    writer: RoutedSpillWriter
    tally: UnitTally
    bucket_counts: Counter
    group: int = 0  # the partner group's number in its split and pass


class PairAndMaskFn(beam.DoFn):
    """(PartitionKey, spill files) → (BucketKey or route group, spill file) + bucket counts +
    a summary."""

    def __init__(self, config: ExamplesConfig, layout: Layout, routing: Routing) -> None:
        self._config = config
        self._layout = layout
        self._routing = routing

    def setup(self) -> None:
        self._counters = StageCounters((DOCUMENTS_PAIRED, EXAMPLES_MADE))
        vocab = load_vocab(self._config.vocab, files.READER)
        self._cls, self._sep = vocab.cls_id, vocab.sep_id
        self._masking: dict[int, MaskingConfig] | None = None  # --masking none: no masks
        if self._config.masking != STATIC:
            return
        self._masking = {
            length: MaskingConfig(
                masked_lm_prob=self._config.masked_lm_prob,
                max_predictions=predictions,
                mask_id=vocab.mask_id,
                replaceable_ids=vocab.replaceable_ids,
                is_continuation=vocab.is_continuation if self._config.whole_word_mask else None,
            )
            for length, predictions in zip(
                self._config.max_seq_lengths, self._config.max_predictions_per_seq, strict=True
            )
        }

    def process(self, element: tuple[tuple, list[str]]) -> Iterator[Any]:
        key, paths = PartitionKey(*element[0]), element[1]
        config = self._config
        unit = key.name.replace("/", "-")
        writer = RoutedSpillWriter(
            files.join(config.work_dir, "examples"),
            unit,
            config.spill_budget_mb << 20,
            self._routing,
        )
        tally = UnitTally(unit)
        bucket_counts: Counter = Counter()
        for group, members in sorted(self._groups(key, paths).items()):
            members.sort(key=lambda d: d.id)
            lengths = [m.sentence_lengths.tolist() for m in members]
            step = GroupStep(
                members, lengths, key.dupe_pass, key.split, writer, tally, bucket_counts, group
            )
            self._group_examples(step, key)
        yield from writer.close()
        for bucket_key, count in sorted(bucket_counts.items()):
            yield beam.pvalue.TaggedOutput(BUCKET_COUNTS, (tuple(bucket_key), count))
        summary = finish_unit(config.output, tally, [])
        self._counters.flush()
        yield beam.pvalue.TaggedOutput(SUMMARY, summary)

    def _group_examples(self, step: GroupStep, key: PartitionKey) -> None:
        """One partner group's examples in one pass: each member's pairs at every length."""
        if len(step.members) == 1:
            step.tally.reject(_alone(step.members[0].id, key, step.group))
        for index in range(len(step.members)):
            for length in self._config.max_seq_lengths:
                self._make_examples(step, index, length)
            self._counters.add(DOCUMENTS_PAIRED)

    def _groups(self, key: PartitionKey, paths: list[str]) -> dict[int, list[TokenizedDocument]]:
        """The step's documents by partner group (a step holds several groups)."""
        config, layout = self._config, self._layout
        groups: dict[int, list[TokenizedDocument]] = defaultdict(list)
        for path in sorted(paths):
            for document in unpack_documents(files.read_file(path), path):
                group = layout.group_of(config.seed, key.dupe_pass, key.split, document.id)
                groups[group].append(document)
        return groups

    def _make_examples(self, step: GroupStep, index: int, length: int) -> None:
        """One document's examples in one pass at one length, spilled to their buckets."""
        config = self._config
        document = step.members[index]
        rng = document_stream(config.seed, document.id, step.dupe_pass, length)
        pairs = create_pairs(
            step.lengths[index], _Others(step.lengths, index), length, config.short_seq_prob, rng
        )
        batch = max(1, MASK_BATCH_TOKENS // length)
        for first in range(0, len(pairs), batch):
            self._spill_examples(step, index, length, pairs[first : first + batch], rng)

    def _spill_examples(
        self, step: GroupStep, index: int, length: int, pairs: list[SentencePair], rng: RandomStream
    ) -> None:
        """A batch of one document's pairs built, masked (unless --masking none) and spilled
        to their buckets; the stream draws the masks, then each example's place in the
        shuffle."""
        document = step.members[index]
        others = _Others(step.members, index)
        inputs = [
            pair_input_ids(
                pair,
                document.tokens,
                others[pair.partner].tokens if pair.is_random_next else None,
                self._cls,
                self._sep,
            )
            for pair in pairs
        ]
        masked_inputs = self._masked(
            [ids for ids, _ in inputs],
            [(0, a_length - 1, len(ids) - 1) for ids, a_length in inputs],
            length,
            rng,
        )
        examples = [
            PretrainingExample(
                masked.input_ids,
                a_length,
                masked.positions,
                masked.labels,
                NOT_NEXT if pair.is_random_next else 0,
                document.id,
                others[pair.partner].id if pair.is_random_next else document.id,
                step.dupe_pass,
            )
            for pair, (_, a_length), masked in zip(pairs, inputs, masked_inputs, strict=True)
        ]
        self._spill(step, length, examples, rng)

    def _masked(
        self,
        inputs: list[np.ndarray],
        special_positions: list[Sequence[int]],
        length: int,
        rng: RandomStream,
    ) -> list[MaskedInput]:
        """The inputs with their static masks drawn from `rng`; as they are (no prediction,
        no draw) with --masking none."""
        if self._masking is None:
            return [MaskedInput(ids, _NOTHING, _NOTHING) for ids in inputs]
        return mask_batch(inputs, special_positions, self._masking[length], rng)

    def _spill(
        self, step: GroupStep, length: int, examples: list[PretrainingExample], rng: RandomStream
    ) -> None:
        """A batch of examples, each given its place in the shuffle (drawn from `rng` after
        the masks), spilled to the bucket that place falls in; their counts added."""
        sort_keys = (rng.uniforms(len(examples)) * 2**53).astype(np.int64).tolist()
        self._counters.add(EXAMPLES_MADE, len(examples))
        output = split_dir(length, step.split)
        buckets = self._layout.buckets[output]
        not_next = tokens = predictions = 0
        for example, sort_key in zip(examples, sort_keys, strict=True):
            bucket_key = BucketKey(output, sort_key % buckets)
            encoded = example.encode(self._layout.id_width)
            step.writer.add(bucket_key, pack_example(sort_key, encoded))
            step.bucket_counts[bucket_key] += 1
            not_next += example.next_sentence_label
            tokens += len(example.input_ids)
            predictions += len(example.masked_lm_positions)
        # the counts of a batch of examples, added once (not per example)
        counts = step.tally.counts
        counts[f"{output}/examples"] += len(examples)
        counts[f"{output}/not_next"] += not_next
        counts[f"{output}/tokens"] += tokens
        counts[f"{output}/predictions"] += predictions


def _alone(document_id: str, key: PartitionKey, group: int) -> Reject:
    return Reject(
        id=document_id,
        input=key.name,
        position=f"pass {key.dupe_pass}, group {group}",
        reason="no_partner_document",
        error=f"{document_id} is alone in its {key.split} partner group: its chunks that need "
        "a NotNext partner make no example in this pass (the split has too few documents)",
    )
