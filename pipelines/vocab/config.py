"""`bertkit vocab`'s one config: every flag, its type, default and help, written once.

`pipelines.command.flags` makes the command line from this dataclass, and vocab.json records it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.command.flags import AT_LEAST_1, POSITIVE, ZERO_OR_MORE, config_problem, option
from pipelines.io.vocabulary import VocabError
from schemas.vocab import SPECIAL_TOKENS

DEFAULT_VOCAB_SIZE = 30522  # BERT-base's vocabulary size


@dataclass(frozen=True, slots=True)
class VocabConfig:
    """Every flag of `bertkit vocab` (recorded in vocab.json)."""

    documents: tuple[str, ...] = option(
        help="documents directories (local, gs://, s3://), each with its manifest", metavar="DIR"
    )
    output: str = option(help="vocabulary directory to write")
    vocab_size: int = option(DEFAULT_VOCAB_SIZE, help="tokens in vocab.txt, all included")
    cased: bool = option(
        False, help="keep case and accents (default: lower-case and strip accents)"
    )
    num_unused: int = option(
        0, help="[unusedN] slots reserved after [PAD] (Google's: 994)", bounds=ZERO_OR_MORE
    )
    sample_mb: float = option(1024.0, help="train on about this many MiB of text", bounds=POSITIVE)
    seed: int = option(0, help="picks the sample")
    limit_alphabet: int = option(
        1000, help="keep the N most frequent characters", bounds=AT_LEAST_1
    )
    min_frequency: int = option(
        2, help="merge only pairs seen at least this often", bounds=AT_LEAST_1
    )
    overwrite: bool = option(
        False, help="replace the vocabulary files of an earlier run in --output"
    )

    def validate(self) -> None:
        """Stop before any work on flags that cannot give a vocabulary."""
        if not self.documents:
            raise VocabError("no documents directory given: pass --documents DIR [DIR …]")
        problem = config_problem(self)  # each field's bounds, as parsing checks them
        if problem:
            raise VocabError(problem)
        reserved = len(SPECIAL_TOKENS) + self.num_unused
        if self.vocab_size <= reserved:
            raise VocabError(
                f"--vocab-size {self.vocab_size} leaves no room after the {reserved} special "
                "and unused tokens: raise --vocab-size or lower --num-unused"
            )
