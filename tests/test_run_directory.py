"""A run directory is written by one trainer and resumed honestly: no resume that starts over
on top of checkpoints, no symbolic link that leads rotation elsewhere, no resume onto other
data, no two writers at once, and a run that wrote no checkpoint retried with its flags."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from pipelines import examples
from tests.test_exits import FLAGS, train_process, wait_for_step
from tests.test_remote_run import BUCKET, s3  # noqa: F401 (the fixture)
from tests.test_train import metrics, run_train
from trainer.run import lock as run_lock
from trainer.run.lock import LOCK_FILE, Holder, RunLock, RunLockedError

STEPS = [
    "--warmup-steps",
    "1",
    "--eval-every",
    "0",
    "--num-workers",
    "0",
    "--checkpoint-every",
    "2",
    "--keep-checkpoints",
    "5",
]


def train_to(shards: Path, run_dir: Path, steps: int, *extra: str) -> int:
    return run_train(
        "--shards", str(shards), "--output", str(run_dir), "--max-steps", str(steps), *STEPS, *extra
    )


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("latest", ["missing", "fifo", "directory"])
def test_resume_without_a_usable_latest_is_refused_and_changes_nothing(
    sample_shards, tmp_path, capsys, latest
):
    run_dir = tmp_path / "run"
    assert train_to(sample_shards, run_dir, 4) == 0
    pointer = run_dir / "checkpoints" / "latest"
    pointer.unlink()
    if latest == "fifo":
        os.mkfifo(pointer)
    elif latest == "directory":
        pointer.mkdir()
    before = snapshot(run_dir)
    assert train_to(sample_shards, run_dir, 6, "--resume") == 2
    error = capsys.readouterr().err.splitlines()[-1]
    if latest == "missing":
        assert (
            f"bertkit train: error: {pointer} is missing, but {run_dir}/checkpoints holds "
            "step-00000002.pt, step-00000004.pt: `latest` names the newest complete one, and "
            f"nothing else says which that is. Write its name into {pointer} "
            f"(echo step-00000004.pt > {pointer}) to resume from it, or pass --overwrite to "
            "start over"
        ) == error
    else:
        assert f"bertkit train: error: {pointer} is not a regular file" in error
    assert snapshot(run_dir) == before
    assert not (run_dir / LOCK_FILE).exists()


def test_a_symlinked_checkpoints_folder_is_refused_and_nothing_there_is_deleted(
    sample_shards, tmp_path, capsys
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "step-00000001.pt").write_bytes(b"not the run's")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoints").symlink_to(elsewhere)
    for flags in ([], ["--resume"], ["--overwrite"]):
        assert train_to(sample_shards, run_dir, 2, *flags) == 2
        assert (
            f"bertkit train: error: {run_dir}/checkpoints is a symbolic link (to {elsewhere}): "
            "a run writes, rotates and deletes files only in a directory of its own"
        ) in capsys.readouterr().err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["step-00000001.pt"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints"]


def test_a_dangling_latest_link_is_refused_with_a_file_as_the_fix(tmp_path):
    """`checkpoints/latest` as a link to nothing: the fix is a file naming the newest
    checkpoint, not the directory the message for a linked checkpoints/ names."""
    from trainer.run.checkpoints import CheckpointError, prepare_run_directory

    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "step-00000002.pt").write_bytes(b"")
    pointer = checkpoints / "latest"
    pointer.symlink_to(tmp_path / "gone")
    with pytest.raises(CheckpointError) as error:
        prepare_run_directory(tmp_path / "run", resume=True, overwrite=False)
    assert str(error.value) == (
        f"{pointer} is a symbolic link (to {tmp_path}/gone, which does not exist): a run "
        "writes, rotates and deletes files only in a directory of its own. Replace the link "
        f"with a file holding the newest checkpoint's name (rm {pointer}; echo "
        f"step-00000002.pt > {pointer}), or choose another --output"
    )


def rebuilt(sample_shards: Path, target: Path, *flags: str) -> None:
    """The shards made again under `target` with other flags (as a user rebuilding them)."""
    manifest = json.loads((sample_shards / "manifest.json").read_text())
    config = manifest["config"]
    assert (
        examples.run(
            [
                "--documents",
                *config["documents"],
                "--vocab",
                config["vocab"],
                "--output",
                str(target),
                "--samples-per-shard",
                "2000",
                "--heldout-fraction",
                "0.05",
                *flags,
            ]
        )
        == 0
    )


def test_resume_onto_shards_rebuilt_under_the_same_path_is_refused(sample_shards, tmp_path, capsys):
    shards = tmp_path / "shards"
    shutil.copytree(sample_shards, shards)
    run_dir = tmp_path / "run"
    assert train_to(shards, run_dir, 2) == 0
    # The same shards somewhere else are the same data: the resume goes on.
    moved = tmp_path / "moved"
    shutil.copytree(shards, moved)
    assert train_to(moved, run_dir, 4, "--resume") == 0
    assert sorted(metrics(run_dir)) == [1, 2, 3, 4]
    shutil.rmtree(shards)
    rebuilt(sample_shards, shards, "--max-seq-length", "128", "--dupe-factor", "2", "--seed", "7")
    before = snapshot(run_dir)
    assert train_to(shards, run_dir, 6, "--resume") == 2
    error = capsys.readouterr().err
    assert "--resume continues exactly only with the data order and the data the run " in error
    assert "the shards' sha256 digest " in error
    assert snapshot(run_dir) == before


def test_resume_compares_the_resolved_sequence_length(sample_shards, tmp_path):
    """A run started without --max-seq-length resumes with `--max-seq-length 128`, the length
    it resolved to; the flag's raw value was compared before."""
    run_dir = tmp_path / "run"
    assert train_to(sample_shards, run_dir, 2) == 0
    assert train_to(sample_shards, run_dir, 4, "--resume", "--max-seq-length", "128") == 0
    assert sorted(metrics(run_dir)) == [1, 2, 3, 4]


