"""Every flag's value is checked before any work: a count that must be
some, a float that is nan or inf, a decay or dropout outside [0, 1), an empty path. Each is
one line naming the flag, the value and what it must be, exit 2; nothing is read, written or
made. The rules live beside each flag (`option(..., bounds=...)`, pipelines/command/flags.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from pipelines import books, vocab, wikipedia
from pipelines.command import flags
from pipelines.command.flags import AT_LEAST_1, FRACTION, POSITIVE, ZERO_OR_MORE, Bounds
from pipelines.examples import cli as examples
from pipelines.io.vocabulary import VocabError
from trainer import export
from trainer.config import TrainConfig, negative_values_joined
from trainer.train import parse_arguments

MUST_BE_A_SEED = "must be between 0 and 9223372036854775807"


@pytest.mark.parametrize(
    ("bounds", "describe", "inside", "outside"),
    [
        (AT_LEAST_1, "at least 1", [1, 10**30], [0, -1]),
        (ZERO_OR_MORE, "0 or more", [0, 0.0, 5], [-1, -1e-9]),
        (POSITIVE, "more than 0", [1e-300, 3], [0, 0.0, -2]),
        (FRACTION, "in [0, 1)", [0, 0.0, 0.999999], [1, 1.0, -0.1]),
        (Bounds(0, 1, low_open=True), "in (0, 1]", [1, 0.5], [0, 1.5]),
        (Bounds(8, 65535), "between 8 and 65535", [8, 65535], [7, 65536]),
        (Bounds(high=4), "at most 4", [-7, 4], [5]),
        (Bounds(high=4, high_open=True), "less than 4", [3.9], [4]),
    ],
)
def test_bounds_say_what_a_value_must_be(bounds, describe, inside, outside) -> None:
    assert bounds.describe() == describe
    assert [bounds.holds(v) for v in inside] == [True] * len(inside)
    assert [bounds.holds(v) for v in outside] == [False] * len(outside)


# flag, value, the line after "bertkit train: error: " (each rule of TrainConfig)
TRAIN_REFUSALS = [
    ("--shards", "", "--shards is empty: give it a value"),
    ("--output", " ", "--output is empty: give it a value"),
    ("--init-checkpoint", "", "--init-checkpoint is empty: give it a value"),
    ("--max-seq-length", "0", "--max-seq-length 0: must be at least 1"),
    ("--micro-batch-size", "0", "--micro-batch-size 0: must be at least 1"),
    ("--global-batch-size", "0", "--global-batch-size 0: must be at least 1"),
    ("--global-batch-size", "-32", "--global-batch-size -32: must be at least 1"),
    ("--max-steps", "0", "--max-steps 0: must be at least 1"),
    ("--stop-at-step", "-1", "--stop-at-step -1: must be 0 or more"),
    ("--lr", "0", "--lr 0.0: must be more than 0"),
    ("--lr", "-1e-4", "--lr -0.0001: must be more than 0"),
    ("--lr", "nan", "--lr nan: must be a finite number"),
    ("--lr", "1e999", "--lr inf: must be a finite number"),
    ("--weight-decay", "-0.01", "--weight-decay -0.01: must be 0 or more"),
    ("--weight-decay", "inf", "--weight-decay inf: must be a finite number"),
    ("--beta1", "1", "--beta1 1.0: must be in [0, 1)"),
    ("--beta1", "-0.1", "--beta1 -0.1: must be in [0, 1)"),
    ("--beta2", "1.5", "--beta2 1.5: must be in [0, 1)"),
    ("--beta2", "nan", "--beta2 nan: must be a finite number"),
    ("--eps", "0", "--eps 0.0: must be more than 0"),
    ("--eps", "-inf", "--eps -inf: must be a finite number"),
    ("--warmup-steps", "-1", "--warmup-steps -1: must be 0 or more"),
    ("--decay-power", "-0.5", "--decay-power -0.5: must be more than 0"),
    ("--decay-power", "0", "--decay-power 0.0: must be more than 0"),
    ("--decay-power", "nan", "--decay-power nan: must be a finite number"),
    ("--clip-grad-norm", "-1", "--clip-grad-norm -1.0: must be 0 or more"),
    ("--clip-grad-norm", "inf", "--clip-grad-norm inf: must be a finite number"),
    ("--dropout", "1", "--dropout 1.0: must be in [0, 1)"),
    ("--dropout", "-0.1", "--dropout -0.1: must be in [0, 1)"),
    ("--dropout", "nan", "--dropout nan: must be a finite number"),
    ("--seed", "-1", f"--seed -1: {MUST_BE_A_SEED}"),
    ("--seed", str(2**63), f"--seed {2**63}: {MUST_BE_A_SEED}"),
    ("--num-workers", "-1", "--num-workers -1: must be 0 or more"),
    ("--shuffle-buffer", "-1", "--shuffle-buffer -1: must be 0 or more"),
    ("--bucket-window", "-1", "--bucket-window -1: must be 0 or more"),
    ("--log-every", "0", "--log-every 0: must be at least 1"),
    ("--eval-every", "-1", "--eval-every -1: must be 0 or more"),
    ("--eval-batches", "-1", "--eval-batches -1: must be 0 or more"),
    ("--checkpoint-every", "0", "--checkpoint-every 0: must be at least 1"),
    ("--checkpoint-every", "-5", "--checkpoint-every -5: must be at least 1"),
    ("--keep-checkpoints", "0", "--keep-checkpoints 0: must be at least 1"),
    ("--peak-tflops", "0", "--peak-tflops 0.0: must be more than 0"),
    ("--peak-tflops", "inf", "--peak-tflops inf: must be a finite number"),
]
REQUIRED = ["--shards", "shards", "--output", "run"]


@pytest.mark.parametrize(("flag", "value", "message"), TRAIN_REFUSALS)
def test_train_refuses_a_value_as_it_parses(flag, value, message, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_arguments([*REQUIRED, f"{flag}={value}"])  # "-1e-4" is a value
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"bertkit train: error: {message}\n"


@pytest.mark.parametrize(("flag", "value", "message"), TRAIN_REFUSALS)
def test_a_value_after_a_space_is_refused_alike(flag, value, message, capsys) -> None:
    """`--lr -1e-4` as `--lr=-1e-4`: argparse alone reads -1e-4 as a flag ("expected one
    argument"); the value's own check speaks instead (trainer/config.py)."""
    with pytest.raises(SystemExit) as exited:
        parse_arguments([*REQUIRED, flag, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"bertkit train: error: {message}\n"


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ("-1,2", "--mix -1,2: -1 must be more than 0"),
        ("-.5,1", "--mix -0.5,1: -0.5 must be more than 0"),
        ("-1e-3,2", "--mix -0.001,2: -0.001 must be more than 0"),
        ("1,-2", "--mix 1,-2: -2 must be more than 0"),
        ("0,1", "--mix 0,1: 0 must be more than 0"),
    ],
)
def test_a_mix_weight_must_be_positive_however_it_is_written(mix, message, capsys) -> None:
    for spelled in (["--mix", mix], [f"--mix={mix}"]):
        with pytest.raises(SystemExit) as exited:
            parse_arguments(["--shards", "a", "b", "--output", "run", *spelled])
        assert exited.value.code == 2
        assert capsys.readouterr().err == f"bertkit train: error: {message}\n"


def test_only_a_number_after_a_flag_is_joined_to_it() -> None:
    assert negative_values_joined(
        ["--mix", "-1,2", "--lr", "-INF", "--seed=-1", "--eps", "-1e-8", "--shards", "a", "-3"]
    ) == ["--mix=-1,2", "--lr=-INF", "--seed=-1", "--eps=-1e-8", "--shards", "a", "-3"]
    # a flag after a flag, a word that is not a number, the end of flags: as they were
    unchanged = ["--output", "--resume", "--output", "-x", "--output", "-info", "--", "-1"]
    assert negative_values_joined(unchanged) == unchanged


@pytest.mark.parametrize(("flag", "value", "message"), TRAIN_REFUSALS)
def test_a_train_config_built_in_code_is_refused_by_validate(flag, value, message) -> None:
    parser = flags.parser_for(TrainConfig, "bertkit train", None)
    config = flags.config_from(TrainConfig, parser.parse_args([*REQUIRED, f"{flag}={value}"]))
    with pytest.raises(ValueError) as refused:
        config.validate()
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("device", "gpu", "--device 'gpu': one of auto, cuda, cpu"),
        ("precision", "fp8", "--precision 'fp8': one of auto, bf16, fp16, fp32"),
    ],
)
def test_train_refuses_a_name_it_does_not_know(field, value, message) -> None:
    with pytest.raises(ValueError) as refused:
        TrainConfig(shards="s", output="o", **{field: value}).validate()
    assert str(refused.value) == message


