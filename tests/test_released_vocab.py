"""A released BERT's vocabulary directory as --vocab (issue 38 item 1).

The released directories are made here as transformers makes them: a vocab.txt written in
Google's format, then `BertTokenizerFast.from_pretrained(DIR, do_lower_case=…)
.save_pretrained(DIR)`, which adds tokenizer.json and tokenizer_config.json beside it. Their
tokens are the sample vocabulary's (trained by `bertkit vocab` on the real sample), with
[unusedN] slots, cased words or CJK characters added. bertkit's tokens must be
transformers' on that directory, token for token, on every sentence of the real sample,
and so on a directory with tokenizer.json and no vocab.txt, as transformers 5 saves one.
The builders are in tests/support/released_dirs.py.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pipelines import chain, examples, inspect
from pipelines.io.released_vocab import CasingNotSaidError
from pipelines.io.vocabulary import VocabError, load_vocab, vocab_txt_bytes
from schemas.vocab import SPECIAL_TOKENS, VOCAB_FILE
from tests.support.released_dirs import (  # noqa: F401 (two fixtures)
    ACCENTED,
    CASED_WORDS,
    CJK,
    EXAMPLE_FLAGS,
    SAVED,
    added,
    bertkit_ids,
    hf_ids,
    released,
    sample_sentences_fixture,
    sample_tokens_fixture,
    saved,
    shard_digests,
    with_unused,
)

transformers = pytest.importorskip("transformers")


def _refusal(directory: Path, error: type[VocabError] = VocabError, **kwargs) -> str:
    """The one line load_vocab refuses `directory` with (it must refuse it, with `error`)."""
    with pytest.raises(error) as refused:
        load_vocab(str(directory), **kwargs)
    return str(refused.value)


# The two kinds of released directory, from the same tokens: Google's vocab.txt with
# transformers 4's files beside it, and transformers 5's tokenizer.json with no vocab.txt.
DIRECTORIES = {
    "vocab-txt": (released, ("vocab.txt", "tokenizer.json", "tokenizer_config.json")),
    "tokenizer-json": (saved, tuple(SAVED)),
}


# Each kind and each casing by default; the two other pairs of them in the slow tier.
KINDS_AND_CASES = [
    pytest.param("vocab-txt", True, id="uncased-vocab-txt"),
    pytest.param("tokenizer-json", False, id="cased-tokenizer-json"),
    pytest.param("vocab-txt", False, id="cased-vocab-txt", marks=pytest.mark.slow),
    pytest.param("tokenizer-json", True, id="uncased-tokenizer-json", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("kind", "lower"), KINDS_AND_CASES)
def test_every_sentence_of_the_sample_as_transformers_tokenizes_it(
    tmp_path, sample_sentences, sample_tokens, kind, lower
):
    make, files = DIRECTORIES[kind]
    tokens = added(with_unused(sample_tokens, 100), CASED_WORDS, ACCENTED)
    directory = make(tmp_path / "bert", tokens, do_lower_case=lower)
    vocab = load_vocab(str(directory))
    assert vocab.tokens == tokens and vocab.size == 8_114
    # The sha256 of the vocab.txt transformers 4 saved (and Google shipped) for these tokens.
    assert vocab.sha256 == hashlib.sha256(vocab_txt_bytes(tokens)).hexdigest()
    assert vocab.source_files == files
    assert (vocab.cased, vocab.cased_from) == (not lower, "tokenizer_config.json do_lower_case")
    assert vocab.released and vocab.metadata.num_unused == 100
    assert len(sample_sentences) == 24_233
    ours = bertkit_ids(directory, sample_sentences)
    assert ours == hf_ids(directory, sample_sentences)
    # The cased words are used only when case is kept: the test compares two tokenizers.
    used = {i for ids in ours for i in ids}
    assert (tokens.index("The") in used) is (not lower)
    # The pair the examples make: [CLS] A [SEP] B [SEP], segment ids 0 then 1.
    hf = transformers.BertTokenizerFast.from_pretrained(str(directory))
    first, second = sample_sentences[:2]
    pair = vocab.tokenizer.encode(first, second)
    assert pair.ids == hf(first, second)["input_ids"]
    assert pair.type_ids == hf(first, second)["token_type_ids"]


def test_cjk_characters_are_split_one_token_each(tmp_path, sample_tokens):
    directory = released(tmp_path / "multilingual", added(sample_tokens, CJK), do_lower_case=False)
    sentences = [
        "日本語 text in Tokyo 東京",
        "北京中文the日本",
        "한국어 is not split: Hangul is not a CJK ideograph to BERT",
        "Café in 東京, naïve 北京.",
    ]
    vocab = load_vocab(str(directory))
    assert vocab.tokenizer.encode(sentences[1], add_special_tokens=False).tokens == [
        "北",
        "京",
        "中",
        "文",
        "the",
        "日",
        "本",
    ]
    assert bertkit_ids(directory, sentences) == hf_ids(directory, sentences)


@pytest.mark.parametrize(
    "settings",
    [
        {"do_lower_case": True, "strip_accents": False},
        {"do_lower_case": False, "strip_accents": True},
        {"do_lower_case": False, "tokenize_chinese_chars": False},
    ],
    ids=["uncased-accents-kept", "cased-accents-stripped", "cjk-not-split"],
)
def test_the_directory_s_normalizer_settings_are_honoured(tmp_path, sample_tokens, settings):
    tokens = added(sample_tokens, CJK, ACCENTED, ["cafe", "naive", "Cafe"])
    directory = released(tmp_path / "bert", tokens, **settings)
    sentences = ["Café naïve CAFÉ in 東京 and 北京中文", "Naïve café: é, É, e."]
    ours = bertkit_ids(directory, sentences)
    assert ours == hf_ids(directory, sentences)
    vocab = load_vocab(str(directory))
    assert vocab.strip_accents == settings.get("strip_accents")


def test_a_vocab_txt_alone_takes_its_casing_from_the_flag(tmp_path, sample_tokens):
    directory = tmp_path / "google"
    directory.mkdir()
    (directory / VOCAB_FILE).write_bytes(vocab_txt_bytes(added(sample_tokens, CASED_WORDS)))
    assert _refusal(directory, CasingNotSaidError) == (
        f"the released vocabulary at {directory} does not say whether it lower-cases (no "
        "tokenizer_config.json do_lower_case, no tokenizer.json normalizer): pass --cased for "
        "a cased model (bert-base-cased) or --no-cased for an uncased one (bert-base-uncased)"
    )
    cased = load_vocab(str(directory), cased=True)
    assert (cased.cased, cased.cased_from, cased.source_files) == (True, "--cased", ("vocab.txt",))
    assert cased.tokenizer.encode("The Alice", add_special_tokens=False).tokens == ["The", "Alice"]
    uncased = load_vocab(str(directory), cased=False)
    assert uncased.cased_from == "--no-cased"
    # transformers on the same directory, told the casing the same way.
    for flag, lower in ((True, False), (False, True)):
        hf = transformers.BertTokenizerFast.from_pretrained(str(directory), do_lower_case=lower)
        text = "The Alice café"
        ours = load_vocab(str(directory), cased=flag).tokenizer.encode(
            text, add_special_tokens=False
        )
        assert ours.ids == hf(text, add_special_tokens=False)["input_ids"]


def test_a_flag_that_contradicts_the_directory_is_refused(tmp_path, sample_tokens, sample_vocab):
    directory = released(tmp_path / "bert", sample_tokens, do_lower_case=True)
    assert _refusal(directory, cased=True) == (
        f"--cased contradicts the released vocabulary at {directory}: its tokenizer_config.json "
        "do_lower_case says uncased; drop the flag"
    )
    assert load_vocab(str(directory), cased=False).cased is False  # agreeing: taken
    with pytest.raises(
        VocabError, match=r"^--cased contradicts the vocabulary at .*vocab\.json says uncased"
    ):
        load_vocab(str(sample_vocab), cased=True)


def write_lines(directory: Path, lines: list[str]) -> Path:
    directory.mkdir()
    (directory / VOCAB_FILE).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    "lines, problem",
    [
        (
            [*SPECIAL_TOKENS, "the", "cat", "the"],
            "line 8: 'the' is on line 6 too; a token must have one id: this is not a "
            "vocabulary bertkit (or BERT) can use",
        ),
        (
            [*SPECIAL_TOKENS, "the", "", "cat"],
            "line 7: an empty token, which no text can give; a vocab.txt holds one token per "
            "line (remove the line only if the model was not trained with it: every later id "
            "would move)",
        ),
        (
            ["[PAD]", "[UNK]", "[CLS]", "the", "cat"],
            "lacks [SEP], [MASK] (5 lines): bertkit needs BERT's special tokens [PAD] [UNK] "
            "[CLS] [SEP] [MASK] in the vocabulary",
        ),
    ],
    ids=["duplicate", "empty-line", "missing-special"],
)
def test_a_vocabulary_bertkit_cannot_use_is_one_line_naming_file_and_line(tmp_path, lines, problem):
    directory = write_lines(tmp_path / "bad", lines)
    assert _refusal(directory, cased=False) == f"{directory / VOCAB_FILE} {problem}"


def test_a_tokenizer_json_that_disagrees_with_vocab_txt_is_refused(tmp_path, sample_tokens):
    directory = released(tmp_path / "bert", sample_tokens, do_lower_case=True)
    tokenizer = json.loads((directory / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["the"], vocab["of"] = vocab["of"], vocab["the"]
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer))
    first = min(vocab["the"], vocab["of"])
    assert _refusal(directory) == (
        f"vocab.txt and tokenizer.json in {directory} disagree: id {first} is "
        f"{sample_tokens[first]!r} in vocab.txt but "
        f"{'of' if sample_tokens[first] == 'the' else 'the'!r} in tokenizer.json; a released "
        "directory's files must come from one model: restore them"
    )


def test_other_special_tokens_are_refused(tmp_path, sample_tokens):
    directory = released(tmp_path / "bert", sample_tokens, do_lower_case=True)
    (directory / "special_tokens_map.json").write_text(json.dumps({"unk_token": "<unk>"}))
    assert _refusal(directory) == (
        f"{directory / 'special_tokens_map.json'}: unk_token is '<unk>'; bertkit uses BERT's "
        "[UNK] (a vocabulary with other special tokens is not one it can make examples with)"
    )
    (directory / "special_tokens_map.json").write_text(
        json.dumps({"unk_token": {"content": "[UNK]"}, "mask_token": "[MASK]"})
    )
    vocab = load_vocab(str(directory))
    assert vocab.source_files == (
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    )


def test_a_directory_without_a_vocabulary_never_advises_training_into_it(tmp_path):
    assert _refusal(tmp_path) == (
        f"no vocabulary at {tmp_path}: it holds neither vocab.json (a `bertkit vocab` output) "
        "nor vocab.txt or tokenizer.json (a released BERT's); give the directory that holds "
        "them, or make one with `bertkit vocab --documents DIR … --output NEW_DIR`"
    )


# --------------------------------------------------------------------------- the commands


def test_examples_with_a_released_vocabulary(tmp_path, sample_documents, sample_vocab, capsys):
    """A released copy of the sample vocabulary (vocab.txt and transformers' files) makes
    the shards the bertkit directory makes, byte for byte; the manifest records the
    vocab.txt's sha256 and where the vocabulary and its casing came from."""
    wiki = str(sample_documents[0])
    directory = tmp_path / "bert-base-uncased"
    released(directory, load_vocab(str(sample_vocab)).tokens, do_lower_case=True)
    mine, theirs = tmp_path / "bertkit-shards", tmp_path / "released-shards"
    argv = ["--documents", wiki, *EXAMPLE_FLAGS]
    assert examples.run([*argv, "--vocab", str(sample_vocab), "--output", str(mine)]) == 0
    assert examples.run([*argv, "--vocab", str(directory), "--output", str(theirs)]) == 0
    assert shard_digests(theirs) == shard_digests(mine) and len(shard_digests(mine)) == 2
    manifest = json.loads((theirs / "manifest.json").read_text())
    assert manifest["vocab"] == {
        "path": "../bert-base-uncased",
        "sha256": hashlib.sha256((directory / VOCAB_FILE).read_bytes()).hexdigest(),
        "size": 8000,
        "cased": False,
        "origin": {
            "kind": "released",
            "files": ["vocab.txt", "tokenizer.json", "tokenizer_config.json"],
            "cased_from": "tokenizer_config.json do_lower_case",
        },
    }
    assert "cased" not in manifest["config"]
    capsys.readouterr()
    assert inspect.run([str(theirs)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        f"vocab: sha256 {manifest['vocab']['sha256']}, path {directory}, size 8000, cased "
        "False, a released BERT's (casing from tokenizer_config.json do_lower_case)"
    )
    # A bertkit vocabulary's record is what it was: no origin (vocab.json says it).
    assert set(json.loads((mine / "manifest.json").read_text())["vocab"]) == {
        "path",
        "sha256",
        "size",
        "cased",
    }
    capsys.readouterr()


def test_examples_refuses_before_any_work(tmp_path, sample_documents, sample_tokens, capsys):
    directory = write_lines(tmp_path / "google", sample_tokens)
    out = tmp_path / "shards"
    argv = ["--documents", str(sample_documents[0]), "--vocab", str(directory)]
    assert examples.run([*argv, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bertkit examples: the released vocabulary at {directory} does not say")
    assert "pass --cased for a cased model" in err and not out.exists()
    assert examples.run([*argv, "--output", str(out), "--no-cased", *EXAMPLE_FLAGS]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["cased"] is False
    assert manifest["vocab"]["origin"] == {
        "kind": "released",
        "files": ["vocab.txt"],
        "cased_from": "--no-cased",
    }


def test_chain_with_a_released_vocabulary_trains_none(tmp_path, sample_tokens, capsys):
    (dump,) = (Path(__file__).resolve().parent.parent / "data" / "wikipedia").glob("*.bz2")
    directory = released(tmp_path / "bert", sample_tokens, do_lower_case=True)
    out = tmp_path / "chain"
    argv = ["--wikipedia", str(dump), "--vocab", str(directory), "--output", str(out)]
    assert chain.run([*argv, "--vocab-size", "100"]) == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: --vocab-size shapes the vocabulary the chain trains, and with --vocab "
        f"{directory} it trains none: drop one of them\n"
    )
    assert chain.run([*argv, *EXAMPLE_FLAGS]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["documents", "shards"]
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    assert (
        manifest["vocab"]["sha256"]
        == hashlib.sha256((directory / VOCAB_FILE).read_bytes()).hexdigest()
    )
    assert manifest["vocab"]["path"] == "../../bert"
    assert manifest["vocab"]["origin"]["kind"] == "released"
    assert "learn pieces" not in capsys.readouterr().err


def test_inspect_shows_a_released_directory(tmp_path, sample_tokens, capsys):
    directory = released(tmp_path / "bert", with_unused(sample_tokens, 3), do_lower_case=False)
    assert inspect.run([str(directory)]) == 0
    lines = capsys.readouterr().out.splitlines()
    digest = hashlib.sha256((directory / VOCAB_FILE).read_bytes()).hexdigest()
    assert lines[:4] == [
        f"vocabulary {directory} (a released BERT's: vocab.txt, tokenizer.json, "
        "tokenizer_config.json)",
        "size: 8,003 tokens (3 [unusedN])",
        "casing: cased (text kept as written), from tokenizer_config.json do_lower_case",
        f"vocab.txt sha256: {digest}",
    ]
    assert lines[5] == "special tokens: [PAD] 0, [UNK] 4, [CLS] 5, [SEP] 6, [MASK] 7"
    assert lines[-1] == (
        "checked: vocab.txt has no empty line, no token twice and BERT's special tokens; "
        "tokenizer.json is BERT's WordPiece over the same tokens and ids"
    )


def test_help_names_the_casing_flags(capsys):
    with pytest.raises(SystemExit):
        examples.run(["--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "--cased, --no-cased" in text and "a released BERT's" in text


def test_train_reads_a_moved_released_vocabulary_with_the_manifest_s_casing(
    tmp_path, sample_documents, sample_sentences, sample_tokens, capsys
):
    """Shards of a vocab.txt alone (--no-cased, recorded in the manifest); the directory
    moves, `bertkit train --vocab NEW --masking dynamic` loads it with the recorded casing,
    and its checkpoints record the vocab.txt's sha256."""
    import torch

    from bertkit import cli

    directory = write_lines(tmp_path / "google", sample_tokens)
    shards = tmp_path / "shards"
    argv = ["--documents", str(sample_documents[0]), "--vocab", str(directory), "--no-cased"]
    assert examples.run([*argv, "--output", str(shards), "--masking", "none", *EXAMPLE_FLAGS]) == 0
    moved = directory.rename(tmp_path / "moved")
    run = tmp_path / "run"
    train = ["train", "--shards", str(shards), "--output", str(run), "--model", "tiny"]
    train += ["--max-steps", "1", "--micro-batch-size", "4", "--device", "cpu"]
    with pytest.raises(SystemExit) as exit_:
        cli.main(train)
    assert exit_.value.code == 2
    assert f"cannot read the vocabulary at {directory}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main([*train, "--vocab", str(moved)])
    assert exit_.value.code in (0, None)
    (checkpoint,) = (run / "checkpoints").glob("step-*.pt")
    record = torch.load(checkpoint, map_location="cpu", weights_only=True)["vocab"]
    assert record["sha256"] == hashlib.sha256((moved / VOCAB_FILE).read_bytes()).hexdigest()
    assert record["cased"] is False
    capsys.readouterr()

    # export-hf: the released directory's own files, none made up; transformers on the
    # export tokenizes as on the original directory told the run's casing.
    sentences = sample_sentences[:2000]
    exported = tmp_path / "hf"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export-hf", str(checkpoint), "--output", str(exported)])
    assert exit_.value.code in (0, None)
    assert sorted(p.name for p in exported.iterdir()) == [
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    assert (exported / VOCAB_FILE).read_bytes() == (moved / VOCAB_FILE).read_bytes()
    original = transformers.BertTokenizerFast.from_pretrained(str(moved), do_lower_case=True)
    want = original(sentences, add_special_tokens=False)["input_ids"]
    assert hf_ids(exported, sentences) == want
    # The same vocab.txt as transformers saves it: its tokenizer files copied byte for byte.
    original = released(tmp_path / "bert", sample_tokens, do_lower_case=True)
    again = tmp_path / "hf-again"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export-hf", str(checkpoint), "--output", str(again), "--vocab", str(original)])
    assert exit_.value.code in (0, None)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        assert (again / name).read_bytes() == (original / name).read_bytes(), name
    assert hf_ids(again, sentences) == want
