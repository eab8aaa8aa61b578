"""A resume follows the schedule flags it is given (--max-steps, --warmup-steps,
--decay-power, --lr), logs where it goes on from and what changed; --stop-at-step says how
to go on; --warmup-steps's default follows --max-steps."""

from __future__ import annotations

import dataclasses
import logging
import shlex

import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.test_train import TINY, metrics
from trainer import train
from trainer.config import TrainConfig, default_warmup_steps
from trainer.run.checkpoints import latest_checkpoint
from trainer.run.start import (
    ONE_COMMAND,
    RESUME_CHECKED,
    RESUME_FOLLOWS,
    RESUME_SAID_APART,
    _log_resume,
)


def common(sample_shards, output) -> list[str]:
    return [
        *TINY,
        "--shards",
        str(sample_shards),
        "--output",
        str(output),
        "--num-workers",
        "0",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "100",
    ]


def weights(run_dir) -> dict[str, torch.Tensor]:
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    return checkpoint[CheckpointKey.MODEL]


def test_a_resume_with_more_steps_trains_them_at_a_fresh_runs_lr(sample_shards, tmp_path, caplog):
    """10 steps, resumed with --max-steps 20: steps 11-20 train at the lr a fresh 20-step run
    has at those steps (before, at the old schedule's 0.0, the weights never moved), and one
    line says what changed: --max-steps, and --warmup-steps's default with it (1 → 2).
    Micro-batches of 4 and one held-out batch: the schedule does not depend on them."""
    run, fresh = tmp_path / "run", tmp_path / "fresh"
    cheap = ["--micro-batch-size", "4", "--eval-batches", "1"]
    assert train.run([*common(sample_shards, run), *cheap, "--max-steps", "10"]) == 0
    stopped = weights(run)
    # The lr each step trained at: step 10, the 10-step schedule's last, at 2e-3 × 1/9; a
    # step after it would train at 0.0.
    assert metrics(run)[10]["lr"] == pytest.approx(2e-3 / 9)
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        resume = [*common(sample_shards, run), *cheap, "--max-steps", "20", "--resume"]
        assert train.run(resume) == 0
    assert train.run([*common(sample_shards, fresh), *cheap, "--max-steps", "20"]) == 0
    resumed, expected = metrics(run), metrics(fresh)
    assert sorted(resumed) == list(range(1, 21))
    # The lr each step trained at: the fresh run's, exactly.
    lrs = [resumed[s]["lr"] for s in range(11, 21)]
    assert lrs == [expected[s]["lr"] for s in range(11, 21)]
    # Step s trains at 2e-3 × (1 - (s - 1 - 2) / 18), warmup 2 of 20: step 11 → 2e-3 × 10/18,
    # step 20 → 2e-3 × 1/18.
    assert lrs[0] == pytest.approx(2e-3 * 10 / 18) and lrs[-1] == pytest.approx(2e-3 / 18)
    after = weights(run)
    assert any(not torch.equal(stopped[name], after[name]) for name in stopped)
    path = latest_checkpoint(run / "checkpoints")
    messages = [record.getMessage() for record in caplog.records]
    assert f"--resume: going on from {path.parent}/step-00000010.pt (step 10)" in messages
    changed = [message for message in messages if "follows this command's flags" in message]
    assert changed == [
        "--resume: from step 11 on, the run follows this command's flags: "
        "--max-steps 10 → 20, --warmup-steps 1 → 2"
    ]
    assert path.name == "step-00000020.pt"


def test_a_resume_with_a_new_peak_lr_and_decay_power_follows_them(sample_shards, tmp_path):
    """Stopped at step 4 of 8, resumed with --lr 1e-3 and --decay-power 0.5: steps 5-8 have
    the lr of a fresh run with those flags."""
    run, fresh = tmp_path / "run", tmp_path / "fresh"
    flags = ["--max-steps", "8", "--warmup-steps", "2"]
    assert train.run([*common(sample_shards, run), *flags, "--stop-at-step", "4"]) == 0
    new = ["--lr", "1e-3", "--decay-power", "0.5"]
    assert train.run([*common(sample_shards, run), *flags, *new, "--resume"]) == 0
    assert train.run([*common(sample_shards, fresh), *flags, *new]) == 0
    resumed, expected = metrics(run), metrics(fresh)
    assert [resumed[s]["lr"] for s in range(5, 9)] == [expected[s]["lr"] for s in range(5, 9)]
    assert resumed[5]["lr"] == pytest.approx(1e-3 * (1 - 2 / 6) ** 0.5)  # factor(4), trained at


