"""Run directories on object storage: `bertkit train --output s3://…` and `gs://…`, against
real servers on loopback (moto's S3, the GCS emulator). Checkpoints, `latest`, the metrics
and the TensorBoard events land in the bucket; `--resume`, `--init-checkpoint` and
`export-hf` read them from there; resuming gives the losses of an uninterrupted local run;
the earlier-run rules hold for a prefix as for a directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bertkit import cli
from pipelines.io import objects
from tests.support.gcsserver import gcs_emulator
from tests.support.s3_bucket import bucket_fixture, objects_under
from tests.support.s3server import client_environment
from tests.support.torchrun import torchrun_trainer
from tests.test_train import TINY, metrics
from trainer import train
from trainer.export import CONFIG_FILE, WEIGHTS_FILE, ExportError, export_hf

BUCKET = "runs"
STEPS = [
    "--max-steps",
    "6",
    "--warmup-steps",
    "2",
    "--eval-every",
    "0",
    "--checkpoint-every",
    "3",
    "--keep-checkpoints",
    "1",
]


s3 = bucket_fixture(BUCKET)


def s3_listing(client, prefix: str) -> dict[str, bytes]:
    return objects_under(client, BUCKET, prefix)


def losses(lines: bytes) -> dict[int, float]:
    records = [json.loads(line) for line in lines.decode().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["kind"] == "train"}


def test_a_run_on_s3_stops_resumes_and_exports_like_a_local_one(
    sample_shards, s3, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # a URL taken for a path would show up here as s3:/…
    common = [*TINY, "--shards", str(sample_shards), *STEPS]
    url = f"s3://{BUCKET}/r1"
    assert train.run([*common, "--output", str(tmp_path / "local")]) == 0
    assert train.run([*common, "--output", url, "--stop-at-step", "3"]) == 0
    stopped = s3_listing(s3, "r1")
    assert sorted(stopped) == [
        "checkpoints/latest",
        "checkpoints/step-00000003.pt",
        "metrics.jsonl",
    ]
    assert stopped["checkpoints/latest"] == b"step-00000003.pt\n"
    # An earlier run on the prefix needs --resume, as a directory does.
    assert train.run([*common, "--output", url]) == 2
    assert f"{url} holds an earlier run (checkpoints/latest, …)" in capsys.readouterr().err
    assert train.run([*common, "--output", url, "--resume"]) == 0
    done = s3_listing(s3, "r1")
    assert sorted(done) == [
        "checkpoints/latest",
        "checkpoints/step-00000006.pt",
        "metrics.jsonl",
    ]  # step 3 rotated out, --keep 1
    assert losses(done["metrics.jsonl"]) == {
        s: metrics(tmp_path / "local")[s]["loss"] for s in range(1, 7)
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local"]
    # export-hf reads the checkpoint from the bucket, given the run's URL (its checkpoints'
    # `latest`): the same weights as the local run's.
    export_hf(url, tmp_path / "hf-remote")
    export_hf(tmp_path / "local" / "checkpoints", tmp_path / "hf-local")
    remote_weights = (tmp_path / "hf-remote" / WEIGHTS_FILE).read_bytes()
    assert remote_weights == (tmp_path / "hf-local" / WEIGHTS_FILE).read_bytes()
    # --init-checkpoint from the bucket starts a new run from those weights.
    assert (
        train.run(
            [
                *TINY,
                "--shards",
                str(sample_shards),
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
                "--eval-every",
                "0",
                "--output",
                str(tmp_path / "phase2"),
                "--init-checkpoint",
                f"{url}/checkpoints",
            ]
        )
        == 0
    )


def test_latest_goes_up_only_after_the_checkpoint_it_names_is_on_s3(sample_shards, s3, monkeypatch):
    """Every upload of `latest` comes after its checkpoint's upload has completed: at that
    moment the bucket already holds the checkpoint whole (a reader of `latest` never finds a
    partial one), and the run's other files follow it."""
    uploads, real_upload = [], objects.upload
    real_create, real_replace = objects.create, objects.replace

    def recording_upload(local: Path, url: str) -> None:
        uploads.append(url.split("/k2/", 1)[1])
        real_upload(local, url)

    def latest_written(url: str, data: bytes) -> None:
        """`latest` is written by a conditional put (`create`, then `replace`), as the run
        lock is (which is not recorded)."""
        if not url.endswith("/checkpoints/latest"):
            return
        named = "checkpoints/" + data.decode().strip()
        on_bucket = s3.get_object(Bucket=BUCKET, Key=f"k2/{named}")["Body"].read()
        assert on_bucket[:2] == b"PK"  # the checkpoint is whole (a zip) before `latest` names it
        uploads.append(f"latest → {named}")

    def recording_create(url: str, data: bytes) -> str | None:
        latest_written(url, data)
        return real_create(url, data)

    def recording_replace(url: str, data: bytes, version: str) -> str | None:
        latest_written(url, data)
        return real_replace(url, data, version)

    monkeypatch.setattr(objects, "upload", recording_upload)
    monkeypatch.setattr(objects, "create", recording_create)
    monkeypatch.setattr(objects, "replace", recording_replace)
    assert (
        train.run([*TINY, "--shards", str(sample_shards), *STEPS, "--output", f"s3://{BUCKET}/k2"])
        == 0
    )
    assert uploads == [
        "checkpoints/step-00000003.pt",
        "latest → checkpoints/step-00000003.pt",
        "metrics.jsonl",
        "checkpoints/step-00000006.pt",
        "latest → checkpoints/step-00000006.pt",
        "metrics.jsonl",
        # The end of the run mirrors once more, for the last metrics: `latest`, unchanged
        # since this run wrote it, is not written again.
        "metrics.jsonl",
    ]


