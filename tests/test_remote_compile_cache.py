"""torch.compile's caches of a run on object storage (trainer/run/remote.py): the URL keeps
them as one archive, OUTPUT/compile-cache.tar, which a run there unpacks into its staging
before the first compilation and uploads again at each mirror where its files changed. So a
requeued job on a fresh machine (its staging new, its /tmp empty) loads what the first job
compiled and tuned. Against moto's S3 on loopback: the archive's round trip, an unchanged
cache not uploaded again, an archive that cannot be unpacked, --overwrite keeping it, and
the trainer's --resume compiling nothing."""

from __future__ import annotations

import io
import logging
import os
import tarfile

import pytest
import torch
import torch._dynamo

from tests.test_compile_mode import flags, no_cache_variables  # noqa: F401 (the fixture)
from tests.test_remote_run import BUCKET, s3, s3_listing  # noqa: F401 (the fixture)
from trainer import train
from trainer.compiling import INDUCTOR_VARIABLE, CompileCache
from trainer.run.checkpoints import COMPILE_CACHE_ARCHIVE, COMPILE_CACHE_DIR
from trainer.run.remote import RemoteRun

ENTRIES = {"fxgraph/ab/entry": b"graph", "triton/k1/kernel.cubin": b"kernel", "locks/x.lock": b""}


def members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def cache_files(cache: CompileCache) -> dict[str, bytes]:
    return {
        p.relative_to(cache.path).as_posix(): p.read_bytes()
        for p in cache.path.rglob("*")
        if p.is_file()
    }


def opened(url: str, main: bool = True) -> tuple[RemoteRun, CompileCache]:
    remote = RemoteRun.open(url, keep=1)
    return remote, CompileCache.open(remote.staging, main, remote.compile_cache_mirror)


def test_the_cache_goes_to_the_url_as_one_archive_and_comes_back(s3, no_cache_variables):  # noqa: F811
    url = f"s3://{BUCKET}/cached"
    remote, cache = opened(url)
    try:
        assert cache.path == (remote.staging / COMPILE_CACHE_DIR).absolute()
        assert cache.line() == (
            f"compile cache {cache.path}, kept at {url}/{COMPILE_CACHE_ARCHIVE}: empty: the "
            "first steps compile into it, and a --resume here loads them"
        )
        remote.push()  # nothing compiled yet: no archive
        assert s3_listing(s3, "cached") == {}
        for name, data in ENTRIES.items():
            (cache.path / name).parent.mkdir(parents=True, exist_ok=True)
            (cache.path / name).write_bytes(data)
        remote.push()
        assert members(s3_listing(s3, "cached")[COMPILE_CACHE_ARCHIVE]) == ENTRIES
        s3.delete_object(Bucket=BUCKET, Key=f"cached/{COMPILE_CACHE_ARCHIVE}")
        remote.push()  # the files did not change: not uploaded again
        assert s3_listing(s3, "cached") == {}
        (cache.path / "fxgraph/cd/entry").parent.mkdir()
        (cache.path / "fxgraph/cd/entry").write_bytes(b"eval graph")
        remote.push()
        uploaded = members(s3_listing(s3, "cached")[COMPILE_CACHE_ARCHIVE])
        assert uploaded == {**ENTRIES, "fxgraph/cd/entry": b"eval graph"}
    finally:
        cache.close()
        remote.close()
    # A requeued job: a fresh staging directory, filled before the first compilation.
    again, cache = opened(url)
    try:
        assert cache_files(cache) == uploaded
        assert cache.files == 3  # the lock file says nothing was compiled
        assert cache.line() == (
            f"compile cache {cache.path}, kept at {url}/{COMPILE_CACHE_ARCHIVE}: warm, 3 "
            "files: what an earlier run compiled (and tuned) for the same graphs loads from "
            "there"
        )
        s3.delete_object(Bucket=BUCKET, Key=f"cached/{COMPILE_CACHE_ARCHIVE}")
        again.push()  # what was unpacked is what the URL held: not uploaded again
        assert s3_listing(s3, "cached") == {}
    finally:
        cache.close()
        again.close()


