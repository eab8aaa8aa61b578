"""The data report's line under a plot says what these data show: the NotNext share about
balanced, skewed or one class; no held-out split when none was held out; and the duplicates
a dedup manifest lists, not a stray file beside them."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.inspect import open_target
from pipelines.inspect.report import report_html
from pipelines.inspect.report_data import SplitSection, duplicate_files, read_duplicates
from pipelines.inspect.report_sections import heldout_meaning, not_next_meaning
from schemas.duplicates import DUPLICATES_DIR
from schemas.manifest import MANIFEST_NAME, DocumentsManifest
from tests.test_report import DOCUMENTS, duplicates_table, write_documents

BALANCED = (
    "the next-sentence task is about balanced (40%–60% NotNext), so an NSP accuracy near "
    "50 % means the model has learnt nothing of it"
)
IS_NEXT_ONLY = (
    "seq128/heldout holds IsNext pairs only, as the examples stage warned: a NotNext pair "
    "takes its second segment from another document of the same split, and it had none, so "
    "next-sentence prediction there sees one class (give the split two or more documents, or "
    "train with --objective mlm)"
)


def split(label: str, examples: int, not_next: int) -> SplitSection:
    return SplitSection(label, 128, 20, examples=examples, not_next=not_next)


@pytest.mark.parametrize(
    ("splits", "no_partner", "meaning"),
    [
        ([split("seq128/train", 1000, 539)], False, f"seq128/train 53.9% NotNext: {BALANCED}."),
        (
            # The sample's books alone at --max-seq-length 64: four long documents.
            [split("seq64/train", 4226, 3000), split("seq64/heldout", 0, 0)],
            False,
            "seq64/train 71.0% NotNext (seq64/heldout: no examples): seq64/train is skewed "
            "towards NotNext (outside 40%–60% NotNext): always answering NotNext scores 71.0% "
            "there, so read its NSP accuracy against that, not 50 %.",
        ),
        (
            [split("seq128/train", 10, 3)],
            False,
            "seq128/train 30.0% NotNext: seq128/train is skewed towards IsNext (outside 40%–60% "
            "NotNext): always answering IsNext scores 70.0% there, so read its NSP accuracy "
            "against that, not 50 %.",
        ),
        (
            # A one-document held-out split: its NotNext chunks were rejected (no partner).
            [split("seq128/train", 5, 3), split("seq128/heldout", 4, 0)],
            True,
            "seq128/train 60.0%, seq128/heldout 0.0% NotNext: the next-sentence task is about "
            "balanced (40%–60% NotNext in seq128/train), so an NSP accuracy near 50 % means the "
            f"model has learnt nothing of it; {IS_NEXT_ONLY}.",
        ),
        (
            [split("seq128/train", 2, 0)],
            False,
            "seq128/train 0.0% NotNext: seq128/train holds IsNext pairs only, so next-sentence "
            "prediction there sees one class (give the split two or more documents, or train "
            "with --objective mlm).",
        ),
        (
            [split("seq128/train", 7, 7)],
            False,
            "seq128/train 100.0% NotNext: seq128/train holds NotNext pairs only (a chunk of one "
            "sentence always takes a random next), so next-sentence prediction there sees one "
            "class.",
        ),
        ([split("seq128/train", 0, 0)], False, "no examples, so no next-sentence pairs to count."),
    ],
    ids=["balanced", "skewed NotNext", "skewed IsNext", "one class", "IsNext", "NotNext", "none"],
)
def test_the_notnext_line_says_balanced_skewed_or_one_class(splits, no_partner, meaning) -> None:
    assert not_next_meaning(splits, no_partner) == meaning


def held(fraction: float, documents: int, documents_heldout: int, examples_heldout: int) -> dict:
    return {
        "fraction": fraction,
        "documents": documents,
        "documents_heldout": documents_heldout,
        "examples": 1000,
        "examples_heldout": examples_heldout,
    }


def test_the_heldout_line_says_there_is_no_heldout_split_when_none_was_held_out() -> None:
    assert heldout_meaning(held(0.01, 121, 0, 0), [0.0, 0.0]) == (
        "no held-out split: --heldout-fraction 0.01 held out none of the 121 documents (chosen "
        "by a hash of their id), so bertkit train evaluates nothing on these shards; raise "
        "--heldout-fraction or give more documents."
    )
    assert heldout_meaning(held(0.0, 121, 0, 0), [0.0, 0.0]) == (
        "no held-out split: --heldout-fraction is 0, so bertkit train evaluates nothing on "
        "these shards."
    )
    assert heldout_meaning(held(0.05, 100, 5, 52), [0.05, 0.052]) == (
        "whole documents are held out (by id hash), so the held-out loss measures text the "
        "model never trained on; 5.2% of examples against 5.0% of documents: held-out "
        "documents are about as long as the others."
    )


def test_a_stray_file_in_duplicates_is_not_read_when_the_manifest_lists_none(
    tmp_path: Path,
) -> None:
    directory = write_documents(tmp_path / "dedup", DOCUMENTS, stage="dedup")
    (directory / DUPLICATES_DIR).mkdir()
    stray = [("books/c", "books", "exact_duplicate", 1.0)]
    pq.write_table(duplicates_table(stray), directory / DUPLICATES_DIR / "mine.parquet")
    manifest = DocumentsManifest.from_json((directory / MANIFEST_NAME).read_text())
    # An older dedup's manifest, without `duplicates_files`: its folder is listed.
    assert duplicate_files(str(directory), manifest) == [
        str(directory / DUPLICATES_DIR / "mine.parquet")
    ]
    # Today's records its files; `[]`: it removed nothing, whatever else lies there.
    manifest.config = {"duplicates_files": []}
    (directory / MANIFEST_NAME).write_text(manifest.to_json())
    assert duplicate_files(str(directory), manifest) == []
    summary = read_duplicates(str(directory), manifest)
    assert summary is not None
    assert (summary.files, dict(summary.rows), summary.note) == (0, {}, "")
    page = report_html(open_target(str(directory)))
    assert "0 of 3 removed" in page and "Note:" not in page
