"""What a run reads is what its manifest lists, all of it, before the first step: a shard
named by pattern that the manifest beside it does not list is refused (it would reach the
model unverified), a listed shard that is missing or of another size is said at the start in
one line (locally, on moto's S3, the GCS emulator and a Python http server), one deleted
after the start is said in one line from a loader worker, and a bucket that does not exist
is called that."""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path

import pytest

from pipelines.io import storage
from pipelines.io.shards import ShardReadError
from pipelines.io.shards.source import DataConfigError, open_source
from schemas.examples import SHARDS_MANIFEST_NAME
from tests.support.gcsserver import gcs_emulator
from tests.support.s3server import client_environment
from tests.test_data import SHARD_SIZES, write_uneven_shards
from tests.test_train import TINY
from trainer import train
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader

BUCKET = "presence"
PATTERN = "seq128/train/shard-{000000..000005}.tar"


@pytest.fixture
def s3(s3_server, monkeypatch):
    s3_server.bucket(BUCKET)
    for name, value in client_environment(s3_server.endpoint).items():
        monkeypatch.setenv(name, value)
    return s3_server.client


def upload(client, shards_dir: Path, prefix: str) -> None:
    for path in sorted(shards_dir.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(shards_dir).as_posix()}"
            client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())


def planted(shards_dir: Path) -> Path:
    """A sixth shard beside the five the manifest lists (a copy of the first)."""
    train_dir = shards_dir / "seq128" / "train"
    shutil.copy(train_dir / "shard-000000.tar", train_dir / "shard-000005.tar")
    return shards_dir


# --------------------------------------------------------------------------- 1: unlisted


def test_a_shard_the_manifest_beside_it_does_not_list_is_refused(tmp_path):
    shards_dir = planted(write_uneven_shards(tmp_path))
    with pytest.raises(DataConfigError) as refused:
        open_source(str(shards_dir / PATTERN))
    assert str(refused.value) == (
        f"{shards_dir}/seq128/train/shard-000005.tar: not listed in "
        f"{shards_dir}/manifest.json, the manifest of the shards there, so nothing could "
        f"verify its bytes: give only shards it lists (or the shards directory, {shards_dir}), "
        "or rebuild the shards with it"
    )
    listed = open_source(str(shards_dir / "seq128/train/shard-{000000..000004}.tar"))
    assert [shard.samples for shard in listed.shards] == SHARD_SIZES
    (shards_dir / SHARDS_MANIFEST_NAME).unlink()  # no manifest at all: read unverified
    counted = open_source(str(shards_dir / PATTERN))
    assert [shard.samples for shard in counted.shards] == [*SHARD_SIZES, SHARD_SIZES[0]]


def test_an_unlisted_shard_on_s3_is_refused_before_any_is_read(tmp_path, s3):
    upload(s3, planted(write_uneven_shards(tmp_path)), "ex1")
    with pytest.raises(DataConfigError) as refused:
        open_source(f"s3://{BUCKET}/ex1/seq128/train/shard-{{000000..000007}}.tar")
    assert str(refused.value) == (
        f"s3://{BUCKET}/ex1/seq128/train/shard-000005.tar (and 2 more): not listed in "
        f"s3://{BUCKET}/ex1/manifest.json, the manifest of the shards there, so nothing could "
        f"verify its bytes: give only shards it lists (or the shards directory, "
        f"s3://{BUCKET}/ex1), or rebuild the shards with it"
    )


def test_shards_of_a_second_directory_with_a_manifest_are_refused(tmp_path):
    first = write_uneven_shards(tmp_path / "a")
    (first / SHARDS_MANIFEST_NAME).unlink()
    write_uneven_shards(tmp_path / "b")
    pattern = str(tmp_path / "{a,b}" / "shards" / "seq128/train/shard-000000.tar")
    with pytest.raises(DataConfigError) as refused:
        open_source(pattern)
    assert str(refused.value) == (
        f"{first}/seq128/train/shard-000000.tar: its pattern names shards of two shards "
        f"directories, this one's and those {tmp_path}/b/shards/manifest.json lists: give "
        "each directory (or its shards) as a --shards source of its own"
    )


# --------------------------------------------------------------------------- 2: at the start


