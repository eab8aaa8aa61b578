"""The trainer's input pipeline: plan, read, shuffle, collate, resume, and remote shards."""

from __future__ import annotations

import tarfile
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pipelines.beam.shards import write_shard
from pipelines.io.shards import ShardReadError, block_table_file, encode_shard
from schemas.batch import IGNORE_INDEX, BatchField
from schemas.examples import SHARDS_MANIFEST_NAME, PretrainingExample, sample_key
from schemas.shards import SequenceOutput, ShardsManifest, SplitShards, block_table_path
from trainer.collate import FixedShape, SampleLimits, to_device
from trainer.data import (
    DataConfigError,
    DataPosition,
    LoaderConfig,
    PretrainingLoader,
    RawSample,
    Segment,
    ShardEntry,
    check_source,
    collate,
    decode_samples,
    open_source,
    split_by_node,
    split_by_worker,
    worker_batches,
)

# Five shards of uneven sizes: 35 samples, keys 0 … 34 in order.
SHARD_SIZES = [7, 3, 11, 5, 9]
VOCAB_SHA = "ab" * 32


def make_example(index: int) -> PretrainingExample:
    """Sample `index`: its tokens encode the index, so a batch tells which samples it holds."""
    a = [5 + index % 7] * (1 + index % 3)
    b = [6 + index % 5] * (1 + index % 4)
    ids = np.array([2, *a, 3, *b, 3], dtype=np.uint16)
    return PretrainingExample(
        input_ids=ids,
        segment_a_length=len(a) + 2,
        masked_lm_positions=np.array([1], dtype=np.uint16),
        masked_lm_ids=np.array([100 + index], dtype=np.uint16),
        next_sentence_label=index % 2,
        doc_a=f"d{index}",
        doc_b=f"d{index}",
        dupe_pass=0,
    )


