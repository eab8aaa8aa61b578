"""`bertkit train` on the real sample: learning, exact resume, 2-process DDP, phase 2, errors."""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import threading
from pathlib import Path

import pytest
import torch

from schemas.checkpoint import LATEST_FILE, CheckpointKey
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_data import write_uneven_shards
from trainer import train
from trainer.export import export_hf
from trainer.metrics import METRICS_FILE
from trainer.run.checkpoints import latest_checkpoint

TINY = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--lr",
    "2e-3",
    "--log-every",
    "1",
    "--eval-batches",
    "4",
    "--no-tensorboard",
]


def metrics(run_dir: Path, kind: str = "train") -> dict[int, dict]:
    """step → the last record of that kind (a resumed run appends)."""
    records = {}
    for line in (run_dir / METRICS_FILE).read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == kind:
            records[record["step"]] = record
    return records


def run_train(*args: str) -> int:
    return train.run([*TINY, *args])


def test_loss_goes_down_on_the_real_sample_and_the_checkpoint_exports(sample_shards, tmp_path):
    run_dir = tmp_path / "run"
    code = run_train(
        "--shards",
        str(sample_shards),
        "--output",
        str(run_dir),
        "--max-steps",
        "60",
        "--warmup-steps",
        "6",
        "--eval-every",
        "30",
        "--checkpoint-every",
        "30",
        "--keep-checkpoints",
        "1",
    )
    assert code == 0
    train_log = metrics(run_dir)
    assert sorted(train_log) == list(range(1, 61))
    first = sum(train_log[s]["mlm_loss"] for s in range(1, 6)) / 5
    last = sum(train_log[s]["mlm_loss"] for s in range(56, 61)) / 5
    # ln(8000) ≈ 9.0 at the start; a tiny model learns the frequent tokens within 60 steps.
    assert first > 8.5 and last < first - 1.5, (first, last)
    evals = metrics(run_dir, "eval")
    assert sorted(evals) == [30, 60] and evals[60]["mlm_loss"] < evals[30]["mlm_loss"]
    assert evals[60]["predictions"] > 0 and 0 <= evals[60]["nsp_accuracy"] <= 1
    assert all(train_log[60][k] is not None for k in ("seq_per_s", "tokens_per_s", "lr"))
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == [LATEST_FILE, "step-00000060.pt"]  # --keep-checkpoints 1
    exported = export_hf(run_dir / "checkpoints", tmp_path / "hf")
    assert any(name.endswith("model.safetensors") for name in exported)


@pytest.mark.parametrize("bucketing", [[], ["--bucket-window", "3"]], ids=["plain", "bucketed"])
def test_resume_gives_the_losses_of_an_uninterrupted_run(sample_shards, tmp_path, bucketing):
    common = [
        "--shards",
        str(sample_shards),
        "--max-steps",
        "8",
        "--warmup-steps",
        "2",
        "--num-workers",
        "2",
        "--shuffle-buffer",
        "500",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "100",
        *bucketing,
    ]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert run_train(*common, "--output", str(whole)) == 0
    assert run_train(*common, "--output", str(parts), "--stop-at-step", "3") == 0
    assert latest_checkpoint(parts / "checkpoints").name == "step-00000003.pt"
    assert run_train(*common, "--output", str(parts), "--resume") == 0
    expected, resumed = metrics(whole), metrics(parts)
    assert sorted(resumed) == list(range(1, 9))
    # Dropout, data order and the optimizer all continue where they stopped: equal losses.
    assert [resumed[s]["loss"] for s in range(1, 9)] == [expected[s]["loss"] for s in range(1, 9)]
    a = torch.load(latest_checkpoint(whole / "checkpoints"), weights_only=True)
    b = torch.load(latest_checkpoint(parts / "checkpoints"), weights_only=True)
    assert (
        a[CheckpointKey.DATA_POSITION]
        == b[CheckpointKey.DATA_POSITION]
        == {"epoch": 0, "global_batches": 8}
    )
    for name, tensor in a[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, b[CheckpointKey.MODEL][name]), name


def test_resume_refuses_another_input_setup(sample_shards, tmp_path, capsys):
    common = [
        "--shards",
        str(sample_shards),
        "--output",
        str(tmp_path / "r"),
        "--max-steps",
        "4",
        "--warmup-steps",
        "1",
        "--eval-every",
        "0",
        "--num-workers",
        "0",
    ]
    assert run_train(*common, "--stop-at-step", "2") == 0
    assert train.run([*TINY, *common, "--resume", "--micro-batch-size", "8"]) == 2
    assert (
        "global batch 16 (micro-batch 16 × 1 process × 1 accumulated), now 8 (micro-batch 8 × 1 "
        "process × 1 accumulated): pass --global-batch-size 16" in capsys.readouterr().err
    )
    assert train.run([*TINY, *common, "--resume", "--bucket-window", "4"]) == 2
    assert "--bucket-window 0, now 4" in capsys.readouterr().err