def test_a_missing_or_cut_shard_is_said_before_anything_is_read(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    train_dir = shards_dir / "seq128" / "train"
    (train_dir / "shard-000002.tar").unlink()
    (train_dir / "shard-000004.tar").unlink()
    with pytest.raises(ShardReadError) as missing:
        open_source(str(shards_dir))
    assert str(missing.value) == (
        f"{train_dir}/shard-000002.tar (and 1 more) listed in {shards_dir}/manifest.json but "
        "not on the storage: restore it or rebuild the shards (nothing was trained on)"
    )
    pattern = str(shards_dir / "seq128/train/shard-{000000..000001}.tar")
    with (train_dir / "shard-000001.tar").open("r+b") as shard:
        size = shard.seek(0, 2)
        shard.truncate(size - 512)
    with pytest.raises(ShardReadError) as cut:
        open_source(pattern)
    assert str(cut.value) == (
        f"{train_dir}/shard-000001.tar: {size - 512:,} bytes on the storage, "
        f"{shards_dir}/manifest.json records {size:,}: cut short or changed after writing: "
        "restore it or rebuild the shards (nothing was trained on)"
    )


def test_a_missing_block_table_is_said_at_the_start(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    table = shards_dir / "seq128/train/shard-000003.tar.blocks.json"
    table.unlink()
    with pytest.raises(ShardReadError, match=r"^\S+/shard-000003\.tar\.blocks\.json listed in "):
        open_source(str(shards_dir))


def test_missing_shards_on_s3_and_gcs_are_found_by_one_listing(tmp_path, s3):
    shards_dir = write_uneven_shards(tmp_path)
    upload(s3, shards_dir, "gone")
    s3.delete_object(Bucket=BUCKET, Key="gone/seq128/train/shard-000001.tar")
    with pytest.raises(ShardReadError) as missing:
        open_source(f"s3://{BUCKET}/gone")
    assert str(missing.value) == (
        f"s3://{BUCKET}/gone/seq128/train/shard-000001.tar listed in "
        f"s3://{BUCKET}/gone/manifest.json but not on the storage: restore it or rebuild the "
        "shards (nothing was trained on)"
    )
    with gcs_emulator(BUCKET) as client:
        bucket = client.bucket(BUCKET)
        for path in sorted(shards_dir.rglob("*")):
            if path.is_file() and path.name != "shard-000003.tar":
                name = f"gone/{path.relative_to(shards_dir).as_posix()}"
                data = path.read_bytes()
                if path.name == "shard-000004.tar":
                    data = data[:-1024]
                bucket.blob(name).upload_from_string(data)
        with pytest.raises(ShardReadError) as on_gcs:
            open_source(f"gs://{BUCKET}/gone")
    assert str(on_gcs.value) == (
        f"gs://{BUCKET}/gone/seq128/train/shard-000003.tar listed in "
        f"gs://{BUCKET}/gone/manifest.json but not on the storage: restore it or rebuild the "
        "shards (nothing was trained on)"
    )


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_a_missing_shard_over_http_is_found_by_a_head(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    shards_dir = write_uneven_shards(tmp_path)
    (shards_dir / "seq128/train/shard-000004.tar").unlink()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **k: _Files(*a, directory=str(tmp_path), **k)
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/shards"
    try:
        with pytest.raises(ShardReadError) as missing:
            open_source(url)
    finally:
        server.shutdown()
    assert str(missing.value) == (
        f"{url}/seq128/train/shard-000004.tar listed in {url}/manifest.json but not on the "
        "storage: restore it or rebuild the shards (nothing was trained on)"
    )


def test_the_trainer_refuses_a_missing_shard_before_its_first_step(sample_shards, tmp_path, capsys):
    shards = tmp_path / "shards"
    shutil.copytree(sample_shards, shards)
    (shards / "seq128/train/shard-000003.tar").unlink()
    run_dir = tmp_path / "run"
    code = train.run([*TINY, "--shards", str(shards), "--output", str(run_dir)])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"bertkit train: error: {shards}/seq128/train/shard-000003.tar listed in "
        f"{shards}/manifest.json but not on the storage: restore it or rebuild the shards "
        "(nothing was trained on)"
    )
    assert not (run_dir / "checkpoints").exists()


# --------------------------------------------------------------------------- 2: in the run


@pytest.mark.parametrize("workers", [0, 2])
def test_a_shard_deleted_after_the_start_is_one_line_from_any_worker(tmp_path, workers):
    shards_dir = write_uneven_shards(tmp_path)
    source = open_source(str(shards_dir))
    shard = shards_dir / "seq128/train/shard-000001.tar"
    shard.unlink()
    loader = PretrainingLoader(source, LoaderConfig(5, shuffle=False, num_workers=workers))
    with pytest.raises(ShardReadError) as missing:
        list(loader.epoch(DataPosition()))
    assert str(missing.value) == (
        f"{shard}: listed in the manifest but not on the storage: restore it or rebuild the shards"
    )


def test_an_os_error_our_code_raises_in_a_worker_is_its_one_line(tmp_path):
    """A shard read without a manifest and gone since: the OSError storage raises is no bug,
    and reaches the trainer as its message, not torch's "Caught …" and a traceback."""
    shards_dir = write_uneven_shards(tmp_path)
    (shards_dir / SHARDS_MANIFEST_NAME).unlink()
    source = open_source(str(shards_dir / "seq128/train/shard-{000000..000004}.tar"))
    assert source.samples == sum(SHARD_SIZES)  # counted: every shard read once
    shard = shards_dir / "seq128/train/shard-000002.tar"
    shard.unlink()
    loader = PretrainingLoader(source, LoaderConfig(5, shuffle=False, num_workers=2))
    with pytest.raises(FileNotFoundError) as missing:
        list(loader.epoch(DataPosition()))
    assert str(missing.value) == f"[Errno 2] No such file or directory: '{shard}'"


# --------------------------------------------------------------------------- 6: no bucket


def test_a_bucket_that_does_not_exist_is_called_that(s3):
    with pytest.raises(FileNotFoundError) as on_s3:
        storage.locate("s3://nobucket/shards")
    assert str(on_s3.value) == (
        "s3://nobucket/shards: the bucket s3://nobucket does not exist: check its name (and "
        "AWS_ENDPOINT_URL, where it is set, for the storage that holds it)"
    )
    with pytest.raises(DataConfigError) as pattern:
        open_source("s3://nobucket/x/seq128/train/shard-{000000..000001}.tar")
    assert str(pattern.value) == (
        "s3://nobucket/x/seq128/train/shard-000000.tar: the bucket s3://nobucket does not "
        "exist: check its name (and AWS_ENDPOINT_URL, where it is set, for the storage that "
        "holds it)"
    )
    with pytest.raises(FileNotFoundError, match=r"neither manifest\.json \(a shards directory"):
        storage.locate(f"s3://{BUCKET}/nothing-here")  # the bucket is there: no manifest
    with gcs_emulator(BUCKET), pytest.raises(FileNotFoundError) as on_gcs:
        storage.locate("gs://nobkt/shards")
    assert str(on_gcs.value) == (
        "gs://nobkt/shards: the bucket gs://nobkt does not exist: check its name (and "
        "STORAGE_EMULATOR_HOST, where it is set, for the storage that holds it)"
    )
