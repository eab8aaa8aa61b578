"""A file named .tar that is no tar file (a zip, a text file, nothing) is said to be that,
not a shard cut short; a shard whose first header is sound keeps the reader's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_inspect import TRAIN_SHARD, inspect, shards_dir  # noqa: F401 (fixture)

REST = "so not a bertkit shard: pass a shard, or rebuild it or restore it from the source\n"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"hello\n", "6 bytes, less than one tar header"),
        (b"", "0 bytes, less than one tar header"),
        (b"PK\x03\x04" + bytes(range(256)) * 4, "its first 512 bytes are not a tar header"),
    ],
    ids=["text", "empty", "zip"],
)
def test_a_file_that_is_no_tar_is_said_to_be_none(tmp_path: Path, capsys, data, why) -> None:
    shard = tmp_path / "shard-000000.tar"
    shard.write_bytes(data)
    code, lines, err = inspect(capsys, str(shard), "--json", "1")
    assert (code, lines) == (1, [])
    assert err == f"bertkit inspect: error: {shard}: not a tar file ({why}), {REST}"


def test_a_shard_cut_inside_its_first_member_keeps_the_reader_s_words(
    shards_dir: Path,  # noqa: F811
    capsys,
) -> None:
    shard = shards_dir / TRAIN_SHARD
    shard.write_bytes(shard.read_bytes()[:600])  # its first header whole, its block cut
    code, _, err = inspect(capsys, str(shard), "--json", "1", "--no-verify")
    assert code == 1 and "not a tar file" not in err
    assert err.startswith(f"bertkit inspect: error: {shard}: member ") and " claims " in err
