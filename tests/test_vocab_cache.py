"""load_vocab builds a directory's tokenizer once per process and shares it: the key is the
directory and the sha256 of its files, which are still read and checked on every call."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from pipelines.io.vocabulary import (
    VocabError,
    build_tokenizer,
    load_vocab,
    vocab_txt_bytes,
)
from schemas.vocab import (
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    VocabMetadata,
)


def write_directory(directory: Path, words: list[str]) -> None:
    tokens = [*SPECIAL_TOKENS, *words]
    vocab_bytes = vocab_txt_bytes(tokens)
    tokenizer_bytes = build_tokenizer(tokens, cased=False).to_str(pretty=True).encode("utf-8")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / VOCAB_FILE).write_bytes(vocab_bytes)
    (directory / TOKENIZER_FILE).write_bytes(tokenizer_bytes)
    metadata = VocabMetadata(
        vocab_size=len(tokens),
        cased=False,
        num_unused=0,
        special_tokens={t: tokens.index(t) for t in SPECIAL_TOKENS},
        sample={},
        inputs=[],
        config={},
        vocab_sha256=hashlib.sha256(vocab_bytes).hexdigest(),
        tokenizer_sha256=hashlib.sha256(tokenizer_bytes).hexdigest(),
    )
    (directory / VOCAB_METADATA_FILE).write_text(metadata.to_json())


def test_a_directory_is_built_once_and_shared(tmp_path: Path) -> None:
    write_directory(tmp_path / "v", ["the", "river", "##s"])
    first = load_vocab(str(tmp_path / "v"))
    assert load_vocab(str(tmp_path / "v")) is first
    assert first.tokenizer.encode("the rivers", add_special_tokens=False).ids == [5, 6, 7]
    # Shared by every caller in the process: its arrays cannot be written.
    with pytest.raises(ValueError, match="read-only"):
        first.replaceable_ids[0] = 0
    assert not first.is_continuation.flags.writeable
    assert np.array_equal(first.is_continuation, [False] * 7 + [True])


def test_rewritten_directory_is_loaded_again_and_tampering_is_still_refused(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "v"
    write_directory(directory, ["the", "river"])
    first = load_vocab(str(directory))
    write_directory(directory, ["the", "sea"])  # a new run of `bertkit vocab`
    second = load_vocab(str(directory))
    assert second is not first and second.tokens[-1] == "sea"
    # The files are checked on every call, loaded before or not.
    (directory / VOCAB_FILE).write_bytes(vocab_txt_bytes([*SPECIAL_TOKENS, "the", "lake"]))
    with pytest.raises(VocabError, match=r"vocab\.txt was modified after training"):
        load_vocab(str(directory))


def test_the_same_bytes_elsewhere_are_another_key(tmp_path: Path) -> None:
    write_directory(tmp_path / "a", ["the", "river"])
    write_directory(tmp_path / "b", ["the", "river"])
    a, b = load_vocab(str(tmp_path / "a")), load_vocab(str(tmp_path / "b"))
    assert a is not b and a.sha256 == b.sha256
