"""Step 2 of the graph: in each pairing step, every document's sentence pairs and masks,
per partner group, drawn from the document's own generator; each example gets a random
place in the global shuffle and goes to the spill bucket that place falls in."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import apache_beam as beam
import numpy as np

from pipelines.beam import files
from pipelines.beam.documents import UnitTally, finish_unit
from pipelines.beam.progress import DOCUMENTS_PAIRED, EXAMPLES_MADE, StageCounters
from pipelines.beam.spill import TokenizedDocument, pack_example, unpack_documents
from pipelines.bert.draws import RandomStream, document_stream
from pipelines.bert.masking import MaskedBatch, MaskedInput, MaskingConfig, mask_batch, mask_flat
from pipelines.bert.pairs import SentencePair, create_pairs, pairs_input_ids
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import BucketKey, PartitionKey
from pipelines.examples.plan import Layout
from pipelines.examples.shuffle import RoutedSpillWriter, Routing
from pipelines.examples.tokenize import SUMMARY
from pipelines.io.vocabulary import load_vocab
from schemas import PretrainingExample, Reject
from schemas.examples import NOT_NEXT, encode_examples
from schemas.shards import STATIC, TRUNCATED_TOKENS, split_dir

# The count of documents renamed because another held their id (distinct_ids).
SHARED_IDS = "documents_renamed_shared_id"
BUCKET_COUNTS = "bucket_counts"  # the tagged output of (BucketKey, examples) counts
# A document's examples are built and masked this many tokens at a time (at most; 8,192
# examples at 128): masking holds ~10 numpy arrays of its tokens, ~100 MB here, however long
# the document. Any document of fewer examples is masked in one batch, as it always was (the
# sample's longest, 117,290 tokens, makes ~1,000 at 128).
MASK_BATCH_TOKENS = 1 << 20
_NOTHING = np.zeros(0, dtype=np.int64)  # the positions and labels of an unmasked input


class _TokensOf(Sequence):
    """The token arrays of documents, without a list of them per batch."""

    def __init__(self, documents: Sequence[TokenizedDocument]) -> None:
        self._documents = documents

    def __len__(self) -> int:
        return len(self._documents)

    def __getitem__(self, index):  # type: ignore[override]
        return self._documents[index].tokens


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
        self._keys_of: dict[str, list[BucketKey]] = {}
        vocab = load_vocab(self._config.vocab, files.READER, self._config.cased)
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
            shared = distinct_ids(members)
            if shared and key.dupe_pass == 0:  # the same documents in every pass: once
                tally.count(SHARED_IDS, shared)
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
        shuffle. The batch is built and masked as arrays laid end to end; each example's
        arrays are views of them, already in the dtypes its encoding stores."""
        document = step.members[index]
        others = _Others(step.members, index)
        flat, lengths, a_lengths = pairs_input_ids(
            pairs, document.tokens, _TokensOf(others), self._cls, self._sep
        )
        masked = self._masked_flat(flat, lengths, a_lengths, length, rng)
        ends = np.cumsum(masked.counts)
        partners = np.fromiter((pair.partner for pair in pairs), np.int64, len(pairs))
        own = document.id.encode("utf-8")
        partner_ids: dict[int, bytes] = {}
        docs = [
            (own, own) if partner < 0 else (own, self._id_bytes(others, partner, partner_ids))
            for partner in partners.tolist()
        ]
        encoded = encode_examples(
            self._layout.id_width,
            masked.input_ids,
            zip(masked.starts.tolist(), (masked.starts + lengths).tolist(), strict=True),
            a_lengths.tolist(),
            masked.positions,
            zip((ends - masked.counts).tolist(), ends.tolist(), strict=True),
            masked.labels,
            np.where(partners >= 0, NOT_NEXT, 0).tolist(),
            docs,
            step.dupe_pass,
        )
        not_next = NOT_NEXT * int(np.count_nonzero(partners >= 0))
        tokens, predictions = int(lengths.sum()), int(masked.counts.sum())
        truncated = sum(pair.truncated for pair in pairs)
        self._spill_encoded(step, length, encoded, rng, (not_next, tokens, predictions, truncated))

    @staticmethod
    def _id_bytes(others: _Others, partner: int, cache: dict[int, bytes]) -> bytes:
        """A partner document's id, UTF-8 encoded once per batch."""
        encoded = cache.get(partner)
        if encoded is None:
            encoded = cache[partner] = others[partner].id.encode("utf-8")
        return encoded

    def _masked_flat(
        self,
        flat: np.ndarray,
        lengths: np.ndarray,
        a_lengths: np.ndarray,
        length: int,
        rng: RandomStream,
    ) -> MaskedBatch:
        """Pairs laid end to end with their static masks drawn from `rng` (as `_masked`
        draws them); as they are (no prediction, no draw) with --masking none."""
        starts = np.cumsum(lengths) - lengths
        if self._masking is None:
            none = np.zeros(len(lengths), dtype=np.int64)
            return MaskedBatch(flat, starts, _NOTHING, _NOTHING, none)
        masking = self._masking[length]
        if masking.is_continuation is not None:  # whole words: one input at a time
            inputs = np.split(flat, starts[1:].tolist())
            specials = zip(a_lengths.tolist(), lengths.tolist(), strict=True)
            one_by_one = self._masked(inputs, [(0, a - 1, n - 1) for a, n in specials], length, rng)
            return MaskedBatch(
                np.concatenate([m.input_ids for m in one_by_one]),
                starts,
                np.concatenate([m.positions for m in one_by_one]),
                np.concatenate([m.labels for m in one_by_one]),
                np.array([len(m.positions) for m in one_by_one], dtype=np.int64),
            )
        # [CLS], the [SEP] after A, the last [SEP]: three per pair, in position order.
        specials = np.stack([starts, starts + a_lengths - 1, starts + lengths - 1], axis=1)
        special_counts = np.full(len(lengths), 3, dtype=np.int64)
        return mask_flat(flat, lengths, specials.ravel(), special_counts, masking, rng)

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
        width = self._layout.id_width
        counts = (
            sum(e.next_sentence_label for e in examples),
            sum(len(e.input_ids) for e in examples),
            sum(len(e.masked_lm_positions) for e in examples),
            0,  # full sentences are cut into sequences, never trimmed
        )
        self._spill_encoded(step, length, [e.encode(width) for e in examples], rng, counts)

    def _spill_encoded(
        self,
        step: GroupStep,
        length: int,
        encoded: list[bytes],
        rng: RandomStream,
        counts: tuple[int, int, int, int],
    ) -> None:
        """`_spill` for examples already encoded; `counts`: their NotNext labels, tokens,
        predictions, and the tokens trimmed off their pairs to fit the length."""
        places = (rng.uniforms(len(encoded)) * 2**53).astype(np.int64)
        self._counters.add(EXAMPLES_MADE, len(encoded))
        output = split_dir(length, step.split)
        keys = self._bucket_keys(output)
        buckets = places % len(keys)
        add = step.writer.add
        for example, place, bucket in zip(encoded, places.tolist(), buckets.tolist(), strict=True):
            add(keys[bucket], pack_example(place, example))
        per_bucket = np.bincount(buckets, minlength=len(keys))
        for bucket in np.flatnonzero(per_bucket).tolist():
            step.bucket_counts[keys[bucket]] += int(per_bucket[bucket])
        # the counts of a batch of examples, added once (not per example)
        not_next, tokens, predictions, truncated = counts
        tally = step.tally.counts
        tally[f"{output}/examples"] += len(encoded)
        tally[f"{output}/not_next"] += not_next
        tally[f"{output}/tokens"] += tokens
        tally[f"{output}/predictions"] += predictions
        if truncated:  # counted where it happens: most runs trim a few tokens, some most
            tally[f"{output}/{TRUNCATED_TOKENS}"] += truncated

    def _bucket_keys(self, output: str) -> list[BucketKey]:
        """The BucketKey of each of an output tree's shuffle buckets, made once."""
        keys = self._keys_of.get(output)
        if keys is None:
            buckets = self._layout.buckets[output]
            keys = self._keys_of[output] = [BucketKey(output, b) for b in range(buckets)]
        return keys


