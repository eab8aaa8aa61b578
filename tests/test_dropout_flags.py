"""The dropout flags (issue 39): `--hidden-dropout` and `--attention-dropout` apart, `--dropout`
for both, a released model's own rates kept where no flag sets them, and a resume that
changes them says so and exports the rates it trained with."""

from __future__ import annotations

import json
import logging

import pytest

from tests.test_model_levers import TINY_RUN, weights_config
from trainer import train
from trainer.config import TrainConfig, dropout_overrides
from trainer.export import export_hf
from trainer.released import read_released, released_model_config


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, {}),
        ({"dropout": 0.0}, {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}),
        ({"hidden_dropout": 0.0}, {"hidden_dropout_prob": 0.0}),
        ({"attention_dropout": 0.2}, {"attention_probs_dropout_prob": 0.2}),
        (
            {"hidden_dropout": 0.0, "attention_dropout": 0.1},
            {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.1},
        ),
    ],
)
def test_the_dropout_flags_set_the_rates_they_name(flags, expected):
    config = TrainConfig(shards="s", output="o", **flags)
    config.validate()
    assert dropout_overrides(config) == expected


def test_dropout_with_a_rate_apart_is_refused(capsys):
    assert train.run(["--shards", "s", "--output", "o", "--dropout", "0.1",
                      "--hidden-dropout", "0"]) == 2  # fmt: skip
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "bertkit train: error: --dropout 0.1 sets --hidden-dropout and --attention-dropout "
        "both, and --hidden-dropout 0 is given too: give --dropout alone, or the two apart"
    )


def test_a_released_model_keeps_the_rates_no_flag_sets(tmp_path):
    pytest.importorskip("transformers")
    from transformers import BertForMaskedLM

    from tests.test_released_model import _save

    directory = _save(tmp_path, BertForMaskedLM, hidden_dropout_prob=0.2)
    released = read_released(str(directory))
    config = released_model_config(released, "mlm")
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.2, 0.1)
    flags = TrainConfig(shards="s", output="o", attention_dropout=0.0)
    config = released_model_config(released, "mlm", dropout_overrides(flags))
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.2, 0.0)


def test_a_resume_may_change_dropout_and_the_export_writes_the_rates_trained(
    sample_shards, tmp_path, caplog
):
    """Started with --hidden-dropout 0 (attention the preset's 0.1), stopped at step 1,
    resumed with --attention-dropout 0: one line says so; the checkpoint's model and the
    export's config.json have both rates 0."""
    run = tmp_path / "run"
    flags = [*TINY_RUN, "--shards", str(sample_shards), "--output", str(run), "--max-steps", "2"]
    assert train.run([*flags, "--hidden-dropout", "0", "--stop-at-step", "1"]) == 0
    saved = weights_config(run)
    assert (saved["hidden_dropout_prob"], saved["attention_probs_dropout_prob"]) == (0.0, 0.1)
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run([*flags, "--attention-dropout", "0", "--resume"]) == 0
    lines = [r.getMessage() for r in caplog.records if "dropout follows" in r.getMessage()]
    assert lines == [
        "--resume: from step 2 on, dropout follows this run's flags: --attention-dropout 0.1 → 0"
    ]
    saved = weights_config(run)
    assert (saved["hidden_dropout_prob"], saved["attention_probs_dropout_prob"]) == (0.0, 0.0)
    export_hf(str(run / "checkpoints"), str(tmp_path / "hf"))
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (written["hidden_dropout_prob"], written["attention_probs_dropout_prob"]) == (0, 0)