def write_uneven_shards(
    root: Path, sizes: list[int] = SHARD_SIZES, block_samples: int | None = None
) -> Path:
    """root/shards with a manifest, laid out as `bertkit examples` writes it; with
    `block_samples`, in verified blocks of that many samples (the writer's are 512)."""
    shards_dir = root / "shards"
    (shards_dir / "seq128" / "train").mkdir(parents=True)
    infos, first = [], 0
    for number, size in enumerate(sizes):
        samples = [(sample_key(i), make_example(i).encode(2)) for i in range(first, first + size)]
        path = f"seq128/train/shard-{number:06d}.tar"
        if block_samples is None:
            infos.append(write_shard(str(shards_dir), path, samples))
        else:
            data, inline = encode_shard(path, samples, block_samples)
            table, info = block_table_file(inline)
            (shards_dir / path).write_bytes(data)
            (shards_dir / block_table_path(path)).write_bytes(table)
            infos.append(info)
        first += size
    manifest = ShardsManifest(
        # make_example's labels are 100 + key: 200 ids, more for more than 100 samples
        vocab={"path": "vocab", "sha256": VOCAB_SHA, "size": max(200, 100 + first), "cased": False},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={
            "seq128": SequenceOutput(
                128,
                20,
                {
                    "train": SplitShards(
                        samples=first, not_next=0, tokens=0, predictions=0, shards=infos
                    )
                },
            )
        },
    )
    (shards_dir / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return shards_dir


def indices(batches) -> list[int]:
    return [int(i) for batch in batches for i in batch[BatchField.SAMPLE_INDEX]]


# --------------------------------------------------------------------------- the plan


def test_split_by_node_gives_every_rank_the_same_full_batches():
    shards = [ShardEntry(f"s{i}", n) for i, n in enumerate(SHARD_SIZES)]
    # 35 samples, 2 ranks, batch 4: 4 batches each (32 samples), the last 3 dropped.
    rank0, batches0 = split_by_node(shards, 0, 2, 4, drop_last=True)
    rank1, batches1 = split_by_node(shards, 1, 2, 4, drop_last=True)
    assert (batches0, batches1) == (4, 4)
    assert rank0 == [Segment(shards[0], 0, 7), Segment(shards[1], 0, 3), Segment(shards[2], 0, 6)]
    assert rank1 == [Segment(shards[2], 6, 5), Segment(shards[3], 0, 5), Segment(shards[4], 0, 6)]
    # Evaluation reads everything: 18 + 17 samples, 5 batches each (the last ones short).
    eval0, eval_batches0 = split_by_node(shards, 0, 2, 4, drop_last=False)
    eval1, eval_batches1 = split_by_node(shards, 1, 2, 4, drop_last=False)
    assert (sum(s.take for s in eval0), sum(s.take for s in eval1)) == (18, 17)
    assert (eval_batches0, eval_batches1) == (5, 5)


def test_split_by_worker_takes_contiguous_batch_ranges():
    shards = [ShardEntry(f"s{i}", n) for i, n in enumerate(SHARD_SIZES)]
    segments, batches = split_by_node(shards, 0, 1, 4, drop_last=True)  # 8 batches, 32 samples
    assert worker_batches(batches, 3) == [3, 3, 2]
    parts = [split_by_worker(segments, batches, w, 3, 4) for w in range(3)]
    assert [n for _, n in parts] == [3, 3, 2]
    assert parts[1][0] == [Segment(shards[2], 2, 9), Segment(shards[3], 0, 3)]  # samples 12 … 23
    assert sum(s.take for segments, _ in parts for s in segments) == 32


# --------------------------------------------------------------------------- collate


def test_collate_pads_to_a_multiple_of_8_with_exact_values():
    raw = [make_example(4), make_example(11)]
    decoded = list(
        decode_samples(RawSample(i, e.encode(2), "s") for i, e in zip([4, 11], raw, strict=True))
    )
    batch = collate(decoded)
    # example 4: [CLS] 9 9 [SEP] 10 [SEP], 6 tokens; example 11: [CLS] 9 9 9 [SEP] 7 7 7 7 [SEP],
    # 10 tokens → both padded to 16, the next multiple of 8.
    assert batch[BatchField.INPUT_IDS].tolist() == [
        [2, 9, 9, 3, 10, 3] + [0] * 10,
        [2, 9, 9, 9, 3, 7, 7, 7, 7, 3] + [0] * 6,
    ]
    assert batch[BatchField.TOKEN_TYPE_IDS].tolist() == [
        [0, 0, 0, 0, 1, 1] + [0] * 10,
        [0] * 5 + [1] * 5 + [0] * 6,
    ]
    assert batch[BatchField.ATTENTION_MASK].tolist() == [
        [True] * 6 + [False] * 10,
        [True] * 10 + [False] * 6,
    ]
    assert batch[BatchField.MASKED_POSITIONS].tolist() == [[1] + [0] * 7, [1] + [0] * 7]
    assert batch[BatchField.MASKED_LABELS].tolist() == [
        [104] + [IGNORE_INDEX] * 7,
        [111] + [IGNORE_INDEX] * 7,
    ]
    assert batch[BatchField.NEXT_SENTENCE_LABELS].tolist() == [0, 1]
    assert batch[BatchField.SAMPLE_INDEX].tolist() == [4, 11]
    assert all(t.dtype in (torch.int64, torch.bool) for t in batch.values())


# --------------------------------------------------------------------------- every sample once


@pytest.mark.parametrize("workers", [0, 2])
def test_two_ranks_read_every_sample_once_per_epoch(tmp_path, workers):
    source = open_source(str(write_uneven_shards(tmp_path)))
    assert source.samples == 35 and source.max_seq_length == 128
    seen: list[int] = []
    for rank in range(2):
        config = LoaderConfig(4, rank=rank, world_size=2, num_workers=workers, shuffle_buffer=5)
        loader = PretrainingLoader(source, config)
        assert loader.batches_per_epoch == 4
        batches = list(loader.epoch(DataPosition(epoch=0)))
        assert len(batches) == 4 and all(len(b[BatchField.SAMPLE_INDEX]) == 4 for b in batches)
        seen += indices(batches)
    assert len(seen) == 32 and len(set(seen)) == 32  # 3 of 35 dropped: less than one batch
    # The labels travel with their sample: masked_labels = 100 + index.
    again = PretrainingLoader(source, LoaderConfig(4, world_size=2, num_workers=workers))
    batch = next(again.epoch(DataPosition()))
    assert (batch[BatchField.MASKED_LABELS][:, 0] - 100).tolist() == batch[
        BatchField.SAMPLE_INDEX
    ].tolist()


def test_epochs_are_shuffled_differently_and_deterministically(tmp_path):
    source = open_source(str(write_uneven_shards(tmp_path)))
    config = LoaderConfig(5, shuffle_buffer=8)
    epoch0 = indices(PretrainingLoader(source, config).epoch(DataPosition(0)))
    epoch1 = indices(PretrainingLoader(source, config).epoch(DataPosition(1)))
    assert epoch0 == indices(PretrainingLoader(source, config).epoch(DataPosition(0)))
    assert epoch0 != epoch1 and len(epoch0) == len(epoch1) == 35
    unshuffled = LoaderConfig(5, shuffle=False)
    assert indices(PretrainingLoader(source, unshuffled).epoch(DataPosition(0))) == list(range(35))


@pytest.mark.parametrize("stop_after", [1, 3, 4])
def test_resume_mid_epoch_repeats_and_skips_nothing(tmp_path, stop_after):
    source = open_source(str(write_uneven_shards(tmp_path)))
    config = LoaderConfig(3, num_workers=2, shuffle_buffer=6)
    loader = PretrainingLoader(source, config)
    full = [indices([b]) for b in loader.epoch(DataPosition(0))]
    assert len(full) == 11
    interrupted = PretrainingLoader(source, config)
    first = []
    for batch in interrupted.epoch(DataPosition(0)):
        first.append(indices([batch]))
        if len(first) == stop_after:
            break
    position = interrupted.position
    assert position == DataPosition(0, stop_after)
    rest = [indices([b]) for b in PretrainingLoader(source, config).epoch(position)]
    assert first + rest == full


def test_batches_run_epoch_after_epoch_and_resume_across_the_boundary(tmp_path):
    source = open_source(str(write_uneven_shards(tmp_path)))
    loader = PretrainingLoader(source, LoaderConfig(10, num_workers=0))  # 3 batches per epoch
    stream = loader.batches(DataPosition(0, 2))
    next(stream)
    assert loader.position == DataPosition(0, 3)
    next(stream)
    assert loader.position == DataPosition(1, 1)


# --------------------------------------------------------------------------- length bucketing


def length_of(index: int) -> int:
    """make_example(index)'s tokens: [CLS] A [SEP] B [SEP]."""
    return 5 + index % 3 + index % 4


def test_bucket_sorts_a_group_and_deals_its_micro_batches():
    from trainer.order import bucket

    # A group of 3 global batches × a micro-batch of 2 (one micro index): 6 samples in
    # position order, their lengths. Sorted (stable: ties keep position order): 1 4 | 0 5 |
    # 2 3, the shortest micro-batch first; micro-batch k goes to global batch deal[k].
    lengths = [7, 5, 9, 9, 6, 7]
    rows = bucket(np.array(lengths), 3, np.array([2, 0, 1]))
    assert rows.tolist() == [[0, 5], [2, 3], [1, 4]]


@pytest.mark.parametrize("workers", [0, 2])
def test_bucketed_batches_hold_the_same_samples_sorted_by_length(tmp_path, workers):
    """Bucketing regroups, per micro index, the samples that W global batches hold at its
    slots: the same samples, each micro-batch sorted, the shorter ones before the longer;
    both ranks' k-th shortest micro-batches land in the same global batch (the deal is
    shared), so a step's ranks get the same quantile."""
    source = open_source(str(write_uneven_shards(tmp_path)))
    plain, bucketed = {}, {}
    for rank in range(2):
        common = {"rank": rank, "world_size": 2, "num_workers": workers, "shuffle_buffer": 12}
        for window, into in ((0, plain), (2, bucketed)):
            config = LoaderConfig(3, bucket_window=window, **common)
            into[rank] = [
                indices([b]) for b in PretrainingLoader(source, config).epoch(DataPosition())
            ]
    assert len(plain[0]) == len(bucketed[0]) == 5  # 35 samples, global batches of 3 × 2
    quantile = {}
    for rank in range(2):
        for first in range(0, 5, 2):  # the groups: global batches 0-1, 2-3, 4
            before = [i for b in plain[rank][first : first + 2] for i in b]
            after = bucketed[rank][first : first + 2]
            assert sorted(before) == sorted(i for b in after for i in b)
            assert all([length_of(i) for i in b] == sorted(length_of(i) for i in b) for b in after)
            if len(after) == 2:
                lo, hi = (sorted(map(length_of, b)) for b in after)
                assert lo[-1] <= hi[0] or hi[-1] <= lo[0]  # one all shorter than the other
                if lo != hi:  # which one is shorter, unless they are alike
                    quantile.setdefault(first, set()).add(int(hi < lo))
    assert all(len(shorter) == 1 for shorter in quantile.values())  # the same for both ranks


@pytest.mark.parametrize("stop_after", [1, 2, 3, 5])
def test_bucketed_resume_repeats_and_skips_nothing(tmp_path, stop_after):
    source = open_source(str(write_uneven_shards(tmp_path)))
    config = LoaderConfig(3, num_workers=2, shuffle_buffer=6, bucket_window=2)
    full = [indices([b]) for b in PretrainingLoader(source, config).epoch(DataPosition(0))]
    assert len(full) == 11
    rest = PretrainingLoader(source, config).epoch(DataPosition(0, stop_after))
    assert full[:stop_after] + [indices([b]) for b in rest] == full


@pytest.mark.parametrize("workers", [0, 2])
def test_the_workers_pad_to_the_compile_shapes_before_pinning(tmp_path, workers):
    """Under torch.compile the loader's workers pad each batch to its fixed shape (the sample
    lengths here are 5 … 10 tokens: collated to 8 or 16), so the trainer's to_device has
    nothing left to pad and copies the pinned tensors as they are."""
    source = open_source(str(write_uneven_shards(tmp_path)))
    for fixed, width in ((FixedShape.of(128, 20), 128), (FixedShape.of(128, 20, buckets=4), 32)):
        config = LoaderConfig(5, num_workers=workers, pad_to=fixed)
        batches = list(PretrainingLoader(source, config).epoch(DataPosition()))
        assert len(batches) == 7
        for batch in batches:
            assert batch[BatchField.INPUT_IDS].shape == (5, width)
            assert batch[BatchField.ATTENTION_MASK].shape == (5, width)
            assert batch[BatchField.MASKED_LABELS].shape == (5, 24)
            assert batch[BatchField.MASKED_LABELS][:, 1:].eq(IGNORE_INDEX).all()
            moved = to_device(dict(batch), torch.device("cpu"), fixed)
            assert all(moved[name] is batch[name] for name in batch)


# --------------------------------------------------------------------------- checks and errors


def test_check_source_refuses_what_the_model_cannot_take(tmp_path):
    source = open_source(str(write_uneven_shards(tmp_path)))
    check_source(source, max_position_embeddings=512, vocab_size=200, vocab_sha256=VOCAB_SHA)
    with pytest.raises(DataConfigError, match="examples of up to 128 tokens, the model has 64"):
        check_source(source, 64, 200, None)
    with pytest.raises(DataConfigError, match="vocabulary has 200 tokens, the model 100"):
        check_source(source, 512, 100, None)
    with pytest.raises(DataConfigError, match=f"vocabulary sha256 {VOCAB_SHA}, the model was"):
        check_source(source, 512, 200, "cd" * 32)


def test_manifest_of_another_schema_or_length_is_refused(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    with pytest.raises(
        DataConfigError, match=r"no shards for --max-seq-length 512 \(it has \[128\]"
    ):
        open_source(str(shards_dir), max_seq_length=512)
    manifest = shards_dir / SHARDS_MANIFEST_NAME
    manifest.write_text(
        manifest.read_text().replace('"schema_version": "2.1"', '"schema_version": "3.0"')
    )
    with pytest.raises(
        DataConfigError,
        match=r"PretrainingExample record at schema 3\.0, this bertkit reads PretrainingExample schema 2\.1",
    ):
        open_source(str(shards_dir))


def test_a_changed_shard_stops_the_epoch_naming_it(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    shard = shards_dir / "seq128/train/shard-000001.tar"
    data = bytearray(shard.read_bytes())
    data[600] ^= 1  # padding: the tar still parses, the checksum does not match
    shard.write_bytes(bytes(data))
    # Unshuffled, read a global batch at a time (--shuffle-buffer 5): batch 0 is shard 0's.
    config = LoaderConfig(5, shuffle=False, shuffle_buffer=5)
    loader = PretrainingLoader(open_source(str(shards_dir)), config)
    used = []
    with pytest.raises(
        ShardReadError,
        match=r"shard-000001\.tar: samples 0–2 \(bytes 0–2,048\) do not match the manifest's "
        r"sha256 \(.*none of them was used",
    ):
        for batch in loader.epoch(DataPosition()):
            used.append(batch)
    assert indices(used) == [0, 1, 2, 3, 4]  # shard 0's first batch; none of shard 1's samples


def test_a_changed_block_table_stops_the_epoch_naming_its_shard(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    table = shards_dir / "seq128/train/shard-000001.tar.blocks.json"
    data = bytearray(table.read_bytes())
    digit = data.index(b'"sha256":["') + 11
    data[digit] = ord("0") if data[digit] != ord("0") else ord("1")  # a block's sha256, changed
    table.write_bytes(bytes(data))
    # Unshuffled, read a global batch at a time (--shuffle-buffer 5): batch 0 is shard 0's.
    config = LoaderConfig(5, shuffle=False, shuffle_buffer=5)
    loader = PretrainingLoader(open_source(str(shards_dir)), config)
    used = []
    with pytest.raises(
        ShardReadError,
        match=r"shard-000001\.tar: its block table shard-000001\.tar\.blocks\.json does not "
        r"match the manifest's sha256 \(.*none of the shard's samples was used",
    ):
        for batch in loader.epoch(DataPosition()):
            used.append(batch)
    assert indices(used) == [0, 1, 2, 3, 4]  # shard 0's first batch; none of shard 1's samples


def test_a_2_0_manifest_with_its_blocks_inline_gives_the_same_batches(tmp_path):
    """Shards made before block tables (2.0: every block listed in the manifest) are read as
    they were, verified block by block, with no block table file anywhere."""
    shards_dir = write_uneven_shards(tmp_path)
    config = LoaderConfig(4, seed=3)
    expected = indices(
        PretrainingLoader(open_source(str(shards_dir)), config).epoch(DataPosition())
    )
    path = shards_dir / SHARDS_MANIFEST_NAME
    manifest = ShardsManifest.from_json(path.read_text())
    train = manifest.outputs["seq128"].splits["train"]
    train.shards = [
        replace(info.with_blocks(table.read_bytes(), info.path), block_table=None)
        for info in train.shards
        for table in [shards_dir / block_table_path(info.path)]
    ]
    manifest.schema_version = "2.0"
    path.write_text(manifest.to_json())
    for table in shards_dir.glob("seq128/train/*.blocks.json"):
        table.unlink()
    source = open_source(str(shards_dir))
    assert source.manifest is not None and source.manifest.schema_version == "2.0"
    assert [len(shard.info.blocks) for shard in source.shards] == [1] * 5  # type: ignore[union-attr]
    assert indices(PretrainingLoader(source, config).epoch(DataPosition())) == expected


def test_unigram_baseline_counts_the_masked_labels(tmp_path):
    from trainer.evaluate import masked_label_counts, unigram_baseline

    source = open_source(str(write_uneven_shards(tmp_path)))
    counts = masked_label_counts(source)
    assert counts == Counter({100 + i: 1 for i in range(35)})  # one label per sample: 100 + key
    # A tie in the train counts goes to the smallest id; it is 1 of the 35 held-out labels.
    assert unigram_baseline(source, source) == (100, 1 / 35)


def _tampered(shards_dir: Path, change) -> Path:
    """The manifest with `change` applied to its JSON, written back."""
    import json

    path = shards_dir / SHARDS_MANIFEST_NAME
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw))
    return shards_dir


def _first_shard(raw: dict) -> dict:
    return raw["outputs"]["seq128"]["splits"]["train"]["shards"][0]


def _inline(raw: dict, blocks) -> None:
    """The first shard listed as a 2.0 manifest lists it: `blocks` inline, no block table."""
    del _first_shard(raw)["block_table"]
    _first_shard(raw)["blocks"] = blocks


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda raw: _first_shard(raw).update(samples=-7),
            r"outputs\.seq128\.splits\.train\.shards\[0\]\.samples is -7: it must be at least 0",
        ),
        (
            lambda raw: _first_shard(raw).update(path="/dev/zero"),
            r"shards\[0\]\.path is '/dev/zero': a manifest lists paths inside its own directory",
        ),
        (
            lambda raw: _first_shard(raw).update(path="../../etc/passwd"),
            r"shards\[0\]\.path is '\.\./\.\./etc/passwd'",
        ),
        (
            lambda raw: _first_shard(raw).update(path="http://evil.example/x.tar"),
            r"shards\[0\]\.path is 'http://evil\.example/x\.tar'",
        ),
        (
            lambda raw: _first_shard(raw).update(samples="7"),
            r"shards\[0\]\.samples must be an integer, not str '7'",
        ),
        (
            lambda raw: _first_shard(raw).update(sha256="x" * 64),
            r"shards\[0\]\.sha256 is 'xxx.*not a sha256",
        ),
        (
            lambda raw: raw["outputs"]["seq128"]["splits"]["train"].update(samples=10**12),
            r"splits\.train: its shards hold 35 samples, `samples` says 1000000000000",
        ),
        (
            lambda raw: raw["outputs"]["seq128"].update(max_seq_length=True),
            r"outputs\.seq128\.max_seq_length must be an integer, not bool",
        ),
        (lambda raw: raw.update(outputs=[]), r"AttributeError"),
        (lambda raw: raw["vocab"].update(size=-1), r"vocab\.size is -1"),
        (lambda raw: _first_shard(raw).pop("block_table"), None),  # a 1.0 entry: one block
        # 2.0 entries, their blocks inline
        (
            lambda raw: _inline(raw, [{"offset": 512, "sha256": "ab" * 32}]),
            r"shards\[0\]\.blocks\[0\]\.offset is 512: blocks start at byte 0",
        ),
        (
            lambda raw: _inline(raw, [{"offset": 0, "sha256": "ab" * 32}] * 2),
            r"shards\[0\]\.blocks: 2 blocks, 7 samples in blocks of 512 make 1",
        ),
        (lambda raw: _inline(raw, [{"offset": 0}]), r"TypeError"),
        (lambda raw: _inline(raw, "0"), r"blocks must be a list"),
        # 2.1 entries, their blocks in a block table file
        (
            lambda raw: _first_shard(raw).update(block_samples=0),
            r"shards\[0\]\.block_samples is 0: it must be at least 1",
        ),
        (
            lambda raw: _first_shard(raw)["block_table"].update(bytes=0),
            r"shards\[0\]\.block_table\.bytes is 0: it must be at least 1 and at most 154",
        ),  # 7 samples: one block
        (
            lambda raw: _first_shard(raw)["block_table"].update(sha256="AB" * 32),
            r"shards\[0\]\.block_table\.sha256 is 'ABAB.*not a sha256",
        ),
        (
            lambda raw: _first_shard(raw).update(block_table=[7]),
            r"block_table must be a \{bytes, sha256\} object",
        ),
        (
            lambda raw: _first_shard(raw).update(blocks=[{"offset": 0, "sha256": "ab" * 32}]),
            r"shards\[0\]: lists blocks inline and a block_table; one or the other",
        ),
    ],
)
def test_a_tampered_manifest_is_refused_naming_file_and_field(tmp_path, change, message):
    shards_dir = _tampered(write_uneven_shards(tmp_path), change)
    if message is None:  # accepted, and still verified: the whole shard is one block
        loader = PretrainingLoader(open_source(str(shards_dir)), LoaderConfig(5, shuffle=False))
        assert indices(loader.epoch(DataPosition()))[:5] == [0, 1, 2, 3, 4]
        return
    with pytest.raises(DataConfigError, match=message) as error:
        open_source(str(shards_dir))
    assert str(error.value).startswith(f"{shards_dir / SHARDS_MANIFEST_NAME}: not a valid")


