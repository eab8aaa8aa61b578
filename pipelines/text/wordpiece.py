"""WordPiece training from word counts: what lets `bertkit vocab` count on every worker.

HF `tokenizers` trains WordPiece in two steps: it counts the words of the text (BERT's
normaliser and pre-tokenizer on every sentence), then learns pieces from those counts by
BPE merges. Its Python API takes only text, so the counting could not be spread over
workers, and it was most of the vocabulary stage's time, in one process.
The counts, though, add up: here each worker counts its part of the sample
(`count_words`), the counts are summed, and `learn_pieces` runs HF's merge step on them.

`count_words` gives exactly the words HF's trainer counts (tests/test_wordpiece.py compares
them on the real sample): ASCII sentences through an equivalent regular expression, 7x
faster than a call into `tokenizers` per batch; any other sentence through HF's own
normaliser and pre-tokenizer. `learn_pieces` follows `BpeTrainer::do_train`
(tokenizers/src/models/bpe/trainer.rs, 0.23) step for step, including its quirks: a merged
pair's own count is never lowered, a queue entry merges only the words it was queued
with, and ties go to the smaller pair of ids. The vocabulary it gives equals HF's on the
real sample, token for token (the same test), and does not depend on hash seeds.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from tokenizers import pre_tokenizers

from pipelines.io.vocabulary import bert_normalizer

# BertNormalizer's clean_text on ASCII: control characters but tab, newline and carriage
# return are dropped (U+000B and U+000C too: they are controls before they are spaces).
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# BertPreTokenizer on cleaned ASCII: a run of letters and digits is a word, every other
# printable character (all ASCII punctuation) a word of its own, whitespace splits.
_ASCII_WORD = {
    False: re.compile(r"[a-z0-9]+|[^a-z0-9 \t\n\r]"),
    True: re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9 \t\n\r]"),
}
PROGRESS_EVERY_MERGES = 256


class WordCounter:
    """Counts the words HF's WordPiece trainer would count in the sentences given to it."""

    def __init__(self, cased: bool) -> None:
        self.cased = cased
        self.counts: Counter[str] = Counter()
        self._word = _ASCII_WORD[cased]
        self._normalizer = bert_normalizer(cased)
        self._pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def add(self, sentences: Sequence[str]) -> None:
        ascii_text, other = [], []
        for sentence in sentences:
            (ascii_text if sentence.isascii() else other).append(sentence)
        if ascii_text:
            text = _ASCII_CONTROL.sub("", "\n".join(ascii_text))
            self.counts.update(self._word.findall(text if self.cased else text.lower()))
        if other:
            # Normalising and pre-tokenizing work within a word, so one call for the lot
            # finds the words of each sentence ("\n" is a space to both).
            normalized = self._normalizer.normalize_str("\n".join(other))
            self.counts.update(w for w, _ in self._pre_tokenizer.pre_tokenize_str(normalized))


def count_words(batches: Iterable[Sequence[str]], cased: bool) -> Counter[str]:
    counter = WordCounter(cased)
    for batch in batches:
        counter.add(batch)
    return counter.counts


def choose_alphabet(word_counts: Mapping[str, int], limit: int) -> list[str]:
    """The `limit` most frequent characters of the words, sorted by code point.

    Ties are broken by the character, never by hash order (which is what makes HF's own
    `limit_alphabet` cut unrepeatable).
    """
    counts: Counter[str] = Counter()
    for word, count in word_counts.items():
        for char in word:
            counts[char] += count
    kept = sorted(counts, key=lambda c: (-counts[c], c))[:limit]
    return sorted(kept)


def learn_pieces(
    word_counts: Mapping[str, int],
    fixed: Sequence[str],
    vocab_size: int,
    min_frequency: int,
    prefix: str = "##",
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """The vocabulary in id order: `fixed` (special tokens, alphabet, `##c` pieces), then the
    pieces merged, most frequent pair first, until `vocab_size` tokens or no pair is seen
    `min_frequency` times.

    A word's characters outside `fixed` are dropped; a character that continues a word
    and has no `##c` piece in `fixed` gets one after `fixed`, as HF's trainer does.
    Words are taken in sorted order, so nothing depends on hash seeds. `progress` is called
    with the vocabulary's size every PROGRESS_EVERY_MERGES merges and at the end.
    """
    id_to_word = list(dict.fromkeys(fixed))
    word_to_id = {w: i for i, w in enumerate(id_to_word)}

    def piece_id(piece: str) -> int:
        known = word_to_id.get(piece)
        if known is None:
            known = word_to_id[piece] = len(id_to_word)
            id_to_word.append(piece)
        return known

    words: list[list[int]] = []
    counts: list[int] = []
    for word in sorted(word_counts):
        symbols = [
            piece_id(char if position == 0 else prefix + char)
            for position, char in enumerate(word)
            if char in word_to_id
        ]
        words.append(symbols)
        counts.append(word_counts[word])

    pair_counts: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for index, (symbols, count) in enumerate(zip(words, counts, strict=True)):
        for pair in itertools.pairwise(symbols):
            pair_counts[pair] = pair_counts.get(pair, 0) + count
            where.setdefault(pair, set()).add(index)
    # The queue: (-count, first id, second id, push order, words to merge in). The push
    # order only keeps tuples from comparing the sets.
    queue: list[tuple[int, int, int, int, set[int]]] = []
    order = itertools.count()

    def queue_pairs_seen() -> None:
        """Queue each pair `where` holds, with the words it was seen in, and empty it."""
        for (a, b), positions in where.items():
            count = pair_counts[a, b]
            if count > 0:
                heapq.heappush(queue, (-count, a, b, next(order), positions))
        where.clear()

    merges = 0
    queue_pairs_seen()
    while len(word_to_id) < vocab_size and queue:
        negative, first, second, _, positions = heapq.heappop(queue)
        count = pair_counts[first, second]
        if -negative != count:  # stale: queued when the pair was seen more or less often
            heapq.heappush(queue, (-count, first, second, next(order), positions))
            continue
        if count < 1 or count < min_frequency:
            break
        second_piece = id_to_word[second]
        if second_piece.startswith(prefix):
            second_piece = second_piece[len(prefix) :]
        new = piece_id(id_to_word[first] + second_piece)
        for index in positions:
            word_count = counts[index]
            for pair, change in _merge(words[index], first, second, new):
                pair_counts[pair] = pair_counts.get(pair, 0) + change * word_count
                if change > 0:
                    where.setdefault(pair, set()).add(index)
        queue_pairs_seen()
        merges += 1
        if progress is not None and merges % PROGRESS_EVERY_MERGES == 0:
            progress(len(id_to_word))
    if progress is not None:
        progress(len(id_to_word))
    return id_to_word


def _merge(
    symbols: list[int], first: int, second: int, new: int
) -> list[tuple[tuple[int, int], int]]:
    """Merge every (first, second) in `symbols`, left to right, in place; the changes to
    the counts of the neighbouring pairs (HF's `Word::merge`: the merged pair's own count
    is left as it was)."""
    changes: list[tuple[tuple[int, int], int]] = []
    i = 0
    while i < len(symbols) - 1:
        if symbols[i] == first and symbols[i + 1] == second:
            if i > 0:
                previous = symbols[i - 1]
                changes.append(((previous, first), -1))
                changes.append(((previous, new), 1))
            symbols[i : i + 2] = [new]
            if i < len(symbols) - 1:
                following = symbols[i + 1]
                changes.append(((second, following), -1))
                changes.append(((new, following), 1))
        i += 1
    return changes
