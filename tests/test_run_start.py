"""The run directory as one object (trainer/run/directory.py) and what a run starts from as
one `Start` (trainer/run/start.py), asked directly: where --output may be, its lock held
until it is closed, an earlier run's files deleted only when told, the start of a fresh
run and of another run's checkpoint (its released model's record rebased to this run).
--resume's start is the end-to-end runs' (tests/test_train.py, tests/test_remote_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from schemas.checkpoint import CHECKPOINT_FORMAT, CheckpointKey
from trainer.config import TrainConfig
from trainer.distributed import Distributed
from trainer.run.checkpoints import CheckpointError, save_checkpoint
from trainer.run.directory import RunDirectory
from trainer.run.lock import LOCK_FILE, RunLockedError
from trainer.run.start import START_CHECKPOINT, START_NOTHING, Start, start_from

ONE_PROCESS = Distributed(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))


def test_an_output_inside_the_shards_is_refused_before_the_lock(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    with pytest.raises(CheckpointError) as error:
        RunDirectory.open(str(shards / "run"), (str(shards),), keep=3, main=True)
    assert str(error.value) == (
        f"--output {shards / 'run'} is inside the shards directory {shards}: write the run "
        "beside the data, e.g. --output runs/NAME"
    )
    assert not (shards / "run").exists()


def test_the_lock_is_held_until_the_directory_is_closed(tmp_path: Path) -> None:
    output = str(tmp_path / "run")
    (tmp_path / "shards").mkdir()
    first = RunDirectory.open(output, (str(tmp_path / "shards"),), keep=3, main=True)
    assert (first.path, first.remote, first.checkpoints) == (
        Path(output),
        None,
        Path(output) / "checkpoints",
    )
    with pytest.raises(RunLockedError):
        RunDirectory.open(output, (str(tmp_path / "shards"),), keep=3, main=True)
    first.close()
    second = RunDirectory.open(output, (str(tmp_path / "shards"),), keep=3, main=True)
    assert (tmp_path / "run" / LOCK_FILE).is_file()
    second.close()
    # Another rank's directory takes no lock: rank 0's is the one.
    other = RunDirectory.open(output, (str(tmp_path / "shards"),), keep=3, main=False)
    assert other.lock is None
    other.close()


def test_overwrite_deletes_the_earlier_run_only_once_cleared(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step-00000002.pt").write_bytes(b"x")
    (run / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "shards").mkdir()
    directory = RunDirectory.open(str(run), (str(tmp_path / "shards"),), keep=3, main=True)
    try:
        with pytest.raises(CheckpointError):
            directory.prepare(resume=False, overwrite=False)
        directory.prepare(resume=False, overwrite=True)
        assert sorted(p.name for p in run.rglob("*") if p.is_file()) == [
            "metrics.jsonl",
            LOCK_FILE,
            "step-00000002.pt",
        ]
        directory.clear_earlier(main=False)  # another rank deletes nothing
        assert (run / "metrics.jsonl").is_file()
        directory.clear_earlier(main=True)
        assert sorted(p.name for p in run.rglob("*") if p.is_file()) == [LOCK_FILE]
    finally:
        directory.close()


def _config(tmp_path: Path, output: str = "run", **flags: object) -> TrainConfig:
    return TrainConfig(
        shards=(str(tmp_path / "shards"),),
        output=str(tmp_path / output),
        max_steps=10,
        **flags,  # type: ignore[arg-type]
    )


def _checkpoint(step: int, start: dict | None = None) -> dict:
    return {
        CheckpointKey.FORMAT: CHECKPOINT_FORMAT,
        CheckpointKey.STEP: step,
        CheckpointKey.TRAIN_CONFIG: {"model": "tiny"},
        CheckpointKey.MODEL_CONFIG: {},
        CheckpointKey.MODEL: {},
        CheckpointKey.VOCAB: {},
        **({CheckpointKey.START: start} if start else {}),
    }


def test_a_fresh_run_starts_from_nothing_with_the_default_model(tmp_path: Path) -> None:
    directory = RunDirectory.open(str(tmp_path / "run"), (), keep=3, main=True)
    try:
        directory.prepare(resume=False, overwrite=False)
        start, config = start_from(_config(tmp_path), ONE_PROCESS, directory, {})
    finally:
        directory.close()
    assert start == Start(START_NOTHING)
    assert (start.resumed, start.weights, config.model, config.warmup_steps) == (
        None,
        None,
        "base",
        1,
    )


def test_another_runs_checkpoint_starts_a_run_its_start_record_rebased(tmp_path: Path) -> None:
    earlier = tmp_path / "a" / "checkpoints"
    record = {"kind": "released", "path": "../../released", "config_file": "config.json"}
    written = save_checkpoint(earlier, 4, _checkpoint(4, record), keep=3)
    directory = RunDirectory.open(str(tmp_path / "b" / "deep"), (), keep=3, main=True)
    try:
        config = _config(tmp_path, "b/deep", init_checkpoint=str(earlier), model="tiny")
        start, config = start_from(config, ONE_PROCESS, directory, {})
    finally:
        directory.close()
    assert (start.kind, start.where, start.resumed) == (START_CHECKPOINT, str(written), None)
    assert start.weights is not None and start.weights[CheckpointKey.STEP] == 4
    # Rebased from a/checkpoints to b/deep/checkpoints: the same released directory.
    assert start.weights[CheckpointKey.START] == {**record, "path": "../../../released"}


def test_a_model_other_than_the_checkpoints_is_refused(tmp_path: Path) -> None:
    earlier = tmp_path / "a" / "checkpoints"
    save_checkpoint(earlier, 4, _checkpoint(4), keep=3)
    directory = RunDirectory.open(str(tmp_path / "run"), (), keep=3, main=True)
    try:
        with pytest.raises(ValueError) as error:
            start_from(
                _config(tmp_path, init_checkpoint=str(earlier), model="base"),
                ONE_PROCESS,
                directory,
                {},
            )
    finally:
        directory.close()
    assert str(error.value) == (
        "the checkpoint holds a tiny model, --model is base: pass --model tiny"
    )


def test_the_directory_says_which_checkpoints_overwrite_deletes(tmp_path: Path) -> None:
    """`deletes` compares real paths (a link, `..`): the earlier run's checkpoints once
    --overwrite has prepared to delete them, nothing before nor with --resume."""
    run = tmp_path / "run"
    step = run / "checkpoints" / "step-00000002.pt"
    save_checkpoint(run / "checkpoints", 2, _checkpoint(2), keep=3)
    (tmp_path / "link").symlink_to(run)
    (tmp_path / "shards").mkdir()
    spellings = [
        step,
        tmp_path / "link" / "checkpoints" / step.name,
        run / ".." / "run" / "checkpoints" / step.name,
    ]
    directory = RunDirectory.open(str(run), (str(tmp_path / "shards"),), keep=3, main=True)
    try:
        assert [directory.deletes(path) for path in spellings] == [False, False, False]
        directory.prepare(resume=True, overwrite=False)
        assert [directory.deletes(path) for path in spellings] == [False, False, False]
        directory.prepare(resume=False, overwrite=True)
        assert [directory.deletes(path) for path in spellings] == [True, True, True]
        assert directory.deletes(tmp_path / "elsewhere" / step.name) is False
        assert directory.deletes(f"s3://bucket/run/checkpoints/{step.name}") is False  # local
    finally:
        directory.close()
