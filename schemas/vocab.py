"""The vocabulary directory (`bertkit vocab`): file names and the metadata record; and the
files of a released BERT's vocabulary directory, which bertkit reads as it is.

Layout of `DIR`:
    vocab.txt        one WordPiece token per line, line number = id ([PAD] = 0): Google's format
    tokenizer.json   the HF `tokenizers` pipeline (BERT normalizer, pre-tokenizer, WordPiece)
    vocab.json       VocabMetadata: settings, the sample trained on, sha256 of vocab.txt
    _work/words/     while the stage runs: each unit's word counts (WORD_COUNTS_SCHEMA),
                     deleted before it ends

The example stage records `vocab_sha256` in its shards manifest, and the trainer refuses
shards made with another vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from schemas.checks import (
    RecordError,
    load_json,
    need_bool,
    need_dict,
    need_int,
    need_list,
    need_sha256,
    need_str,
)

VOCAB_SCHEMA_VERSION = "1.0"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_METADATA_FILE = "vocab.json"
# A released BERT's directory (Google's, transformers'): vocab.txt, and perhaps these.
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
RELEASED_FILES = (VOCAB_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
# Where a released vocabulary's casing came from (the shards manifest records one).
CASED_FROM_TOKENIZER_CONFIG = "tokenizer_config.json do_lower_case"
CASED_FROM_TOKENIZER = "tokenizer.json normalizer"

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)
CONTINUATION_PREFIX = "##"
# Google's FullTokenizer: a word longer than this becomes one [UNK].
MAX_INPUT_CHARS_PER_WORD = 200


def unused_token(index: int) -> str:
    """The reserved slot `[unusedN]` (Google's vocabularies reserve 994 of them)."""
    return f"[unused{index}]"


@dataclass(slots=True)
class VocabMetadata:
    vocab_size: int  # lines in vocab.txt
    cased: bool  # False: lower-cased and accents stripped (BERT uncased)
    num_unused: int  # [unused0] … [unusedN-1] reserved slots
    special_tokens: dict[str, int]  # token → id
    sample: dict[str, Any]  # how the training sample was drawn and how big it was
    # documents directories (paths relative to this directory: docs/formats.md) and their
    # manifests' sha256
    inputs: list[dict[str, Any]]
    config: dict[str, Any]  # every flag
    vocab_sha256: str  # sha256 of vocab.txt's bytes
    tokenizer_sha256: str  # sha256 of tokenizer.json's bytes
    record: str = "Vocabulary"
    schema_version: str = VOCAB_SCHEMA_VERSION
    bertkit_version: str = "0.1.0"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> VocabMetadata:
        metadata = cls(**load_json(text))
        metadata.validate()
        return metadata

    def validate(self) -> None:
        """Types and ranges of every field a reader relies on (schemas/checks.py)."""
        need_int(self.vocab_size, "vocab_size", len(SPECIAL_TOKENS), 1 << 32)
        need_bool(self.cased, "cased")
        need_int(self.num_unused, "num_unused", 0, self.vocab_size)
        need_dict(self.special_tokens, "special_tokens")
        for token in SPECIAL_TOKENS:
            if token not in self.special_tokens:
                raise RecordError(f"special_tokens lacks {token}")
        for token, token_id in self.special_tokens.items():
            need_str(token, "special_tokens key")
            need_int(token_id, f"special_tokens[{token!r}]", 0, self.vocab_size - 1)
        for name in ("sample", "config"):
            need_dict(getattr(self, name), name)
        need_list(self.inputs, "inputs")
        need_sha256(self.vocab_sha256, "vocab_sha256")
        need_sha256(self.tokenizer_sha256, "tokenizer_sha256")


# --- Word counts: what each worker of `bertkit vocab` hands to the step that learns pieces ---

WORD_COUNTS_DIR = "_work/words"  # below the vocabulary directory, one file per unit
WORD_COUNTS_SCHEMA_VERSION = "1.0"


class WordCountColumn:
    """Column names of the word-count spill files."""

    WORD = "word"
    COUNT = "count"


WORD_COUNTS_SCHEMA = pa.schema(
    [
        pa.field(
            WordCountColumn.WORD,
            pa.string(),
            nullable=False,
            metadata={"doc": "a word as BERT's normaliser and pre-tokenizer leave it; sorted"},
        ),
        pa.field(
            WordCountColumn.COUNT,
            pa.int64(),
            nullable=False,
            metadata={"doc": "how often it occurs in the unit's sampled documents"},
        ),
    ],
    metadata={
        "bertkit.record": "WordCounts",
        "bertkit.schema_version": WORD_COUNTS_SCHEMA_VERSION,
    },
)
