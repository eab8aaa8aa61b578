"""What `bertkit train --init-checkpoint DIR` refuses of a released BERT, in one line before
any work, and what it says instead of a traceback or a misleading line: a pickle in its
weights."""

from __future__ import annotations

import os

import torch
import transformers

from tests.test_released_start import FLAGS, released
from trainer import train


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
