"""`bertkit train --init-checkpoint`: a bertkit checkpoint it starts from is named in the log
with its step, and one that --overwrite would delete (the run directory's own, under any
spelling: its checkpoints folder, a step file, a link, `..`; on s3:// by URL) is refused
in one line before any work, every file of the earlier run kept."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from tests.support.s3_bucket import bucket_fixture, objects_under
from tests.test_train import TINY
from trainer import train

BUCKET = "init-overwrite"
s3 = bucket_fixture(BUCKET)

STEPS = [
    "--max-steps",
    "2",
    "--warmup-steps",
    "1",
    "--num-workers",
    "0",
    "--eval-every",
    "0",
    "--eval-batches",
    "1",
    "--checkpoint-every",
    "1",
]
FIX = (
    "(nothing is deleted yet): copy it out of the run directory and pass the copy, or write "
    "this run to another --output"
)


def _refused(capsys, *argv: str) -> str:
    """train.run's exit code 2 and its one line on stderr."""
    capsys.readouterr()
    assert train.run(list(argv)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line.removeprefix("bertkit train: error: ")


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_overwrite_refuses_to_start_from_a_checkpoint_it_would_delete(
    sample_shards, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    common = [*TINY, "--shards", str(sample_shards), *STEPS]
    assert train.run([*common, "--output", "p1"]) == 0
    kept = _files(tmp_path / "p1")
    assert [name for name in kept if name.startswith("checkpoints/")] == [
        "checkpoints/latest",
        "checkpoints/step-00000001.pt",
        "checkpoints/step-00000002.pt",
    ]
    os.symlink("p1", "link")
    (tmp_path / "sub").mkdir()
    latest = "p1/checkpoints/step-00000002.pt"
    for given, resolved in (
        ("p1", latest),
        ("p1/checkpoints", latest),
        ("link/checkpoints/", "link/checkpoints/step-00000002.pt"),
        ("sub/../p1/checkpoints/step-00000001.pt", None),
        (str(tmp_path / "p1" / "checkpoints" / "step-00000001.pt"), None),
    ):
        line = _refused(
            capsys, *common, "--output", "p1", "--init-checkpoint", given, "--overwrite"
        )
        named = f" is {resolved}," if resolved else " is"
        assert line == (
            f"--init-checkpoint {given}{named} one of the earlier run's checkpoints that "
            f"--overwrite deletes from p1 {FIX}"
        )
        assert _files(tmp_path / "p1") == kept
    # A copy outside the run directory is what it may start from.
    shutil.copytree("p1/checkpoints", "copy")
    args = [*common, "--output", "p1", "--init-checkpoint", "copy", "--overwrite"]
    assert train.run(args) == 0


def test_a_bertkit_checkpoint_it_starts_from_is_named_with_its_step(
    sample_shards, tmp_path, caplog
) -> None:
    common = [*TINY, "--shards", str(sample_shards), *STEPS]
    first = tmp_path / "first"
    assert train.run([*common, "--output", str(first)]) == 0
    caplog.set_level(logging.INFO, "bertkit.train")
    given = ["--output", str(tmp_path / "second"), "--init-checkpoint", str(first)]
    assert train.run([*common, *given]) == 0
    named = [message for message in caplog.messages if message.startswith("--init-checkpoint")]
    assert named == [
        f"--init-checkpoint: the model's weights from {first}/checkpoints/step-00000002.pt (its "
        "step 2); this run's optimizer and schedule start at step 0"
    ]


def test_overwrite_on_s3_refuses_to_start_from_its_own_checkpoint(
    sample_shards, s3, capsys
) -> None:
    common = [*TINY, "--shards", str(sample_shards), *STEPS, "--stop-at-step", "1"]
    url = f"s3://{BUCKET}/run"
    assert train.run([*common, "--output", url]) == 0
    client = s3
    kept = objects_under(client, BUCKET, "run")
    for given in (url, f"{url}/checkpoints/", f"{url}/checkpoints/step-00000001.pt"):
        line = _refused(capsys, *common, "--output", url, "--init-checkpoint", given, "--overwrite")
        resolved = f"{url}/checkpoints/step-00000001.pt"
        named = " is" if given == resolved else f" is {resolved},"
        assert line == (
            f"--init-checkpoint {given}{named} one of the earlier run's checkpoints that "
            f"--overwrite deletes from {url} {FIX}"
        )
        assert objects_under(client, BUCKET, "run") == kept
