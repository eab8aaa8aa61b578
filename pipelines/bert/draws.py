"""Where every random decision of the example stage comes from.

Google's script draws from one `random.Random(seed)` walked across the whole corpus in input
order, so its output depends on the order documents arrive in: impossible to parallelise
without changing it. Here each (document, dupe pass, max_seq_length) has its own generator,
seeded from those values alone, so a document's examples are the same whichever worker
makes them, in whatever order. Corpus-level choices (held-out split, partner group) are
stable hashes of the document id, not draws.
"""

from __future__ import annotations

import numpy as np

from pipelines.io.hashing import stable_hash

_BLOCK = 256  # uniforms drawn at once: a buffered draw costs a fraction of a numpy scalar draw


class RandomStream:
    """A numpy PCG64 generator with buffered scalar draws.

    The buffer refills are themselves draws from the generator, in a fixed order, so the
    sequence of values (buffered or direct, such as `permutation`) depends only on the seed
    and the sequence of calls.
    """

    __slots__ = ("_buffer", "_next", "generator")

    def __init__(self, *seed_parts: object) -> None:
        entropy = stable_hash(*seed_parts, bits=128)
        self.generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
        self._buffer: list[float] = []
        self._next = 0

    def random(self) -> float:
        """A uniform float in [0, 1), like `random.Random.random`."""
        if self._next == len(self._buffer):
            self._buffer = self.generator.random(_BLOCK).tolist()
            self._next = 0
        value = self._buffer[self._next]
        self._next += 1
        return value

    def randint(self, low: int, high: int) -> int:
        """A uniform integer in [low, high], both ends included (like `random.randint`)."""
        return low + int(self.random() * (high - low + 1))

    def uniforms(self, count: int) -> np.ndarray:
        return self.generator.random(count)

    def permutation(self, count: int) -> np.ndarray:
        return self.generator.permutation(count)


def document_stream(
    seed: int, document_id: str, dupe_pass: int, max_seq_length: int
) -> RandomStream:
    """The generator for one document's examples in one pass at one sequence length."""
    return RandomStream("examples", seed, document_id, dupe_pass, max_seq_length)


def group_stream(
    seed: int, split: str, dupe_pass: int, group: int, max_seq_length: int
) -> RandomStream:
    """The generator for one partner group's full-sentence sequences in one pass at one
    length (their masks and places in the shuffle): the group's documents are one stream,
    packed in id order, so the group, not a document, is the unit of its draws."""
    return RandomStream("full-sentences", seed, split, dupe_pass, group, max_seq_length)
