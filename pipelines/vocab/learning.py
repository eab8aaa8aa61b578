"""Step 2, LearnPieces: the vocabulary's layout (reserved tokens, alphabet, `##c` pieces, fixed
before learning) and the WordPiece pieces learned from the summed word counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import pre_tokenizers

from pipelines.beam.progress import PIECES_LEARNED, StageCounters
from pipelines.io.vocabulary import VocabError, bert_normalizer
from pipelines.text.wordpiece import choose_alphabet, learn_pieces
from pipelines.vocab.config import VocabConfig
from schemas.vocab import CONTINUATION_PREFIX, PAD_TOKEN, SPECIAL_TOKENS, unused_token


def reserved_tokens(num_unused: int) -> list[str]:
    """The vocabulary's first ids: [PAD], the unused slots, [UNK], [CLS], [SEP], [MASK]."""
    # Google's vocabularies put [unused0..98] right after [PAD] and the rest after [MASK];
    # keeping every unused slot in one run after [PAD] keeps the ids of the four others
    # predictable (num_unused + 1 …).
    return [PAD_TOKEN, *(unused_token(i) for i in range(num_unused)), *SPECIAL_TOKENS[1:]]


def continuation_alphabet(alphabet: Sequence[str], cased: bool) -> list[str]:
    """The characters that can follow another inside a word, sorted.

    Punctuation and CJK characters are always words of their own (the pre-tokenizer and the
    normaliser split them off whatever surrounds them), so they never need a `##c` piece.
    """
    normalizer, pre_tokenizer = bert_normalizer(cased), pre_tokenizers.BertPreTokenizer()
    return [
        c
        for c in alphabet
        if len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str("a" + c))) == 1
    ]


@dataclass(frozen=True, slots=True)
class TrainedVocab:
    """The trainer's result: tokens in id order, and how many ids were fixed before it ran."""

    tokens: list[str]
    alphabet: int  # single characters
    continuations: int  # `##c` pieces
    fixed: int  # special and unused tokens, alphabet, continuations: ids 0 … fixed-1

    @property
    def learned(self) -> int:
        return len(self.tokens) - self.fixed


def learn_vocab(
    word_counts: Counter[str], config: VocabConfig, counters: StageCounters | None = None
) -> TrainedVocab:
    """The vocabulary of the summed word counts; the same counts and config give the same
    tokens."""
    alphabet = choose_alphabet(word_counts, config.limit_alphabet)
    if not alphabet:
        raise VocabError(
            f"the sample of {', '.join(config.documents)} holds no text: check the documents "
            "directories or raise --sample-mb"
        )
    continuations = [CONTINUATION_PREFIX + c for c in continuation_alphabet(alphabet, config.cased)]
    # Every id below `fixed` is decided here, not by the order pieces are met in.
    fixed = [*reserved_tokens(config.num_unused), *alphabet, *continuations]
    if config.vocab_size <= len(fixed):
        raise VocabError(
            f"--vocab-size {config.vocab_size} leaves no room for learned pieces: the special "
            f"tokens, {len(alphabet)} characters and {len(continuations)} continuation pieces "
            f"take {len(fixed)} ids; raise --vocab-size or lower --limit-alphabet"
        )

    reported = 0

    def learned(size: int) -> None:
        nonlocal reported
        if counters is not None:
            counters.add(PIECES_LEARNED, size - reported)
            reported = size

    tokens = learn_pieces(
        word_counts,
        fixed,
        config.vocab_size,
        config.min_frequency,
        CONTINUATION_PREFIX,
        progress=learned,
    )
    stray = [t for t in tokens[len(fixed) :] if t.startswith(CONTINUATION_PREFIX) and len(t) == 3]
    if stray:
        raise RuntimeError(
            f"continuation pieces {stray[:5]} were made after the fixed ids (a character the "
            "continuation alphabet missed): please report this with the input"
        )
    return TrainedVocab(tokens, len(alphabet), len(continuations), len(fixed))