def test_resume_before_the_first_checkpoint_starts_the_run(sample_shards, tmp_path, caplog):
    """A job requeued before its first checkpoint passes --resume like every requeue: the run
    starts at step 0, from --init-checkpoint's weights when given, and ends as a run started
    without --resume does."""
    common = [
        "--shards",
        str(sample_shards),
        "--max-steps",
        "3",
        "--warmup-steps",
        "1",
        "--num-workers",
        "0",
        "--eval-every",
        "0",
    ]
    phase1, phase2 = tmp_path / "phase1", tmp_path / "phase2"
    assert run_train(*common, "--output", str(phase1)) == 0
    init = ["--init-checkpoint", str(phase1 / "checkpoints")]
    assert run_train(*common, *init, "--output", str(phase2)) == 0
    killed = tmp_path / "killed"  # its first try was killed before its first checkpoint
    killed.mkdir()
    (killed / METRICS_FILE).write_bytes((phase2 / METRICS_FILE).read_bytes())
    with caplog.at_level("WARNING"):
        assert run_train(*common, *init, "--output", str(killed), "--resume") == 0
    assert f"--resume: {killed}/checkpoints has no checkpoint yet" in caplog.text
    assert "starting at step 0 from --init-checkpoint" in caplog.text
    lines = [json.loads(line) for line in (killed / METRICS_FILE).read_text().splitlines()]
    # replaced, not appended to: the killed try's steps 1-3 are not in the metrics twice
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2, 3]
    assert (
        f"{killed}: an earlier run stopped before its first checkpoint; its metrics.jsonl will be replaced"
        in caplog.text
    )
    want = torch.load(latest_checkpoint(phase2 / "checkpoints"), weights_only=True)
    got = torch.load(latest_checkpoint(killed / "checkpoints"), weights_only=True)
    assert got[CheckpointKey.STEP] == 3
    for name, tensor in want[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, got[CheckpointKey.MODEL][name]), name
    # Once it has a checkpoint, the same command line goes on from it, not from the weights.
    assert (
        run_train(
            *[*common[:2], "--max-steps", "4", *common[4:]],
            *init,
            "--output",
            str(killed),
            "--resume",
        )
        == 0
    )
    assert sorted(metrics(killed)) == [1, 2, 3, 4]
    assert (
        torch.load(latest_checkpoint(killed / "checkpoints"), weights_only=True)[CheckpointKey.STEP]
        == 4
    )


def test_a_checkpoint_from_before_bucketing_resumes_unbucketed():
    from trainer.run.checkpoints import check_resumable

    saved = {
        "num_workers": 2,
        "micro_batch_size": 16,
        "global_batch_size": None,
        "seed": 1,
        "shards": "s",
        "max_seq_length": None,
        "shuffle_buffer": 10,
    }
    checkpoint = {CheckpointKey.TRAIN_CONFIG: saved, CheckpointKey.WORLD_SIZE: 1}
    check_resumable(checkpoint, {**saved, "bucket_window": 0}, world=1)
    with pytest.raises(ValueError, match="--bucket-window 0, now 2"):
        check_resumable(checkpoint, {**saved, "bucket_window": 2}, world=1)


