"""Released BERT vocabulary directories made as transformers makes them, and the real
sample's sentences and tokens to compare tokenizers on: shared by tests/test_released_vocab.py
and tests/test_released_tokenizer_json.py.

Two kinds of directory, from the same tokens: `released` is Google's vocab.txt with the files
transformers 4 writes beside it (tokenizer.json, tokenizer_config.json); `saved` is what
transformers 5's save_pretrained writes, tokenizer.json and tokenizer_config.json with no
vocab.txt.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.io.vocabulary import load_vocab, vocab_txt_bytes
from schemas.documents import DocumentColumn
from schemas.vocab import VOCAB_FILE

# Added to the uncased sample vocabulary for the cased directory: capitalised words of the
# sample's first sentences, an accented word, and pieces of both.
CASED_WORDS = ["The", "Alice", "Project", "Gutenberg", "In", "It", "He", "She", "A", "##S"]
ACCENTED = ["café", "naïve", "é", "##é"]
CJK = ["日", "本", "語", "東", "京", "北", "中", "文", "한국어", "##어"]

SAVED = ["tokenizer.json", "tokenizer_config.json"]  # what transformers 5 writes, no vocab.txt

EXAMPLE_FLAGS = ["--dupe-factor", "1", "--heldout-fraction", "0.05"]


def _transformers():
    return pytest.importorskip("transformers")


def released(directory: Path, tokens: list[str], **settings) -> Path:
    """A released BERT's vocabulary directory, as Google ships vocab.txt and transformers
    writes the rest (`settings`: do_lower_case, strip_accents, tokenize_chinese_chars)."""
    directory.mkdir(parents=True)
    (directory / VOCAB_FILE).write_bytes(vocab_txt_bytes(tokens))
    hf = _transformers().BertTokenizerFast.from_pretrained(str(directory), **settings)
    hf.save_pretrained(str(directory))
    assert (directory / VOCAB_FILE).read_bytes() == vocab_txt_bytes(tokens)
    return directory


def saved(directory: Path, tokens: list[str], **settings) -> Path:
    """`BertTokenizerFast.from_pretrained(a vocab.txt's directory).save_pretrained(directory)`
    (`settings`: do_lower_case, …), as transformers 5 does it: no vocab.txt. The vocab.txt's
    directory stays beside it, named `directory`-google."""
    google = directory.parent / f"{directory.name}-google"
    google.mkdir(parents=True)
    (google / VOCAB_FILE).write_bytes(vocab_txt_bytes(tokens))
    hf = _transformers().BertTokenizerFast.from_pretrained(str(google), **settings)
    hf.save_pretrained(str(directory))
    model = ("config.json", "model.safetensors")  # a model's directory: the tokenizer beside
    assert sorted(p.name for p in directory.iterdir() if p.name not in model) == SAVED
    return directory


def added(tokens: list[str], *extra: list[str]) -> list[str]:
    """`tokens` and those of `extra` it lacks (the sample's vocabulary has some already)."""
    return [*tokens, *(t for t in dict.fromkeys(itertools.chain(*extra)) if t not in set(tokens))]


def with_unused(tokens: list[str], count: int) -> list[str]:
    """Google's layout: [PAD], then the [unusedN] slots, then the rest."""
    return [tokens[0], *(f"[unused{i}]" for i in range(count)), *tokens[1:]]


def hf_ids(directory: Path, sentences: list[str]) -> list[list[int]]:
    hf = _transformers().BertTokenizerFast.from_pretrained(str(directory))
    return hf(sentences, add_special_tokens=False)["input_ids"]


def bertkit_ids(directory: Path, sentences: list[str], **kwargs) -> list[list[int]]:
    tokenizer = load_vocab(str(directory), **kwargs).tokenizer
    return [e.ids for e in tokenizer.encode_batch_fast(sentences, add_special_tokens=False)]


def shard_digests(shards: Path) -> dict[str, str]:
    return {
        str(p.relative_to(shards)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(shards.glob("seq*/*/*.tar"))
    }


# Fixtures named apart from their functions, so a test module imports the functions (its
# one `noqa: F401`) and its tests' parameters do not shadow them.
@pytest.fixture(scope="session", name="sample_sentences")
def sample_sentences_fixture(sample_documents) -> list[str]:
    """Every sentence of the real sample's documents, read once per session."""
    return [
        sentence
        for directory in sample_documents
        for path in sorted(directory.glob("*.parquet"))
        for document in pq.read_table(path, columns=[DocumentColumn.SENTENCES])
        .column(DocumentColumn.SENTENCES)
        .to_pylist()
        for sentence in document
    ]


@pytest.fixture(scope="session", name="sample_tokens")
def sample_tokens_fixture(sample_vocab: Path) -> list[str]:
    """The sample vocabulary's 8,000 tokens in id order."""
    return load_vocab(str(sample_vocab)).tokens
