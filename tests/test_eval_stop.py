"""A stop signal during held-out evaluation is honoured at the next batch: a preempted run
checkpoints and exits within seconds, not after the whole split (--eval-batches 0 read
all of it first; a scheduler's grace period of 30 s ran out before the checkpoint)."""

from __future__ import annotations

import json
import logging
import os
import signal

import pytest
import torch

from trainer import distributed, train
from trainer.data import open_source
from trainer.evaluate import EvaluationStopped, evaluate
from trainer.model import BertForPreTraining, config_for
from trainer.preemption import PREEMPTED_EXIT_CODE
from trainer.run.checkpoints import latest_checkpoint
from trainer.source import heldout_source


def test_evaluation_leaves_off_at_the_batch_after_the_stop(sample_shards) -> None:
    heldout = heldout_source(open_source(str(sample_shards), "train", 128))
    assert heldout is not None
    torch.manual_seed(0)
    model = BertForPreTraining(config_for("tiny", 8000))
    env = distributed.setup("cpu")
    asked = []

    def stop() -> bool:  # a signal noted while the second batch ran
        asked.append(True)
        return len(asked) > 2

    with pytest.raises(EvaluationStopped, match=r"^left off after 16 held-out sequences$"):
        evaluate(model, heldout, env, 8, stop=stop)
    assert len(asked) == 3 and model.training  # put back in training mode
    assert evaluate(model, heldout, env, 8, max_sequences=16, stop=lambda: False).sequences == 16


def test_a_run_stopped_during_evaluation_checkpoints_that_step_and_exits_75(
    sample_shards, tmp_path, monkeypatch, caplog
) -> None:
    real = train.evaluate

    def signalled(*args, **kwargs):  # SIGTERM lands as the evaluation starts
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "evaluate", signalled)
    out = tmp_path / "run"
    flags = ["--model", "tiny", "--micro-batch-size", "8", "--max-steps", "5", "--eval-every"]
    flags += ["2", "--eval-batches", "0", "--num-workers", "0", "--no-tensorboard"]
    with caplog.at_level(logging.WARNING, logger="bertkit.train"):
        code = train.run([*flags, "--shards", str(sample_shards), "--output", str(out)])
    assert code == PREEMPTED_EXIT_CODE
    assert "step 2 held-out evaluation left off after 0 held-out sequences: stopping" in (
        caplog.text
    )
    assert latest_checkpoint(out / "checkpoints").name == "step-00000002.pt"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows] == [("train", 2)]  # no eval row


def test_ctrl_c_inside_a_checkpoint_write_is_an_interruption(
    sample_shards, tmp_path, monkeypatch, capsys
) -> None:
    """torch.save's zip writer turns a KeyboardInterrupt in its write into a RuntimeError
    ("unexpected pos"): that was a traceback and exit 1."""

    def interrupted_write(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos") from (
                interrupt
            )

    monkeypatch.setattr(train, "save_checkpoint", interrupted_write)
    # Ctrl-C as a terminal's foreground job gets it (CI's background job ignores SIGINT).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    flags = ["--model", "tiny", "--micro-batch-size", "8", "--max-steps", "3"]
    flags += ["--checkpoint-every", "2", "--num-workers", "0", "--no-tensorboard"]
    out = tmp_path / "run"
    try:
        code = train.run([*flags, "--shards", str(sample_shards), "--output", str(out)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130
    assert capsys.readouterr().err.splitlines()[-1] == "bertkit train: interrupted"