def test_a_stale_writer_never_moves_latest_back(s3):
    """A trainer that passed its lock check, stalled, and uploads after another run took the
    directory over and wrote `latest`: its write of `latest` is conditional on the version it
    last read or wrote, so it fails (RunLockLost) and `latest` keeps the newer run's."""
    from trainer.run.lock import RunLockLost
    from trainer.run.remote import RemoteRun

    prefix = "stale"
    for name, data in {
        "checkpoints/latest": b"step-00000002.pt\n",
        "checkpoints/step-00000002.pt": b"two",
        "metrics.jsonl": b'{"kind": "train", "step": 2}\n',
    }.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
    stale = RemoteRun.open(f"s3://{BUCKET}/{prefix}", keep=3)
    try:
        assert stale.prepare(resume=True, overwrite=False) == []  # reads `latest`: step 2
        # The run that took over writes its step 4, and `latest` names it.
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/checkpoints/step-00000004.pt", Body=b"four")
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/checkpoints/latest", Body=b"step-00000004.pt\n")
        staged = stale.staging / "checkpoints"
        (staged / "step-00000003.pt").write_bytes(b"three")
        (staged / "latest").write_bytes(b"step-00000003.pt\n")
        with pytest.raises(RunLockLost) as lost:
            stale.push()
    finally:
        stale.close()
    assert str(lost.value) == (
        f"s3://{BUCKET}/{prefix}/checkpoints/latest: another trainer wrote it after this run "
        "last wrote or read it, and this run's write would have replaced what that one points "
        "to; this run stopped before writing anything more. Two trainers may be writing this "
        "run directory: rerun with --resume once only one runs"
    )
    listing = s3_listing(s3, prefix)
    assert listing["checkpoints/latest"] == b"step-00000004.pt\n"
    assert "metrics.jsonl" in listing and listing["metrics.jsonl"].count(b"\n") == 1


