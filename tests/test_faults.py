"""The fault suite: kill -9 and object-store errors; nothing good lost, reruns byte-identical.

Real commands in child processes (`python -m bertkit STAGE …`), killed with SIGKILL
(their whole process group), and moto's S3 server behind tests.support.faultproxy, which
breaks a seeded share of the requests (503, 500, a reset mid-request, a write done but
unanswered, an answer cut mid-body). The machinery is tests.support.faults_* (which `python -m
bench.faults` runs as the longer randomized campaign) and tests.support.killpoint (a kill
right before the N-th rename, where a timed kill lands only by luck). The default run: examples killed mid-publication
and rerun, training killed between a checkpoint's write and its rename and resumed, and
wikipedia reading its dump from and writing its documents to S3 through faults. `-m slow`:
every stage killed before each of its renames, kills at seeded random delays (Beam on two
worker processes included), examples to S3 through faults, an S3 outage that makes a stage
fail and its rerun, the trainer streaming from S3 through faults, and the trainer's leftover
temporary checkpoint, which --resume deletes.
"""

from __future__ import annotations

import json
import random

import pytest

from tests.support.faultproxy import FaultProxy
from tests.support.faults_runs import (
    Inputs,
    Tally,
    child_environment,
    command,
    kill_stage,
    reference_run,
    run_to_end,
    snapshot,
    stage_argv,
    train_argv,
)
from tests.support.faults_s3 import (
    S3,
    S3_TRAIN_FIELDS,
    RemoteInputs,
    outage_after,
    s3_faulty_run,
    s3_flags,
    s3_reference,
    s3_stage_argv,
    upload_inputs,
)
from tests.support.faults_training import (
    RESUME_FIELDS,
    TrainingReference,
    compare_training,
    kill_training,
)
from tests.support.s3server import client_environment

SHARD_NAMES = [
    "seq128/heldout/shard-000000.tar",
    *(f"seq128/train/shard-00000{i}.tar" for i in range(4)),
]
TABLE_NAMES = [f"{name}.blocks.json" for name in SHARD_NAMES]  # each shard's block table
EXAMPLES_FILES = sorted(["README.md", "manifest.json", *SHARD_NAMES, *TABLE_NAMES])


@pytest.fixture(scope="module")
def inputs(sample_documents, sample_vocab, sample_shards) -> Inputs:
    wikipedia, books = sample_documents
    return Inputs(wikipedia, books, sample_vocab, sample_shards)


@pytest.fixture(scope="module")
def examples_reference(inputs, tmp_path_factory):
    """An undisturbed `bertkit examples` run: (its output directory, its files' sha256)."""
    output = tmp_path_factory.mktemp("faults-examples") / "out"
    argv = stage_argv("examples", inputs, str(output))
    _, renames = reference_run(argv)
    assert renames == 12  # five shards, each then its block table, the card, the manifest
    return output, snapshot(output)


def test_examples_killed_while_publishing_shards_reruns_to_the_same_bytes(
    inputs, examples_reference
):
    output, reference = examples_reference
    assert sorted(reference) == EXAMPLES_FILES
    tally = Tally("examples")
    argv = stage_argv("examples", inputs, str(output))
    # Killed right before its fifth rename: two shards and their block tables published, the
    # third shard complete under its temporary name, the spill files still under _work, no
    # manifest yet.
    killed, left, rerun = kill_stage(tally, argv, output, reference, before_rename=5)
    assert killed.killed and rerun.returncode == 0, rerun.output[-2000:]
    published = sorted(left.keys() & reference.keys())
    assert len(published) == 4 and "manifest.json" not in left
    assert sorted(n.endswith(".blocks.json") for n in published) == [False, False, True, True]
    assert len([n for n in left if ".tar.tmp-" in n]) == 1
    assert any(n.startswith("_work/") for n in left)
    # The published shards and tables were whole; the rerun (--overwrite) gave every file
    # again, the same names, no others (no _work, no temporary), the same bytes.
    assert tally.mismatches == [] and tally.recovered == 1
    assert snapshot(output) == reference
    assert tally.files == 4 + 12 and tally.bytes == sum(reference[n][0] for n in published) + sum(
        size for size, _ in reference.values()
    )


