"""The tokens Google's pair rule trims off pairs to fit the length are counted in the shards
manifest (`seqN/SPLIT/truncated_tokens`), and a split that loses more than a tenth of its
tokens that way says so on a WARNING line (pipelines/beam/empty_outputs.py)."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from pipelines import examples
from pipelines.bert.draws import RandomStream
from pipelines.bert.pairs import create_pairs
from schemas import Document
from schemas.shards import TRUNCATED_TOKENS, ShardsManifest
from schemas.vocab import TOKENIZER_FILE
from tests.test_empty_outputs import (  # noqa: F401  (fixtures: _quiet, story_vocab)
    STORY,
    _quiet,
    story,
    story_vocab,
    warnings_of,
    write_documents,
)


def test_a_pair_records_the_tokens_trimmed_off_it() -> None:
    # One sentence of 100 tokens is a chunk alone: A is all of it, B (a random next) the
    # partner's first sentence from wherever it starts, 5 tokens; 105 → 29 drops 76.
    [pair] = create_pairs([100], [[5, 5]], 32, 0.0, RandomStream(0, 0))
    assert pair.truncated == 76
    assert (pair.a_end - pair.a_start) + (pair.b_end - pair.b_start) == 29
    # Short sentences fit: nothing trimmed.
    pairs = create_pairs([5, 5, 5], [[5, 5]], 32, 0.0, RandomStream(0, 1))
    assert [p.truncated for p in pairs] == [0, 0]
    # An IsNext pair's B is the document's own text: its trimmed tokens count too. Two
    # sentences of 20: A = 20, B = 20, 40 → 29 drops 11 (B 6, A 5), all the document's.
    for seed in range(20):
        own = create_pairs([20, 20], [[5]], 32, 0.0, RandomStream(seed, 0))
        if own[0].partner < 0:
            assert [p.truncated for p in own] == [11]
            break
    else:
        raise AssertionError("no seed of 20 drew an IsNext pair")


def test_a_split_of_overlong_sentences_is_counted_and_warned_of(
    tmp_path,
    caplog,
    story_vocab,  # noqa: F811
) -> None:
    # Each document is one sentence of the whole story (what a book without sentence ends
    # becomes): every pair is two such sentences cut down to 29 tokens, A (the document's
    # own) losing half the excess, B (a random next: another document's) the other half.
    text = " ".join(STORY)
    long_ones = [
        Document(id=f"t/long{i}", source="test", title="long", sentences=(text,)) for i in range(4)
    ]
    documents = write_documents(tmp_path / "documents", long_ones)
    out = tmp_path / "shards"
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    flags = ["--max-seq-length", "32", "--dupe-factor", "1", "--heldout-fraction", "0"]
    assert examples.run([*argv, *flags]) == 0
    manifest = ShardsManifest.from_json((out / "manifest.json").read_text())
    train = manifest.outputs["seq32"].splits["train"]
    tokenizer = Tokenizer.from_file(str(story_vocab / TOKENIZER_FILE))
    length = len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert train.samples == 4 and train.tokens == 4 * 32
    dropped = manifest.counts[f"seq32/train/{TRUNCATED_TOKENS}"]
    assert dropped == 4 * ((2 * length - 29) // 2)
    total = dropped + train.tokens
    assert warnings_of(caplog, "examples") == [
        f"{out}/seq32/train: trimming pairs to 32 tokens dropped {dropped:,} of their "
        f"{total:,} tokens ({dropped / total:.1%}): the documents hold sentences longer than "
        "a sequence (text without sentence ends, one sentence a line run together): split "
        "such text into sentences before the documents stage, or use --sequences "
        "full-sentences"
    ]


def test_ordinary_sentences_are_counted_not_warned_of(
    tmp_path: Path,
    caplog,
    story_vocab,  # noqa: F811
) -> None:
    # Sentences of about 14 tokens in pairs of 29: the chunks' overshoot is trimmed (the
    # rule at work, counted), well under half of the text.
    documents = write_documents(tmp_path / "documents", [story(f"t/s{i}", i) for i in range(4)])
    out = tmp_path / "shards"
    argv = ["--documents", str(documents), "--vocab", str(story_vocab), "--output", str(out)]
    flags = ["--max-seq-length", "32", "--dupe-factor", "1", "--heldout-fraction", "0"]
    assert examples.run([*argv, *flags]) == 0
    manifest = ShardsManifest.from_json((out / "manifest.json").read_text())
    dropped = manifest.counts[f"seq32/train/{TRUNCATED_TOKENS}"]
    assert 0 < dropped < manifest.outputs["seq32"].splits["train"].tokens
    assert warnings_of(caplog, "examples") == []