def test_train_takes_every_edge_that_means_something() -> None:
    edges = [
        "--beta1",
        "0",
        "--beta2",
        "0.999999",
        "--dropout",
        "0",
        "--clip-grad-norm",
        "0",
        "--eval-every",
        "0",
        "--eval-batches",
        "0",
        "--num-workers",
        "0",
        "--seed",
        "0",
        "--warmup-steps",
        "0",
        "--shuffle-buffer",
        "0",
        "--weight-decay",
        "0",
        "--bucket-window",
        "0",
        "--max-steps",
        "1",
        "--checkpoint-every",
        "1",
        "--global-batch-size",
        "32",
    ]
    config = parse_arguments([*REQUIRED, *edges])
    config.validate()
    assert (config.checkpoint_every, config.beta2, config.seed) == (1, 0.999999, 0)
    top = parse_arguments([*REQUIRED, "--seed", str(2**63 - 1)])
    assert top.seed == 2**63 - 1


def test_bertkit_train_checkpoint_every_0_exits_2_before_making_the_run_directory(
    sample_shards, tmp_path
) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertkit",
            "train",
            "--shards",
            str(sample_shards),
            "--output",
            str(run_dir),
            "--model",
            "tiny",
            "--micro-batch-size",
            "8",
            "--max-steps",
            "2",
            "--warmup-steps",
            "1",
            "--num-workers",
            "0",
            "--checkpoint-every",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr == "bertkit train: error: --checkpoint-every 0: must be at least 1\n"
    assert done.stdout == ""
    assert not run_dir.exists()


