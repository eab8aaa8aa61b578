"""The model's positions follow the shards: `examples --max-seq-length 1024` shards train
as they are (--max-position-embeddings, default the preset's 512 raised to the shards'
length); an explicit value under it is refused, and a checkpoint's model keeps its own."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from pipelines.beam.shards import write_shard
from schemas.checkpoint import CheckpointKey
from schemas.examples import SHARDS_MANIFEST_NAME, PretrainingExample, sample_key
from schemas.shards import SequenceOutput, ShardsManifest, SplitShards
from trainer import train
from trainer.run.checkpoints import latest_checkpoint

LENGTH = 1024


def write_long_shards(root: Path, samples: int = 32) -> Path:
    """root/shards: one seq1024 train shard of `samples` sequences of 600 tokens, each with
    a prediction at position 550 (past the preset's 512 positions)."""
    shards = root / "shards"
    (shards / "seq1024" / "train").mkdir(parents=True)
    records = []
    for index in range(samples):
        ids = np.array([2, *[5 + (index + i) % 90 for i in range(597)], 3, 3], dtype=np.uint16)
        example = PretrainingExample(
            input_ids=ids,
            segment_a_length=300,
            masked_lm_positions=np.array([550], dtype=np.uint16),
            masked_lm_ids=np.array([100 + index % 50], dtype=np.uint16),
            next_sentence_label=index % 2,
            doc_a=f"d{index}",
            doc_b=f"d{index}",
            dupe_pass=0,
        )
        records.append((sample_key(index), example.encode(2)))
    info = write_shard(str(shards), "seq1024/train/shard-000000.tar", records)
    manifest = ShardsManifest(
        vocab={"path": "vocab", "sha256": "ab" * 32, "size": 200, "cased": False},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={
            f"seq{LENGTH}": SequenceOutput(
                LENGTH,
                154,
                {"train": SplitShards(samples, 0, 0, 0, [info])},
            )
        },
    )
    (shards / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return shards


def flags(shards: Path, output: Path, *extra: str) -> list[str]:
    return [
        "--model",
        "tiny",
        "--micro-batch-size",
        "4",
        "--max-steps",
        "2",
        "--num-workers",
        "0",
        "--no-tensorboard",
        "--shards",
        str(shards),
        "--output",
        str(output),
        *extra,
    ]


def positions(run_dir: Path) -> int:
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    return checkpoint[CheckpointKey.MODEL_CONFIG]["max_position_embeddings"]


def test_the_models_positions_follow_the_shards(tmp_path, caplog, capsys):
    shards = write_long_shards(tmp_path)
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run(flags(shards, run)) == 0
    assert positions(run) == LENGTH
    assert (
        f"{shards}/manifest.json: sequences of up to 1024 tokens, more than the preset's 512 "
        "positions: the model gets 1024 (--max-position-embeddings)"
    ) in [record.getMessage() for record in caplog.records]
    # An explicit value: taken when it is long enough, refused in one line when it is not.
    more = tmp_path / "more"
    assert train.run(flags(shards, more, "--max-position-embeddings", "2048")) == 0
    assert positions(more) == 2048
    capsys.readouterr()
    short = tmp_path / "short"
    assert train.run(flags(shards, short, "--max-position-embeddings", "512")) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bertkit train: error: --max-position-embeddings 512 is less than the shards' sequence "
        f"length 1024 ({shards}/manifest.json): pass at least 1024, or leave it out (default: "
        "512, or the shards' length where longer)"
    ]


def test_a_checkpoints_model_keeps_its_positions(tmp_path, capsys):
    """--init-checkpoint and --resume take the checkpoint's positions (not the default's);
    a flag that says otherwise is refused in one line."""
    shards = write_long_shards(tmp_path)
    first = tmp_path / "first"
    assert train.run(flags(shards, first, "--max-position-embeddings", "2048")) == 0
    init = ["--init-checkpoint", str(first / "checkpoints")]
    phase2 = tmp_path / "phase2"
    assert train.run(flags(shards, phase2, *init)) == 0
    assert positions(phase2) == 2048  # the checkpoint's, not the default's 1024
    capsys.readouterr()
    refused = tmp_path / "refused"
    assert train.run(flags(shards, refused, *init, "--max-position-embeddings", "1024")) == 2
    message = (
        "bertkit train: error: --max-position-embeddings 1024: the checkpoint's model has "
        "2048 positions, and a model started from a checkpoint keeps its own; leave the flag out"
    )
    assert capsys.readouterr().err.splitlines() == [message]
    resumed = ["--max-steps", "3", "--resume", "--max-position-embeddings", "1024"]
    assert train.run(flags(shards, first, *resumed)) == 2
    assert capsys.readouterr().err.splitlines() == [message]