def test_vocab_killed_before_publishing_its_tokenizer_reruns_without_the_temporary(
    inputs, tmp_path
):
    output = tmp_path / "vocab"
    argv = stage_argv("vocab", inputs, str(output))
    _, renames = reference_run(argv)
    assert renames == 5  # the two units' word counts, then vocab.txt, tokenizer.json, vocab.json
    reference = snapshot(output)
    assert sorted(reference) == ["tokenizer.json", "vocab.json", "vocab.txt"]
    tally = Tally("vocab")
    # Killed over the complete earlier run, right before tokenizer.json's rename: vocab.json
    # deleted first (no reader pairs old metadata with new files), vocab.txt replaced (the
    # same bytes), the old tokenizer.json deleted (files.replace deletes, then renames) and
    # the new one whole under its temporary name; the word counts still in `_work`.
    # `bertkit vocab` keeps its earlier files readable until each is replaced
    # (clear_earlier_run(remove=False)); it kept such a temporary too, for ever, until
    # pipelines/beam/files.py deleted temporaries. The rerun deletes `_work` before counting.
    killed, left, rerun = kill_stage(tally, argv, output, reference, fresh=False, before_rename=4)
    assert killed.killed and rerun.returncode == 0, rerun.output[-2000:]
    (temporary,) = [n for n in left if n.startswith("tokenizer.json.tmp-")]
    assert sorted(left) == [
        "_work/words/d000-f00000.parquet",
        "_work/words/d001-f00000.parquet",
        temporary,
        "vocab.txt",
    ]
    assert tally.mismatches == [] and tally.recovered == 1
    assert snapshot(output) == reference


# Half the campaign's run (bench.faults): 8 steps, a checkpoint every 2, evaluated every 4.
TRAIN_SHORT = ("--max-steps", "8", "--checkpoint-every", "2", "--eval-every", "4")


@pytest.fixture(scope="module")
def training_reference(inputs, tmp_path_factory) -> TrainingReference:
    """An uninterrupted 8-step run (a checkpoint every 2 steps, all kept)."""
    run_dir = tmp_path_factory.mktemp("faults-train") / "run"
    _, renames = reference_run(train_argv(str(inputs.shards), run_dir, *TRAIN_SHORT))
    assert renames == 8  # 4 checkpoints, each then `latest`
    return TrainingReference.read(run_dir, RESUME_FIELDS)


def test_training_killed_between_a_checkpoint_write_and_its_rename_resumes_exactly(
    inputs, training_reference
):
    reference = training_reference
    assert sorted(reference.checkpoints) == [f"step-0000000{s}.pt" for s in (2, 4, 6, 8)]
    run_dir = reference.run_dir
    tally = Tally("train")
    # Before the third rename: step 2 and `latest` published, step 4 written but not renamed.
    rerun = kill_training(
        tally, reference, str(inputs.shards), run_dir, before_rename=3, flags=TRAIN_SHORT
    )
    assert tally.faults == 1 and rerun.returncode == 0, rerun.output[-2000:]
    # What the kill left (step 2) equalled the reference's step 2; after --resume every
    # checkpoint (model, optimizer, schedule, data position, RNG), latest and the metrics
    # (last line per step) equal the uninterrupted run's.
    assert tally.mismatches == [] and tally.recovered == 1
    assert tally.files == 1 + 4 + 1
    # And nothing beside them: --resume deleted the killed write's temporary step 4.
    assert _names(run_dir) == [
        "checkpoints/latest",
        *(f"checkpoints/{n}" for n in reference.checkpoints),
        "metrics.jsonl",
    ]
    assert tally.notes == []


def _names(run_dir) -> list[str]:
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())


