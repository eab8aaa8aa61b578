"""`bertkit train`'s run directory and checkpoints: an earlier run needs --resume or
--overwrite, rotation keeps the newest, --overwrite deletes only what a run wrote, a
checkpoint is on disk before `latest` names it, and a tampered `latest` is refused (the
training itself is tested in tests/test_train.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemas.checkpoint import LATEST_FILE
from tests.test_train import metrics, run_train
from trainer.run.checkpoints import latest_checkpoint


def test_an_earlier_run_needs_resume_or_overwrite_and_rotation_keeps_latest(
    sample_shards, tmp_path, capsys
):
    run_dir = tmp_path / "r"
    common = [
        "--shards",
        str(sample_shards),
        "--output",
        str(run_dir),
        "--warmup-steps",
        "1",
        "--num-workers",
        "0",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "2",
    ]
    assert run_train(*common, "--max-steps", "4") == 0
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert before == [LATEST_FILE, "step-00000002.pt", "step-00000004.pt"]
    # A second run into it: refused before any work, nothing touched.
    assert run_train(*common, "--max-steps", "2", "--keep-checkpoints", "1") == 2
    err = capsys.readouterr().err
    assert f"{run_dir} holds an earlier run" in err and "--resume" in err and "--overwrite" in err
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before
    # --overwrite starts over; rotation keeps the checkpoint just written, which latest names.
    assert run_train(*common, "--max-steps", "2", "--keep-checkpoints", "1", "--overwrite") == 0
    assert latest_checkpoint(run_dir / "checkpoints").name == "step-00000002.pt"
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        LATEST_FILE,
        "step-00000002.pt",
    ]
    assert sorted(metrics(run_dir)) == [1, 2]  # the earlier run's metrics went with it
    assert run_train(*common, "--max-steps", "2", "--resume", "--overwrite") == 2
    assert "give one" in capsys.readouterr().err


def test_overwrite_never_deletes_what_no_run_wrote(tmp_path):
    from trainer.run.checkpoints import CheckpointError, prepare_run_directory

    run_dir = tmp_path / "r"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "step-00000002.pt").write_bytes(b"x")
    (run_dir / "checkpoints" / LATEST_FILE).write_text("step-00000002.pt\n")
    (run_dir / "metrics.jsonl").write_text("{}\n")
    (run_dir / "notes").mkdir()
    (run_dir / "notes" / "weights.bin").write_bytes(b"mine")
    with pytest.raises(CheckpointError, match=r"also holds notes, which no training run writes"):
        prepare_run_directory(run_dir, resume=False, overwrite=True)
    assert (run_dir / "notes" / "weights.bin").read_bytes() == b"mine"
    assert (run_dir / "checkpoints" / "step-00000002.pt").exists()
    (run_dir / "notes" / "weights.bin").unlink()
    (run_dir / "notes").rmdir()
    assert [p.name for p in prepare_run_directory(run_dir, resume=False, overwrite=True)] == [
        "latest",
        "step-00000002.pt",
        "metrics.jsonl",
    ]
    assert prepare_run_directory(run_dir, resume=True, overwrite=False) == []
    assert prepare_run_directory(tmp_path / "new", resume=False, overwrite=False) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(CheckpointError, match="is a file"):
        prepare_run_directory(tmp_path / "file", resume=False, overwrite=False)


def test_another_tool_s_log_directory_is_never_taken_for_a_run_killed_early(tmp_path):
    from trainer.run.checkpoints import CheckpointError, prepare_run_directory

    logs = tmp_path / "logs"  # a TensorBoard log directory of another trainer's
    logs.mkdir()
    (logs / "metrics.jsonl").write_text('{"my": "precious results"}\n')
    (logs / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"x")
    for resume in (False, True):
        with pytest.raises(CheckpointError) as refused:
            prepare_run_directory(logs, resume=resume, overwrite=False)
        assert str(refused.value) == (
            f"{logs} holds events.out.tfevents.1700000000.host.1.0, metrics.jsonl, names a "
            "training run writes, but no metrics.jsonl a run wrote (its rows have a kind and a "
            "step): nothing was deleted. Pass --overwrite to replace them, or choose another "
            "--output"
        )
    (logs / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError) as refused:
        prepare_run_directory(logs, resume=False, overwrite=False)
    assert str(refused.value) == (
        f"{logs} also holds notes.txt, which no training run writes; nothing was deleted. "
        "Move it, or choose another --output"
    )
    assert (logs / "metrics.jsonl").read_text() == '{"my": "precious results"}\n'
    (logs / "notes.txt").unlink()
    assert len(prepare_run_directory(logs, resume=False, overwrite=True)) == 2  # asked to
    # A run killed before its first row: its metrics.jsonl is open and empty.
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "metrics.jsonl").write_text("")
    (killed / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"x")
    assert len(prepare_run_directory(killed, resume=False, overwrite=False)) == 2
    (killed / "metrics.jsonl").write_text('{"kind": "train", "loss": 2.5, "step": 1}\n')
    assert len(prepare_run_directory(killed, resume=True, overwrite=False)) == 2


def test_rotation_never_removes_the_checkpoint_just_written(tmp_path):
    from trainer.run.checkpoints import save_checkpoint

    directory = tmp_path / "checkpoints"
    directory.mkdir()
    for step in (6, 8):  # a later run's, left behind
        (directory / f"step-{step:08d}.pt").write_bytes(b"old")
    (directory / "step-notes.pt").write_bytes(b"not a checkpoint name")
    save_checkpoint(directory, 2, {"step": 2}, keep=2)
    names = sorted(p.name for p in directory.iterdir())
    # kept: the one written and the newest other; a file not named step-NNNNNNNN.pt stays.
    assert names == [LATEST_FILE, "step-00000002.pt", "step-00000008.pt", "step-notes.pt"]
    assert latest_checkpoint(directory).name == "step-00000002.pt"


def test_a_checkpoint_is_on_disk_before_latest_names_it(tmp_path, monkeypatch):
    from trainer.run.checkpoints import save_checkpoint

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (
            events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1]))
            or real_fsync(fd)
        ),
    )
    monkeypatch.setattr(
        os, "replace", lambda a, b: events.append(("replace", Path(b).name)) or real_replace(a, b)
    )
    save_checkpoint(tmp_path / "checkpoints", 2, {"step": 2}, keep=1)
    kinds = [
        (kind, name if kind == "replace" or not name.startswith(".tmp-") else name.split("-", 2)[2])
        for kind, name in events
    ]
    assert kinds == [
        ("fsync", "step-00000002.pt"),
        ("replace", "step-00000002.pt"),
        ("fsync", LATEST_FILE),
        ("replace", LATEST_FILE),
        ("fsync", "checkpoints"),
    ]


def test_resume_deletes_only_the_temporaries_of_a_killed_checkpoint_write(tmp_path):
    from trainer.run.checkpoints import prepare_run_directory

    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    names = [
        "step-00000004.pt",
        "latest",
        f".tmp-{'a' * 32}-step-00000008.pt",
        f".tmp-{'b' * 32}-latest",
        ".tmp-notes",
    ]
    for name in names:
        (checkpoints / name).write_bytes(b"x")
    assert [p.name for p in prepare_run_directory(tmp_path, resume=True, overwrite=False)] == [
        f".tmp-{'a' * 32}-step-00000008.pt",
        f".tmp-{'b' * 32}-latest",
    ]
    # `.tmp-notes` is no name the trainer writes: --overwrite refuses the directory for it.
    with pytest.raises(ValueError, match=r"also holds checkpoints/\.tmp-notes, which no "):
        prepare_run_directory(tmp_path, resume=False, overwrite=True)


@pytest.mark.parametrize(
    ("latest", "message"),
    [
        ("../../../etc/passwd", r"holds '\.\./\.\./\.\./etc/passwd', not the name of a checkpoint"),
        ("/etc/passwd", r"holds '/etc/passwd', not the name"),
        ("step-2.pt", r"holds 'step-2\.pt', not the name"),
        ("step-00000002.pt" + " " * 100, r"holds 'step-00000002\.pt', not the name"),  # too long
        ("step-00000004.pt", r"names 'step-00000004\.pt', which is not a file in "),
    ],
)
def test_a_tampered_latest_is_refused_naming_it(tmp_path, latest, message):
    from trainer.run.checkpoints import CheckpointError, resolve_checkpoint, save_checkpoint

    directory = tmp_path / "checkpoints"
    directory.mkdir()
    save_checkpoint(directory, 2, {"step": 2}, keep=2)
    (directory / LATEST_FILE).write_text(latest)
    with pytest.raises(CheckpointError, match=message) as error:
        latest_checkpoint(directory)
    assert str(error.value).startswith(str(directory / LATEST_FILE))
    with pytest.raises(CheckpointError, match=message):
        resolve_checkpoint(directory)
