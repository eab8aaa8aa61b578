"""`bertkit train --shards A B --mix 0.7,0.3`, the run's side of a mix (issue 38 item 3): the
flags and their refusals, the sources' checks (their names: tests/test_mix_names.py),
metrics.jsonl's per-source rows,
the per-source held-out evaluation, the progress line, and --resume of a mix. The mix's
order and loader are trainer/mix.py's (tests/test_mix.py); the torchrun runs are in
tests/test_mix_torchrun.py."""

from __future__ import annotations

import argparse
import io
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pipelines.command.flags import float_list
from pipelines.command.progress import format_value as _format_value
from schemas.checkpoint import CheckpointKey
from schemas.shards import FULL_SENTENCES, NO_MASKS
from tests.support import mix_sources
from tests.support.mix_sources import make_examples
from trainer import train
from trainer.config import TrainConfig
from trainer.data import DataPosition
from trainer.evaluate import EvalResult, MixEvalResult
from trainer.metrics import MetricsLogger, ProgressLine
from trainer.mix import MixedSource, drawn_per_source
from trainer.run.checkpoints import latest_checkpoint
from trainer.source import (
    DataConfigError,
    check_mix_sources,
    heldout_source,
    open_source,
)
from trainer.train import parse_arguments

wiki_shards = mix_sources.wiki_shards  # the second source, a session fixture

# --------------------------------------------------------------------------- the flags


def test_float_list_reads_one_number_per_comma() -> None:
    assert float_list("0.7,0.3") == (0.7, 0.3)
    assert float_list(" 7, 3 ") == (7.0, 3.0)
    assert float_list("1") == (1.0,)
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        float_list("0.7,,0.3")
    assert str(refused.value) == "'0.7,,0.3': expected numbers separated by commas, like 0.7,0.3"


def test_several_shards_and_their_mix_parse_into_the_config() -> None:
    config = parse_arguments(["--shards", "a", "b", "--output", "o", "--mix", "7,3"])
    assert (config.shards, config.mix, config.weights) == (("a", "b"), (7.0, 3.0), (0.7, 0.3))
    repeated = parse_arguments(["--shards", "a", "--shards", "b", "--mix", "1,3", "--output", "o"])
    assert (repeated.shards, repeated.weights) == (("a", "b"), (0.25, 0.75))
    config.validate()


def test_one_source_is_the_run_it_was() -> None:
    config = parse_arguments(["--shards", "a", "--output", "o"])
    assert (config.shards, config.mix, config.weights) == (("a",), None, (1.0,))
    # Built in code (the demo, a checkpoint's record from before mixes): a string is one source.
    assert TrainConfig(shards="a", output="o") == config
    assert config.record()["shards"] == "a"  # as checkpoints recorded it before mixes
    assert parse_arguments(["--shards", "a", "b", "--mix", "1,1", "--output", "o"]).record()[
        "shards"
    ] == ("a", "b")


