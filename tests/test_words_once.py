"""Each distinct word tokenized once (pipelines/bert/words_once.py): exact ids on literal
texts, the same tokens as the plain call on tricky text and on every sentence of the real
sample, bounded windows and calls, and the tokenizers it refuses."""

import json

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from pipelines.bert.words_once import (
    encode_in_calls,
    encode_words_once,
    splits_at_spaces,
    windows,
)
from pipelines.io.vocabulary import build_tokenizer, load_vocab
from tests.support.released_dirs import sample_sentences_fixture  # noqa: F401 (a fixture)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["hello", ",", "world", "!", "un", "##aff", "##able", "cafe", "[", "]", "mask", "中"]
TRICKY = [
    "Hello, World! hello",
    "",
    "  double  spaces  ",
    "a_b x\x7fy tab\tsep\x0bvt\x0cff\x1fus\r\nend",
    "don't (re-)use [MASK] 3.14 #1 ~50% e-mail@x.org",
    "Naïve CAFÉ 中文字 e\u0301te\u0301 ÅNGSTRÖM straße İstanbul",
    "\u00a0nbsp\u2028line\u3000ideographic \ufffd\x00gone ½ ² ﬁ",
    "emoji 🙂 ok… “quoted” — dash",
    "x" * 250 + " hello",
]


@pytest.fixture(scope="module")
def small() -> Tokenizer:
    tokenizer = build_tokenizer(SPECIALS + WORDS, cased=False)
    tokenizer.encode_special_tokens = True  # as load_vocab sets it
    return tokenizer


def test_exact_ids_on_literal_texts(small):
    texts = ["Hello, world!", "unaffable  café", "", "[MASK] 中中", "zzz hello"]
    tokens, lengths = encode_words_once(small, texts, window_chars=1 << 20, call_chars=1 << 20)
    # hello=5 ,=6 world=7 !=8 un=9 ##aff=10 ##able=11 cafe=12 [=13 ]=14 mask=15 中=16 UNK=1
    assert lengths.tolist() == [4, 4, 0, 5, 2]
    assert tokens.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 14, 16, 16, 1, 5]
    assert tokens.dtype == np.uint32 and lengths.dtype == np.uint32


@pytest.mark.parametrize("window_chars,call_chars", [(1 << 20, 1 << 20), (7, 5), (1, 1)])
def test_the_plain_calls_tokens_in_any_window(small, window_chars, call_chars):
    expected = encode_in_calls(small, TRICKY, 4096, 1 << 20)
    tokens, lengths = encode_words_once(small, TRICKY, window_chars, call_chars)
    assert lengths.tolist() == expected[1].tolist()
    assert tokens.tolist() == expected[0].tolist()


def test_windows_count_characters_texts_and_separators():
    texts = ["ab", "cde", "f", "ghijkl", "", "m"]
    runs = lambda *a, **k: [texts[w] for w in windows(texts, *a, **k)]  # noqa: E731
    assert runs(4) == [["ab"], ["cde", "f"], ["ghijkl"], ["", "m"]]
    assert runs(6, max_texts=2) == [["ab", "cde"], ["f"], ["ghijkl", ""], ["m"]]
    # joined by one character: "ab cde" is 6, "f ghijkl" 8
    assert runs(6, joined_by=1) == [["ab", "cde"], ["f"], ["ghijkl"], ["", "m"]]
    assert runs(1) == [["ab"], ["cde"], ["f"], ["ghijkl"], ["", "m"]]
    assert list(windows([], 4)) == []


def test_nothing_in_nothing_out(small):
    tokens, lengths = encode_words_once(small, [], 10, 10)
    assert tokens.tolist() == [] and lengths.tolist() == []


class _Recording:
    """A tokenizer that records each call's texts."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self.calls: list[list[str]] = []

    def encode_batch(self, texts, add_special_tokens):
        self.calls.append(list(texts))
        return self._tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)


def test_each_distinct_word_goes_once_in_bounded_calls(small):
    recording = _Recording(small)
    texts = ["hello world", "world hello", "hello", "unaffable world"]
    tokens, lengths = encode_words_once(recording, texts, window_chars=1 << 20, call_chars=12)
    assert lengths.tolist() == [2, 2, 1, 4]
    assert tokens.tolist() == [5, 7, 7, 5, 5, 9, 10, 11, 7]
    # The distinct words, in first-seen order, joined; a call holds at most 12 characters.
    assert recording.calls == [["hello world"], ["unaffable"]]


def test_windows_bound_the_words_held(small):
    recording = _Recording(small)
    encode_words_once(
        recording, ["hello", "hello", "world", "hello"], window_chars=10, call_chars=100
    )
    # windows: ["hello", "hello"] and ["world", "hello"]: a word is seen again in a new window
    assert recording.calls == [["hello"], ["world hello"]]


def test_bert_tokenizers_split_at_spaces(small, sample_vocab):
    assert splits_at_spaces(small)
    assert splits_at_spaces(load_vocab(str(sample_vocab)).tokenizer)


def _variant(small: Tokenizer, change) -> Tokenizer:
    config = json.loads(small.to_str())
    change(config)
    return Tokenizer.from_str(json.dumps(config))


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(pre_tokenizer={"type": "Whitespace"}),
        lambda c: c.update(pre_tokenizer=None),
        lambda c: c.update(normalizer={"type": "NFKC"}),
        lambda c: c["added_tokens"][0].update(lstrip=True),
        lambda c: c["added_tokens"][0].update(content="[P D]"),
    ],
    ids=["whitespace-pre-tokenizer", "no-pre-tokenizer", "nfkc", "lstrip", "spaced-token"],
)
def test_other_tokenizers_are_refused(small, change):
    assert not splits_at_spaces(_variant(small, change))


def test_a_bpe_tokenizer_is_refused():
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    bpe.add_special_tokens([AddedToken("[CLS]", special=True)])
    assert not splits_at_spaces(bpe)


def test_every_sentence_of_the_sample(sample_sentences, sample_vocab):
    tokenizer = load_vocab(str(sample_vocab)).tokenizer
    sentences = sample_sentences  # every sentence of the real sample, read once a session
    assert len(sentences) > 20_000
    expected = encode_in_calls(tokenizer, sentences, 4096, 1 << 20)
    tokens, lengths = encode_words_once(tokenizer, sentences, 1 << 20, 1 << 18)
    assert np.array_equal(lengths, expected[1])
    assert np.array_equal(tokens, expected[0])
