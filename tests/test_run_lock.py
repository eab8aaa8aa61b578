"""A trainer that lost its run lock writes nothing more (issue 37 item 1): two real trainers
on loopback S3 with the first paused past its lease, renewals that are compare-and-swap on
moto's S3 (If-Match) and the GCS emulator, a release that deletes only the object this run
last wrote, a local run.lock deleted or replaced under its holder, lock objects judged by the
storage's time whatever renewal time they record, and lock fields printed escaped. (The GCS
emulator takes if_generation_match and ignores it: only S3's conditions are tested to hold.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.io import objects
from tests.support.s3server import client_environment
from tests.test_exits import ENV, FLAGS, wait_for_exit
from tests.test_remote_run import BUCKET, s3, s3_listing  # noqa: F401 (the fixture)
from tests.test_train import TINY
from trainer import train
from trainer.run import lock as run_lock
from trainer.run.lock import LEASE_VARIABLE, LOCK_FILE, Holder, RunLock, RunLockLost

JOB_VARIABLES = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "BERTKIT_JOB_ID")


@pytest.fixture
def no_job(monkeypatch):
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def lock_bytes(**fields: object) -> bytes:
    holder = {"host": "h", "pid": 7, "job": "", "since": 0, "renewed": 0, "token": "t"}
    return json.dumps(holder | fields).encode()


# --------------------------------------------------------------------------- object storage


def test_a_replace_over_a_stale_etag_fails_and_changes_nothing(s3):  # noqa: F811
    url = f"s3://{BUCKET}/cas/object"
    first = objects.create(url, b"1")
    assert first is not None and objects.create(url, b"x") is None
    second = objects.replace(url, b"2", first)
    assert second is not None and second != first
    assert objects.replace(url, b"3", first) is None  # 412 PreconditionFailed
    found = objects.get_versioned(url, 10)
    assert (found.data, found.version) == (b"2", second)
    assert objects.replace(f"s3://{BUCKET}/cas/none", b"4", second) is None
    assert objects.delete_if(url, first) is False  # 412: the object stays
    assert objects.get_versioned(url, 10).data == b"2"
    assert objects.delete_if(url, second) is True
    assert objects.delete_if(url, second) is True  # gone already: nothing to give back
    with pytest.raises(FileNotFoundError):
        objects.get_versioned(url, 10)


def test_a_release_deletes_only_the_lock_object_this_run_last_wrote(s3, no_job):  # noqa: F811
    """The release is a conditional delete (If-Match on the ETag this run last wrote): an
    object put there since, even one naming this run's token (an old copy put back), is not
    this run's write, and stays for its lease to run out."""
    url = f"s3://{BUCKET}/released"
    key = f"released/{LOCK_FILE}"
    lock = RunLock.acquire(url)
    lock.release()
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=key)
    lock = RunLock.acquire(url)
    copy = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    copy["renewed"] -= 60.0
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(copy).encode())
    lock.release()
    assert json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()) == copy


def test_a_holder_whose_lock_was_taken_stops_and_leaves_the_new_lock(s3, no_job):  # noqa: F811
    url = f"s3://{BUCKET}/taken"
    key = f"taken/{LOCK_FILE}"
    lock = RunLock.acquire(url)
    lock.check()  # still ours: renews it
    other = Holder("node2", 7, "", time.time(), time.time(), "other")
    s3.put_object(Bucket=BUCKET, Key=key, Body=other.to_bytes())
    with pytest.raises(RunLockLost) as lost:
        lock.check()
    assert str(lost.value).startswith(
        f"{url}/{LOCK_FILE}: this trainer no longer holds the run lock (the lock now names "
        "process 7 on node2, since "
    )
    assert str(lost.value).endswith(
        "); it stopped before writing anything more. Another trainer may be writing this run "
        "directory now: rerun with --resume once only one runs"
    )
    lock.release()
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == other.to_bytes()


