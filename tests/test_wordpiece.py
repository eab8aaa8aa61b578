"""WordPiece from word counts (pipelines/text/wordpiece.py): exact values on literal words,
then the real sample against HF's own trainer, word for word and token for token."""

from collections import Counter

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from pipelines.io.vocabulary import bert_normalizer
from pipelines.text.wordpiece import _merge, choose_alphabet, count_words, learn_pieces
from pipelines.vocab import continuation_alphabet, iter_sample_texts, reserved_tokens

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Sennrich et al.'s example corpus, as word counts.
SENNRICH = {"low": 5, "lower": 2, "newest": 6, "widest": 3}

TRICKY = [
    "Hello, World! hello",
    "a_b x\x7fy tab\tsep\x0bvt\x0cff\x1fus\r\nend",  # controls dropped, \t \r \n split
    "don't (re-)use [MASK] 3.14 #1 ~50% e-mail@x.org",
    "Naïve CAFÉ 中文字 e\u0301te\u0301 ÅNGSTRÖM straße İstanbul",
    "\u00a0nbsp\u2028line\u3000ideographic \ufffd\x00gone ½ ² ﬁ",
    "emoji 🙂 ok… “quoted” — dash",
]


def hf_words(sentences: list[str], cased: bool) -> Counter[str]:
    """What HF's trainer counts: its normaliser and pre-tokenizer, sentence by sentence."""
    normalizer, pre_tokenizer = bert_normalizer(cased), pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for sentence in sentences:
        counts.update(
            w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(sentence))
        )
    return counts


def fixed_tokens(alphabet: list[str], cased: bool, num_unused: int = 0) -> list[str]:
    continuations = ["##" + c for c in continuation_alphabet(alphabet, cased)]
    return [*reserved_tokens(num_unused), *alphabet, *continuations]


def hf_vocabulary(batches, fixed: list[str], alphabet: list[str], cased: bool, size: int):
    """HF's WordPiece trainer on the text itself, its ids fixed as `bertkit vocab` fixes them."""
    trainer = trainers.WordPieceTrainer(
        vocab_size=size,
        min_frequency=2,
        special_tokens=fixed,
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = bert_normalizer(cased)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(batches, trainer=trainer)
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    return sorted(vocab, key=vocab.__getitem__)


# --- Counting words -------------------------------------------------------------------------


def test_count_words_exact_values() -> None:
    assert count_words([["Hello, World! hello", "a_b x\x7fy tab\tsep\x0bvt"]], cased=False) == {
        "hello": 2,
        ",": 1,
        "world": 1,
        "!": 1,
        "a": 1,
        "_": 1,
        "b": 1,
        "xy": 1,
        "tab": 1,
        "sepvt": 1,
    }
    assert count_words([["Naïve CAFÉ 中文"]], cased=False) == {
        "naive": 1,
        "cafe": 1,
        "中": 1,
        "文": 1,
    }
    assert count_words([["Naïve CAFÉ 中文"]], cased=True) == {
        "Naïve": 1,
        "CAFÉ": 1,
        "中": 1,
        "文": 1,
    }


@pytest.mark.parametrize("cased", [False, True])
def test_count_words_equals_hf_on_every_kind_of_character(cased: bool) -> None:
    # One batch, sentence by sentence, and every sentence alone: ASCII and the rest mixed.
    expected = hf_words(TRICKY, cased)
    assert count_words([TRICKY], cased) == expected
    assert count_words([[s] for s in TRICKY], cased) == expected


def test_alphabet_counts_characters_of_words_and_breaks_ties_by_character() -> None:
    # a 3, b 3, c 4: c, then a before b on the tie; the kept ones sorted.
    assert choose_alphabet({"ab": 2, "ba": 1, "c": 4}, limit=2) == ["a", "c"]
    assert choose_alphabet({"ab": 2, "ba": 1, "c": 4}, limit=9) == ["a", "b", "c"]
    assert choose_alphabet({}, limit=5) == []


# --- Learning pieces ------------------------------------------------------------------------


def test_merge_follows_hf_word_merge_left_to_right() -> None:
    symbols = [1, 1, 1]
    assert _merge(symbols, 1, 1, 9) == [((1, 1), -1), ((9, 1), 1)] and symbols == [9, 1]
    symbols = [3, 1, 2, 1, 2, 4]
    assert _merge(symbols, 1, 2, 9) == [
        ((3, 1), -1),
        ((3, 9), 1),
        ((2, 1), -1),
        ((9, 1), 1),
        ((9, 1), -1),
        ((9, 9), 1),
        ((2, 4), -1),
        ((9, 4), 1),
    ]
    assert symbols == [3, 9, 9, 4]


def test_learn_pieces_on_sennrich_s_words() -> None:
    alphabet = choose_alphabet(SENNRICH, limit=100)
    assert alphabet == ["d", "e", "i", "l", "n", "o", "r", "s", "t", "w"]
    fixed = [*SPECIALS, *alphabet, *("##" + c for c in alphabet)]
    learned = learn_pieces(SENNRICH, fixed, vocab_size=len(fixed) + 8, min_frequency=2)
    assert learned[: len(fixed)] == fixed
    # "es" (9 = 6 newest + 3 widest) first, then "est", "lo" (7), "low" (7), ...
    assert learned[len(fixed) :] == ["##es", "##est", "lo", "low", "ne", "##west", "newest", "wi"]
    everything = learn_pieces(SENNRICH, fixed, vocab_size=100, min_frequency=2)
    assert everything[len(fixed) + 8 :] == ["##dest", "widest", "##er", "lower"]
    # The same as HF's trainer fed the words themselves.
    text = [" ".join(w for w, n in SENNRICH.items() for _ in range(n))]
    assert hf_vocabulary([text], fixed, alphabet, False, 100) == everything


def test_learn_pieces_stops_at_min_frequency_and_drops_unknown_characters() -> None:
    fixed = [*SPECIALS, "a", "b", "##a", "##b"]
    assert learn_pieces({"ab": 1, "abx": 1}, fixed, 100, min_frequency=3) == fixed
    # "x" is not in the alphabet: "abx" is learned from as "ab".
    assert learn_pieces({"ab": 1, "abx": 1}, fixed, 100, min_frequency=2) == [*fixed, "ab"]


def test_learn_pieces_reports_its_progress() -> None:
    fixed = [*SPECIALS, *"abc", "##a", "##b", "##c"]
    seen: list[int] = []
    learn_pieces({"abc": 3, "cab": 2}, fixed, 100, 1, progress=seen.append)
    assert seen == [len(fixed) + 4]  # ab, abc, ca, cab: once, at the end


# Cased and uncased at 2,000, and the demo's 8,000 uncased; 8,000 cased in the slow tier.
@pytest.mark.parametrize(
    ("cased", "size"),
    [(False, 2000), (True, 2000), pytest.param(False, 8000, marks=pytest.mark.slow)],
)
def test_real_sample_equals_hf_trainer_token_for_token(sample_documents, cased, size) -> None:
    documents = [str(d) for d in sample_documents]
    batches = list(iter_sample_texts(documents, 1024.0, 0))
    counts = count_words(batches, cased)
    assert counts == hf_words([s for b in batches for s in b], cased)
    assert len(counts) == (42_434 if cased else 36_455)
    alphabet = choose_alphabet(counts, limit=1000)
    fixed = fixed_tokens(alphabet, cased, num_unused=3)
    ours = learn_pieces(counts, fixed, size, min_frequency=2)
    assert len(ours) == size
    assert ours == hf_vocabulary(iter(batches), fixed, alphabet, cased, size)