def test_a_resume_replaces_a_checkpoint_that_latest_never_named(s3, monkeypatch):
    """A run killed between a checkpoint's upload and `latest`'s (or a stale writer whose
    upload landed late) leaves a step-4 that `latest` does not name. The resumed run, from
    step 2, reaches step 4 and uploads its own over it before `latest` names it."""
    from trainer.run.remote import RemoteRun

    prefix = "orphan"
    for name, data in {
        "checkpoints/latest": b"step-00000002.pt\n",
        "checkpoints/step-00000002.pt": b"two",
        "checkpoints/step-00000004.pt": b"the killed run's four",
    }.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
    resumed = RemoteRun.open(f"s3://{BUCKET}/{prefix}", keep=3)
    uploads: list[str] = []
    upload = objects.upload
    monkeypatch.setattr(
        objects, "upload", lambda local, url: [uploads.append(url), upload(local, url)]
    )
    try:
        assert resumed.prepare(resume=True, overwrite=False) == []
        staged = resumed.staging / "checkpoints"
        (staged / "step-00000004.pt").write_bytes(b"this run's four")
        (staged / "latest").write_bytes(b"step-00000004.pt\n")
        resumed.push()
        resumed.push()  # the end of a run mirrors again: no checkpoint uploaded twice
    finally:
        resumed.close()
    assert uploads == [f"s3://{BUCKET}/{prefix}/checkpoints/step-00000004.pt"]
    assert s3_listing(s3, prefix) == {
        "checkpoints/latest": b"step-00000004.pt\n",
        "checkpoints/step-00000002.pt": b"two",
        "checkpoints/step-00000004.pt": b"this run's four",
    }


def test_a_new_run_never_writes_over_a_latest_that_appeared_meanwhile(s3):
    from trainer.run.lock import RunLockLost
    from trainer.run.remote import RemoteRun

    prefix = "appeared"
    fresh = RemoteRun.open(f"s3://{BUCKET}/{prefix}", keep=3)
    try:
        assert fresh.prepare(resume=False, overwrite=False) == []  # nothing there
        staged = fresh.staging / "checkpoints"
        staged.mkdir()
        (staged / "step-00000001.pt").write_bytes(b"one")
        (staged / "latest").write_bytes(b"step-00000001.pt\n")
        fresh.push()  # created: nothing was there
        (staged / "step-00000002.pt").write_bytes(b"two")
        (staged / "latest").write_bytes(b"step-00000002.pt\n")
        fresh.push()  # replaced: still the version this run wrote
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/checkpoints/latest", Body=b"step-00000009.pt\n")
        (staged / "latest").write_bytes(b"step-00000003.pt\n")
        (staged / "step-00000003.pt").write_bytes(b"three")
        with pytest.raises(RunLockLost, match=r"checkpoints/latest: another trainer wrote it "):
            fresh.push()
    finally:
        fresh.close()
    assert s3_listing(s3, prefix)["checkpoints/latest"] == b"step-00000009.pt\n"


def test_overwrite_on_s3_never_deletes_what_no_run_wrote(sample_shards, s3, capsys):
    common = [*TINY, "--shards", str(sample_shards), *STEPS, "--stop-at-step", "3"]
    url = f"s3://{BUCKET}/r2"
    assert train.run([*common, "--output", url]) == 0
    run_files = ["checkpoints/latest", "checkpoints/step-00000003.pt", "metrics.jsonl"]
    # Names close to the run's own: a run on object storage never writes a .tmp- file, and an
    # event file is never a folder.
    for foreign in ("notes.txt", "checkpoints/.tmp-notes.txt", "events.out.tfevents.old/keep"):
        s3.put_object(Bucket=BUCKET, Key=f"r2/{foreign}", Body=b"mine")
        assert train.run([*common, "--output", url, "--overwrite"]) == 2
        assert f"--overwrite: {url} also holds {foreign}, which no training run writes" in (
            capsys.readouterr().err
        )
        assert sorted(s3_listing(s3, "r2")) == sorted([*run_files, foreign])
        s3.delete_object(Bucket=BUCKET, Key=f"r2/{foreign}")
    assert train.run([*common, "--output", url, "--overwrite"]) == 0


