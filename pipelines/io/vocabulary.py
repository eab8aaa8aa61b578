"""Loading a vocabulary: `bertkit vocab`'s directory, or a released BERT's. Beam-free.

The example stage, the trainer, its export, `inspect` and the tests load vocabularies
through `load_vocab` alone, over any path or URL `pipelines.io.storage` reads. Two kinds of
directory are taken:

- a `bertkit vocab` directory (vocab.json in it), checked before use: its metadata's record
  and schema version, the sha256 of vocab.txt and tokenizer.json against vocab.json, and
  that vocab.txt and tokenizer.json list the same tokens with the same casing;
- a released BERT's directory, as Google and transformers ship it: vocab.txt, with or
  without tokenizer.json, tokenizer_config.json and special_tokens_map.json; or
  tokenizer.json without vocab.txt (transformers 5 saves no vocab.txt), its tokens then
  the WordPiece model's, and the sha256 recorded that of the vocab.txt they make. Its casing
  comes from tokenizer_config.json's `do_lower_case` (else tokenizer.json's normalizer),
  as transformers' BertTokenizerFast reads it; a directory that says nothing needs the
  caller's `cased` (the --cased / --no-cased flags), and a `cased` that contradicts the
  directory is refused. tokenizer.json, when present, must list vocab.txt's tokens with
  vocab.txt's ids. The tokenizer is built from vocab.txt with the directory's settings
  (accent stripping, CJK splitting, the longest word), so its tokens are transformers'
  token for token, except that "[MASK]" typed in the text stays text (Google's rule).

vocab.txt is Google's format: one token per line, the line number is the id, and lines end
in "\n" only (tokens may hold \x1c or U+2028, which `str.splitlines` would split on). A
vocabulary bertkit cannot use (an empty line, a token twice, a special token missing) is
refused naming the file and the line.

`load_vocab` builds a directory's tokenizer once per process: every Beam DoFn that loads the
vocabulary in a worker (tokenizing, pairing, on any runner) gets the same `Vocabulary`, keyed
by the directory, the casing asked for and the sha256 of its files, which are read and
checked on every call.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from pipelines.io import storage
from schemas.checks import MAX_RECORD_BYTES, MAX_VOCAB_FILE_BYTES
from schemas.versions import read_record
from schemas.vocab import (
    CLS_TOKEN,
    CONTINUATION_PREFIX,
    MASK_TOKEN,
    MAX_INPUT_CHARS_PER_WORD,
    PAD_TOKEN,
    SEP_TOKEN,
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    UNK_TOKEN,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    VocabMetadata,
)


class VocabError(ValueError):
    """Bad input, flags or vocabulary directory; the message says what to do."""


def vocab_txt_bytes(tokens: Sequence[str]) -> bytes:
    """vocab.txt's bytes: one token per line, each ending in "\n"."""
    return "".join(f"{t}\n" for t in tokens).encode("utf-8")


def parse_vocab_txt(data: bytes) -> list[str]:
    """vocab.txt's tokens, id order; a "\r" before a line end (a file saved on Windows) is
    not part of the token."""
    lines = data.decode("utf-8").split("\n")  # not splitlines(): see the module docstring
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def vocab_txt_url(directory_or_file: str) -> str:
    """DIR/vocab.txt; the argument may be a URL, or the vocab.txt itself."""
    if storage.basename(directory_or_file) == VOCAB_FILE:
        return directory_or_file
    return storage.join(directory_or_file, VOCAB_FILE)


def read_vocab_txt(url: str) -> tuple[list[str], str]:
    """The tokens of a vocab.txt and the sha256 of its bytes (the hash manifests record)."""
    data = storage.read_bytes(url, MAX_VOCAB_FILE_BYTES)
    return parse_vocab_txt(data), hashlib.sha256(data).hexdigest()


def bert_normalizer(
    cased: bool, strip_accents: bool | None = None, chinese_chars: bool = True
) -> normalizers.Normalizer:
    """Google's BasicTokenizer text cleanup: control characters out, CJK split, and unless
    cased, lower-case then strip accents (NFD, drop combining marks). A released tokenizer
    may set accent stripping apart from case (`strip_accents`, None: as case says) and turn
    CJK splitting off (`chinese_chars`), as transformers' BertTokenizer takes them."""
    return normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=chinese_chars,
        strip_accents=not cased if strip_accents is None else strip_accents,
        lowercase=not cased,
    )


