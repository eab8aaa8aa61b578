"""`bertkit inspect`'s flags come from InspectConfig: `--max-seq-length` as every other command
spells it, `--seq` kept as its alias, bare switches and the positional PATH_OR_URL."""

from __future__ import annotations

import shutil

import pytest

from bertkit.demo import DemoConfig
from pipelines.inspect.cli import InspectConfig, parse_arguments
from tests.test_inspect import inspect


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


@pytest.mark.parametrize("damage", ["cut short", "not parquet"])
def test_schema_of_a_damaged_documents_file_is_one_line(
    damage: str, sample_documents, tmp_path, capsys
) -> None:
    books = shutil.copytree(sample_documents[1], tmp_path / "books")
    (parquet,) = books.glob("documents-*.parquet")
    size = parquet.stat().st_size
    if damage == "cut short":
        with parquet.open("r+b") as file:
            file.truncate(size // 2)
        said = f"{size // 2:,} bytes, the manifest says {size:,}; the file was changed or cut"
    else:
        parquet.write_bytes(b"not parquet")
        said = "11 bytes"
    code, lines, err = inspect(capsys, str(books), "--schema")
    assert code == 1 and lines[0] == "record Document, schema version 1.0 (this bertkit)"
    assert err.startswith(f"bertkit inspect: error: {parquet}: {said}")
    assert err.count("\n") == 1
    code, _, err = inspect(capsys, str(books), "--schema", "--no-verify")
    assert code == 1
    assert err.startswith(f"bertkit inspect: error: {parquet}: not a readable Parquet file: ")