def test_another_tool_s_logs_on_s3_are_never_taken_for_a_run_killed_early(s3) -> None:
    from trainer.run.checkpoints import CheckpointError
    from trainer.run.remote import RemoteRun

    url = f"s3://{BUCKET}/logs"
    events = "events.out.tfevents.1700000000.host.1.0"
    s3.put_object(Bucket=BUCKET, Key="logs/metrics.jsonl", Body=b'{"my": "results"}\n')
    s3.put_object(Bucket=BUCKET, Key=f"logs/{events}", Body=b"x")
    with pytest.raises(CheckpointError) as refused:
        RemoteRun.open(url, keep=2).prepare(resume=False, overwrite=False)
    assert str(refused.value) == (
        f"{url} holds {events}, metrics.jsonl, names a training run writes, but no "
        "metrics.jsonl a run wrote (its rows have a kind and a step): nothing was deleted. "
        "Pass --overwrite to replace them, or choose another --output"
    )
    s3.put_object(Bucket=BUCKET, Key="logs/notes.txt", Body=b"mine")
    with pytest.raises(CheckpointError, match=r"^s3://\S+ also holds notes.txt, which no"):
        RemoteRun.open(url, keep=2).prepare(resume=True, overwrite=False)
    s3.delete_object(Bucket=BUCKET, Key="logs/notes.txt")
    s3.put_object(Bucket=BUCKET, Key="logs/metrics.jsonl", Body=b'{"kind": "train", "step": 1}\n')
    assert RemoteRun.open(url, keep=2).prepare(resume=False, overwrite=False) == [
        events,
        "metrics.jsonl",
    ]
    assert sorted(s3_listing(s3, "logs")) == [events, "metrics.jsonl"]  # deleted only later


def test_an_output_naming_an_object_is_refused_and_the_object_kept(s3) -> None:
    from trainer.run.checkpoints import CheckpointError
    from trainer.run.remote import RemoteRun

    s3.put_object(Bucket=BUCKET, Key="object-out/run", Body=b"a user's object")
    with pytest.raises(CheckpointError) as refused:
        RemoteRun.open(f"s3://{BUCKET}/object-out/run/", keep=2).prepare(False, overwrite=True)
    assert str(refused.value) == (
        f"--output s3://{BUCKET}/object-out/run is an object, not a directory: the files would "
        "go beside it, under the same name. Choose a new or empty --output"
    )
    assert s3_listing(s3, "object-out") == {"run": b"a user's object"}
    # A name that merely starts like it is another object: object-out/run-2 is no obstacle.
    s3.delete_object(Bucket=BUCKET, Key="object-out/run")
    s3.put_object(Bucket=BUCKET, Key="object-out/run-2", Body=b"x")
    try:
        assert RemoteRun.open(f"s3://{BUCKET}/object-out/run", keep=2).prepare(False, False) == []
    finally:  # the bucket is the module's: leave nothing for another test's prefix
        s3.delete_object(Bucket=BUCKET, Key="object-out/run-2")


def test_a_resumed_run_on_s3_keeps_as_many_checkpoints_as_a_local_one(sample_shards, s3, tmp_path):
    common = [
        *TINY,
        "--shards",
        str(sample_shards),
        "--max-steps",
        "5",
        "--warmup-steps",
        "1",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "1",
        "--keep-checkpoints",
        "3",
        "--num-workers",
        "0",
    ]
    for output in (str(tmp_path / "local"), f"s3://{BUCKET}/k"):
        assert train.run([*common, "--output", output, "--stop-at-step", "3"]) == 0
        assert train.run([*common, "--output", output, "--resume", "--stop-at-step", "4"]) == 0
    want = sorted(p.name for p in (tmp_path / "local" / "checkpoints").iterdir())
    assert want == ["latest", "step-00000002.pt", "step-00000003.pt", "step-00000004.pt"]
    assert (
        sorted(n.split("/")[1] for n in s3_listing(s3, "k") if n.startswith("checkpoints/")) == want
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local"]


def test_storage_errors_are_reported_and_leave_no_temporary_files(
    sample_shards, s3, tmp_path, monkeypatch, capsys
):
    staging = tmp_path / "tmp"  # where the runs' staging and download folders go
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    common = [*TINY, "--shards", str(sample_shards), *STEPS]
    assert train.run([*common, "--output", "s3://no-such-bucket/r"]) == 2
    assert (
        "bertkit train: error: creating s3://no-such-bucket/r/run.lock: no such bucket or object"
        in (capsys.readouterr().err)
    )
    with pytest.raises(
        FileNotFoundError,
        match=f"reading s3://{BUCKET}/none/checkpoints/latest: no such bucket or object .*; "
        "nor is there checkpoints/latest under it, as in a run directory: pass a checkpoint file",
    ):
        export_hf(f"s3://{BUCKET}/none/checkpoints", tmp_path / "hf")
    assert (
        train.run(
            [
                *common,
                "--output",
                str(tmp_path / "r"),
                "--init-checkpoint",
                f"s3://{BUCKET}/none/step-00000001.pt",
            ]
        )
        == 2
    )
    assert f"reading s3://{BUCKET}/none/step-00000001.pt: no such" in capsys.readouterr().err
    assert list(staging.iterdir()) == []
    # export-hf checks its --output before it downloads anything.
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "README.md").write_text("mine")
    with pytest.raises(ValueError, match=r"taken holds README\.md, which `bertkit export-hf` does"):
        export_hf(f"s3://{BUCKET}/none/checkpoints", tmp_path / "taken")


