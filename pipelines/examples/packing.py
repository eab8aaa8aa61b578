"""Step 2 of the graph with --sequences full-sentences: in each pairing step, every partner
group's documents, in id order, packed into full-sentence sequences (pipelines/bert/packing.py)
at each length, masked unless --masking none, each given a random place in the global
shuffle and sent to the spill bucket that place falls in.

The group is the unit: its members and their order come from the plan (a stable hash of the
seed, pass and document id, then the ids), and its draws from a generator seeded by (seed,
split, pass, group, length), so the sequences do not depend on runner, worker count or order.
"""

from __future__ import annotations

from itertools import islice

from pipelines.beam.progress import DOCUMENTS_PAIRED
from pipelines.bert.draws import RandomStream, group_stream
from pipelines.bert.packing import Piece, pack_sequences, packed_input_ids
from pipelines.examples.keys import PartitionKey
from pipelines.examples.pairing import MASK_BATCH_TOKENS, GroupStep, PairAndMaskFn
from schemas import PretrainingExample
from schemas.examples import IS_NEXT
from schemas.shards import split_dir


class PackSentencesFn(PairAndMaskFn):
    """(PartitionKey, spill files) → (BucketKey or route group, spill file) + bucket counts +
    a summary, as PairAndMaskFn, with full-sentence sequences instead of pairs."""

    def _group_examples(self, step: GroupStep, key: PartitionKey) -> None:
        config = self._config
        for length in config.max_seq_lengths:
            rng = group_stream(config.seed, step.split, step.dupe_pass, step.group, length)
            sequences = pack_sequences(step.lengths, length)
            batch = max(1, MASK_BATCH_TOKENS // length)
            while pieces := list(islice(sequences, batch)):
                self._spill_sequences(step, length, pieces, rng)
        self._counters.add(DOCUMENTS_PAIRED, len(step.members))

    def _spill_sequences(
        self, step: GroupStep, length: int, sequences: list[list[Piece]], rng: RandomStream
    ) -> None:
        """A batch of one group's sequences built, masked (unless --masking none) and
        spilled; the stream draws the masks, then each sequence's place in the shuffle."""
        members = step.members
        tokens = [member.tokens for member in members]
        inputs = [packed_input_ids(pieces, tokens, self._cls, self._sep) for pieces in sequences]
        masked_inputs = self._masked(
            [ids for ids, _ in inputs], [special for _, special in inputs], length, rng
        )
        examples = [
            PretrainingExample(
                masked.input_ids,
                len(masked.input_ids),  # one segment: every segment id is 0
                masked.positions,
                masked.labels,
                IS_NEXT,  # no next-sentence label; 0 is what a reader that asks sees
                members[pieces[0].document].id,
                # empty when the sequence is all one document's: readers give doc_a back
                # (schemas/examples.py), and the shards save its bytes in most samples
                members[pieces[-1].document].id
                if pieces[-1].document != pieces[0].document
                else "",
                step.dupe_pass,
            )
            for pieces, masked in zip(sequences, masked_inputs, strict=True)
        ]
        self._spill(step, length, examples, rng)
        short = sum(len(example.input_ids) < length for example in examples)
        step.tally.counts[f"{split_dir(length, step.split)}/short_sequences"] += short