SHARD = "s3://b/shards/seq128/train/shard-000001.tar"


def _example(ids, a_length=3, positions=(1,), labels=(104,), label=0) -> PretrainingExample:
    return PretrainingExample(
        input_ids=np.array(ids, dtype=np.uint16),
        segment_a_length=a_length,
        masked_lm_positions=np.array(positions, dtype=np.uint16),
        masked_lm_ids=np.array(labels, dtype=np.uint16),
        next_sentence_label=label,
        doc_a="a",
        doc_b="b",
        dupe_pass=0,
    )


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (_example([2, *[7] * 597, 3, 5, 3]), "has more than the manifest's 128 tokens"),
        (_example([2, 9000, 3, 5, 3]), "has a token id past the vocabulary's 8000"),
        (_example([2, 7, 3, 5, 3], labels=(8001,)), "has a label past the vocabulary's 8000"),
        (_example([2, 7, 3, 5, 3], positions=(50,)), "has a masked position outside its tokens"),
        (_example([2, 7, 3, 5, 3], positions=(0,)), "has a masked position outside its tokens"),
        (_example([2, 7, 3, 5, 3], a_length=9), "has segment A's length outside its tokens"),
        (_example([2, 7, 3, 5, 3], label=7), "has a next-sentence label other than 0 or 1"),
    ],
)
def test_collate_checks_every_field_and_names_shard_and_sample(bad, what):
    good = _example([2, 7, 3, 5, 3])
    decoded = list(
        decode_samples([RawSample(6, good.encode(2), SHARD), RawSample(7, bad.encode(2), SHARD)])
    )
    with pytest.raises(ShardReadError) as error:
        collate(decoded, SampleLimits(max_tokens=128, vocab_size=8000))
    assert str(error.value).startswith(f"{SHARD}: sample 000000000007 {what}; the shard is")
    collate(decoded[:1], SampleLimits(max_tokens=128, vocab_size=8000))  # the good one alone


