"""A model's config is checked against its weights and for its types before the model is
built: a released config.json or a checkpoint's model_config of absurd sizes (a million
layers) allocated gigabytes for a minute before failing, and one of other types (32.0,
"x") failed with a traceback from inside torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.test_released_start import released
from trainer.model import BertConfig, BertForPreTraining, config_for, shape_problem
from trainer.released import ReleasedModelError, read_released, released_model
from trainer.run.checkpoints import CheckpointError, model_from_checkpoint


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hidden_size", 32.0, "BertConfig.hidden_size must be a whole number, got 32.0"),
        (
            "num_hidden_layers",
            True,
            "BertConfig.num_hidden_layers must be a whole number, got True",
        ),
        ("layer_norm_eps", "x", "BertConfig.layer_norm_eps must be a number, got 'x'"),
        ("hidden_dropout_prob", 1.5, "BertConfig.hidden_dropout_prob must be in [0, 1), got 1.5"),
        (
            "initializer_range",
            float("nan"),
            "BertConfig.initializer_range must be a finite number, 0 or more, got nan",
        ),
    ],
)
def test_a_config_of_other_types_is_refused(field, value, message) -> None:
    with pytest.raises(ValueError) as refused:
        BertConfig(**{"vocab_size": 100, field: value})
    assert str(refused.value) == message


def test_the_sizes_are_checked_against_the_weights_in_either_naming() -> None:
    config = config_for("tiny", 100)
    ours = BertForPreTraining(config).state_dict()
    assert shape_problem(config, ours) is None
    assert shape_problem(config_for("mini", 100), ours) == (
        "num_hidden_layers 4, but the weights hold 2"
    )
    wide = BertConfig(vocab_size=100, hidden_size=256, num_hidden_layers=2, num_attention_heads=2)
    assert shape_problem(wide, ours) == (
        "vocab_size 100, hidden_size 256, but the weights' embeddings.word_embeddings.weight is "
        "100×128"
    )
    hf = {
        "bert.encoder.layer.0.intermediate.dense.weight": torch.empty(512, 128),
        "bert.encoder.layer.1.intermediate.dense.weight": torch.empty(512, 128),
    }
    assert shape_problem(config, hf) is None
    inner = BertConfig(vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=2)
    assert shape_problem(inner, hf) == (
        "intermediate_size 3072, hidden_size 128, but the weights' "
        "bert.encoder.layer.0.intermediate.dense.weight is 512×128"
    )


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("num_hidden_layers", 1_000_000, "says num_hidden_layers 1000000, but the weights hold 2"),
        ("hidden_size", 32.0, ": BertConfig.hidden_size must be a whole number, got 32.0"),
    ],
)
def test_a_released_config_json_of_other_sizes_is_refused_before_building(
    sample_vocab: Path, tmp_path: Path, field, value, says
) -> None:
    directory = released(tmp_path, sample_vocab)
    config = json.loads((directory / "config.json").read_text())
    config[field] = value
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ReleasedModelError) as refused:
        released_model(read_released(str(directory)), "mlm+nsp")
    assert str(refused.value).startswith(f"{directory}/config.json")
    assert says in str(refused.value)


def test_a_checkpoint_whose_model_config_is_not_its_weights_is_refused(tmp_path: Path) -> None:
    model = BertForPreTraining(config_for("tiny", 100))
    checkpoint = {
        CheckpointKey.MODEL_CONFIG: {**vars(config_for("tiny", 100)), "num_hidden_layers": 10**6},
        CheckpointKey.MODEL: model.state_dict(),
    }
    with pytest.raises(CheckpointError) as refused:
        model_from_checkpoint(checkpoint, "run/checkpoints/step-00000001.pt")
    assert str(refused.value) == (
        "run/checkpoints/step-00000001.pt: its model_config says num_hidden_layers 1000000, but "
        "the weights hold 2: the checkpoint was changed after the run wrote it"
    )


DEEP = "[" * 200_000 + "]" * 200_000  # past Python's recursion limit: a RecursionError


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("config.json", '{"model_type": "bert", "x": ' + DEEP + "}", "config.json: not JSON (JSON"),
        ("tokenizer_config.json", DEEP, "tokenizer_config.json: not valid JSON (JSON nested"),
        (
            "model.safetensors.index.json",
            '{"weight_map": {"a": ["x"], "b": 1}}',
            "model.safetensors.index.json has no weight_map of tensor names to file names",
        ),
    ],
)
def test_released_json_files_of_another_shape_are_one_line(
    sample_vocab: Path, tmp_path: Path, name, text, says
) -> None:
    """Each was a traceback (RecursionError; TypeError: unhashable type: 'list')."""
    from pipelines.io.released_vocab import released_casing
    from pipelines.io.vocabulary import VocabError

    directory = released(tmp_path, sample_vocab)
    (directory / name).write_text(text)
    with pytest.raises((ReleasedModelError, VocabError)) as refused:
        released_casing(str(directory))  # what `inspect DIR` and the trainer read first
        read_released(str(directory))
    assert f"{directory}/{name}" in str(refused.value)
    assert says in str(refused.value)


@pytest.mark.parametrize("added", [[1], 5])
def test_a_tokenizer_json_with_added_tokens_of_another_shape_is_one_line(
    sample_vocab: Path, added
) -> None:
    from pipelines.io.released_vocab import tokenizer_json_tokens
    from pipelines.io.vocabulary import VocabError

    config = json.loads((sample_vocab / "tokenizer.json").read_text())
    config["added_tokens"] = added
    with pytest.raises(VocabError) as refused:
        tokenizer_json_tokens(json.dumps(config).encode(), "v/tokenizer.json")
    assert str(refused.value) == (
        "v/tokenizer.json: added_tokens is not a list of objects (content, id); restore the "
        "released file"
    )
