"""A sample between its read and its batch: the carrier (`RawSample`, `Sample`), its header
checked (`decode_samples`, schemas/examples.py), evaluation's grouping (`batch_samples`).
trainer/data.py reads the samples and re-exports these."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from pipelines.io.shards import ShardReadError
from schemas.examples import ExampleDecodeError, ExampleHeader, read_header


class RawSample(NamedTuple):
    """A sample as `read_samples` hands it out, its fields named."""

    index: int  # the sample's key: its position in its split
    data: bytes
    shard: str


# A sample (key, bytes, shard): a RawSample, or the plain tuple the training loader holds,
# which the garbage collector stops tracking at its first pass (a RawSample, a tuple
# subclass, it goes over in every full collection while held). Decoding and collating index
# it, so either kind goes through them as it is.
Sample = tuple[int, bytes, str]
Decoded = tuple[Sample, ExampleHeader]


def plain_sample(index: int, data: bytes, shard: str) -> Sample:
    """The training loader's sample (`Sample`): a plain tuple."""
    return index, data, shard


def decode_samples(samples: Iterable[Sample]) -> Iterator[Decoded]:
    """Each sample's header, checked; a bad sample stops the run naming its shard."""
    for sample in samples:
        try:
            yield sample, read_header(sample[1])
        except ExampleDecodeError:
            # Read again for the message with the sample's key: its text is made only for
            # the one bad sample, not for every good one.
            try:
                read_header(sample[1], f"{sample[0]:012d}")
            except ExampleDecodeError as error:
                raise ShardReadError(f"{sample[2]}: {error}") from error
            raise


def batch_samples(
    decoded: Iterable[Decoded], batch_size: int, batches: int
) -> Iterator[list[Decoded]]:
    """Groups of `batch_size` (the last one short only when not dropping)."""
    group: list[Decoded] = []
    made = 0
    for item in decoded:
        group.append(item)
        if len(group) == batch_size:
            yield group
            made += 1
            group = []
            if made == batches:
                return
    if group and made < batches:
        yield group