def test_the_loader_refuses_a_sample_outside_the_manifests_vocabulary(tmp_path):
    shards_dir = write_uneven_shards(tmp_path)
    samples = [(sample_key(0), _example([2, 500, 3, 5, 3]).encode(2))]  # the manifest says 200
    info = write_shard(str(shards_dir), "seq128/train/shard-000000.tar", samples)
    _tampered(
        shards_dir,
        lambda raw: raw["outputs"]["seq128"]["splits"]["train"].update(
            samples=raw["outputs"]["seq128"]["splits"]["train"]["samples"] - 6,
            shards=[asdict(info), *raw["outputs"]["seq128"]["splits"]["train"]["shards"][1:]],
        ),
    )
    loader = PretrainingLoader(open_source(str(shards_dir)), LoaderConfig(4, shuffle=False))
    refused = r"shard-000000\.tar: sample 000000000000 has a token id past the vocabulary's 200"
    with pytest.raises(ShardReadError, match=refused):
        list(loader.epoch(DataPosition()))


def test_shards_in_the_1x_layout_are_still_read(tmp_path):
    """A 1.1 manifest over shards of one tar member per sample gives the same batches."""
    from tests.support.legacy_shards import write_legacy_copy

    shards_dir = write_uneven_shards(tmp_path)
    legacy = write_legacy_copy(shards_dir, tmp_path / "legacy")
    with tarfile.open(legacy / "seq128/train/shard-000000.tar") as archive:
        assert archive.getnames()[:2] == ["000000000000.example.bin", "000000000001.example.bin"]
    source = open_source(str(legacy))
    assert source.manifest is not None and source.manifest.schema_version == "1.1"

    def batches(directory) -> list[list[int]]:
        loader = PretrainingLoader(open_source(str(directory)), LoaderConfig(4, seed=3))
        return [batch[BatchField.SAMPLE_INDEX].tolist() for batch in loader.epoch(DataPosition())]

    assert batches(legacy) == batches(shards_dir) and len(batches(legacy)) == 8