def test_a_requeue_without_warmup_steps_keeps_the_checkpoints_warmup(
    sample_shards, tmp_path, caplog
):
    """A run started with --warmup-steps 3 (or, before the default followed --max-steps,
    with the old default) and resumed with the same --max-steps but no --warmup-steps goes
    on with its own warmup: the lrs of the uninterrupted run, and no line of changes."""
    run, whole = tmp_path / "run", tmp_path / "whole"
    flags = ["--max-steps", "8", "--warmup-steps", "3"]
    assert train.run([*common(sample_shards, whole), *flags]) == 0
    assert train.run([*common(sample_shards, run), *flags, "--stop-at-step", "4"]) == 0
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run([*common(sample_shards, run), "--max-steps", "8", "--resume"]) == 0
    assert [metrics(run)[s]["lr"] for s in range(1, 9)] == [
        metrics(whole)[s]["lr"] for s in range(1, 9)
    ]
    assert "follows this command's flags" not in caplog.text
    checkpoint = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.TRAIN_CONFIG]["warmup_steps"] == 3


def test_a_resume_says_every_flag_it_takes_with_a_new_value(sample_shards, tmp_path, caplog):
    """Stopped at step 2 of an fp32 run (auto on the CPU), resumed with another clipping,
    precision, evaluation and loader: the one line names each change, --precision as
    resolved; the run then trains in bf16 with clipping at 0.5."""
    run = tmp_path / "run"
    flags = [*common(sample_shards, run), "--max-steps", "3", "--warmup-steps", "1"]
    cheap = ["--micro-batch-size", "4", "--eval-batches", "1"]
    assert train.run([*flags, *cheap, "--stop-at-step", "2"]) == 0
    changed = ["--clip-grad-norm", "0.5", "--precision", "bf16", "--eval-batches", "2"]
    more = ["--micro-batch-size", "4", "--num-workers", "1", *changed]
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run([*flags, *more, "--resume"]) == 0
    lines = [message for message in caplog.messages if "follows this command's flags" in message]
    assert lines == [
        "--resume: from step 3 on, the run follows this command's flags: --clip-grad-norm 1 → "
        "0.5, --num-workers 0 → 1, --eval-batches 1 → 2, --precision fp32 → bf16"
    ]
    saved = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert (saved[CheckpointKey.STEP], saved[CheckpointKey.TRAIN_CONFIG]["clip_grad_norm"]) == (
        3,
        0.5,
    )


def test_the_line_of_changes_shows_switches_unset_flags_and_an_unresolved_precision(caplog):
    """Switches read on and off, a flag left unset "unset"; a checkpoint whose run took
    `auto` on a device it did not record is compared by the flags; a requeue with the
    checkpoint's own flags says nothing."""
    saved = TrainConfig(shards="s", output="o", warmup_steps=1, precision="auto")
    now = dataclasses.replace(
        saved, compile=True, compile_mode="max-autotune", tensorboard=False, peak_tflops=250.0
    )
    checkpoint = {
        CheckpointKey.STEP: 7,
        CheckpointKey.TRAIN_CONFIG: dataclasses.asdict(saved),
    }
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        _log_resume(dataclasses.replace(now, precision="bf16"), checkpoint, "bf16")
        _log_resume(saved, checkpoint, "fp32")  # auto then, auto now: nothing to say
    assert caplog.messages == [
        "--resume: from step 8 on, the run follows this command's flags: --compile off → on, "
        "--compile-mode unset → max-autotune, --peak-tflops unset → 250, --tensorboard on → "
        "off, --precision auto → bf16"
    ]


def test_every_flag_is_followed_said_apart_or_checked_on_resume():
    """Each flag of `bertkit train` has one rule on --resume: followed and said when it
    changes, compared apart (precision, dropout), checked where it is used, or one command's
    own; a new flag must take one of them."""
    groups = (RESUME_FOLLOWS, RESUME_SAID_APART, RESUME_CHECKED, ONE_COMMAND)
    named = [name for group in groups for name in group]
    assert sorted(named) == sorted(field.name for field in dataclasses.fields(TrainConfig))
    assert len(named) == len(set(named))