def test_an_archive_that_cannot_be_unpacked_is_said_and_replaced(s3, no_cache_variables, caplog):  # noqa: F811
    url = f"s3://{BUCKET}/broken"
    outside = io.BytesIO()
    with tarfile.open(fileobj=outside, mode="w") as tar:
        member = tarfile.TarInfo("../escaped")
        member.size = 1
        tar.addfile(member, io.BytesIO(b"x"))
    for archive, why in [
        (b"not a tar archive", "file could not be opened successfully"),
        (outside.getvalue(), "'../escaped' would be extracted to"),
    ]:
        s3.put_object(Bucket=BUCKET, Key=f"broken/{COMPILE_CACHE_ARCHIVE}", Body=archive)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="trainer.run.remote"):
            remote, cache = opened(url)
        try:
            (warning,) = caplog.messages
            assert warning.startswith(f"{url}/{COMPILE_CACHE_ARCHIVE}: not a compile cache ")
            assert why in warning
            assert warning.endswith("): the run compiles from scratch and replaces it")
            assert (cache.files, cache_files(cache)) == (0, {})
            assert not (remote.staging.parent / "escaped").exists()
            (cache.path / "fxgraph").mkdir()
            (cache.path / "fxgraph" / "entry").write_bytes(b"graph")
            remote.push()
            assert members(s3_listing(s3, "broken")[COMPILE_CACHE_ARCHIVE]) == {
                "fxgraph/entry": b"graph"
            }
        finally:
            cache.close()
            remote.close()


def test_overwrite_keeps_the_archive_and_a_prefix_holding_only_it_holds_no_run(s3):  # noqa: F811
    run = {
        "checkpoints/latest": b"step-00000002.pt\n",
        "checkpoints/step-00000002.pt": b"checkpoint",
        "metrics.jsonl": b"{}\n",
        COMPILE_CACHE_ARCHIVE: b"archive",
    }
    for name, data in run.items():
        s3.put_object(Bucket=BUCKET, Key=f"kept/{name}", Body=data)
    s3.put_object(Bucket=BUCKET, Key=f"only/{COMPILE_CACHE_ARCHIVE}", Body=b"archive")
    for prefix, resume, overwrite, earlier in [
        (
            "kept",
            False,
            True,
            ["checkpoints/latest", "checkpoints/step-00000002.pt", "metrics.jsonl"],
        ),
        ("only", False, False, []),
    ]:
        remote = RemoteRun.open(f"s3://{BUCKET}/{prefix}", keep=1)
        try:
            assert remote.prepare(resume, overwrite) == earlier
        finally:
            remote.close()


# slow: two cold compilations of the tiny model (about 60 CPU-seconds); the archive's round
# trip is checked above with the trainer's own objects, and a compiled resume that compiles
# nothing in tests/test_compile.py.
@pytest.mark.slow
def test_a_resume_on_a_fresh_machine_compiles_nothing(
    sample_shards,
    s3,  # noqa: F811
    no_cache_variables,  # noqa: F811
    caplog,
):
    """`bertkit train --compile --output s3://…` to step 1, then --resume in a fresh dynamo
    and a fresh staging directory, as a requeued job on another machine: every FX graph
    loads from the archive the first run left."""
    url = f"s3://{BUCKET}/compiled"
    counters = torch._dynamo.utils.counters
    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run(flags(sample_shards, url, "--compile", "--stop-at-step", "1")) == 0
    assert f", kept at {url}/{COMPILE_CACHE_ARCHIVE}: empty: the first steps compile" in caplog.text
    assert counters["inductor"]["fxgraph_cache_miss"] > 0
    compiled = members(s3_listing(s3, "compiled")[COMPILE_CACHE_ARCHIVE])
    assert any(name.startswith("fxgraph/") for name in compiled)
    assert INDUCTOR_VARIABLE not in os.environ  # put back as it was when the run ended
    caplog.clear()
    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run(flags(sample_shards, url, "--compile", "--resume")) == 0
    assert f", kept at {url}/{COMPILE_CACHE_ARCHIVE}: warm, " in caplog.text
    assert counters["inductor"]["fxgraph_cache_hit"] > 0
    assert counters["inductor"]["fxgraph_cache_miss"] == 0