def test_phase_two_starts_from_weights_and_checks_the_vocabulary(sample_shards, tmp_path, capsys):
    phase1 = tmp_path / "phase1"
    assert (
        run_train(
            "--shards",
            str(sample_shards),
            "--output",
            str(phase1),
            "--max-steps",
            "2",
            "--warmup-steps",
            "1",
            "--num-workers",
            "0",
            "--eval-every",
            "0",
        )
        == 0
    )
    phase2 = tmp_path / "phase2"
    assert (
        run_train(
            "--shards",
            str(sample_shards),
            "--output",
            str(phase2),
            "--max-steps",
            "2",
            "--warmup-steps",
            "1",
            "--num-workers",
            "0",
            "--eval-every",
            "0",
            "--init-checkpoint",
            str(phase1 / "checkpoints"),
        )
        == 0
    )
    start = torch.load(latest_checkpoint(phase1 / "checkpoints"), weights_only=True)
    after = torch.load(latest_checkpoint(phase2 / "checkpoints"), weights_only=True)
    assert after[CheckpointKey.STEP] == 2  # a new run: its own steps, optimizer and schedule
    assert after[CheckpointKey.MODEL_CONFIG] == start[CheckpointKey.MODEL_CONFIG]
    assert (
        run_train(
            "--shards",
            str(sample_shards),
            "--output",
            str(tmp_path / "mini"),
            "--init-checkpoint",
            str(phase1 / "checkpoints"),
            "--model",
            "mini",
        )
        == 2
    )
    assert "the checkpoint holds a tiny model, --model is mini" in capsys.readouterr().err
    other = write_uneven_shards(tmp_path / "other")  # made with another vocabulary
    assert (
        run_train(
            "--shards",
            str(other),
            "--output",
            str(tmp_path / "bad"),
            "--max-steps",
            "1",
            "--warmup-steps",
            "0",
            "--init-checkpoint",
            str(phase1 / "checkpoints"),
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "the shards were made with vocabulary sha256 abab" in err and "token ids" in err


def test_two_gloo_processes_train_in_step(sample_shards, tmp_path, capsys):
    run_dir = tmp_path / "ddp"
    env = torchrun_env()
    command = [
        *torchrun_trainer(2),
        *TINY,
        "--shards",
        str(sample_shards),
        "--output",
        str(run_dir),
        "--max-steps",
        "2",
        "--warmup-steps",
        "1",
        "--global-batch-size",
        "64",
        "--num-workers",
        "1",
        "--eval-every",
        "1",
        "--checkpoint-every",
        "1",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.WORLD_SIZE] == 2
    # 64 sequences per step = 2 processes × 2 micro-batches of 16: 2 global batches, the
    # position any number of processes can go on from.
    assert checkpoint[CheckpointKey.DATA_POSITION] == {"epoch": 0, "global_batches": 2}
    assert len(checkpoint[CheckpointKey.RNG]["torch"]) == 2  # each rank's dropout state
    assert sorted(metrics(run_dir)) == [1, 2]
    assert sorted(metrics(run_dir, "eval")) == [1, 2]
    # --eval-batches 4 of 16: the held-out split's first 64 sequences, 32 on each rank,
    # summed over both (tests/test_eval_world_size.py: the totals of one process).
    assert metrics(run_dir, "eval")[2]["sequences"] == 4 * 16
    # Resuming it with one process and another global batch is refused, naming both
    # (tests/test_elastic.py resumes with the same one).
    one = train.run(
        [
            *TINY,
            "--shards",
            str(sample_shards),
            "--output",
            str(run_dir),
            "--max-steps",
            "2",
            "--warmup-steps",
            "1",
            "--global-batch-size",
            "32",
            "--num-workers",
            "1",
            "--resume",
        ]
    )
    assert one == 2
    assert "global batch 64 (micro-batch 16 × 2 processes × 2 accumulated), now 32" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model", "huge"], "--model 'huge': one of tiny, mini"),
        (["--global-batch-size", "24"], "not a multiple of --micro-batch-size × processes = 16"),
        (["--warmup-steps", "50", "--max-steps", "10"], "--warmup-steps 50 exceeds --max-steps 10"),
    ],
)
def test_bad_flags_stop_before_work(sample_shards, tmp_path, capsys, flags, message):
    assert run_train("--shards", str(sample_shards), "--output", str(tmp_path), *flags) == 2
    assert message in capsys.readouterr().err


class _BasicAuthHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files only to `trainer:s3cret-Pa55` (HTTP basic auth)."""

    expected = "Basic " + base64.b64encode(b"trainer:s3cret-Pa55").decode()

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != self.expected:
            self.send_error(401, "who are you")
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


def test_url_credentials_are_used_but_never_printed_logged_or_stored(
    sample_shards, tmp_path, monkeypatch, capsys, caplog
):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    root = sample_shards.parent

    def handler(*args, **kwargs):
        return _BasicAuthHandler(*args, directory=str(root), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    run_dir = tmp_path / "r"
    common = [
        "--output",
        str(run_dir),
        "--warmup-steps",
        "1",
        "--num-workers",
        "0",
        "--eval-every",
        "0",
        "--eval-batches",
        "1",
    ]
    try:
        shards = f"http://trainer:s3cret-Pa55@{host}/{sample_shards.name}"
        assert run_train("--shards", shards, *common, "--max-steps", "2") == 0
        assert run_train("--shards", shards, *common, "--max-steps", "3", "--resume") == 0
        wrong = f"http://trainer:wr0ng-Pa55@{host}/{sample_shards.name}"
        assert run_train("--shards", wrong, *common, "--max-steps", "4", "--overwrite") == 2
    finally:
        server.shutdown()
    printed = capsys.readouterr()
    shown = printed.out + printed.err + caplog.text
    assert "s3cret" not in shown and "wr0ng" not in shown
    assert f"http://***@{host}/{sample_shards.name}" in shown  # the error names the URL
    for path in (run_dir / "checkpoints").glob("step-*.pt"):
        assert b"s3cret" not in path.read_bytes()
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert (
        checkpoint[CheckpointKey.TRAIN_CONFIG]["shards"]
        == f"http://***@{host}/{sample_shards.name}"
    )
    assert checkpoint[CheckpointKey.DATA]["manifest"].startswith(f"http://***@{host}/")
    assert checkpoint[CheckpointKey.STEP] == 3  # the failed --overwrite deleted nothing


def test_a_refused_checkpoint_is_one_line_that_never_advises_unpickling(tmp_path):
    """A checkpoint holding objects weights_only refuses is named in one line, with what it
    holds; torch's own advice (weights_only=False: run its code) is never passed on."""
    import datetime

    from trainer.run.checkpoints import CheckpointError, load_checkpoint

    path = tmp_path / "step-00000001.pt"
    torch.save({"when": datetime.date(2020, 1, 2)}, path)  # a global weights_only refuses
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)
    assert str(error.value) == (
        f"{path} is not a bertkit checkpoint: it holds objects other than tensors and plain "
        "containers (datetime.date), so it is refused, never unpickled; pass a "
        "step-NNNNNNNN.pt file written by the trainer"
    )


