"""A released BERT directory with tokenizer.json and no vocab.txt, as transformers 5 saves
one (issue 38 item 1): its tokens are tokenizer.json's WordPiece vocab in id order, its
sha256 the vocab.txt's those tokens make (what transformers 4 saved), its tokens
BertTokenizerFast's on every sentence of the real sample (that test is
tests/test_released_vocab.py's, over both kinds of directory); examples, inspect, train
--init-checkpoint and export-hf take it; other models and broken ids are refused in one line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models

from bertkit import cli
from pipelines.io.vocabulary import VocabError, load_vocab, vocab_txt_bytes
from schemas.vocab import SPECIAL_TOKENS, VOCAB_FILE
from tests.support.released_dirs import (  # noqa: F401 (two fixtures)
    EXAMPLE_FLAGS,
    SAVED,
    hf_ids,
    sample_sentences_fixture,
    sample_tokens_fixture,
    saved,
    shard_digests,
)

transformers = pytest.importorskip("transformers")


def test_without_tokenizer_config_json_the_normalizer_says_the_casing(tmp_path):
    """tokenizer.json alone: its normalizer's `lowercase` is the casing. transformers'
    BertTokenizerFast there lower-cases whatever it says (its do_lower_case default): the one
    place bertkit's tokens are not transformers', on purpose (the file says cased)."""
    tokens = [*SPECIAL_TOKENS, "the", "cat", "##s", "The"]
    directory = saved(tmp_path / "bert", tokens, do_lower_case=False)
    (directory / "tokenizer_config.json").unlink()
    vocab = load_vocab(str(directory))
    assert (vocab.cased, vocab.cased_from) == (True, "tokenizer.json normalizer")
    assert vocab.origin()["files"] == ["tokenizer.json"]
    assert vocab.tokenizer.encode("The cats", add_special_tokens=False).ids == [8, 6, 7]
    assert hf_ids(directory, ["The cats"]) == [[5, 6, 7]]


TOKENS = [*SPECIAL_TOKENS, "the", "cat", "##s"]
# A tokenizer with `add_tokens`' tokens: not damaged, not supported; the ways around it.
ADDED_UNSUPPORTED = (
    "tokens added with `tokenizer.add_tokens` are not supported (a released tokenizer's added "
    "tokens must be its vocabulary's tokens with their ids); use the tokenizer files as "
    "released, before the tokens were added (the model's extra embedding rows then go "
    "unused), or make them vocabulary tokens: write them into vocab.txt (over [unusedN] "
    "lines, or appended in id order) and save the tokenizer again from that file"
)


def broken(tmp_path: Path, change) -> Path:
    """A saved directory of TOKENS whose tokenizer.json `change(json)` edits."""
    directory = saved(tmp_path / "bert", TOKENS, do_lower_case=True)
    config = json.loads((directory / "tokenizer.json").read_text())
    change(config)
    (directory / "tokenizer.json").write_text(json.dumps(config))
    return directory


def _rename(config: dict, old: str, new: str) -> None:
    config["model"]["vocab"] = {
        new if t == old else t: i for t, i in config["model"]["vocab"].items()
    }
    for token in config["added_tokens"]:
        token["content"] = new if token["content"] == old else token["content"]


def _bpe(config: dict) -> None:
    bpe = json.loads(Tokenizer(models.BPE({t: i for i, t in enumerate(TOKENS)}, [])).to_str())
    config["model"] = bpe["model"]


def _unigram(config: dict) -> None:
    unigram = models.Unigram([(t, -1.0) for t in TOKENS], unk_id=1, byte_fallback=False)
    config["model"] = json.loads(Tokenizer(unigram).to_str())["model"]


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            _bpe,
            " is a BPE tokenizer, not BERT's WordPiece: bertkit makes examples with BERT's "
            "WordPiece vocabulary only (give a BERT model's directory)",
        ),
        (
            _unigram,
            " is a Unigram tokenizer, not BERT's WordPiece: bertkit makes examples with "
            "BERT's WordPiece vocabulary only (give a BERT model's directory)",
        ),
        (
            lambda c: c["model"]["vocab"].update({"cat": 9}),
            ": its model's vocab has no token with id 6 (8 tokens, ids up to 9); ids must "
            "run 0..7 with no gap",
        ),
        (
            lambda c: c["model"]["vocab"].update({"cat": 5}),
            ": id 5 is given to 'the' and to 'cat'; a token's id is its row in the model's "
            "embeddings, so each id must be one token's",
        ),
        (
            lambda c: c["added_tokens"][1].update({"id": 6}),
            ": the added token '[UNK]' has id 6, where the model's vocab has 'cat'; bertkit "
            "takes a vocabulary whose added tokens are its own (restore the released file)",
        ),
        (
            lambda c: c["added_tokens"].append({"id": 8, "content": "<extra>"}),
            f": the added token '<extra>' (id 8) is outside the model's WordPiece vocabulary "
            f"of 8 tokens: {ADDED_UNSUPPORTED}",
        ),
        (
            lambda c: _rename(c, "cat", "c\nat"),
            ": the token with id 6 is 'c\\nat', which cannot be a line of a vocab.txt (one "
            "token per line): not a vocabulary bertkit (or BERT) can use",
        ),
        (
            lambda c: _rename(c, "[MASK]", "[MSK]"),
            " lacks [MASK] (8 tokens): bertkit needs BERT's special tokens [PAD] [UNK] [CLS] "
            "[SEP] [MASK] in the vocabulary",
        ),
    ],
    ids=["bpe", "unigram", "gap", "id-twice", "added-elsewhere", "added-extra", "newline", "mask"],
)
def test_a_tokenizer_json_bertkit_cannot_use_is_one_line_naming_it(tmp_path, change, problem):
    directory = broken(tmp_path, change)
    with pytest.raises(VocabError) as refused:
        load_vocab(str(directory))
    assert str(refused.value) == f"{directory / 'tokenizer.json'}{problem}"


@pytest.mark.parametrize("with_vocab_txt", [False, True], ids=["transformers-5", "transformers-4"])
def test_tokens_added_with_add_tokens_are_unsupported_not_damaged(tmp_path, with_vocab_txt):
    """`tokenizer.add_tokens` puts words past the vocabulary, in tokenizer.json alone (a
    transformers 4 save keeps vocab.txt without them): said as unsupported, with the ways
    around it, not as a file to restore."""
    directory = saved(tmp_path / "bert", TOKENS, do_lower_case=True)
    hf = transformers.AutoTokenizer.from_pretrained(str(directory))
    hf.add_tokens(["wonderland", "[ENT]"])
    hf.save_pretrained(str(directory))
    if with_vocab_txt:
        (directory / "vocab.txt").write_bytes(vocab_txt_bytes(TOKENS))
    with pytest.raises(VocabError) as refused:
        load_vocab(str(directory))
    assert str(refused.value) == (
        f"{directory / 'tokenizer.json'}: the added token 'wonderland' (id 8) is outside the model's WordPiece "
        f"vocabulary of 8 tokens: {ADDED_UNSUPPORTED}"
    )


def test_the_released_model_check_reads_tokenizer_json(tmp_path):
    """trainer/released.py's check: a model directory with tokenizer.json alone has the
    sha256 of the vocab.txt its tokens make, and a difference names the first id."""
    from trainer.released import ReleasedModelError, check_vocabulary, read_released

    directory = tmp_path / "model"
    sizes = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}
    config = transformers.BertConfig(vocab_size=8, intermediate_size=8, **sizes)
    transformers.BertForMaskedLM(config).save_pretrained(directory)
    saved(directory, TOKENS, do_lower_case=True)
    released = read_released(str(directory))
    assert "vocab.txt" not in released.files
    check_vocabulary(released, hashlib.sha256(vocab_txt_bytes(TOKENS)).hexdigest(), None)
    other = [*TOKENS[:6], "dog", "##s"]
    shards = saved(tmp_path / "shards-vocab", other, do_lower_case=True)  # tokenizer.json too
    with pytest.raises(ReleasedModelError) as caught:
        check_vocabulary(released, hashlib.sha256(vocab_txt_bytes(other)).hexdigest(), str(shards))
    assert str(caught.value) == (
        f"{directory}/tokenizer.json differs from the shards' vocabulary at id 6: the model's "
        f"token is 'cat', the shards' 'dog': make the shards with the model's vocabulary "
        f"(`bertkit examples --vocab {directory}`)"
    )


# --------------------------------------------------------------------------- the commands


def test_examples_and_inspect_on_the_cli(tmp_path, sample_documents, sample_tokens, capsys):
    """`bertkit examples --vocab DIR` (tokenizer.json alone) makes the shards the same tokens
    in a vocab.txt make, byte for byte, and records that vocab.txt's sha256."""
    directory = saved(tmp_path / "bert", sample_tokens, do_lower_case=True)
    google = tmp_path / "bert-google"
    argv = ["examples", "--documents", str(sample_documents[0]), *EXAMPLE_FLAGS]
    argv += ["--masking", "none"]  # for the dynamic masking of `train --vocab` below
    for vocab, out in ((google, "google-shards"), (directory, "shards")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(
                [*argv, "--vocab", str(vocab), "--output", str(tmp_path / out)]
                + (["--no-cased"] if vocab == google else [])
            )
        assert exit_.value.code in (0, None)
    shards = tmp_path / "shards"
    assert shard_digests(shards) == shard_digests(tmp_path / "google-shards")
    assert len(shard_digests(shards)) == 2
    manifest = json.loads((shards / "manifest.json").read_text())
    assert manifest["vocab"] == {
        "path": "../bert",
        "sha256": hashlib.sha256((google / VOCAB_FILE).read_bytes()).hexdigest(),
        "size": 8000,
        "cased": False,
        "origin": {
            "kind": "released",
            "files": SAVED,
            "cased_from": "tokenizer_config.json do_lower_case",
        },
    }
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["inspect", str(directory)])
    assert exit_.value.code in (0, None)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        f"vocabulary {directory} (a released BERT's: tokenizer.json, tokenizer_config.json)",
        "size: 8,000 tokens (0 [unusedN])",
        "casing: uncased (lower-cased, accents stripped, as BERT uncased), from "
        "tokenizer_config.json do_lower_case",
        f"vocab.txt sha256: {manifest['vocab']['sha256']} (the vocab.txt its tokens make)",
        "tokenizer.json sha256: "
        + hashlib.sha256((directory / "tokenizer.json").read_bytes()).hexdigest(),
    ]
    assert lines[-1] == (
        "checked: tokenizer.json is BERT's WordPiece, its ids 0..7,999 once each, its added "
        "tokens its own, BERT's special tokens in it"
    )

    # The directory moves: `bertkit train --vocab NEW` masks with it (dynamic masking), checked
    # against the manifest's sha256, and its checkpoint records that sha256.
    moved = directory.rename(tmp_path / "moved")
    run = tmp_path / "run"
    train = ["train", "--shards", str(shards), "--output", str(run), "--model", "tiny"]
    train += ["--max-steps", "1", "--micro-batch-size", "4", "--device", "cpu"]
    with pytest.raises(SystemExit) as exit_:
        cli.main([*train, "--vocab", str(moved)])
    assert exit_.value.code in (0, None), capsys.readouterr().err
    (checkpoint,) = (run / "checkpoints").glob("step-*.pt")
    record = torch.load(checkpoint, map_location="cpu", weights_only=True)["vocab"]
    assert (record["sha256"], record["path"]) == (manifest["vocab"]["sha256"], "../../moved")
    capsys.readouterr()