def build_tokenizer(
    tokens: Sequence[str],
    cased: bool,
    strip_accents: bool | None = None,
    chinese_chars: bool = True,
    max_chars: int = MAX_INPUT_CHARS_PER_WORD,
) -> Tokenizer:
    """A BERT WordPiece tokenizer for `tokens` (id = position), Google FullTokenizer semantics.

    The special tokens and unused slots are registered as special added tokens, so
    `decode(..., skip_special_tokens=True)` drops them. Google's tokenizer treats "[MASK]"
    typed in the text as text; set `tokenizer.encode_special_tokens = True` (`load_vocab`
    does) for the same behaviour, since tokenizers does not store that flag in the JSON.
    One known difference remains: Python's `str.lower()` (Google's) writes a word-final
    capital sigma as "ς", tokenizers as "σ".
    """
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        repeated = next(t for t, n in Counter(tokens).items() if n > 1)
        raise VocabError(f"token {repeated!r} appears twice in the vocabulary")
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise VocabError(f"the vocabulary lacks the special tokens {missing}")
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab,
            unk_token=UNK_TOKEN,
            max_input_chars_per_word=max_chars,
            continuing_subword_prefix=CONTINUATION_PREFIX,
        )
    )
    tokenizer.normalizer = bert_normalizer(cased, strip_accents, chinese_chars)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS_TOKEN} $A {SEP_TOKEN}",
        pair=f"{CLS_TOKEN} $A {SEP_TOKEN} $B:1 {SEP_TOKEN}:1",
        special_tokens=[(CLS_TOKEN, vocab[CLS_TOKEN]), (SEP_TOKEN, vocab[SEP_TOKEN])],
    )
    # In id order, so tokenizer.json lists them the same way every time.
    special = [t for t in tokens if t in SPECIAL_TOKENS or is_unused_token(t)]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tokenizer


def is_unused_token(token: str) -> bool:
    return token.startswith("[unused") and token.endswith("]") and token[7:-1].isdigit()


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """A trained vocabulary, as the example stage and the trainer use it."""

    tokenizer: Tokenizer  # encode_special_tokens = True: "[MASK]" in text is text
    tokens: list[str]  # id → token
    sha256: str  # of vocab.txt
    cased: bool
    metadata: VocabMetadata
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    special_ids: frozenset[int]  # [PAD] [UNK] [CLS] [SEP] [MASK] and every [unusedN]
    replaceable_ids: np.ndarray  # sorted int64: the MLM random-replacement pool
    is_continuation: np.ndarray  # bool per id: a `##` piece (whole-word masking)
    # Where it came from: a `bertkit vocab` directory, or a released BERT's (True), the
    # files its directory holds (a released one's of RELEASED_FILES, which `export-hf` copies
    # to keep the original tokenizer), and what said its casing.
    released: bool = False
    source_files: tuple[str, ...] = (VOCAB_FILE, TOKENIZER_FILE, VOCAB_METADATA_FILE)
    cased_from: str = VOCAB_METADATA_FILE
    strip_accents: bool | None = None  # None: as casing says (a released tokenizer may not)

    @property
    def size(self) -> int:
        return len(self.tokens)

    def origin(self) -> dict[str, object] | None:
        """What a shards manifest records of a released vocabulary's origin (its `vocab`
        record's "origin"); None for a `bertkit vocab` directory, whose vocab.json says it."""
        if not self.released:
            return None
        origin: dict[str, object] = {
            "kind": "released",
            "files": list(self.source_files),
            "cased_from": self.cased_from,
        }
        if self.strip_accents is not None:
            origin["strip_accents"] = self.strip_accents
        return origin

    @classmethod
    def from_tokens(
        cls,
        tokens: Sequence[str],
        metadata: VocabMetadata,
        tokenizer: Tokenizer | None = None,
        **origin: object,
    ) -> Vocabulary:
        """Build from an id-ordered token list (a tokenizer is built unless one is given);
        `origin`: the fields that say where it came from (`released`, `source_files`, …)."""
        tokens = list(tokens)
        if tokenizer is None:
            tokenizer = build_tokenizer(tokens, metadata.cased)
        tokenizer.encode_special_tokens = True  # Google: special tokens are never in the text
        ids = {t: i for i, t in enumerate(tokens)}
        special = frozenset(
            i for i, t in enumerate(tokens) if t in SPECIAL_TOKENS or is_unused_token(t)
        )
        return cls(
            tokenizer=tokenizer,
            tokens=tokens,
            sha256=metadata.vocab_sha256,
            cased=metadata.cased,
            metadata=metadata,
            pad_id=ids[PAD_TOKEN],
            unk_id=ids[UNK_TOKEN],
            cls_id=ids[CLS_TOKEN],
            sep_id=ids[SEP_TOKEN],
            mask_id=ids[MASK_TOKEN],
            special_ids=special,
            replaceable_ids=_read_only(
                np.array([i for i in range(len(tokens)) if i not in special], dtype=np.int64)
            ),
            is_continuation=_read_only(
                np.array(
                    [t.startswith(CONTINUATION_PREFIX) and len(t) > 2 for t in tokens], dtype=bool
                )
            ),
            **origin,  # type: ignore[arg-type]
        )