@pytest.mark.slow
def test_a_resumed_run_holds_only_the_files_of_an_uninterrupted_run(inputs, training_reference):
    reference = training_reference
    tally = Tally("train")
    kill_training(
        tally, reference, str(inputs.shards), reference.run_dir, before_rename=3, flags=TRAIN_SHORT
    )
    assert tally.recovered == 1
    assert _names(reference.run_dir) == [
        "checkpoints/latest",
        *(f"checkpoints/{n}" for n in reference.checkpoints),
        "metrics.jsonl",
    ]


S3_BUCKET = "faults"


@pytest.fixture(scope="module")
def s3(s3_server, inputs) -> tuple[S3, RemoteInputs]:
    """The session's S3 server with this module's bucket and the sample's inputs in it."""
    s3_server.bucket(S3_BUCKET)
    store = S3(s3_server.endpoint, s3_server.client, S3_BUCKET)
    return store, upload_inputs(store, inputs)


def _without_input_paths(manifest: bytes) -> dict:
    """A shards manifest without the fields naming its inputs' paths (local or s3://)."""
    record = json.loads(manifest)
    del record["config"]["documents"], record["config"]["vocab"], record["vocab"]["path"]
    for item in record["inputs"]:
        del item["path"]
    return record


def test_wikipedia_reading_and_writing_s3_through_faults_gives_the_same_objects(s3):
    store, remote = s3
    prefix = "out/wikipedia-faults"
    argv = s3_stage_argv("wikipedia", remote, store.url(prefix))
    reference = s3_reference(store, argv, prefix)
    assert sorted(reference) == ["_manifest.json", "documents-00000-00000-0000.parquet"]
    tally = Tally("wikipedia → s3")
    # 30 % of requests broken (at most twice in a row for one request, since botocore's
    # standard retries make three attempts): the dump's ranged reads, the Parquet file's and
    # the manifest's multipart uploads (POST create/complete, PUT part), their renames (PUT
    # copy, DELETE).
    with FaultProxy(store.endpoint, rate=0.3, seed=5) as proxy:
        finished = s3_faulty_run(tally, store, argv, prefix, reference, proxy)
    assert finished.returncode == 0, finished.output[-3000:]
    writes = sum(n for (_, method), n in proxy.counts.items() if method in ("PUT", "POST"))
    assert proxy.injected > 0 and writes > 0, proxy.counts
    # The objects of the fault-free run at the same place: the same keys, no others (no
    # temporary name left), the same bytes.
    assert tally.mismatches == [] and tally.recovered == 1 and tally.files == 2


@pytest.mark.slow
def test_examples_writing_to_s3_through_faults_gives_the_local_runs_bytes(s3, examples_reference):
    store, remote = s3
    output, local = examples_reference
    prefix = "out/examples-faults"
    argv = s3_stage_argv("examples", remote, store.url(prefix))
    tally = Tally("examples → s3")
    with FaultProxy(store.endpoint, rate=0.3, seed=7) as proxy:
        finished = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
    assert finished.returncode == 0, finished.output[-3000:]
    # Uploads (PUT: parts, copies) and multipart calls (POST: create, complete) broken too.
    writes = sum(n for (_, method), n in proxy.counts.items() if method in ("PUT", "POST"))
    assert proxy.injected > 0 and writes > 0, proxy.counts
    # The shards and their block tables byte for byte as the local run's; the manifest names
    # its inputs (s3:// here), so it is compared without those path fields, and only them.
    remote_files = store.snapshot(prefix)
    assert sorted(remote_files) == EXAMPLES_FILES
    names = [*SHARD_NAMES, *TABLE_NAMES]
    shards = {name: local[name] for name in names}
    assert tally.compare_trees(shards, {n: remote_files[n] for n in names}, "s3")
    assert tally.files == 10
    body = store.client.get_object(Bucket=S3_BUCKET, Key=f"{prefix}/manifest.json")["Body"]
    assert _without_input_paths(body.read()) == _without_input_paths(
        (output / "manifest.json").read_bytes()
    )