def test_export_hf_to_s3_uploads_the_bytes_of_a_local_export(
    sample_shards, sample_vocab, s3, tmp_path, monkeypatch, capsys
):
    """export-hf --output s3://…: staged locally, uploaded config.json last; the prefix is
    checked as a local --output is, and no staging folder is left."""
    run = tmp_path / "run"
    assert (
        train.run(
            [
                *TINY,
                "--shards",
                str(sample_shards),
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
                "--eval-every",
                "0",
                "--output",
                str(run),
            ]
        )
        == 0
    )
    # Where the export's staging and download folders go (after training: a first trainer in
    # a process leaves torch's compile cache folder in the temporary folder).
    staging = tmp_path / "tmp"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    local = export_hf(run / "checkpoints", tmp_path / "hf")
    want = {Path(path).name: Path(path).read_bytes() for path in local}
    url = f"s3://{BUCKET}/models/m1"
    written = export_hf(run / "checkpoints", url)
    assert written == [f"{url}/{Path(path).name}" for path in local]  # config.json last
    assert written[-1] == f"{url}/{CONFIG_FILE}"
    assert s3_listing(s3, "models/m1") == want
    # An earlier export there needs --overwrite, as a directory does; the command then reads
    # its summary back from the bucket.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(run / "checkpoints"), "--output", url])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"{url} is not empty (e.g. {CONFIG_FILE})" in error and "--overwrite" in error
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(run / "checkpoints"), "--output", url, "--overwrite"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert f"{url}/{WEIGHTS_FILE}  {len(want[WEIGHTS_FILE]):,} bytes" in printed
    assert f"{url}: HF BertForPreTraining, 2 layers" in printed
    assert s3_listing(s3, "models/m1") == want
    # What no export writes is never written over, even with --overwrite.
    s3.put_object(Bucket=BUCKET, Key="models/m1/notes/README.md", Body=b"mine")
    with pytest.raises(ExportError, match=r"holds notes/README\.md, which `bertkit export-hf`"):
        export_hf(run / "checkpoints", url, overwrite=True)
    assert s3_listing(s3, "models/m1") == {**want, "notes/README.md": b"mine"}
    # From a checkpoint directory on the bucket to another prefix: the same bytes; into the
    # checkpoint directory itself: refused. Copied there without the vocabulary it records
    # relative to itself, it is given with --vocab.
    for path in (run / "checkpoints").iterdir():
        s3.upload_file(str(path), BUCKET, f"r/checkpoints/{path.name}")
    checkpoints = f"s3://{BUCKET}/r/checkpoints"
    with pytest.raises(ExportError, match="is inside the checkpoint directory"):
        export_hf(checkpoints, f"{checkpoints}/hf")
    with pytest.raises(ExportError, match="if it moved, pass --vocab DIR"):
        export_hf(checkpoints, f"s3://{BUCKET}/models/m2")
    export_hf(checkpoints, f"s3://{BUCKET}/models/m2", str(sample_vocab))
    assert s3_listing(s3, "models/m2") == want
    assert list(staging.iterdir()) == []


