"""What `bertkit train --init-checkpoint DIR` refuses of a released BERT, in one line before
any work, and what it says instead of a traceback or a misleading line: a tokenizer that
cuts text otherwise than the shards' (accents), sentence pairs for a model of one token
type, a pickle in its weights, a directory without config.json, a directory on object
storage (moto), and a --resume naming another --init-checkpoint. A mix whose sources differ
in accent stripping is refused too."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch
import transformers

from pipelines.io.shards.source import open_source
from schemas.shards import FULL_SENTENCES
from tests.support.s3_bucket import bucket_fixture
from tests.test_released_start import FLAGS, released
from trainer import train
from trainer.released import ReleasedModelError, check_shards, read_released
from trainer.source import check_mix_sources

BUCKET = "released-models"
s3 = bucket_fixture(BUCKET)

FIX = "make the shards with `bertkit examples --vocab {0}`, which takes its accent stripping"
CUT = "its tokenizer, which an export ships, does not cut text as the shards were cut"


def _refused(capsys, *argv: str) -> str:
    """train.run's exit code 2 and its one error line."""
    capsys.readouterr()
    assert train.run(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("bertkit train: error: ")
    return lines[-1].removeprefix("bertkit train: error: ")


def _with_strip_accents(source, value: bool):
    """`source` as if its shards had been made by a released tokenizer that sets
    strip_accents to `value` (what the manifest's vocab origin records)."""
    assert source.manifest is not None
    origin = {"kind": "released", "files": ["vocab.txt"], "cased_from": "--no-cased"}
    vocab = {**source.manifest.vocab, "origin": {**origin, "strip_accents": value}}
    return replace(source, manifest=replace(source.manifest, vocab=vocab))


def test_accent_stripping_must_be_the_shards(sample_shards, sample_vocab, tmp_path):
    """The sample's shards are uncased, so they strip accents; a released uncased tokenizer
    with strip_accents false keeps them, and the other way round."""
    source = open_source(str(sample_shards))
    original = released(tmp_path, sample_vocab)
    model = read_released(str(original))
    check_shards(model, source, str(sample_vocab))  # uncased, strip_accents unset: agree
    with pytest.raises(ReleasedModelError) as caught:
        check_shards(model, _with_strip_accents(source, False), str(sample_vocab))
    assert str(caught.value) == (
        f"{original} strips accents (uncased, its strip_accents unset), the shards were made "
        f"keeping them (their manifest): {CUT}; {FIX.format(original)}"
    )
    config_file = original / "tokenizer_config.json"
    config_file.write_text(
        json.dumps({**json.loads(config_file.read_text()), "strip_accents": False})
    )
    check_shards(model, _with_strip_accents(source, False), str(sample_vocab))
    with pytest.raises(ReleasedModelError) as caught:
        check_shards(model, source, str(sample_vocab))
    assert str(caught.value) == (
        f"{original} keeps accents (its tokenizer_config.json strip_accents), the shards were "
        f"made stripping them (their manifest): {CUT}; {FIX.format(original)}"
    )


def test_a_mix_of_sources_stripping_accents_and_not_is_refused(sample_shards):
    source = open_source(str(sample_shards))
    keeping = _with_strip_accents(source, False)
    with pytest.raises(ValueError) as caught:
        check_mix_sources([source, keeping], ["wiki", "books"])
    assert str(caught.value) == (
        f"--shards source books ({sample_shards / 'manifest.json'}) differs from wiki: "
        "vocabulary strip_accents False, wiki True. The sources of a mix share one "
        "vocabulary, sequence length and recipe: build them with the same `bertkit examples` "
        "flags and vocabulary"
    )
    check_mix_sources([keeping, _with_strip_accents(source, False)], ["wiki", "books"])


def test_pairs_need_two_token_types(sample_shards, sample_vocab, tmp_path):
    """Segment B of a pair is token type 1, which a type_vocab_size 1 model cannot embed
    (it crashed at the first step), whatever the objective; full sentences are all type 0."""
    original = released(tmp_path, sample_vocab, type_vocab_size=1)
    model = read_released(str(original))
    source = open_source(str(sample_shards))
    with pytest.raises(ReleasedModelError) as caught:
        check_shards(model, source, str(sample_vocab))
    assert str(caught.value) == (
        f"{original}/config.json has type_vocab_size 1, and {sample_shards / 'manifest.json'} "
        "holds sentence pairs, whose segment B is token type 1, which a model of 1 token type "
        "cannot embed (under --objective mlm too): make full-sentence shards for it (`bertkit "
        "examples --sequences full-sentences`, token type 0 throughout), which train with "
        "--objective mlm"
    )
    assert source.manifest is not None
    full = replace(source, manifest=replace(source.manifest, sequences=FULL_SENTENCES))
    check_shards(model, full, str(sample_vocab))


def test_a_pickle_in_the_weights_is_refused_never_unpickled(
    sample_shards, sample_vocab, tmp_path, capsys
):
    original = released(tmp_path, sample_vocab)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    tensors = transformers.BertForPreTraining.from_pretrained(original).state_dict()
    torch.save({**tensors, "extra": Payload()}, original / "pytorch_model.bin")
    (original / "model.safetensors").unlink()
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original), *FLAGS]
    assert _refused(capsys, *args, "--output", str(tmp_path / "run")) == (
        f"{original}/pytorch_model.bin holds objects other than tensors "
        f"({os.system.__module__}.system), so it is refused, never unpickled: save the model as "
        "safetensors (save_pretrained writes model.safetensors), or download the "
        "model.safetensors it was released with"
    )
    assert not marker.exists()
    # Bytes that are no torch file at all: torch's own reason, in one line.
    (original / "pytorch_model.bin").write_bytes(b"hello world" * 10)
    assert _refused(capsys, *args, "--output", str(tmp_path / "run")) == (
        f"{original}/pytorch_model.bin cannot be read (KeyError: 101); download it again, "
        "or save the model with save_pretrained"
    )


