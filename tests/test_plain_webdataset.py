"""A user with plain `webdataset` (no bertkit reader) gets one sample per item, each with its
own key, from the line docs/formats.md documents, with no warning; and the Parquet export
reads the way Hugging Face `datasets`' Parquet loader reads it (pyarrow, batch by batch)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import webdataset as wds

from pipelines.inspect import iter_examples
from schemas.examples import (
    EXAMPLE_MEMBER,
    PRETRAINING_EXAMPLE_SCHEMA,
    SAMPLES_MEMBER,
    ExampleDecodeError,
    pack_samples,
    sample_key,
)
from schemas.shards import WEBDATASET_FIELDS, ShardsManifest, decode_block, unpack_blocks
from tests.test_export_parquet import ROWS
from tests.test_inspect import TRAIN, inspect, shards_dir  # noqa: F401 (fixture)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "formats.md"
# The line docs/formats.md gives a webdataset user, run here as written.
DOCUMENTED = "wds.WebDataset(urls, shardshuffle=False).compose(unpack_blocks)"


def user_visible(caught: list[warnings.WarningMessage]) -> list[str]:
    """The warnings a user would see. webdataset leaves its tar streams for the garbage
    collector to close, with or without bertkit: a ResourceWarning, which Python hides
    unless asked for."""
    return [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]


def train_urls(shards: Path) -> tuple[str, int]:
    manifest = ShardsManifest.from_json((shards / "manifest.json").read_text())
    train = manifest.outputs["seq128"].splits["train"]
    last = len(train.shards) - 1
    return str(shards / f"seq128/train/shard-{{000000..{last:06d}}}.tar"), train.samples


def test_the_formats_page_documents_the_line_tested_here() -> None:
    text = DOCS.read_text()
    assert f"samples = {DOCUMENTED}" in text
    assert "from schemas.shards import unpack_blocks" in text


def test_plain_webdataset_gives_every_sample_with_its_own_key_and_no_warning(
    sample_shards: Path,
) -> None:
    urls, samples = train_urls(sample_shards)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = list(eval(DOCUMENTED, {"wds": wds, "unpack_blocks": unpack_blocks, "urls": urls}))
    assert user_visible(caught) == []
    # The sample's 128-token shards: 15,521 training examples in 8 shards, blocks of 512.
    assert samples == 15521 and len(found) == samples
    assert [sample["__key__"] for sample in found] == [sample_key(i) for i in range(samples)]
    assert set(found[0]) == set(WEBDATASET_FIELDS)
    assert found[0]["__url__"] == str(sample_shards / "seq128/train/shard-000000.tar")
    ours = list(iter_examples(str(sample_shards), 128, "train"))
    assert len(ours) == samples
    for sample, example in zip(found, ours, strict=True):
        assert sample["__key__"] == example.key
        assert sample["input_ids"].dtype == np.int32
        assert sample["input_ids"].tolist() == example.input_ids.tolist()
        assert sample["segment_ids"].tolist() == example.segment_ids.tolist()
        assert sample["masked_lm_positions"].tolist() == example.masked_lm_positions.tolist()
        assert sample["masked_lm_ids"].tolist() == example.masked_lm_ids.tolist()
        assert sample["next_sentence_label"] == example.next_sentence_label
        assert (sample["doc_a"], sample["doc_b"]) == (example.doc_a, example.doc_b)


def test_the_literal_shard_through_webdataset(shards_dir: Path) -> None:  # noqa: F811
    url = str(shards_dir / "seq128/train/shard-000000.tar")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = list(wds.WebDataset(url, shardshuffle=False).compose(unpack_blocks))
    assert user_visible(caught) == []
    first = found[0]
    assert [s["__key__"] for s in found] == ["000000000000", "000000000001"]
    assert {
        name: value.tolist() if isinstance(value, np.ndarray) else value
        for name, value in first.items()
        if name != "__url__"
    } == {"__key__": ROWS[0]["key"], **{k: v for k, v in ROWS[0].items() if k != "key"}}


def test_webdataset_warns_without_shardshuffle(shards_dir: Path) -> None:  # noqa: F811
    """What the line above avoids: left out, shardshuffle draws a warning (so the checks
    above would see one)."""
    url = str(shards_dir / "seq128/train/shard-000000.tar")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(wds.WebDataset(url).compose(unpack_blocks))
    assert user_visible(caught) == [
        "WebDataset(shardshuffle=...) is None; set explicitly to False or a number"
    ]


def test_a_block_key_counts_on_from_its_first_sample() -> None:
    record = {"__key__": "000000000512", SAMPLES_MEMBER: pack_samples([e.encode(2) for e in TRAIN])}
    samples = decode_block(record)
    assert [s["__key__"] for s in samples] == ["000000000512", "000000000513"]
    assert [s["__url__"] for s in samples] == [None, None]
    assert [s["input_ids"].tolist() for s in samples] == [e.input_ids.tolist() for e in TRAIN]
    one = {"__key__": "000000000007", EXAMPLE_MEMBER: TRAIN[1].encode(2)}  # a 1.x record
    assert [(s["__key__"], s["doc_b"]) for s in decode_block(one)] == [("000000000007", "books/b")]


def test_a_record_that_is_not_a_bertkit_block_is_named() -> None:
    with pytest.raises(
        ExampleDecodeError, match=r"record 'x' holds \['txt'\], neither examples\.bin"
    ):
        decode_block({"__key__": "x", "txt": b"hello"})
    with pytest.raises(ExampleDecodeError, match=r"block 'abc': a block's key is its first sample"):
        decode_block({"__key__": "abc", SAMPLES_MEMBER: pack_samples([])})


def test_the_parquet_export_reads_as_datasets_reads_it(
    shards_dir: Path,  # noqa: F811
    tmp_path: Path,
    capsys,
) -> None:
    """HF `datasets.load_dataset("parquet", data_files=...)` reads a file with
    pyarrow.parquet.ParquetFile(...).iter_batches and takes its features from the Arrow
    schema: the same read here, without `datasets` installed."""
    out = tmp_path / "examples.parquet"
    code, _, err = inspect(capsys, str(shards_dir), "--parquet", str(out), "--split", "train")
    assert (code, err) == (0, "")
    parquet = pq.ParquetFile(out)
    rows = [row for batch in parquet.iter_batches(batch_size=1000) for row in batch.to_pylist()]
    assert [row["key"] for row in rows] == ["000000000000", "000000000001"]
    assert {name: rows[0][name] for name in PRETRAINING_EXAMPLE_SCHEMA.names} == ROWS[0]
    assert parquet.schema_arrow.names[: len(PRETRAINING_EXAMPLE_SCHEMA)] == (
        PRETRAINING_EXAMPLE_SCHEMA.names
    )
    assert parquet.metadata.num_rows == 2