def distinct_ids(members: list[TokenizedDocument]) -> int:
    """Give documents that share an id (a corpus whose files each number their records
    from 0) ids of their own, in place: the second of a run "corpus/7#2", the third "#3", the
    copies ordered by their tokens, whatever order they were read in; a number another
    document of the group already has as its id is skipped. An id names a
    document's random stream and its NotNext partners' exclusion, so copies sharing one
    drew the same targets and took each other as "another document" (`doc_b` == `doc_a`).
    `members` is sorted by id; returns how many were renamed."""
    renamed, start = 0, 0
    while start < len(members):
        stop = start + 1
        while stop < len(members) and members[stop].id == members[start].id:
            stop += 1
        if stop - start > 1:
            run = sorted(
                members[start:stop],
                key=lambda d: (d.sentence_lengths.tobytes(), d.tokens.tobytes()),
            )
            taken = {member.id for member in members}
            number = 1
            for index in range(1, len(run)):
                number += 1
                while f"{run[index].id}#{number}" in taken:  # a document's own id already
                    number += 1
                run[index] = replace(run[index], id=f"{run[index].id}#{number}")
                taken.add(run[index].id)
            members[start:stop] = run
            renamed += stop - start - 1
        start = stop
    return renamed


def _alone(document_id: str, key: PartitionKey, group: int) -> Reject:
    return Reject(
        id=document_id,
        input=key.name,
        position=f"pass {key.dupe_pass}, group {group}",
        reason="no_partner_document",
        error=f"{document_id} is alone in its {key.split} partner group: its chunks that need "
        "a NotNext partner make no example in this pass (documents are grouped by a hash, "
        "about --partner-group-docs a group: a larger value, or more documents in the "
        "split, makes a lone one rarer)",
    )