def test_a_renewal_loses_to_a_takeover_between_its_read_and_its_write(
    s3,  # noqa: F811
    no_job,
    monkeypatch,
):
    """The compare-and-swap itself: the lock read is still ours, but another trainer replaces
    it before the renewal writes; the renewal's If-Match fails and the holder stops."""
    url = f"s3://{BUCKET}/race"
    key = f"race/{LOCK_FILE}"
    lock = RunLock.acquire(url)
    other = Holder("node3", 8, "", time.time(), time.time(), "other").to_bytes()
    read = objects.get_versioned

    def read_then_taken(where: str, limit: int) -> objects.Versioned:
        answer = read(where, limit)
        s3.put_object(Bucket=BUCKET, Key=key, Body=other)
        return answer

    monkeypatch.setattr(objects, "get_versioned", read_then_taken)
    with pytest.raises(RunLockLost, match=r"\(another trainer replaced the lock while it was"):
        lock.check()
    monkeypatch.undo()
    lock.release()
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == other


@pytest.mark.parametrize("pending", ["a new checkpoint", "a rotation alone"])
def test_a_writer_whose_lock_was_taken_uploads_and_rotates_nothing(s3, no_job, pending):  # noqa: F811
    """A stale writer on S3: another trainer took the lock over and wrote its own step 6 and
    `latest`; the stale one's mirror (a new checkpoint to upload, or, resumed with a lower
    --keep-checkpoints, only older ones to rotate away) checks the lock before each write
    (a compare-and-swap on the lock object) and stops before the first: the new holder's
    objects and the checkpoints it may go back to stay as they were."""
    from trainer.run.remote import RemoteRun

    prefix = f"stale-{pending.split()[1]}"
    url = f"s3://{BUCKET}/{prefix}"
    for name, data in {
        "checkpoints/latest": b"step-00000004.pt\n",
        "checkpoints/step-00000002.pt": b"two",
        "checkpoints/step-00000004.pt": b"four",
    }.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
    lock = RunLock.acquire(url)
    stale = RemoteRun.open(url, keep=1, guard=lock.check)
    try:
        assert stale.prepare(resume=True, overwrite=False) == []  # fetches step 4
        other = Holder("node2", 7, "", time.time(), time.time(), "other").to_bytes()
        taken = {
            f"{prefix}/{LOCK_FILE}": other,
            f"{prefix}/checkpoints/step-00000006.pt": b"the new holder's six",
            f"{prefix}/checkpoints/latest": b"step-00000006.pt\n",
        }
        for key, data in taken.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        before = s3_listing(s3, prefix)
        if pending == "a new checkpoint":
            staged = stale.staging / "checkpoints"
            (staged / "step-00000006.pt").write_bytes(b"the stale writer's six")
            (staged / "latest").write_bytes(b"step-00000006.pt\n")
        with pytest.raises(RunLockLost) as lost:
            stale.push()
    finally:
        stale.close()
        lock.release()
    assert str(lost.value).startswith(
        f"{url}/{LOCK_FILE}: this trainer no longer holds the run lock (the lock now names "
        "process 7 on node2, since "
    )
    assert s3_listing(s3, prefix) == before
    assert sorted(before) == [
        "checkpoints/latest",
        "checkpoints/step-00000002.pt",
        "checkpoints/step-00000004.pt",
        "checkpoints/step-00000006.pt",
        LOCK_FILE,
    ]
    assert before["checkpoints/step-00000006.pt"] == b"the new holder's six"


def test_a_lock_taken_on_gcs_stops_its_holder(no_job):
    from tests.support.gcsserver import gcs_emulator

    with gcs_emulator(BUCKET) as client:
        url = f"gs://{BUCKET}/taken"
        lock = RunLock.acquire(url)
        lock.check()
        other = Holder("node2", 7, "", time.time(), time.time(), "other").to_bytes()
        client.bucket(BUCKET).blob(f"taken/{LOCK_FILE}").upload_from_string(other)
        with pytest.raises(RunLockLost, match=r"\(the lock now names process 7 on node2, "):
            lock.check()
        lock.release()
        assert client.bucket(BUCKET).blob(f"taken/{LOCK_FILE}").download_as_bytes() == other


