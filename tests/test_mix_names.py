"""A mix's source names, the ones metrics.jsonl and TensorBoard know each source by: from the
directory's normalised absolute path (the same from any working directory), told apart by
the parent's name, and kept by a resume as its checkpoint gave them."""

from __future__ import annotations

import logging

import pytest

from trainer.source import resumed_names, source_names


@pytest.mark.parametrize(
    ("specs", "names"),
    [
        (["out/wiki", "out/domain"], ("wiki", "domain")),
        (["out/demo/shards", "/data/law/shards/"], ("demo-shards", "law-shards")),
        (["a/x", "b/x/manifest.json", "c"], ("a-x", "b-x", "c")),
        (["s3://b/wiki/seq128/train/shard-{000000..000009}.tar", "dom"], ("wiki", "dom")),
        (["x/a/s", "y/a/s"], ("a-s-1", "a-s-2")),
        (["/data/shards", "/data/old/shards"], ("data-shards", "old-shards")),
        (["s3://b/law/x/../shards", "gs://c/shards/."], ("law-shards", "c-shards")),
    ],
)
def test_each_source_is_named_by_its_directory_and_told_apart_by_its_parent(specs, names) -> None:
    assert source_names(specs) == names


def test_the_same_shards_have_the_same_name_from_any_working_directory(
    tmp_path, monkeypatch
) -> None:
    """A path is named as its normalised absolute path: `shards` run from w/ and `../shards`
    from w/law are one source, w-shards (its parent's name in front, as law/shards is
    another "shards"); `..` and `.` are never a name."""
    work = tmp_path / "w"
    (work / "law").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert source_names(["law/shards", "shards"]) == ("law-shards", "w-shards")
    assert source_names(["./law/../law/shards/manifest.json", "./shards/"]) == (
        "law-shards",
        "w-shards",
    )
    assert source_names([str(work / "law" / "shards"), str(work / "shards")]) == (
        "law-shards",
        "w-shards",
    )
    monkeypatch.chdir(work / "law")
    assert source_names(["shards", "../shards"]) == ("law-shards", "w-shards")
    assert source_names([".", ".."]) == ("law", "w")


def test_a_resume_keeps_the_names_its_checkpoint_gave_the_same_shards(caplog) -> None:
    caplog.set_level(logging.INFO, "bertkit.train")
    saved = {
        "sources": [
            {"name": "law-shards", "shards_sha256": "a" * 64},
            {"name": "shards", "shards_sha256": "b" * 64},
        ]
    }
    now = {
        "sources": [
            {"name": "law-shards", "shards_sha256": "a" * 64},
            {"name": "w-shards", "shards_sha256": "b" * 64},
        ]
    }
    specs = ["shards", "../shards"]
    assert resumed_names(saved, now, specs) == ("law-shards", "shards")
    assert caplog.messages == [
        "--resume: each source keeps the name the checkpoint gives it, the one metrics.jsonl "
        "and TensorBoard know it by: ../shards is shards (not w-shards)"
    ]
    caplog.clear()
    assert resumed_names(saved, now, specs, main=False) == ("law-shards", "shards")
    assert resumed_names(now, now, specs) == ("law-shards", "w-shards")
    assert caplog.messages == []  # another process, or nothing renamed: no line
    # Other shards (a resume refuses them), a record without a mix or without names: None.
    other = {"sources": [now["sources"][1], now["sources"][0]]}
    assert resumed_names(saved, other, specs) is None
    assert resumed_names({"shards_sha256": "c" * 64}, now, specs) is None
    assert resumed_names(None, now, specs) is None
    unnamed = {"sources": [{"shards_sha256": "a" * 64}, {"shards_sha256": "b" * 64}]}
    assert resumed_names(unnamed, now, specs) is None
