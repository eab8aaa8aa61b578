"""Object storage under faults, for the fault campaign (bench/faults.py): moto's S3 server
behind tests.support.faultproxy, the stages and the trainer reading and writing through it, an
outage and its rerun, each compared with a fault-free run. Not a command.
"""

from __future__ import annotations

import itertools
import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.faultproxy import FaultProxy
from tests.support.faults_runs import (
    DUMP_GLOB,
    EXAMPLES_FLAGS,
    Finished,
    Inputs,
    Snapshot,
    Tally,
    child_environment,
    command,
    digest,
    run_to_end,
    train_argv,
)
from tests.support.faults_training import TrainingReference, compare_training
from tests.support.s3server import client_environment, start_s3_server, stop_server

TRAIN_READ_RATE = 0.5  # the least share of the trainer's S3 requests broken
S3_BUCKET = "faults"


@dataclass
class S3:
    """moto's server, a boto3 client straight to it, and the campaign's bucket."""

    endpoint: str
    client: Any
    bucket: str = S3_BUCKET

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def upload_tree(self, local: Path, prefix: str) -> str:
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            self.client.upload_file(str(path), self.bucket, f"{prefix}/{path.relative_to(local)}")
        return self.url(prefix)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{prefix}/"
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def snapshot(self, prefix: str) -> Snapshot:
        """Every object under `prefix`/, read straight from the server (no faults)."""
        return {
            key[len(prefix) + 1 :]: digest(
                self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            )
            for key in self.keys(prefix)
        }

    def delete(self, prefix: str) -> None:
        for key in self.keys(prefix):
            self.client.delete_object(Bucket=self.bucket, Key=key)


@contextmanager
def s3_server() -> Iterator[S3]:
    process, endpoint, client = start_s3_server()
    try:
        client.create_bucket(Bucket=S3_BUCKET)
        yield S3(endpoint, client)
    finally:
        stop_server(process)


def s3_flags(endpoint: str) -> list[str]:
    """Beam's s3:// filesystem flags for an endpoint (the proxy's or the server's)."""
    return [
        "--s3_endpoint_url",
        endpoint,
        "--s3_access_key_id",
        "test",
        "--s3_secret_access_key",
        "test",
        "--s3_region_name",
        "us-east-1",
    ]


@dataclass(frozen=True)
class RemoteInputs:
    wikipedia: str
    books: str
    vocab: str
    shards: str
    dumps: str  # the sample dump's folder


def upload_inputs(s3: S3, inputs: Inputs) -> RemoteInputs:
    return RemoteInputs(
        s3.upload_tree(inputs.wikipedia, "in/documents/wikipedia"),
        s3.upload_tree(inputs.books, "in/documents/books"),
        s3.upload_tree(inputs.vocab, "in/vocab"),
        s3.upload_tree(inputs.shards, "in/shards"),
        s3.upload_tree(Path(DUMP_GLOB).parent, "in/dumps"),
    )


def s3_stage_argv(stage: str, remote: RemoteInputs, output: str) -> list[str]:
    if stage == "wikipedia":
        dumps = f"{remote.dumps}/*.xml.bz2"
        return ["wikipedia", "--input", dumps, "--output", output, "--overwrite"]
    return [
        "examples",
        "--documents",
        remote.wikipedia,
        remote.books,
        "--vocab",
        remote.vocab,
        "--output",
        output,
        *EXAMPLES_FLAGS,
        "--overwrite",
    ]


def s3_reference(s3: S3, argv: list[str], prefix: str) -> Snapshot:
    """A fault-free run straight to the server, its objects read, then deleted: the faulty
    runs write at the same place."""
    s3.delete(prefix)
    run_to_end(command([*argv, *s3_flags(s3.endpoint)]), check=True)
    reference = s3.snapshot(prefix)
    s3.delete(prefix)
    return reference


def s3_faulty_run(
    tally: Tally, s3: S3, argv: list[str], prefix: str, reference: Snapshot, proxy: FaultProxy
) -> Finished:
    """The stage through `proxy`; its objects compared with `reference`."""
    where = f"{tally.row} run {tally.runs + 1}"
    before = proxy.injected
    finished = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
    tally.faults += proxy.injected - before
    tally.runs += 1
    if finished.returncode != 0:
        tally.mismatches.append(
            f"{where}: exited {finished.returncode}: {finished.output.strip().splitlines()[-1:]}"
        )
    elif tally.compare_trees(reference, s3.snapshot(prefix), where):
        tally.recovered += 1
    return finished