# --- The longer cases: python -m pytest -m slow tests/test_faults.py ---------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage, renames", [("wikipedia", 2), ("books", 2), ("vocab", 5), ("examples", 12)]
)
def test_every_stage_killed_before_each_rename_reruns_to_the_same_bytes(
    inputs, tmp_path, stage, renames
):
    output = tmp_path / "out"
    argv = stage_argv(stage, inputs, str(output))
    _, counted = reference_run(argv)
    assert counted == renames
    reference = snapshot(output)
    tally = Tally(stage)
    for point in range(1, renames + 1):
        # Odd points start in an empty directory, even ones over the complete output.
        killed, _, rerun = kill_stage(
            tally, argv, output, reference, fresh=point % 2 == 1, before_rename=point
        )
        assert killed.killed and rerun.returncode == 0, rerun.output[-2000:]
    assert tally.mismatches == [] and tally.recovered == renames


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["wikipedia", "books", "vocab", "examples", "examples-2w"])
def test_stages_killed_at_random_points_rerun_to_the_same_bytes(inputs, tmp_path, stage):
    output = tmp_path / "out"
    argv = stage_argv(stage, inputs, str(output))
    finished = run_to_end(command(argv), check=True)
    reference = snapshot(output)
    rng = random.Random(f"faults-{stage}")
    tally = Tally(stage)
    for trial in range(3):
        kill_stage(
            tally,
            argv,
            output,
            reference,
            fresh=trial % 2 == 0,
            after_s=rng.uniform(0.3, 1.0) * finished.seconds,
        )
    assert tally.mismatches == [] and tally.recovered == 3


@pytest.mark.slow
def test_training_killed_at_random_points_recovers_exactly(inputs, training_reference):
    rng = random.Random("faults-train")
    tally = Tally("train")
    for _ in range(3):  # within the 8-step run's few seconds, imports included
        kill_training(
            tally,
            training_reference,
            str(inputs.shards),
            training_reference.run_dir,
            after_s=rng.uniform(1.0, 5.0),
            flags=TRAIN_SHORT,
        )
    assert tally.mismatches == [] and tally.recovered == 3


@pytest.mark.slow
def test_a_put_outage_fails_the_stage_and_the_rerun_gives_the_same_objects(s3):
    store, remote = s3
    prefix = "out/examples-outage"
    argv = s3_stage_argv("examples", remote, store.url(prefix))
    reference = s3_reference(store, argv, prefix)
    # From the 6th PUT on, every PUT (uploads, parts, copies) fails, beyond every retry.
    with FaultProxy(
        store.endpoint,
        rate=1.0,
        seed=0,
        faults=("503", "reset"),
        max_in_a_row=1 << 30,
        only=outage_after(6),
    ) as proxy:
        failed = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
    assert failed.returncode != 0 and proxy.injected > 0
    assert store.snapshot(prefix) != {}  # it left a partial output behind
    tally = Tally("outage rerun")
    with FaultProxy(store.endpoint, rate=0.2, seed=11) as proxy:
        rerun = s3_faulty_run(tally, store, argv, prefix, reference, proxy)
    assert rerun.returncode == 0, rerun.output[-3000:]
    assert tally.mismatches == [] and tally.recovered == 1 and tally.faults > 0


@pytest.mark.slow
def test_training_streamed_from_s3_through_faults_equals_training_from_disk(s3, inputs, tmp_path):
    store, remote = s3
    run_dir = tmp_path / "run"
    run_to_end(command(train_argv(str(inputs.shards), run_dir)), check=True)
    reference = TrainingReference.read(run_dir, S3_TRAIN_FIELDS)
    for path in sorted(run_dir.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    tally = Tally("train ← s3")
    with FaultProxy(store.endpoint, rate=0.5, seed=3) as proxy:
        env = child_environment(client_environment(proxy.endpoint))
        finished = run_to_end(command(train_argv(remote.shards, run_dir)), env)
    assert finished.returncode == 0, finished.output[-3000:]
    assert proxy.injected > 0
    assert compare_training(tally, reference, run_dir, "s3", S3_TRAIN_FIELDS), tally.mismatches