# the flags after --output o, the line after "bertkit train: error: "
MIX_REFUSALS = [
    (
        ["--shards", "a", "b"],
        "--shards names 2 sources: give --mix, one weight each in --shards order "
        "(e.g. --mix 0.5,0.5)",
    ),
    (
        ["--shards", "a", "b", "c"],
        "--shards names 3 sources: give --mix, one weight each in --shards order "
        "(e.g. --mix 1,1,1)",
    ),
    (
        ["--shards", "a", "b", "--mix", "1"],
        "--mix 1: 1 weight for 2 --shards sources; give one weight each, in --shards order",
    ),
    (
        ["--shards", "a", "b", "--mix", "0.5,0.3,0.2"],
        "--mix 0.5,0.3,0.2: 3 weights for 2 --shards sources; give one weight each, in "
        "--shards order",
    ),
    (
        ["--shards", "a", "--mix", "1"],
        "--mix 1: --mix weighs several --shards sources; with one, leave it out",
    ),
    (["--shards", "a", "b", "--mix", "0.7,0"], "--mix 0.7,0: 0 must be more than 0"),
    (["--shards", "a", "b", "--mix=-1,2"], "--mix -1,2: -1 must be more than 0"),
    (["--shards", "a", "b", "--mix", "0.7,nan"], "--mix 0.7,nan: nan must be a finite number"),
    (
        ["--shards", "a", "b", "--mix", "1e-300,1"],
        "--mix 1e-300,1: a weight under 1e-09 of the largest draws that source next to never "
        "(once in a billion samples); raise it, or leave the source out",
    ),
    (
        ["--shards", "a", "b", "--mix", "0.7,x"],
        "argument --mix: '0.7,x': expected numbers separated by commas, like 0.7,0.3",
    ),
    (["--shards", "a", "a/", "--mix", "1,1"], "--shards a/ is given twice: name each source once"),
    (
        ["--shards", "a", "./a/manifest.json", "--mix", "1,1"],
        "--shards ./a/manifest.json is the same source as --shards a: name each source once",
    ),
    (
        ["--shards", "s3://b/a", "s3://b//a/./", "--mix", "1,1"],
        "--shards s3://b//a/./ is the same source as --shards s3://b/a: name each source once",
    ),
    (
        ["--shards", "a", "b", "--mix", "1,1", "--bucket-window", "4"],
        "--bucket-window 4: a mix (several --shards) is not batched by length (its sources' "
        "windows are read apart); leave it out",
    ),
]