def test_a_resumed_run_on_s3_never_copies_its_lock_back(s3):  # noqa: F811
    """--resume fetches the run's files into staging and every checkpoint mirrors staging
    back; the lock is not one of them. Uploaded with the metrics, an old copy of it would
    undo a renewal: a renewal racing the upload failed (a live trainer exited 75), and a
    renewal time put back could let a third trainer take a live run's lock over."""
    from trainer.run.remote import RemoteRun

    prefix = "copied"
    run = {
        "checkpoints/latest": b"step-00000002.pt\n",
        "checkpoints/step-00000002.pt": b"checkpoint",
        "metrics.jsonl": b'{"kind": "train", "step": 2}\n',
        LOCK_FILE: lock_bytes(renewed=1.0),
    }
    for name, data in run.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)
    remote = RemoteRun.open(f"s3://{BUCKET}/{prefix}", keep=3)
    try:
        assert remote.prepare(resume=True, overwrite=False) == []
        staged = sorted(
            p.relative_to(remote.staging).as_posix()
            for p in remote.staging.rglob("*")
            if p.is_file()
        )
        assert staged == ["checkpoints/latest", "checkpoints/step-00000002.pt", "metrics.jsonl"]
        renewed = lock_bytes(renewed=2.0)  # the holder renews
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{LOCK_FILE}", Body=renewed)
        (remote.staging / LOCK_FILE).write_bytes(run[LOCK_FILE])  # and were it staged
        remote.push()
    finally:
        remote.close()
    assert s3_listing(s3, prefix) == {**run, LOCK_FILE: renewed}


@pytest.mark.parametrize(
    ("renewed", "fresh"),
    [
        (1000.0, True),
        (880.0, True),  # 120 s: the lease's last second
        (879.0, False),
        (1004.0, True),  # a clock 4 s ahead
        (1006.0, False),  # in the future: proves nothing
        (1e300, False),
        ("abc", False),
        ("1000", False),
        (True, False),
        (None, False),
    ],
)
def test_a_renewal_time_in_the_future_or_not_a_number_is_not_fresh(renewed, fresh):
    holder = Holder.parse(lock_bytes(renewed=renewed))
    assert holder is not None and holder.fresh(1000.0, 120.0) is fresh


def test_not_a_number_parses_as_nan_and_is_not_fresh():
    holder = Holder.parse(b'{"host":"h","pid":1,"job":"","since":NaN,"renewed":NaN,"token":"t"}')
    assert holder is not None and holder.fresh(1000.0, 120.0) is False
    assert holder.describe() == "process 1 on h, since nan (not a time)"


SKEWED = {
    "behind": lambda: time.time() - 600,  # a holder whose clock is 10 minutes behind
    "ahead": lambda: 4102444800,  # 2100-01-01: one far ahead
    "not a time": lambda: "abc",
}


@pytest.mark.parametrize("skew", sorted(SKEWED))
def test_a_lock_is_judged_by_the_storage_s_time_not_by_the_holder_s_clock(
    s3,  # noqa: F811
    no_job,
    monkeypatch,
    caplog,
    skew,
):
    """What the holder wrote as its renewal time proves nothing either way: a lock object the
    storage says was written just now is a live holder's (one whose clock runs behind was
    taken over as stale before), and one not written for a lease is stale, whatever it says."""
    url = f"s3://{BUCKET}/skewed"
    key = f"skewed/{LOCK_FILE}"
    s3.put_object(Bucket=BUCKET, Key=key, Body=lock_bytes(renewed=SKEWED[skew]()))
    with pytest.raises(run_lock.RunLockedError) as refused:
        RunLock.acquire(url)
    assert re.search(
        r" \(renewed [0-2] s ago; if that run is dead, its lock runs out 1(18|19|20) s from now\)",
        str(refused.value),
    )
    monkeypatch.setenv(LEASE_VARIABLE, "1")
    time.sleep(2.1)  # S3's LastModified counts whole seconds
    with caplog.at_level("WARNING"):
        lock = RunLock.acquire(url)
    assert f"{url}/{LOCK_FILE}: taking over the lock of process 7 on h, since " in caplog.text
    assert re.search(r"\(stale, last written [23] s ago by the storage's clock\)", caplog.text)
    lock.release()
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=key)