def test_a_run_on_gcs_writes_checkpoints_metrics_and_events(sample_shards, tmp_path):
    flags = [f for f in TINY if f != "--no-tensorboard"]
    common = [
        *flags,
        "--shards",
        str(sample_shards),
        "--max-steps",
        "4",
        "--warmup-steps",
        "1",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "2",
        "--keep-checkpoints",
        "2",
    ]
    with gcs_emulator(BUCKET) as client:
        url = f"gs://{BUCKET}/r1"
        assert train.run([*common, "--output", url, "--stop-at-step", "2"]) == 0
        assert train.run([*common, "--output", url, "--resume"]) == 0
        names = sorted(b.name for b in client.list_blobs(BUCKET, prefix="r1/"))
        blobs = {n: client.bucket(BUCKET).blob(n).download_as_bytes() for n in names}
    assert [n for n in names if not n.startswith("r1/events.out.tfevents.")] == [
        "r1/checkpoints/latest",
        "r1/checkpoints/step-00000002.pt",
        "r1/checkpoints/step-00000004.pt",
        "r1/metrics.jsonl",
    ]
    assert any(n.startswith("r1/events.out.tfevents.") for n in names)
    assert blobs["r1/checkpoints/latest"] == b"step-00000004.pt\n"
    assert sorted(losses(blobs["r1/metrics.jsonl"])) == [1, 2, 3, 4]


def test_a_run_on_s3_says_bertkit_s_lines_and_not_botocore_s(sample_shards, s3, tmp_path):
    """The command's own stderr, as a user sees it: the storage client's INFO lines (on
    where it found its credentials and its endpoint) are not among them."""
    command = [*TINY, "--shards", str(sample_shards), "--max-steps", "1", "--eval-every", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "bertkit", "train", *command, "--output", f"s3://{BUCKET}/said"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Each line's first words: the run's, each step's, the end's.
    said = [" ".join(line.split()[:2]) for line in done.stderr.splitlines()]
    assert said == [
        f"s3://{BUCKET}/said: tiny,",
        "step 1",
        "step 1/1",
        "step 1:",
    ], done.stderr
    assert done.stdout.startswith("trained 1 steps in "), done.stdout


# Slow (15 s, two torchrun jobs): one process stopping and resuming on s3 is in the default
# tier (test_a_run_on_s3_stops_resumes_and_exports_like_a_local_one).
@pytest.mark.slow
def test_two_processes_stop_and_resume_from_s3_like_an_uninterrupted_run(
    sample_shards, s3, s3_server, tmp_path
):
    """A 2-process Gloo run under torchrun with --output on S3: rank 0 mirrors, every rank
    downloads the checkpoint on --resume into its own staging; the losses are those of an
    uninterrupted local 2-process run."""
    env = {
        **os.environ,
        **client_environment(s3_server.endpoint),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(Path.cwd()),
    }

    def torchrun(*args: str) -> None:
        command = [
            *torchrun_trainer(2),
            *TINY,
            "--shards",
            str(sample_shards),
            *STEPS,
            "--global-batch-size",
            "32",
            "--num-workers",
            "1",
            *args,
        ]
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-3000:]

    url = f"s3://{BUCKET}/ddp"
    torchrun("--output", str(tmp_path / "local"))
    torchrun("--output", url, "--stop-at-step", "3")
    assert s3_listing(s3, "ddp")["checkpoints/latest"] == b"step-00000003.pt\n"
    torchrun("--output", url, "--resume")
    done = s3_listing(s3, "ddp")
    assert sorted(done) == ["checkpoints/latest", "checkpoints/step-00000006.pt", "metrics.jsonl"]
    assert losses(done["metrics.jsonl"]) == {
        s: metrics(tmp_path / "local")[s]["loss"] for s in range(1, 7)
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local"]  # no s3:/… directory
