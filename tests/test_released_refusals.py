"""What `bertkit train --init-checkpoint DIR` refuses of a released BERT, in one line before
any work, and what it says instead of a traceback or a misleading line: a pickle in its
weights, a directory without config.json, a directory on object storage (moto), and a
--resume naming another --init-checkpoint."""

from __future__ import annotations

import os

import torch
import transformers

from tests.support.s3_bucket import bucket_fixture
from tests.test_released_start import FLAGS, released
from trainer import train

BUCKET = "released-models"
s3 = bucket_fixture(BUCKET)


def _refused(capsys, *argv: str) -> str:
    """train.run's exit code 2 and its one error line."""
    capsys.readouterr()
    assert train.run(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("bertkit train: error: ")
    return lines[-1].removeprefix("bertkit train: error: ")


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
