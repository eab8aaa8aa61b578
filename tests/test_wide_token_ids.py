"""Shards of a vocabulary over 65,536 tokens store 4-byte ids, and every reader follows the
width (issue 38 item 1: multilingual BERT's vocabulary has 119,547 entries).

The wide vocabulary is the sample vocabulary's 8,000 tokens with 62,000 generated ones put
between its special tokens and the rest, as a released directory (vocab.txt only): 70,000
tokens, every word of the text at an id of 62,005 or more, many past 65,535. The same
documents made into examples with the sample vocabulary (2-byte ids) and with the wide one
(4-byte ids) must hold the same tokens: id i there is id i + 62,000 here (i ≥ 5).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines import examples, inspect
from pipelines.io.vocabulary import load_vocab, vocab_txt_bytes
from schemas.batch import BatchField
from schemas.vocab import SPECIAL_TOKENS, VOCAB_FILE

torch = pytest.importorskip("torch")

from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source  # noqa: E402

PADDING = 62_000
FLAGS = ["--dupe-factor", "1", "--heldout-fraction", "0.05", "--masking", "none"]


def wide(sample_vocab, directory):
    tokens = load_vocab(str(sample_vocab)).tokens
    assert tokens[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    padding = [f"zzpad{n:05d}" for n in range(PADDING)]
    directory.mkdir()
    wide_tokens = [*SPECIAL_TOKENS, *padding, *tokens[len(SPECIAL_TOKENS) :]]
    (directory / VOCAB_FILE).write_bytes(vocab_txt_bytes(wide_tokens))
    assert len(wide_tokens) == 70_000
    return directory


def widened(ids: list[int]) -> list[int]:
    return [i if i < len(SPECIAL_TOKENS) else i + PADDING for i in ids]


def inspected(capsys, shards, split: str) -> list[dict]:
    capsys.readouterr()  # what ran before
    assert inspect.run([str(shards), "--split", split, "--json", "100000"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def loaded(shards, split: str) -> list[list[int]]:
    """Every sample's token ids as the trainer's loader collates them, padding cut off."""
    rows = []
    config = LoaderConfig(16, shuffle=False, drop_last=False)
    with PretrainingLoader(open_source(str(shards), split), config) as loader:
        for batch in loader.epoch(DataPosition()):
            ids, mask = batch[BatchField.INPUT_IDS], batch[BatchField.ATTENTION_MASK]
            rows += [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    return rows


def test_a_70000_token_vocabulary_makes_4_byte_shards_every_reader_follows(
    tmp_path, sample_documents, sample_vocab, capsys
):
    directory = wide(sample_vocab, tmp_path / "wide-vocab")
    narrow_out, wide_out = tmp_path / "narrow", tmp_path / "wide"
    argv = ["--documents", str(sample_documents[0]), *FLAGS]
    assert examples.run([*argv, "--vocab", str(sample_vocab), "--output", str(narrow_out)]) == 0
    assert (
        examples.run([*argv, "--vocab", str(directory), "--no-cased", "--output", str(wide_out)])
        == 0
    )
    narrow_manifest = json.loads((narrow_out / "manifest.json").read_text())
    wide_manifest = json.loads((wide_out / "manifest.json").read_text())
    assert (narrow_manifest["layout"]["id_width"], wide_manifest["layout"]["id_width"]) == (2, 4)
    assert wide_manifest["vocab"]["size"] == 70_000
    assert wide_manifest["counts"] == narrow_manifest["counts"]

    for split in ("train", "heldout"):
        narrow = inspected(capsys, narrow_out, split)
        shown = inspected(capsys, wide_out, split)
        assert len(shown) == len(narrow) > 0
        assert [s["input_ids"] for s in shown] == [widened(s["input_ids"]) for s in narrow]
        # The trainer's loader reads the same ids, in the same stored order.
        assert loaded(wide_out, split) == [s["input_ids"] for s in shown]
        assert loaded(narrow_out, split) == [s["input_ids"] for s in narrow]
    ids = np.concatenate([np.array(s["input_ids"]) for s in inspected(capsys, wide_out, "train")])
    assert ids.max() > 65_535 and (ids > 65_535).sum() > 10_000

    # --show writes the same tokens (the shards' vocabulary, found through the manifest).
    shown_text = {}
    for name, shards in (("narrow", narrow_out), ("wide", wide_out)):
        capsys.readouterr()
        assert inspect.run([str(shards), "--show", "20"]) == 0
        shown_text[name] = capsys.readouterr().out.splitlines()[1:]
    assert shown_text["wide"] == shown_text["narrow"] and len(shown_text["wide"]) == 60

    # export-parquet writes the same ids; the report reads the shards to its end.
    out = tmp_path / "wide.parquet"
    assert inspect.run([str(wide_out), "--split", "train", "--parquet", str(out)]) == 0
    table = pq.read_table(out, columns=["input_ids"]).column("input_ids").to_pylist()
    assert table == [s["input_ids"] for s in inspected(capsys, wide_out, "train")]
    report = tmp_path / "report.html"
    assert inspect.run([str(wide_out), "--report", str(report)]) == 0
    assert report.stat().st_size > 0
    capsys.readouterr()


def test_static_masks_of_a_wide_vocabulary_keep_their_labels(
    tmp_path, sample_documents, sample_vocab
):
    """Stored masks: the labels (the original ids, up to 69,999) are 4 bytes wide too."""
    directory = wide(sample_vocab, tmp_path / "wide-vocab")
    out = tmp_path / "wide-static"
    argv = ["--documents", str(sample_documents[0]), "--dupe-factor", "1"]
    assert examples.run([*argv, "--vocab", str(directory), "--no-cased", "--output", str(out)]) == 0
    labels = []
    with PretrainingLoader(open_source(str(out)), LoaderConfig(64, shuffle=False)) as loader:
        for batch in loader.epoch(DataPosition()):
            labels.append(batch[BatchField.MASKED_LABELS].flatten())
    labels = torch.cat(labels)
    assert int(labels.max()) > 65_535 and int(labels.max()) < 70_000


# slow: torchrun and two trainers; every reader of 4-byte shards is checked above in
# process.
@pytest.mark.slow
def test_two_processes_train_on_wide_shards_of_a_released_vocabulary(
    tmp_path, sample_documents, sample_vocab
):
    """torchrun, 2 Gloo processes: each rank loads the released vocabulary with the casing
    the manifest recorded (--masking dynamic draws from it) and reads 4-byte ids; one step
    at lr 0 leaves the same weights and held-out figures as one process."""
    import subprocess

    from schemas.checkpoint import CheckpointKey
    from tests.support.torchrun import torchrun_env, torchrun_trainer
    from tests.test_train import metrics
    from trainer import train
    from trainer.run.checkpoints import latest_checkpoint

    directory = wide(sample_vocab, tmp_path / "wide-vocab")
    shards = tmp_path / "wide"
    argv = ["--documents", str(sample_documents[0]), "--vocab", str(directory), "--no-cased"]
    assert examples.run([*argv, *FLAGS, "--output", str(shards)]) == 0
    flags = ["--model", "tiny", "--micro-batch-size", "8", "--max-steps", "1"]
    flags += ["--warmup-steps", "1", "--eval-batches", "2", "--num-workers", "0"]
    flags += ["--no-tensorboard", "--masking", "dynamic", "--shards", str(shards)]
    one, two = tmp_path / "one", tmp_path / "two"
    assert train.run([*flags, "--output", str(one)]) == 0
    command = [*torchrun_trainer(2), *flags, "--output", str(two)]
    done = subprocess.run(command, env=torchrun_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    a = torch.load(latest_checkpoint(one / "checkpoints"), weights_only=True)
    b = torch.load(latest_checkpoint(two / "checkpoints"), weights_only=True)
    assert b[CheckpointKey.WORLD_SIZE] == 2
    assert a[CheckpointKey.MODEL_CONFIG]["vocab_size"] == 70_000
    assert a[CheckpointKey.VOCAB]["sha256"] == b[CheckpointKey.VOCAB]["sha256"]
    for name, tensor in a[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, b[CheckpointKey.MODEL][name]), name
    got, want = metrics(two, "eval")[1], metrics(one, "eval")[1]
    assert got["sequences"] == want["sequences"] == 16
    assert got["mlm_loss"] == pytest.approx(want["mlm_loss"], rel=1e-6)