def test_a_directory_without_config_json(sample_shards, sample_vocab, tmp_path, capsys):
    """A download cut short: weights and tokenizer, no config.json. It was called a
    directory without a checkpoints `latest`."""
    original = released(tmp_path, sample_vocab)
    (original / "config.json").unlink()
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original), *FLAGS]
    assert _refused(capsys, *args, "--output", str(tmp_path / "run")) == (
        f"{original} holds model.safetensors and 3 more of a model's files but no config.json, "
        "which a released model's directory needs (bert_config.json for Google's TF "
        "checkpoint): a download cut short? Put the model's config.json there"
    )


def test_a_released_model_on_object_storage_must_be_downloaded(
    s3, sample_shards, sample_vocab, tmp_path, capsys
):
    original = released(tmp_path, sample_vocab)
    for path in original.iterdir():
        s3.upload_file(str(path), BUCKET, f"bert/{path.name}")
    url = f"s3://{BUCKET}/bert"
    args = ["--shards", str(sample_shards), "--init-checkpoint", url, *FLAGS]
    assert _refused(capsys, *args, "--output", str(tmp_path / "run")) == (
        f"--init-checkpoint {url} holds config.json: a released model's directory, which must "
        f"be local: download it first (`aws s3 cp --recursive {url} DIR`), then pass "
        "--init-checkpoint DIR"
    )
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_resume_refuses_another_init_checkpoint(sample_shards, sample_vocab, tmp_path, capsys):
    """--resume goes on from the run's own checkpoint: another --init-checkpoint was
    ignored without a word. The same one, as a requeue repeats the command, goes on."""
    first = released(tmp_path, sample_vocab)
    other = released(tmp_path, sample_vocab, name="other")
    run = tmp_path / "run"
    args = ["--shards", str(sample_shards), *FLAGS, "--output", str(run)]
    assert train.run([*args, "--init-checkpoint", str(first), "--stop-at-step", "0"]) == 0
    assert _refused(capsys, *args, "--init-checkpoint", str(other), "--resume") == (
        f"--resume: {run / 'checkpoints' / 'step-00000000.pt'} is of a run that started from "
        f"--init-checkpoint {first}, and --init-checkpoint is {other}: a resume goes on from "
        "the run's own checkpoint; leave --init-checkpoint out, or start a new run (another "
        f"--output) from {other}"
    )
    fresh = tmp_path / "fresh"
    flags = ["--shards", str(sample_shards), *FLAGS, "--output", str(fresh), "--model", "tiny"]
    assert train.run([*flags, "--stop-at-step", "0"]) == 0
    assert _refused(capsys, *flags, "--init-checkpoint", str(first), "--resume") == (
        f"--resume: {fresh / 'checkpoints' / 'step-00000000.pt'} is of a run that started from "
        f"a fresh model (no --init-checkpoint), and --init-checkpoint is {first}: a resume goes "
        "on from the run's own checkpoint; leave --init-checkpoint out, or start a new run "
        f"(another --output) from {first}"
    )
    assert (
        train.run([*args, "--init-checkpoint", str(first), "--resume", "--stop-at-step", "1"]) == 0
    )


def test_train_checks_the_shards_before_any_work(sample_shards, sample_vocab, tmp_path, capsys):
    """`bertkit train` runs check_shards: the refusals above, from the command line, exit 2,
    before any checkpoint (a type_vocab_size 1 model crashed at the first step)."""
    single = released(tmp_path, sample_vocab, type_vocab_size=1)
    run = tmp_path / "run"
    args = ["--shards", str(sample_shards), *FLAGS, "--output", str(run)]
    error = _refused(capsys, *args, "--init-checkpoint", str(single), "--objective", "mlm")
    assert error.startswith(f"{single}/config.json has type_vocab_size 1, and ")
    assert not (run / "checkpoints").exists()
    keeping = released(tmp_path, sample_vocab, name="keeping")
    config_file = keeping / "tokenizer_config.json"
    config_file.write_text(
        json.dumps({**json.loads(config_file.read_text()), "strip_accents": False})
    )
    assert _refused(capsys, *args, "--init-checkpoint", str(keeping)) == (
        f"{keeping} keeps accents (its tokenizer_config.json strip_accents), the shards were "
        f"made stripping them (their manifest): {CUT}; {FIX.format(keeping)}"
    )
    assert not (run / "checkpoints").exists()
