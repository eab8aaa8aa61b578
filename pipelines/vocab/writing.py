"""The vocabulary's files: vocab.txt, tokenizer.json and, last, vocab.json."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from pipelines.beam import files
from pipelines.io.vocabulary import build_tokenizer, vocab_txt_bytes
from pipelines.vocab.config import VocabConfig
from pipelines.vocab.learning import TrainedVocab
from pipelines.vocab.sample import SampleCounts, SamplePlan
from schemas.vocab import (
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    VocabMetadata,
)

# Flags that say how to write, not what: left out of vocab.json, so that `--overwrite` does not
# change its bytes (as the shards manifest leaves it out, and the dataset card says).
NOT_RECORDED = ("overwrite",)


def write_vocab(
    plan: SamplePlan, counted: SampleCounts, config: VocabConfig, trained: TrainedVocab
) -> VocabMetadata:
    """Write vocab.txt, tokenizer.json and, last, vocab.json; return the metadata."""
    tokens = trained.tokens
    vocab_bytes = vocab_txt_bytes(tokens)
    tokenizer_bytes = build_tokenizer(tokens, config.cased).to_str(pretty=True).encode("utf-8")
    # An earlier run's vocab.json goes first: a run that dies half-way then leaves a
    # directory that `load_vocab` refuses, never a new vocab.txt under old metadata.
    files.delete(files.match(files.join(config.output, VOCAB_METADATA_FILE)))
    files.write_atomically(files.join(config.output, VOCAB_FILE), vocab_bytes)
    files.write_atomically(files.join(config.output, TOKENIZER_FILE), tokenizer_bytes)
    metadata = VocabMetadata(
        vocab_size=len(tokens),
        cased=config.cased,
        num_unused=config.num_unused,
        special_tokens={t: tokens.index(t) for t in SPECIAL_TOKENS},
        sample={
            **plan.describe(counted),
            "alphabet": trained.alphabet,
            "continuation_pieces": trained.continuations,
            "learned_tokens": trained.learned,
        },
        inputs=[i.summary(config.output) for i in plan.inputs],
        config=json.loads(json.dumps(recorded_config(config))),
        vocab_sha256=hashlib.sha256(vocab_bytes).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_bytes).hexdigest(),
    )
    files.write_atomically(
        files.join(config.output, VOCAB_METADATA_FILE), metadata.to_json().encode("utf-8")
    )
    return metadata


def recorded_config(config: VocabConfig) -> dict:
    """The flags vocab.json records: every one that shapes the vocabulary, and where it
    read and wrote (`documents`, `output`); not `NOT_RECORDED`."""
    return {k: v for k, v in asdict(config).items() if k not in NOT_RECORDED}