def test_a_lock_on_gcs_is_judged_by_its_updated_time(no_job):
    """The emulator ignores if_generation_match (a create over an object succeeds there), so
    the takeover cannot be watched on it: what it shows is that GCS's `updated` is the time a
    lock object is judged by, and that a release deletes the lock."""
    from tests.support.gcsserver import gcs_emulator

    with gcs_emulator(BUCKET) as client:
        blob = client.bucket(BUCKET).blob(f"skewed/{LOCK_FILE}")
        blob.upload_from_string(lock_bytes(renewed=time.time() - 600))
        found = objects.get_versioned(f"gs://{BUCKET}/skewed/{LOCK_FILE}", 4096)
        assert found.modified is not None and abs(time.time() - found.modified) < 5
        holder = Holder.parse(found.data)
        assert holder is not None and not holder.fresh(time.time(), 120.0)  # by its own clock
        fresh, _, _ = run_lock._judged(found, holder, 120.0)
        assert fresh  # by the storage's
        blob.delete()
        lock = RunLock.acquire(f"gs://{BUCKET}/skewed")
        assert blob.exists()
        lock.release()
        assert not blob.exists()


def test_what_a_lock_says_is_printed_escaped(s3, no_job):  # noqa: F811
    url = f"s3://{BUCKET}/escaped"
    holder = Holder("evil\n\x1b[2Jhost", 7, "j\r\x07", time.time(), time.time(), "t")
    s3.put_object(Bucket=BUCKET, Key=f"escaped/{LOCK_FILE}", Body=holder.to_bytes())
    with pytest.raises(run_lock.RunLockedError) as refused:
        RunLock.acquire(url)
    message = str(refused.value)
    assert "is being written by process 7 on evil\\n\\x1b[2Jhost, job j\\r\\x07, since " in message
    assert not any(c in message for c in "\n\r\x1b\x07")


def test_a_lease_that_is_not_a_positive_number_is_refused(s3, monkeypatch):  # noqa: F811
    monkeypatch.setenv(LEASE_VARIABLE, "0")
    with pytest.raises(ValueError, match=f"^{LEASE_VARIABLE}=0: give the run lock's lease in "):
        RunLock.acquire(f"s3://{BUCKET}/lease")


# --------------------------------------------------------------------------- local run.lock


@pytest.mark.parametrize("fault", ["deleted", "replaced"])
def test_a_local_lock_deleted_or_replaced_under_its_holder_is_lost(tmp_path, fault):
    run_dir = tmp_path / "run"
    lock = RunLock.acquire(str(run_dir))
    lock.check()
    (run_dir / LOCK_FILE).unlink()
    if fault == "replaced":
        second = RunLock.acquire(str(run_dir))  # what flock let a second trainer do
    with pytest.raises(RunLockLost) as lost:
        lock.check()
    why = "it was deleted" if fault == "deleted" else "it was replaced by another file"
    assert str(lost.value).startswith(
        f"{run_dir / LOCK_FILE}: this trainer no longer holds the run lock ({why}); "
    )
    lock.release()
    if fault == "replaced":  # the second trainer's lock stays
        assert (run_dir / LOCK_FILE).exists()
        second.release()
    assert not (run_dir / LOCK_FILE).exists()