def _read_only(array: np.ndarray) -> np.ndarray:
    """`array`, frozen: a process shares one Vocabulary between its callers (load_vocab)."""
    array.flags.writeable = False
    return array


# Vocabularies built in this process: (directory, sha256 of vocab.json, of vocab.txt, of
# tokenizer.json) → Vocabulary. A worker keeps every DoFn's vocabulary here, so a bundle or a
# DoFn instance never builds a tokenizer again; the hashes make a rewritten directory a new key.
_LOADED: dict[tuple[str, ...], Vocabulary] = {}
_LOADED_LOCK = threading.Lock()


def load_vocab(
    directory: str,
    reader: storage.Reader = storage.READER,
    cased: bool | None = None,
    cased_flag: str = "--cased",
) -> Vocabulary:
    """Load and check a vocabulary directory (local, gs://, s3://, http): `bertkit vocab`'s,
    or a released BERT's (module docstring).

    `cased`: the casing the caller was given (None: none); a released directory that does
    not say its own needs it, and one that contradicts a directory's is refused. `cased_flag`
    names where it came from in that refusal (`--cased`, or the shards' manifest). The files
    are read and their hashes checked on every call; the tokenizer is built once per process
    for the same directory, casing and bytes, and that one `Vocabulary` is shared (its
    tokenizer, token list and arrays are read-only to every caller).
    """
    if reader.exists(reader.join(directory, VOCAB_METADATA_FILE)):
        vocab = _load_bertkit_vocab(directory, reader)
        if cased is not None and cased != vocab.cased:
            raise VocabError(
                f"{_casing_flag(cased, cased_flag)} contradicts the vocabulary at {directory}: "
                f"its {VOCAB_METADATA_FILE} says {'cased' if vocab.cased else 'uncased'}; "
                "drop the flag or give the vocabulary you mean"
            )
        return vocab
    if reader.exists(reader.join(directory, VOCAB_FILE)) or reader.exists(
        reader.join(directory, TOKENIZER_FILE)
    ):
        # Imported here: the released reader builds on this module's Vocabulary and tokenizer.
        from pipelines.io.released_vocab import load_released_vocab

        return load_released_vocab(directory, reader, cased, cased_flag)
    if not storage.is_remote(directory) and not os.path.isdir(directory):
        raise VocabError(
            f"no vocabulary at {directory}: there is no such directory; give the directory "
            f"that holds {VOCAB_FILE}, a `bertkit vocab` output or a released BERT's"
        )
    raise VocabError(
        f"no vocabulary at {directory}: it holds neither {VOCAB_METADATA_FILE} (a `bertkit "
        f"vocab` output) nor {VOCAB_FILE} or {TOKENIZER_FILE} (a released BERT's); give the "
        "directory that holds them, or make one with `bertkit vocab --documents DIR … --output "
        "NEW_DIR`"
    )


def _casing_flag(cased: bool, flag: str) -> str:
    """How a refusal names the casing the caller gave: the flag given, or its source."""
    if flag == "--cased":
        return "--cased" if cased else "--no-cased"
    return f"{flag} ({'cased' if cased else 'uncased'})"


def _load_bertkit_vocab(directory: str, reader: storage.Reader) -> Vocabulary:
    paths = {
        name: reader.join(directory, name)
        for name in (VOCAB_METADATA_FILE, VOCAB_FILE, TOKENIZER_FILE)
    }
    for path in paths.values():
        if not reader.exists(path):
            raise VocabError(
                f"{path} is missing from the `bertkit vocab` output at {directory} (it holds "
                f"{VOCAB_METADATA_FILE}): restore it, or rerun `bertkit vocab` into that directory"
            )
    metadata_bytes = reader.read_bytes(paths[VOCAB_METADATA_FILE], MAX_RECORD_BYTES)
    metadata = read_record(
        VocabMetadata,
        metadata_bytes.decode("utf-8"),
        paths[VOCAB_METADATA_FILE],
        "rerun `bertkit vocab`",
        VocabError,
    )
    vocab_bytes = reader.read_bytes(paths[VOCAB_FILE], MAX_VOCAB_FILE_BYTES)
    if hashlib.sha256(vocab_bytes).hexdigest() != metadata.vocab_sha256:
        raise VocabError(
            f"{paths[VOCAB_FILE]} was modified after training: its sha256 differs from the one "
            f"in {VOCAB_METADATA_FILE}; restore it or rerun `bertkit vocab`"
        )
    tokenizer_bytes = reader.read_bytes(paths[TOKENIZER_FILE], MAX_VOCAB_FILE_BYTES)
    if hashlib.sha256(tokenizer_bytes).hexdigest() != metadata.tokenizer_sha256:
        raise VocabError(
            f"{paths[TOKENIZER_FILE]} was modified after training: its sha256 differs from the "
            f"one in {VOCAB_METADATA_FILE}; restore it or rerun `bertkit vocab`"
        )
    key = (
        directory,
        hashlib.sha256(metadata_bytes).hexdigest(),
        metadata.vocab_sha256,
        metadata.tokenizer_sha256,
    )

    def build() -> Vocabulary:
        tokens = parse_vocab_txt(vocab_bytes)
        tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        check_agreement(tokens, tokenizer, metadata.cased, directory)
        return Vocabulary.from_tokens(tokens, metadata, tokenizer)

    return loaded_once(key, build)