@pytest.mark.parametrize(("flags", "message"), MIX_REFUSALS)
def test_a_mix_that_means_nothing_is_refused_in_one_line(
    flags, message, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing made: the run directory stays absent
    try:
        code = train.run([*flags, "--output", "run"])
    except SystemExit as exited:  # refused as it parses
        code = exited.code
    assert code == 2
    # A value argparse cannot read comes after its usage, as for every flag; the rest alone.
    err = capsys.readouterr().err
    if message.startswith("argument "):
        assert err.startswith("usage: bertkit train ")
        err = err.splitlines()[-1] + "\n"
    assert err == f"bertkit train: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_help_says_how_the_mix_is_weighed(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--mix W,W,... with several --shards: each one's share of every global batch" in shown
    assert "weights are normalised to sum to 1 (7,3 is 0.7,0.3)" in shown


# --------------------------------------------------------------------------- real shards


def test_sources_that_differ_are_refused_naming_the_source_and_what(
    sample_shards, wiki_shards
) -> None:
    both = (open_source(str(sample_shards)), open_source(str(wiki_shards)))
    names = ("shards", "wiki")
    check_mix_sources(both, names)  # the same vocabulary, length and recipe: taken
    first, wiki = both
    where = f"--shards source wiki ({wiki.manifest_url}) differs from shards: "
    fix = (
        ". The sources of a mix share one vocabulary, sequence length and recipe: build them "
        "with the same `bertkit examples` flags and vocabulary"
    )
    vocab = {**wiki.manifest.vocab, "sha256": "ab" * 32, "cased": True}
    cases = [
        (
            replace(wiki, manifest=replace(wiki.manifest, vocab=vocab)),
            f"vocabulary sha256 abababababababab…, shards {first.manifest.vocab['sha256'][:16]}…; "
            "vocabulary cased True, shards False",
        ),
        (
            replace(wiki, manifest=replace(wiki.manifest, sequences=FULL_SENTENCES)),
            "sequences full-sentences, shards pairs",
        ),
        (
            replace(wiki, manifest=replace(wiki.manifest, masking=NO_MASKS)),
            "masking none, shards static",
        ),
    ]
    for other, differs in cases:
        with pytest.raises(DataConfigError) as refused:
            check_mix_sources((first, other), names)
        assert str(refused.value) == where + differs + fix


def test_a_source_of_another_length_is_refused_before_any_work(
    sample_shards, sample_documents, sample_vocab, tmp_path, capsys
) -> None:
    short = make_examples(
        [sample_documents[0]], sample_vocab, tmp_path / "short", "--max-seq-length", "64"
    )
    capsys.readouterr()  # the examples stage's lines
    flags = ["--shards", str(sample_shards), str(short), "--mix", "0.5,0.5"]
    code = train.run([*flags, "--output", str(tmp_path / "run"), "--model", "tiny"])
    assert code == 2
    err = capsys.readouterr().err
    manifest = short / "manifest.json"
    assert err == (
        f"bertkit train: error: --shards source short ({manifest}) differs from shards: "
        "sequence length 64, shards 128. The sources of a mix share one vocabulary, sequence "
        "length and recipe: build them with the same `bertkit examples` flags and vocabulary\n"
    )
    assert not (tmp_path / "run" / "checkpoints").exists()


# --------------------------------------------------------------------------- metrics


def test_a_map_is_nested_in_metrics_jsonl_and_its_numbers_tagged_in_tensorboard(
    tmp_path,
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricsLogger(tmp_path)
    logger.log(2, "train", {"loss": 3.5, "drawn": {"wiki": 45, "books": 19}})
    logger.log(2, "eval", {"mlm_loss": 2.5, "sources": {"wiki": {"mlm_loss": 2.25}}})
    with pytest.raises(TypeError) as refused:
        logger.log(3, "eval", {"sources": {"wiki": {"mlm_loss": "x"}}})
    logger.close()
    assert str(refused.value) == (
        "metric 'sources/wiki/mlm_loss' is a str; log a Python number (tensor.item()), None "
        "or a map of them"
    )
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [
        {"step": 2, "kind": "train", "loss": 3.5, "drawn": {"books": 19, "wiki": 45}},
        {"step": 2, "kind": "eval", "mlm_loss": 2.5, "sources": {"wiki": {"mlm_loss": 2.25}}},
    ]
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    scalars = {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert scalars == {
        "train/loss": [3.5],
        "train/drawn/wiki": [45.0],
        "train/drawn/books": [19.0],
        "eval/mlm_loss": [2.5],
        "eval/sources/wiki/mlm_loss": [2.25],
    }


def test_the_mix_figure_is_the_mean_of_the_sources_weighted_by_mix() -> None:
    wiki = EvalResult(2.0, 0.5, 0.75, 100, 10)
    books = EvalResult(4.0, 0.25, 0.5, 50, 5)
    result = MixEvalResult.of({"wiki": wiki, "books": books}, {"wiki": 0.75, "books": 0.25})
    assert result.as_dict() == {
        "mlm_loss": 2.5,  # 0.75 × 2 + 0.25 × 4, whatever the splits' sizes
        "mlm_accuracy": 0.4375,
        "nsp_accuracy": 0.6875,
        "predictions": 150,
        "sequences": 15,
        "sources": {"wiki": wiki.as_dict(), "books": books.as_dict()},
    }
    assert result.summary() == (
        "mix MLM loss 2.500, MLM accuracy 0.438, NSP accuracy 0.688; wiki MLM loss 2.000, "
        "accuracy 0.500; books MLM loss 4.000, accuracy 0.250"
    )
    # A source without a held-out split is left out, the others' shares normalised.
    alone = MixEvalResult.of({"books": books}, {"wiki": 0.75, "books": 0.25})
    assert (alone.mix.mlm_loss, alone.mix.mlm_accuracy) == (4.0, 0.25)


def test_the_progress_line_holds_each_sources_held_out_loss_until_the_next_evaluation() -> None:
    stream = io.StringIO()
    line = ProgressLine(4, every=1, stream=stream, tty=False, clock=lambda: 0.0)
    line.update(1, {"loss": 9.5})
    line.hold({"wiki held-out": 7.25, "books held-out": 8.5})
    line.update(2, {"loss": 9.25})
    line.hold({"wiki held-out": 7.0, "books held-out": 8.25})
    line.update(3, {"loss": 9.0})
    assert stream.getvalue().splitlines() == [
        "step 1/4 | loss 9.5",
        "step 2/4 | loss 9.25 | wiki held-out 7.25 | books held-out 8.5 | eta 0:00:00",
        "step 3/4 | loss 9 | wiki held-out 7 | books held-out 8.25 | eta 0:00:00",
    ]


# --------------------------------------------------------------------------- a real run

MICRO = 8
RUN_FLAGS = [
    "--model",
    "tiny",
    "--micro-batch-size",
    str(MICRO),
    "--max-steps",
    "4",
    "--log-every",
    "2",
    "--eval-every",
    "2",
    "--eval-batches",
    "2",
    "--checkpoint-every",
    "2",
    "--num-workers",
    "0",
    "--no-tensorboard",
]


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_mixed_run_logs_what_each_source_gave_and_each_sources_held_out_figures(
    sample_shards, wiki_shards, tmp_path, capsys, caplog
) -> None:
    caplog.set_level(logging.INFO, "bertkit.train")
    run_dir = tmp_path / "run"
    mix = ["--shards", str(sample_shards), str(wiki_shards), "--mix", "0.7,0.3"]
    assert train.run([*mix, "--output", str(run_dir), *RUN_FLAGS]) == 0
    rows = _rows(run_dir)
    assert [(row["kind"], row["step"]) for row in rows] == [
        ("train", 2),
        ("eval", 2),
        ("train", 4),
        ("eval", 4),
    ]
    source = MixedSource(
        (open_source(str(sample_shards)), open_source(str(wiki_shards))),
        ("shards", "wiki"),
        (0.7, 0.3),
    )
    for row in rows[0::2]:  # what each source gave up to the row's step, as the loader drew it
        drawn = drawn_per_source(source, 12345, MICRO, DataPosition(0, row["step"]))
        assert row["drawn"] == drawn
        assert sum(drawn.values()) == MICRO * row["step"]
        assert abs(drawn["shards"] - 0.7 * MICRO * row["step"]) < 2
    for row in rows[1::2]:
        each = row["sources"]
        assert sorted(each) == ["shards", "wiki"]
        for figures in each.values():
            assert sorted(figures) == [
                "mlm_accuracy",
                "mlm_loss",
                "nsp_accuracy",
                "predictions",
                "sequences",
            ]
            assert figures["sequences"] == 2 * MICRO  # --eval-batches of each source
        assert row["mlm_loss"] == 0.7 * each["shards"]["mlm_loss"] + 0.3 * each["wiki"]["mlm_loss"]
        assert row["sequences"] == 4 * MICRO
    out = capsys.readouterr()
    assert "a mix of 2 sources, by the names metrics.jsonl and TensorBoard use:" in caplog.text
    assert (
        f"  shards: 0.7 of each global batch, 15521 train samples, {sample_shards}" in caplog.text
    )
    assert f"  wiki: 0.3 of each global batch, 5350 train samples, {wiki_shards}" in caplog.text
    losses = rows[3]["sources"]
    assert (
        f"step 4/4 | loss {_format_value(rows[2]['loss'])} | seq/s "
        f"{_format_value(rows[2]['seq_per_s'])} | shards held-out "
        f"{_format_value(losses['shards']['mlm_loss'])} | wiki held-out "
        f"{_format_value(losses['wiki']['mlm_loss'])}"
    ) in out.err
    assert "held-out (the mix, weighted by --mix): MLM loss " in out.out
    assert f"  wiki: MLM loss {losses['wiki']['mlm_loss']:.3f} (perplexity " in out.out
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    data = checkpoint[CheckpointKey.DATA]
    assert checkpoint[CheckpointKey.TRAIN_CONFIG]["shards"] == (
        str(sample_shards),
        str(wiki_shards),
    )
    assert (data["mix"], [(s["name"], s["weight"]) for s in data["sources"]]) == (
        "0.7,0.3",
        [("shards", 0.7), ("wiki", 0.3)],
    )
    assert data["samples_per_epoch"] == sum(s["samples_per_epoch"] for s in data["sources"])


def test_resume_refuses_another_mix_or_other_sources_and_goes_on_with_the_same(
    sample_shards, wiki_shards, tmp_path, capsys
) -> None:
    run_dir = tmp_path / "run"
    shards = ["--shards", str(sample_shards), str(wiki_shards)]
    common = ["--output", str(run_dir), *RUN_FLAGS]
    assert train.run([*shards, "--mix", "0.7,0.3", *common, "--stop-at-step", "2"]) == 0
    capsys.readouterr()
    saved = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    digests = [s["shards_sha256"][:8] for s in saved[CheckpointKey.DATA]["sources"]]
    refused = "bertkit train: error: --resume continues exactly only with the data order and "
    refused += "the data the run started with: "
    fix = ". Use the original flags and shards, or start a new run with --init-checkpoint\n"

    assert train.run([*shards, "--mix", "0.5,0.5", *common, "--resume"]) == 2
    assert capsys.readouterr().err.endswith(refused + "--mix 0.7,0.3, now 0.5,0.5" + fix)

    one = f"one source ({sample_shards / 'manifest.json'})"
    both = f"shards (digest {digests[0]}…), wiki (digest {digests[1]}…)"
    assert train.run([*shards[:2], *common, "--resume"]) == 2
    assert capsys.readouterr().err.endswith(refused + f"--shards {both}, now {one}" + fix)

    swapped = ["--shards", str(wiki_shards), str(sample_shards), "--mix", "0.3,0.7"]
    assert train.run([*swapped, *common, "--resume"]) == 2
    turned = f"wiki (digest {digests[1]}…), shards (digest {digests[0]}…)"
    assert capsys.readouterr().err.endswith(
        refused + f"--shards {both}, now {turned}; --mix 0.7,0.3, now 0.3,0.7" + fix
    )

    assert train.run([*shards, "--mix", "0.7,0.3", *common, "--resume"]) == 0
    assert [(row["kind"], row["step"]) for row in _rows(run_dir)] == [
        ("train", 2),
        ("eval", 2),
        ("train", 4),
        ("eval", 4),
    ]


def test_a_mixed_run_resumed_gives_the_losses_and_weights_of_an_uninterrupted_one(
    sample_shards, wiki_shards, tmp_path
) -> None:
    common = [
        "--shards",
        str(sample_shards),
        str(wiki_shards),
        "--mix",
        "0.7,0.3",
        *RUN_FLAGS,
        "--max-steps",
        "5",
        "--log-every",
        "1",
        "--eval-every",
        "0",
        "--num-workers",
        "2",
        "--shuffle-buffer",
        "64",
    ]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.run([*common, "--output", str(whole)]) == 0
    assert train.run([*common, "--output", str(parts), "--stop-at-step", "2"]) == 0
    assert train.run([*common, "--output", str(parts), "--resume"]) == 0
    expected = {row["step"]: row for row in _rows(whole) if row["kind"] == "train"}
    resumed = {row["step"]: row for row in _rows(parts) if row["kind"] == "train"}
    assert sorted(resumed) == [1, 2, 3, 4, 5]
    for step in range(1, 6):
        assert (resumed[step]["loss"], resumed[step]["drawn"]) == (
            expected[step]["loss"],
            expected[step]["drawn"],
        )
    a = torch.load(latest_checkpoint(whole / "checkpoints"), weights_only=True)
    b = torch.load(latest_checkpoint(parts / "checkpoints"), weights_only=True)
    for name, tensor in a[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, b[CheckpointKey.MODEL][name]), name


def test_a_mix_resumed_from_moved_shards_keeps_its_sources_names(
    sample_shards, wiki_shards, tmp_path, caplog
) -> None:
    """The sample's shards copied to books/ (the same shards, by their digest) resume the run
    that knew them as `shards`: its metrics rows and its next checkpoint go on naming them
    so, not `books`, whose series would start over under another name."""
    run_dir, moved = tmp_path / "run", tmp_path / "elsewhere" / "books"
    common = ["--mix", "0.7,0.3", "--output", str(run_dir), *RUN_FLAGS]
    assert (
        train.run(
            ["--shards", str(sample_shards), str(wiki_shards), *common, "--stop-at-step", "2"]
        )
        == 0
    )
    shutil.copytree(sample_shards, moved)
    caplog.set_level(logging.INFO, "bertkit.train")
    assert train.run(["--shards", str(moved), str(wiki_shards), *common, "--resume"]) == 0
    assert (
        "--resume: each source keeps the name the checkpoint gives it, the one metrics.jsonl "
        f"and TensorBoard know it by: {moved} is shards (not books)"
    ) in caplog.messages
    assert f"  shards: 0.7 of each global batch, 15521 train samples, {moved}" in caplog.text
    rows = _rows(run_dir)
    assert [
        (row["kind"], row["step"], sorted(row.get("drawn") or row["sources"])) for row in rows
    ] == [
        ("train", 2, ["shards", "wiki"]),
        ("eval", 2, ["shards", "wiki"]),
        ("train", 4, ["shards", "wiki"]),
        ("eval", 4, ["shards", "wiki"]),
    ]
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.STEP] == 4
    assert [s["name"] for s in checkpoint[CheckpointKey.DATA]["sources"]] == ["shards", "wiki"]


def test_a_checkpoint_from_before_mixes_resumes_with_its_one_source() -> None:
    """A checkpoint recorded --shards as a string (and, before the data digest, had nothing
    else to tell its data by): the same one source, now a tuple of one, goes on."""
    from dataclasses import asdict

    from trainer.run.checkpoints import check_resumable

    saved = {**asdict(TrainConfig(shards="s", output="o")), "shards": "s"}
    del saved["mix"]  # not a flag then
    checkpoint = {CheckpointKey.TRAIN_CONFIG: saved, CheckpointKey.WORLD_SIZE: 1}
    data = {"manifest": "s/manifest.json", "max_seq_length": 128, "masking": "static"}
    check_resumable(checkpoint, asdict(TrainConfig(shards="s", output="o")), 1, data)
    with pytest.raises(ValueError) as refused:
        check_resumable(checkpoint, asdict(TrainConfig(shards="t", output="o")), 1, data)
    assert "the data the run started with: --shards s, now t. Use" in str(refused.value)


def test_a_source_without_held_out_shards_is_named_and_the_others_evaluated(
    sample_shards, sample_documents, sample_vocab, tmp_path, caplog
) -> None:
    # The 4 books, a tenth held out by document: none is.
    books = make_examples([sample_documents[1]], sample_vocab, tmp_path / "books")
    caplog.set_level(logging.WARNING, "bertkit.train")
    run_dir = tmp_path / "run"
    flags = ["--shards", str(sample_shards), str(books), "--mix", "0.5,0.5"]
    assert train.run([*flags, "--output", str(run_dir), *RUN_FLAGS, "--max-steps", "2"]) == 0
    assert f"{books / 'manifest.json'}: no held-out shards; source books is not evaluated" in (
        caplog.text
    )
    (row,) = [row for row in _rows(run_dir) if row["kind"] == "eval"]
    assert list(row["sources"]) == ["shards"]
    assert row["mlm_loss"] == row["sources"]["shards"]["mlm_loss"]  # its share renormalised


def test_a_held_out_split_of_is_next_pairs_only_is_said_once(sample_shards, caplog) -> None:
    # The held-out split of one document (adapt.md's four books, one held out) makes no
    # NotNext pair: its NSP accuracy counts one class. The sample's has both kinds.
    caplog.set_level(logging.WARNING, "bertkit.train")
    source = open_source(str(sample_shards), "train", 128)
    assert heldout_source(source) is not None
    assert caplog.messages == []
    source.manifest.outputs["seq128"].splits["heldout"].not_next = 0
    assert heldout_source(source) is not None
    assert caplog.messages == [
        f"{sample_shards / 'manifest.json'}: the held-out split holds IsNext pairs only (its "
        "documents had no NotNext partner: one document, say), so its NSP accuracy counts one "
        "class; its MLM figures are unaffected"
    ]
    caplog.clear()  # the other processes of a job say nothing: once, not once a process
    assert heldout_source(source, main=False) is not None
    assert caplog.messages == []


def test_weights_near_the_largest_float_are_shares_of_one() -> None:
    config = TrainConfig(shards=("a", "b"), output="o", mix=(1e308, 3e307))
    assert config.weights == pytest.approx((1 / 1.3, 0.3 / 1.3))
    assert TrainConfig(shards=("a", "b"), output="o", mix=(1e308, 1e308)).weights == (0.5, 0.5)
