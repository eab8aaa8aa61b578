"""The vocabulary stage's one serial step, LearnPieces, against the number of distinct words.

    python -m bench.vocab_learn                         # 37k (the sample), 300k, 1.15M words
    python -m bench.vocab_learn --distinct 37k,150k     # a quick check

`bertkit vocab` counts words on every worker; one worker then sums the units' counts and
learns the pieces (pipelines.text.wordpiece.learn_pieces), in time that grows with the
distinct words, not with the sample. bench.scale's corpora repeat the real sample, so their
distinct words stay at the sample's 36,745 whatever their size: this benchmark gives the
step the word counts a real 1 GiB sample would have.

How many: Heaps' law fitted on the real sample's documents (shuffled, uncased BERT words):
V = 9.6 · N^0.61, which gives ~1.15 M distinct words for the ~211 M words of a 1 GiB sample
(5.08 bytes of text per word in the sample). The word counts: the sample's own 36,745 words
with their counts scaled to 211 M words, plus new words made by an order-3 character Markov
chain trained on the sample's words (so their letters pair up as English does), each seen
1–20 times (60 % once: the tail of a Zipf distribution), until the distinct words reach the
target. Prints, per size: the time to sum the counts as LearnPieces does (from one spill
file per unit, UNITS of them, each holding a share of the words), to choose the alphabet and
learn a 30,522-token vocabulary, and the process's peak RSS. Not a test: the result is a
figure for bench.scale's projection (its --learn-s-per-million-words).
"""

from __future__ import annotations

import random
import resource
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.measure import (
    DEFAULT_WORKDIR,
    argument_parser,
    machine_description,
    print_table,
    write_results,
)
from bench.scale_documents import find_sample_documents

SAMPLE_WORDS_PER_GIB = 211e6  # words in a 1 GiB sample at the real sample's 5.08 bytes a word
VOCAB_SIZE = 30522
UNITS = 64  # spill files summed: a sample spread over many documents files
TAIL_COUNTS = [1] * 60 + [2] * 20 + [3] * 10 + list(range(4, 14))  # a new word's count


def parse_size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def sample_counts(workdir: Path) -> Counter[str]:
    """The real sample's uncased words (its documents made with the demo if need be)."""
    from pipelines.text.wordpiece import count_words
    from pipelines.vocab import iter_sample_texts

    dirs = [str(d) for d in find_sample_documents(workdir).values()]
    return count_words(iter_sample_texts(dirs, 1024.0, 0), cased=False)


def markov_words(words: list[str], rng: random.Random, order: int = 3):
    """New words drawn letter by letter from the words' order-`order` transitions."""
    transitions: dict[str, list[str]] = defaultdict(list)
    for word in words:
        padded = "^" * order + word + "$"
        for i in range(order, len(padded)):
            transitions[padded[i - order : i]].append(padded[i])
    while True:
        state, out = "^" * order, []
        while len(out) < 30:
            char = rng.choice(transitions[state])
            if char == "$":
                break
            out.append(char)
            state = state[1:] + char
        if out:
            yield "".join(out)


def scaled_counts(base: Counter[str], distinct: int, seed: int = 0) -> Counter[str]:
    """The sample's words at 1 GiB's counts, plus Markov words up to `distinct` words."""
    factor = SAMPLE_WORDS_PER_GIB / base.total()
    counts = Counter({w: max(1, round(c * factor)) for w, c in base.items()})
    rng = random.Random(seed)
    alphabetic = [w for w in base if w.isalpha() and w.isascii()]
    new = markov_words(alphabetic, rng)
    while len(counts) < distinct:
        word = next(new)
        if word not in counts:
            counts[word] = rng.choice(TAIL_COUNTS)
    return counts


def spill_units(
    counts: Counter[str], directory: Path, units: int
) -> tuple[list[dict[str, Any]], int]:
    """The counts split over `units` word-count files as CountWords writes them (a word may
    be in several units: each holds a share of its count)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from schemas.vocab import WORD_COUNTS_DIR, WORD_COUNTS_SCHEMA

    shares: list[Counter[str]] = [Counter() for _ in range(units)]
    for index, (word, count) in enumerate(sorted(counts.items())):
        spread = min(count, units)
        for k in range(spread):
            shares[(index + k) % units][word] += count // spread + (k < count % spread)
    summaries, entries = [], 0
    (directory / WORD_COUNTS_DIR).mkdir(parents=True, exist_ok=True)
    for unit, share in enumerate(shares):
        name = f"d000-f{unit:05d}"
        words = sorted(share)
        table = pa.table(
            {"word": words, "count": [share[w] for w in words]}, schema=WORD_COUNTS_SCHEMA
        )
        pq.write_table(table, directory / WORD_COUNTS_DIR / f"{name}.parquet", compression="zstd")
        summaries.append({"unit": name})
        entries += len(words)
    return summaries, entries


def measure(counts: Counter[str], workdir: Path) -> dict[str, Any]:
    from pipelines.text.wordpiece import choose_alphabet, learn_pieces
    from pipelines.vocab import continuation_alphabet, reserved_tokens, sum_word_counts

    directory = workdir / f"learn-{len(counts)}"
    summaries, entries = spill_units(counts, directory, UNITS)
    start = time.perf_counter()
    summed = sum_word_counts(str(directory), summaries)
    sum_s = time.perf_counter() - start
    assert summed == counts
    start = time.perf_counter()
    alphabet = choose_alphabet(summed, 1000)
    fixed = [
        *reserved_tokens(0),
        *alphabet,
        *("##" + c for c in continuation_alphabet(alphabet, cased=False)),
    ]
    tokens = learn_pieces(summed, fixed, VOCAB_SIZE, min_frequency=2)
    learn_s = time.perf_counter() - start
    return {
        "distinct_words": len(counts),
        "entries_summed": entries,
        "sum_s": sum_s,
        "learn_s": learn_s,
        "tokens": len(tokens),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argument_parser("bench.vocab_learn", __doc__)
    parser.add_argument("--distinct", default="37k,300k,1.15m", help="distinct words per run")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args()
    base = sample_counts(args.workdir)
    rows, results = [], []
    print(f"{len(base):,} distinct words in the sample; {UNITS} units summed", flush=True)
    for size in map(parse_size, args.distinct.split(",")):
        counts = scaled_counts(base, max(size, len(base)))
        result = measure(counts, args.workdir / "vocab_learn")
        results.append(result)
        rows.append(
            [
                f"{result['distinct_words']:,}",
                f"{result['entries_summed']:,}",
                f"{result['sum_s']:.1f}",
                f"{result['learn_s']:.1f}",
                f"{result['tokens']:,}",
                f"{result['peak_rss_mib']:,.0f}",
            ]
        )
        print(f"  {rows[-1]}", flush=True)
    headers = [
        "distinct words",
        "entries summed",
        "sum s",
        "learn s",
        "tokens",
        "peak RSS MiB (so far)",
    ]
    print_table(headers, rows)
    largest = results[-1]
    per_million = (largest["sum_s"] + largest["learn_s"]) / (largest["distinct_words"] / 1e6)
    print(f"\nsum + learn: {per_million:.1f} s per million distinct words at the largest size")
    write_results(
        args.workdir / "results" / "vocab_learn.json",
        {"machine": machine_description(), "runs": results, "s_per_million_words": per_million},
    )


if __name__ == "__main__":
    main()