def test_chain_with_it_trains_no_vocabulary(tmp_path, sample_tokens, capsys):
    (dump,) = (Path(__file__).resolve().parent.parent / "data" / "wikipedia").glob("*.bz2")
    directory = saved(tmp_path / "bert", sample_tokens, do_lower_case=True)
    out = tmp_path / "chain"
    argv = ["chain", "--wikipedia", str(dump), "--vocab", str(directory), "--output", str(out)]
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, *EXAMPLE_FLAGS])
    assert exit_.value.code in (0, None), capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["documents", "shards"]
    vocab = json.loads((out / "shards" / "manifest.json").read_text())["vocab"]
    assert vocab["sha256"] == hashlib.sha256(vocab_txt_bytes(sample_tokens)).hexdigest()
    assert (vocab["path"], vocab["origin"]["files"]) == ("../../bert", SAVED)
    capsys.readouterr()


def test_train_from_a_saved_model_and_export(
    tmp_path, sample_documents, sample_sentences, sample_tokens, capsys
):
    """A transformers BertForPreTraining saved with save_pretrained (tokenizer.json alone):
    examples with it as --vocab, `bertkit train --init-checkpoint DIR` 1 step on those
    shards, export-hf: its tokenizer files byte for byte, plus the vocab.txt whose sha256
    the checkpoint records; transformers on the export gives the original's ids."""
    model = tmp_path / "bert"
    torch.manual_seed(3)
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
    config = transformers.BertConfig(
        vocab_size=8000, intermediate_size=24, max_position_embeddings=128, **sizes
    )
    transformers.BertForPreTraining(config).save_pretrained(model)
    saved(model, sample_tokens, do_lower_case=True)
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors", *SAVED]
    shards, run = tmp_path / "shards", tmp_path / "run"
    commands = [
        ["examples", "--documents", str(sample_documents[0]), "--vocab", str(model)],
        ["train", "--shards", str(shards), "--init-checkpoint", str(model), "--max-steps", "1"],
    ]
    commands[0] += [*EXAMPLE_FLAGS, "--output", str(shards)]
    commands[1] += ["--micro-batch-size", "4", "--device", "cpu", "--num-workers", "0"]
    commands[1] += ["--no-tensorboard", "--output", str(run)]
    for argv in commands:
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code in (0, None), capsys.readouterr().err
    (checkpoint,) = (run / "checkpoints").glob("step-*.pt")
    saved_checkpoint = torch.load(checkpoint, map_location="cpu", weights_only=True)
    digest = hashlib.sha256(vocab_txt_bytes(sample_tokens)).hexdigest()
    assert saved_checkpoint["vocab"]["sha256"] == digest
    assert sorted(saved_checkpoint["start"]["tokenizer_files"]) == SAVED

    exported = tmp_path / "hf"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export-hf", str(checkpoint), "--output", str(exported)])
    assert exit_.value.code in (0, None), capsys.readouterr().err
    assert sorted(p.name for p in exported.iterdir()) == [
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        *SAVED,
        "vocab.txt",
    ]
    for name in SAVED:
        assert (exported / name).read_bytes() == (model / name).read_bytes(), name
    assert hashlib.sha256((exported / VOCAB_FILE).read_bytes()).hexdigest() == digest
    sentences = sample_sentences[:2000]
    assert hf_ids(exported, sentences) == hf_ids(model, sentences)
    assert transformers.BertForPreTraining.from_pretrained(str(exported)).config.vocab_size == 8000
    capsys.readouterr()