def refused(main: Callable[[list[str]], None], argv: list[str], capsys) -> str:
    """Run `main`, which must exit 2 with one line on stderr and no traceback; that line."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.rstrip("\n")


DOCUMENTS_STAGES = {"wikipedia": wikipedia.main, "books": books.main}


@pytest.mark.parametrize(
    ("stage", "flag", "value", "message"),
    [
        ("wikipedia", "--split-mb", "-64", "--split-mb -64: must be 0 or more"),
        ("wikipedia", "--min-paragraph-words", "-1", "--min-paragraph-words -1: must be 0 or more"),
        ("wikipedia", "--file-mb", "0", "--file-mb 0: must be at least 1"),
        ("wikipedia", "--output", "", "--output is empty: give it a value"),
        ("wikipedia", "--input", "", "--input is empty: give it a value"),
        ("books", "--file-mb", "-1", "--file-mb -1: must be at least 1"),
        ("books", "--unit-mb", "-1", "--unit-mb -1: must be 0 or more"),
        ("books", "--max-line-kb", "0", "--max-line-kb 0: must be at least 1"),
        ("books", "--max_line_kb", "-8", "--max-line-kb -8: must be at least 1"),
        ("books", "--lines-per-document", "0", "--lines-per-document 0: must be at least 1"),
        ("books", "--min-paragraph-words", "-3", "--min-paragraph-words -3: must be 0 or more"),
    ],
)
def test_documents_stages_refuse_a_value_before_any_work(
    stage, flag, value, message, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("A book of one line with enough words in it.\n")
    argv = ["--input", "in.txt", "--output", "out", f"{flag}={value}"]
    line = refused(DOCUMENTS_STAGES[stage], argv, capsys)
    assert line == f"bertkit {stage}: error: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--sample-mb", "nan", "--sample-mb nan: must be a finite number"),
        ("--sample-mb", "inf", "--sample-mb inf: must be a finite number"),
        ("--sample-mb", "0", "--sample-mb 0.0: must be more than 0"),
        ("--sample-mb", "-1", "--sample-mb -1.0: must be more than 0"),
        ("--num-unused", "-1", "--num-unused -1: must be 0 or more"),
        ("--limit-alphabet", "0", "--limit-alphabet 0: must be at least 1"),
        ("--min-frequency", "0", "--min-frequency 0: must be at least 1"),
    ],
)
def test_vocab_refuses_a_value_before_any_work(flag, value, message, tmp_path, capsys) -> None:
    (tmp_path / "docs").mkdir()
    argv = ["--documents", str(tmp_path / "docs"), "--output", str(tmp_path / "out")]
    argv.append(f"{flag}={value}")
    assert refused(vocab.main, argv, capsys) == f"bertkit vocab: error: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_a_vocab_config_built_in_code_is_refused_by_validate() -> None:
    config = vocab.VocabConfig(documents=("d",), output="o", sample_mb=float("nan"))
    with pytest.raises(VocabError) as refused_:
        config.validate()
    assert str(refused_.value) == "--sample-mb nan: must be a finite number"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_examples_refuses_a_float_that_is_not_finite(value, tmp_path, capsys) -> None:
    # Refused as it is parsed: the config derives --max-predictions-per-seq from it when built.
    argv = [
        "--documents",
        str(tmp_path),
        "--vocab",
        str(tmp_path),
        "--output",
        str(tmp_path / "out"),
        f"--masked-lm-prob={value}",
    ]
    line = refused(examples.main, argv, capsys)
    message = f"--masked-lm-prob {float(value)}: must be a finite number"
    assert line == f"bertkit examples: error: {message}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["", "--output", "hf"], "CHECKPOINT is empty: give it a value"),
        (["ckpt", "--output", ""], "--output is empty: give it a value"),
        (["ckpt", "--output", "hf", "--vocab", " "], "--vocab is empty: give it a value"),
    ],
)
def test_export_hf_refuses_an_empty_path(argv, message, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert refused(export.main, argv, capsys) == f"bertkit export-hf: error: {message}"
    assert list(tmp_path.iterdir()) == []


def test_every_float_flag_of_every_command_is_checked() -> None:
    """No float flag escapes the finite check: each config's floats are found by type."""
    configs = [TrainConfig, wikipedia.WikipediaConfig, books.BooksConfig, vocab.VocabConfig]
    for config_class in configs:
        parser = flags.parser_for(config_class, "p", None)
        required = [
            a
            for action in parser._actions
            if action.required
            for a in (action.option_strings[0], "x")
        ]
        for action in parser._actions:
            if action.type is float:
                values = flags.config_values(
                    config_class, parser.parse_args([*required, action.option_strings[0], "nan"])
                )
                problem = flags.value_problem(config_class, values)
                assert problem == f"{action.option_strings[0]} nan: must be a finite number"