def start_trainer(code: str, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env={**ENV, **env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


# After its first checkpoint the trainer runs `AFTER_FIRST_CHECKPOINT` (a fault at a known
# point: the lock deleted, the process paused), then goes on to its next checkpoint.
PATCHED = """
    import os, signal, sys
    from pathlib import Path
    import trainer.train
    original = trainer.train.{hook}
    done = []
    def hooked(*args, **kwargs):
        result = original(*args, **kwargs)
        if not done:
            done.append(1)
            {fault}
        return result
    trainer.train.{hook} = hooked
    sys.exit(trainer.train.run(sys.argv[1:]))
"""
LOCK_STEPS = ["--checkpoint-every", "2", "--keep-checkpoints", "5", "--num-workers", "0"]


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("Path(sys.argv[-1], 'run.lock').unlink()", "it was deleted"),
        (
            "Path(sys.argv[-1], 'run.lock').unlink(); Path(sys.argv[-1], 'run.lock').write_text('')",
            "it was replaced by another file",
        ),
    ],
)
def test_a_trainer_whose_run_lock_was_deleted_or_replaced_exits_75_before_its_next_checkpoint(
    sample_shards, tmp_path, fault, why
):
    run_dir = tmp_path / "run"
    code = PATCHED.format(hook="save_checkpoint", fault=fault)
    process = start_trainer(
        code,
        *TINY,
        "--shards",
        str(sample_shards),
        *FLAGS,
        "--max-steps",
        "8",
        *LOCK_STEPS,
        "--output",
        str(run_dir),
        env={},
    )
    code_, output, _ = wait_for_exit(process, time.monotonic())
    assert code_ == 75, output
    assert output.splitlines()[-1] == (
        f"bertkit train: {run_dir / LOCK_FILE}: this trainer no longer holds the run lock "
        f"({why}); it stopped before writing anything more. Another trainer may be writing "
        "this run directory now: rerun with --resume once only one runs (exit 75)"
    )
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "latest",
        "step-00000002.pt",
    ]


# --------------------------------------------------------------------------- two trainers


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_paused_trainer_that_lost_its_lease_writes_nothing_when_it_wakes(
    sample_shards,
    s3,  # noqa: F811
    no_job,
    monkeypatch,
    caplog,
):
    """The issue's run: trainer A pauses (SIGSTOP) right after its step-2 checkpoint, for
    longer than its lease; trainer B --resume (run in this process: A is the one that needs
    a process of its own) takes the lock over and finishes the run; A, woken (SIGCONT),
    exits 75 with one line before it writes anything, and B's checkpoints and metrics are
    whole."""
    url = f"s3://{BUCKET}/paused"
    # Long enough that a renewal thread starved of CPU on a loaded machine still renews in
    # time (a holder stops trusting its lease one renewal before it runs out).
    lease = 6.0
    env = {**client_environment(s3.meta.endpoint_url), LEASE_VARIABLE: str(lease)}
    monkeypatch.setenv(LEASE_VARIABLE, str(lease))  # B's (the s3 fixture set its AWS_*)
    flags = [*TINY, "--shards", str(sample_shards), *FLAGS, "--max-steps", "6", *LOCK_STEPS]
    pause = "os.kill(os.getpid(), signal.SIGSTOP)"
    first = start_trainer(
        PATCHED.format(hook="_checkpoint", fault=pause), *flags, "--output", url, env=env
    )
    try:
        deadline = time.monotonic() + 60
        while process_state(first.pid) != "T":  # bounded: a trainer starts in seconds
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
            time.sleep(0.05)
        assert sorted(s3_listing(s3, "paused")) == [
            "checkpoints/latest",
            "checkpoints/step-00000002.pt",
            "metrics.jsonl",
            LOCK_FILE,
        ]
        time.sleep(lease + 0.5)  # the lease runs out
        assert train.run([*flags, "--output", url, "--resume"]) == 0, caplog.text
        assert f"{url}/{LOCK_FILE}: taking over the lock of process {first.pid} on " in caplog.text
        written = s3_listing(s3, "paused")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    code, output, _ = wait_for_exit(first, time.monotonic())
    assert code == 75, output
    last = output.splitlines()[-1]
    assert last.startswith(
        f"bertkit train: {url}/{LOCK_FILE}: this trainer no longer holds the run lock (not "
        "renewed for "
    ), output
    assert last.endswith(
        "s, and its lease is 6 s); it stopped before writing anything more. Another trainer "
        "may be writing this run directory now: rerun with --resume once only one runs "
        "(exit 75)"
    )
    assert s3_listing(s3, "paused") == written  # nothing written after it woke
    assert sorted(written) == [  # the second trainer gave its lock back
        "checkpoints/latest",
        "checkpoints/step-00000002.pt",
        "checkpoints/step-00000004.pt",
        "checkpoints/step-00000006.pt",
        "metrics.jsonl",
    ], caplog.text
    assert written["checkpoints/latest"] == b"step-00000006.pt\n"
    records = [json.loads(line) for line in written["metrics.jsonl"].decode().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