def test_a_resume_refuses_what_its_flags_cannot_go_on_with(sample_shards, tmp_path, capsys):
    run = tmp_path / "run"
    flags = [*common(sample_shards, run), "--warmup-steps", "1"]
    assert train.run([*flags, "--max-steps", "4"]) == 0
    capsys.readouterr()
    assert train.run([*flags, "--max-steps", "3", "--resume"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"bertkit train: error: --resume: {run}/checkpoints/step-00000004.pt is at step 4, "
        "past --max-steps 3: pass a --max-steps above 4 to train on"
    )
    assert train.run([*flags, "--max-steps", "6", "--optimizer", "lamb", "--resume"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"bertkit train: error: --resume: {run}/checkpoints/step-00000004.pt holds adamw's "
        "state, --optimizer is lamb: pass --optimizer adamw, or start a new run from it with "
        "--init-checkpoint"
    )
    # The data order is still checked: another global batch is refused.
    assert train.run([*flags, "--max-steps", "6", "--global-batch-size", "32", "--resume"]) == 2
    assert "global batch 16 (micro-batch 16 × 1 process × 1 accumulated), now 32" in (
        capsys.readouterr().err
    )


def test_stop_at_step_ends_with_the_command_that_goes_on(sample_shards, tmp_path, capsys):
    run = tmp_path / "run"
    flags = [*common(sample_shards, run), "--max-steps", "4", "--warmup-steps", "1"]
    assert train.run([*flags, "--stop-at-step", "2"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (
        f"stopped at step 2 of 4 (--stop-at-step); to go on: bertkit train {shlex.join(flags)} "
        "--resume"
    )
    command = shlex.split(last.split("to go on: bertkit train ", 1)[1])
    assert train.run(command) == 0
    assert sorted(metrics(run)) == [1, 2, 3, 4]
    out = capsys.readouterr().out
    assert "stopped at step" not in out  # it ran to --max-steps
    # The closing line counts the steps this run added, not the checkpoint's total.
    assert out.startswith("trained 2 steps (3-4, resumed at 2) in ")


@pytest.mark.parametrize(
    "stop",
    [
        ["--stop-at-step", "2"],
        ["--stop-at-step=2"],
        ["--stop_at_step", "2"],
        ["--stop-at", "2"],
        ["--stop_at=2"],
    ],
)
def test_the_command_that_goes_on_drops_the_stop_in_any_spelling(stop: list[str]) -> None:
    flags = ["--shards", "s", "--output", "o", "--max-steps", "4"]
    for overwrite in ([], ["--overwrite"], ["--over"]):
        assert train.resume_command([*flags, *stop, *overwrite]) == (
            "--shards s --output o --max-steps 4 --resume"
        )
    assert train.resume_command([*stop, *flags, "--res"]) == (
        "--shards s --output o --max-steps 4 --res"
    )
    # Every spelling above is one argparse takes for --stop-at-step.
    assert train.parse_arguments([*flags, *stop]).stop_at_step == 2


def test_the_command_that_goes_on_after_torchrun_names_the_global_batch() -> None:
    """Under torchrun the global batch defaults to micro-batch x processes; the printed
    `bertkit train` command runs one process, so it names the global batch the resume needs
    (a user's own --global-batch-size, in any spelling, is kept as given)."""
    flags = ["--shards", "s", "--output", "o", "--micro-batch-size", "8", "--stop-at-step", "3"]
    assert train.resume_command(flags, world_size=2, global_batch=16) == (
        "--shards s --output o --micro-batch-size 8 --global-batch-size 16 --resume"
    )
    assert train.resume_command([*flags, "--global_batch_size=32"], 2, 32) == (
        "--shards s --output o --micro-batch-size 8 --global_batch_size=32 --resume"
    )
    assert train.resume_command(flags, world_size=1, global_batch=8) == (
        "--shards s --output o --micro-batch-size 8 --resume"
    )


def test_the_closing_line_names_the_steps_a_run_trained():
    assert train.trained_steps(0, 20) == "trained 20 steps"
    assert train.trained_steps(1200, 1220) == "trained 20 steps (1201-1220, resumed at 1200)"
    assert train.trained_steps(1225, 1225) == (
        "trained no step (the checkpoint is at step 1225 already)"
    )


# --------------------------------------------------------------------------- warmup default


def test_the_default_warmup_is_a_tenth_of_the_run_at_most_100():
    steps = [1, 9, 10, 60, 999, 1000, 1001, 5000]
    assert [default_warmup_steps(n) for n in steps] == [0, 0, 1, 6, 99, 100, 100, 100]


def test_a_run_under_100_steps_trains_with_the_default_warmup(sample_shards, tmp_path, capsys):
    """--max-steps 3 without --warmup-steps: no warmup (before: 100, refused); an explicit
    --warmup-steps above --max-steps is still refused in one line."""
    run = tmp_path / "run"
    assert train.run([*common(sample_shards, run), "--max-steps", "3"]) == 0
    checkpoint = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.TRAIN_CONFIG]["warmup_steps"] == 0
    # No warmup under 10 steps: the first step trains at the peak, then its decay.
    assert [metrics(run)[s]["lr"] for s in (1, 2, 3)] == pytest.approx(
        [2e-3, 2e-3 * 2 / 3, 2e-3 / 3]
    )
    capsys.readouterr()
    other = tmp_path / "other"
    assert (
        train.run([*common(sample_shards, other), "--max-steps", "5", "--warmup-steps", "6"]) == 2
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "bertkit train: error: --warmup-steps 6 exceeds --max-steps 5: the run would end "
        "before its learning rate reaches --lr 0.002 (step 1 trains at 0); lower it, or leave "
        "it out (the default is a tenth of --max-steps, at most 100)"
    )
    assert not other.exists()