def loaded_once(key: tuple[str, ...], build: Callable[[], Vocabulary]) -> Vocabulary:
    """The Vocabulary this process built for `key` (a directory, its files' hashes and the
    casing asked for), built by `build` the first time."""
    with _LOADED_LOCK:
        if (loaded := _LOADED.get(key)) is None:
            loaded = _LOADED[key] = build()
        return loaded


def load_vocab_txt(path: str, cased: bool) -> Vocabulary:
    """A lone vocab.txt file with Google's FullTokenizer settings (a word over 200 characters
    is one [UNK]), for literal vocabularies in tests and tools. Commands load through
    `load_vocab`, which takes a released BERT's directory with transformers' settings.

    Google's files say nothing about case: pass `cased` as the model was trained (the
    `uncased_L-12_H-768_A-12` vocabulary wants cased=False).
    """
    if not storage.exists(path):
        raise VocabError(f"{path} does not exist: give the path of a vocab.txt")
    vocab_bytes = storage.read_bytes(path, MAX_VOCAB_FILE_BYTES)
    tokens = parse_vocab_txt(vocab_bytes)
    tokenizer = build_tokenizer(tokens, cased)
    metadata = given_tokens_metadata(
        tokens,
        cased,
        vocab_bytes,
        tokenizer.to_str(pretty=True).encode("utf-8"),
        inputs=[{"path": path}],
        config={"vocab_txt": path, "cased": cased},
    )
    return Vocabulary.from_tokens(tokens, metadata, tokenizer)


def given_tokens_metadata(
    tokens: list[str],
    cased: bool,
    vocab_bytes: bytes,
    tokenizer_bytes: bytes,
    inputs: list[dict[str, Any]],
    config: dict[str, Any],
) -> VocabMetadata:
    """The record of a vocabulary given as its tokens (a vocab.txt, a released directory),
    not trained here: no sample; its size, [unusedN] slots and special tokens' ids are the
    tokens'; the sha256 of its vocab.txt's and tokenizer.json's bytes."""
    return VocabMetadata(
        vocab_size=len(tokens),
        cased=cased,
        num_unused=sum(1 for t in tokens if is_unused_token(t)),
        special_tokens={t: tokens.index(t) for t in SPECIAL_TOKENS},
        sample={},
        inputs=inputs,
        config=config,
        vocab_sha256=hashlib.sha256(vocab_bytes).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_bytes).hexdigest(),
    )


def check_agreement(
    tokens: list[str],
    tokenizer: Tokenizer,
    cased: bool | None,
    where: str,
    advice: str = "they come from different runs: rerun `bertkit vocab`",
) -> None:
    """vocab.txt and tokenizer.json (and, unless `cased` is None, vocab.json's casing) must
    describe the same vocabulary; `advice` ends the refusal."""
    actual = tokenizer.get_vocab(with_added_tokens=True)
    if actual != {t: i for i, t in enumerate(tokens)}:
        in_json = sorted(actual, key=actual.__getitem__)
        pairs = zip(tokens, in_json, strict=False)  # the shorter list ends the comparison
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
        difference = (
            f"id {first} is {tokens[first]!r} in {VOCAB_FILE} but {in_json[first]!r} in "
            f"{TOKENIZER_FILE}"
            if first is not None
            else f"{len(tokens)} and {len(actual)} tokens"
        )
        raise VocabError(
            f"{VOCAB_FILE} and {TOKENIZER_FILE} in {where} disagree: {difference}; {advice}"
        )
    if cased is None:
        return
    normalizer = json.loads(tokenizer.to_str()).get("normalizer") or {}
    if normalizer.get("lowercase") is (not cased):
        return
    raise VocabError(
        f"{TOKENIZER_FILE} in {where} {'lower-cases' if not cased else 'keeps case'} "
        f"but {VOCAB_METADATA_FILE} says cased={cased}: rerun `bertkit vocab`"
    )