def test_a_run_killed_before_its_first_checkpoint_is_retried_with_the_same_flags(
    sample_shards, tmp_path, caplog
):
    """A trainer SIGKILLed at step 3, before any checkpoint; the retry, the same command line
    (run in this process: the kill is what needs a process of its own), replaces the killed
    try's metrics.jsonl and says so."""
    run_dir = tmp_path / "run"
    flags = ("--max-steps", "8", "--checkpoint-every", "100", "--num-workers", "0")
    process = train_process(sample_shards, run_dir, *flags)
    wait_for_step(run_dir, 3, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    assert (run_dir / "metrics.jsonl").exists() and not (run_dir / "checkpoints").exists()
    # train_process's arguments after its TINY (which run_train adds).
    retry = ["--shards", str(sample_shards), "--output", str(run_dir), *FLAGS, *flags]
    assert run_train(*retry) == 0
    assert (
        "an earlier run stopped before its first checkpoint; its metrics.jsonl will be replaced"
        in caplog.text
    )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [record["step"] for record in records if record["kind"] == "train"]
    assert steps == list(range(1, 9))  # once each: the killed try's are gone


def test_a_second_trainer_on_the_same_output_is_refused_until_the_first_is_gone(
    sample_shards, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    first = train_process(sample_shards, run_dir, "--max-steps", "100000", "--num-workers", "0")
    wait_for_step(run_dir, 2, first)
    before = (run_dir / "metrics.jsonl").read_bytes()
    for flags in ([], ["--resume"], ["--overwrite"]):
        assert train_to(sample_shards, run_dir, 4, *flags) == 2
        error = capsys.readouterr().err
        assert (
            f"bertkit train: error: --output {run_dir} is being written by process {first.pid} on "
            in error
        )
        assert "one run directory takes one trainer" in error
    assert (run_dir / "metrics.jsonl").read_bytes().startswith(before)
    os.killpg(first.pid, signal.SIGKILL)  # a crash: the kernel gives its lock back
    first.communicate()
    assert train_to(sample_shards, run_dir, 4, "--overwrite") == 0
    assert sorted(metrics(run_dir)) == [1, 2, 3, 4]
    assert not (run_dir / LOCK_FILE).exists()


def test_a_refused_run_leaves_no_run_directory(sample_shards, tmp_path, capsys):
    run_dir = tmp_path / "a" / "b" / "run"
    assert (
        train_to(
            sample_shards,
            run_dir,
            2,
            "--model",
            "base",
            "--init-checkpoint",
            str(tmp_path / "none.pt"),
        )
        == 2
    )
    assert "none.pt does not exist" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_lock_on_object_storage_is_exclusive_and_a_stale_one_is_taken_over(
    s3,  # noqa: F811 (the fixture)
    monkeypatch,
    caplog,
):
    url = f"s3://{BUCKET}/locked"
    key = f"locked/{LOCK_FILE}"
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.delenv("BERTKIT_JOB_ID", raising=False)
    first = RunLock.acquire(url)
    holder = Holder.parse(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert holder is not None and holder.pid == os.getpid() and holder.job == ""
    with pytest.raises(
        RunLockedError,
        match=f"--output {url} is being written by process "
        f"{os.getpid()} on .* \\(renewed [0-2] s ago; if that run is dead, its lock "
        "runs out 1(18|19|20) s from now\\): one run directory takes one trainer",  # whole s
    ):
        RunLock.acquire(url)
    first.release()
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="locked/")
    # A run killed with its lock held: once the lease has run out (by the storage's clock:
    # when it last wrote the object), the next run takes it.
    stale = Holder("gone", 1, "", time.time() - 500, time.time() - 500, "dead")
    s3.put_object(Bucket=BUCKET, Key=key, Body=stale.to_bytes())
    with monkeypatch.context() as short:
        short.setenv(run_lock.LEASE_VARIABLE, "1")
        time.sleep(2.1)  # S3's LastModified counts whole seconds
        with caplog.at_level("WARNING"):
            taken = RunLock.acquire(url)
    assert f"{url}/{LOCK_FILE}: taking over the lock of process 1 on gone, since " in caplog.text
    assert (
        "(stale, last written " in caplog.text and " s ago by the storage's clock)" in caplog.text
    )
    taken.release()
    # The same scheduler job started again (a requeue) takes over a fresh lock at once.
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    same_job = Holder("node1", 2, "4242", time.time(), time.time(), "earlier-attempt")
    s3.put_object(Bucket=BUCKET, Key=key, Body=same_job.to_bytes())
    RunLock.acquire(url).release()
    # The renewal thread rewrites the lock: shortened here to see it.
    monkeypatch.setattr(run_lock, "RENEW_SECONDS", 0.05)
    lock = RunLock.acquire(url)
    first_renewal = Holder.parse(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()).renewed
    time.sleep(0.3)
    assert (
        Holder.parse(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()).renewed > first_renewal
    )
    lock.release()


def test_a_damaged_checkpoint_on_gcs_is_named_by_its_url_not_the_staging_folder(
    sample_shards, capsys
):
    from tests.support.gcsserver import gcs_emulator

    common = ["--shards", str(sample_shards), "--max-steps", "4", *STEPS]
    with gcs_emulator(BUCKET) as client:
        url = f"gs://{BUCKET}/damaged"
        assert run_train(*common, "--output", url, "--stop-at-step", "2") == 0
        blob = client.bucket(BUCKET).blob("damaged/checkpoints/step-00000002.pt")
        blob.upload_from_string(b"not a checkpoint")
        assert run_train(*common, "--output", url, "--resume") == 2
        error = capsys.readouterr().err.split("bertkit train: error: ", 1)[1]
        assert error.startswith(
            f"{url}/checkpoints/step-00000002.pt is not a bertkit "
            "checkpoint (torch.load(weights_only=True): "
        ), error
        assert "bertkit-run-" not in error
        assert (
            run_train(
                *common,
                "--output",
                f"gs://{BUCKET}/phase2",
                "--init-checkpoint",
                f"{url}/checkpoints",
            )
            == 2
        )
        error = capsys.readouterr().err.split("bertkit train: error: ", 1)[1]
        assert error.startswith(
            f"{url}/checkpoints/step-00000002.pt is not a bertkit checkpoint"
        ), error