@pytest.mark.parametrize(
    "flags",
    [
        ["--output", "hdfs://nn/r"],
        ["--output", "file:///tmp/r"],
        ["--output", "OUT", "--init-checkpoint", "ftp://host/r0/checkpoints"],
    ],
)
def test_a_url_is_never_taken_for_a_local_path(sample_shards, tmp_path, monkeypatch, capsys, flags):
    # `Path("hdfs://nn/r")` is the local directory hdfs:/nn/r; the run must refuse, not write
    # there and report the URL. (s3:// and gs:// are run directories: test_remote_run.py.)
    monkeypatch.chdir(tmp_path)
    common = ["--shards", str(sample_shards), "--max-steps", "1", "--warmup-steps", "0"]
    assert run_train(*common, *flags) == 2
    assert "a URL is never taken for a local path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(
        ValueError,
        match=r"--output hdfs://nn/hf: --output takes a local or "
        r"mounted path, s3:// or gs://; a URL is never taken for a local path",
    ):
        export_hf(tmp_path / "checkpoints", "hdfs://nn/hf")
    with pytest.raises(
        ValueError,
        match=r"--checkpoint hdfs://b/r/checkpoints: --checkpoint "
        r"takes a local or mounted path, s3:// or gs://",
    ):
        export_hf("hdfs://b/r/checkpoints", tmp_path / "hf")


def test_a_url_the_storage_cannot_read_is_refused_not_read_locally(
    sample_shards, tmp_path, monkeypatch, capsys
):
    from pipelines.io import storage

    monkeypatch.chdir(tmp_path)
    local = tmp_path / "hdfs:" / "nn" / "shards"  # what open("hdfs://nn/shards/…") would read
    local.mkdir(parents=True)
    (local / "manifest.json").write_bytes((sample_shards / "manifest.json").read_bytes())
    refused = r"hdfs://nn/shards/manifest.json: bertkit reads local paths, file://, s3://, gs:// "
    with pytest.raises(storage.StorageError, match=refused):
        storage.read_bytes("hdfs://nn/shards/manifest.json")
    with pytest.raises(storage.StorageError, match="not hdfs://; a URL is never taken for a local"):
        storage.locate("hdfs://nn/shards")
    assert (
        run_train(
            "--shards",
            "hdfs://nn/shards",
            "--output",
            "out",
            "--max-steps",
            "1",
            "--warmup-steps",
            "0",
        )
        == 2
    )
    assert "not hdfs://; a URL is never taken for a local path" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hdfs:"]  # no run directory either
    # Joining and splitting stay URL-shaped for any scheme (Beam's filesystems read them).
    assert storage.join("hdfs://nn/a", "b.txt") == "hdfs://nn/a/b.txt"
    assert storage.parent("hdfs://nn/a/b.txt") == "hdfs://nn/a"
    assert storage.read_bytes(f"file://{local}/manifest.json")[:1] == b"{"


def test_a_warmup_as_long_as_the_run_is_said_once(sample_shards, tmp_path, caplog):
    """--warmup-steps equal to --max-steps never reaches the peak (one step: trains at lr
    0); allowed (a test's way of a step that moves nothing), and the log says so."""
    flags = ["--shards", str(sample_shards), "--output", str(tmp_path / "run")]
    flags += ["--max-steps", "1", "--warmup-steps", "1", "--lr", "2e-3", "--eval-every", "0"]
    with caplog.at_level("WARNING", logger="bertkit.train"):
        assert run_train(*flags, "--eval-batches", "1", "--num-workers", "0") == 0
    assert [r.getMessage() for r in caplog.records if "--warmup-steps" in r.getMessage()] == [
        "--warmup-steps equals --max-steps 1: the run ends before its lr reaches 0.002"
    ]