def s3_stage_campaign(
    stage: str, s3: S3, remote: RemoteInputs, runs: int, rate: float, rng: random.Random
) -> Tally:
    tally = Tally(f"{stage} → s3 (5xx, resets, drops)")
    prefix = f"out/{stage}"
    argv = s3_stage_argv(stage, remote, s3.url(prefix))
    reference = s3_reference(s3, argv, prefix)
    for run in range(runs):
        with FaultProxy(s3.endpoint, rate=rate, seed=rng.randrange(1 << 30)) as proxy:
            s3_faulty_run(tally, s3, argv, prefix, reference, proxy)
        print(
            f"  {tally.row}: run {run + 1}/{runs}, {tally.faults} faults so far, "
            f"{len(tally.mismatches)} mismatches"
        )
    return tally


def outage_after(puts: int) -> Callable[[str, str], bool]:
    """`FaultProxy(only=…)`: every PUT (uploads, parts, copies) from the `puts`-th on."""
    counter = itertools.count()
    return lambda method, _target: method == "PUT" and next(counter) >= puts


def s3_outage_campaign(
    stage: str, s3: S3, remote: RemoteInputs, runs: int, rate: float, rng: random.Random
) -> Tally:
    """A PUT outage longer than the clients' retries: the stage fails; the rerun (faults at
    `rate`) must still give the reference's objects."""
    tally = Tally(f"{stage} → s3 (PUT outage, rerun)")
    prefix = f"out/{stage}-outage"
    argv = s3_stage_argv(stage, remote, s3.url(prefix))
    reference = s3_reference(s3, argv, prefix)
    for run in range(runs):
        where = f"{tally.row} run {run + 1}"
        with FaultProxy(
            s3.endpoint,
            rate=1.0,
            seed=0,
            faults=("503", "reset"),
            max_in_a_row=1 << 30,
            only=outage_after(rng.randrange(2, 12)),
        ) as proxy:
            failed = run_to_end(command([*argv, *s3_flags(proxy.endpoint)]))
            tally.faults += proxy.injected
        if failed.returncode == 0:
            tally.notes.append(
                f"{where}: the outage began after the last PUT; the stage ended well"
            )
        with FaultProxy(s3.endpoint, rate=rate, seed=rng.randrange(1 << 30)) as proxy:
            before = len(tally.mismatches)
            s3_faulty_run(tally, s3, argv, prefix, reference, proxy)
            if len(tally.mismatches) > before:
                tally.mismatches[-1] = f"{tally.mismatches[-1]} (after the outage)"
        print(
            f"  {tally.row}: run {run + 1}/{runs}: the outage run exited "
            f"{failed.returncode}; {len(tally.mismatches)} mismatches"
        )
    return tally


# The URL of the shards differs from the local path by design, and so does where the
# checkpoints record the vocabulary: the manifest's relative vocab path, taken beside the
# manifest, names a local directory for the local shards and an object prefix for the
# uploaded ones (pipelines/io/recorded_paths.py). The rest must not differ.
S3_TRAIN_FIELDS = {
    "train_config": ("resume", "overwrite", "shards"),
    "data": ("manifest",),
    "vocab": ("path",),
}


def s3_training_campaign(
    s3: S3,
    inputs: Inputs,
    remote: RemoteInputs,
    workdir: Path,
    runs: int,
    rate: float,
    rng: random.Random,
) -> Tally:
    """The trainer streams the shards from s3:// through faults: the same run as from disk."""
    tally = Tally("train ← s3 (5xx, resets, cuts)")
    run_dir = workdir / "train-s3" / "out"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_to_end(command(train_argv(str(inputs.shards), run_dir)), check=True)
    reference = TrainingReference.read(run_dir, S3_TRAIN_FIELDS)
    for run in range(runs):
        shutil.rmtree(run_dir, ignore_errors=True)
        where = f"{tally.row} run {run + 1}"
        # The trainer makes few requests (the manifest, then per shard its block table and one
        # streamed GET), so it meets at least half of them broken whatever --rate says.
        read_rate = max(rate, TRAIN_READ_RATE)
        with FaultProxy(s3.endpoint, rate=read_rate, seed=rng.randrange(1 << 30)) as proxy:
            env = child_environment(client_environment(proxy.endpoint))
            finished = run_to_end(command(train_argv(remote.shards, run_dir)), env)
            tally.faults += proxy.injected
        tally.runs += 1
        if finished.returncode != 0:
            tally.mismatches.append(
                f"{where}: exited {finished.returncode}: "
                f"{finished.output.strip().splitlines()[-1:]}"
            )
        elif compare_training(tally, reference, run_dir, where, S3_TRAIN_FIELDS):
            tally.recovered += 1
        print(
            f"  {tally.row}: run {run + 1}/{runs}, {tally.faults} faults so far, "
            f"{len(tally.mismatches)} mismatches"
        )
    return tally
