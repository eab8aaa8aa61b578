"""`bertkit inspect`'s flags come from InspectConfig: `--max-seq-length` as every other command
spells it, `--seq` kept as its alias, bare switches and the positional PATH_OR_URL."""

from __future__ import annotations

import pytest

from bertkit.demo import DemoConfig
from pipelines.inspect.cli import InspectConfig, parse_arguments


@pytest.mark.parametrize("flag", ["--max-seq-length", "--max_seq_length", "--seq"])
def test_the_length_has_one_name_and_keeps_seq_as_an_alias(flag: str) -> None:
    assert parse_arguments(["out/shards", flag, "128"]).max_seq_length == 128


def test_no_flag_gives_the_defaults() -> None:
    config = parse_arguments(["out/shards"])
    assert config == InspectConfig(target="out/shards")
    assert (config.schema, config.stats, config.verify, config.max_seq_length) == (
        False,
        False,
        True,
        None,
    )


def test_switches_take_no_value_and_have_no_twin(capsys) -> None:
    config = parse_arguments(["x", "--schema", "--stats", "--no-verify", "--split", "train"])
    assert (config.schema, config.stats, config.verify, config.split) == (
        True,
        True,
        False,
        "train",
    )
    assert parse_arguments(["x", "--no_verify"]).verify is False
    for twin in ("--no-schema", "--verify"):
        with pytest.raises(SystemExit) as exit_:
            parse_arguments(["x", twin])
        assert exit_.value.code == 2
        assert f"unrecognized arguments: {twin}" in capsys.readouterr().err


def test_the_demo_s_flags_keep_their_defaults() -> None:
    assert DemoConfig() == DemoConfig(output="out/demo", train_steps=1200)
