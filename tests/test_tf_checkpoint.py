"""Google's TensorFlow BERT checkpoints read without TensorFlow (pipelines/io/tf_checkpoint.py).

The fixture in tests/data/tf_bert_tiny/ was written by TensorFlow's own v1 Saver
(make_fixture.py there, not run here); expected.safetensors holds the values it saved, under
transformers' names, written from numpy, not read back through the reader under test.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import BertConfig, BertForPreTraining

from pipelines.io.crc32c import crc32c, unmask_crc
from pipelines.io.tf_checkpoint import TFCheckpointError, find_prefix, hf_name, read_tf_bert
from tests.support.literal_batch import LiteralBatch

FIXTURE = Path(__file__).parent / "data" / "tf_bert_tiny"
INDEX = "bert_model.ckpt.index"
DATA = "bert_model.ckpt.data-00000-of-00001"

# bert_model.ckpt.index's layout, as TensorFlow wrote it: one data block at byte 0 of 4,493
# bytes (then its compression byte and crc), the metaindex block, the index block, the footer.
DATA_BLOCK_BYTES = 4493


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "tf_bert_tiny"
    shutil.copytree(FIXTURE, copy)
    return copy


def _patch(path: Path, position: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] = value
    path.write_bytes(bytes(data))


def test_reads_google_checkpoint_exactly() -> None:
    config, tensors = read_tf_bert(str(FIXTURE))
    expected = load_file(str(FIXTURE / "expected.safetensors"))
    assert sorted(tensors) == sorted(expected)
    assert len(tensors) == 46  # 2 layers x 16, 5 embeddings, pooler 2, MLM head 5, NSP head 2
    for name, value in expected.items():
        assert tensors[name].dtype == np.float32, name
        assert tensors[name].flags.c_contiguous and tensors[name].flags.writeable, name
        np.testing.assert_array_equal(tensors[name], value, err_msg=name)
    assert tensors["bert.encoder.layer.1.intermediate.dense.weight"].shape == (16, 8)
    assert tensors["cls.seq_relationship.weight"].shape == (2, 8)
    assert config == {
        "architectures": ["BertForPreTraining"],
        "model_type": "bert",
        "vocab_size": 40,
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }


def test_tensors_fill_transformers_bert_for_pretraining() -> None:
    """The names and config are transformers' own: every parameter of its BertForPreTraining
    is given but the two it ties to others (the decoder's weight to the word embeddings, its
    bias to cls.predictions.bias)."""
    config, tensors = read_tf_bert(str(FIXTURE))
    model = BertForPreTraining(BertConfig(**config))
    state = {name: torch.from_numpy(value) for name, value in tensors.items()}
    result = model.load_state_dict(state, strict=False)
    assert result.unexpected_keys == []
    assert sorted(result.missing_keys) == [
        "cls.predictions.decoder.bias",
        "cls.predictions.decoder.weight",
    ]
    assert torch.equal(
        model.cls.predictions.decoder.weight, state["bert.embeddings.word_embeddings.weight"]
    )
    assert torch.equal(model.cls.predictions.decoder.bias, state["cls.predictions.bias"])


def test_prefix_and_two_data_files_read_the_same() -> None:
    expected = load_file(str(FIXTURE / "expected.safetensors"))
    for path in (FIXTURE / "bert_model.ckpt", FIXTURE / "sharded"):
        _, tensors = read_tf_bert(str(path))
        assert sorted(tensors) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(tensors[name], value, err_msg=f"{path}: {name}")
    assert find_prefix(str(FIXTURE / "sharded")) == str(FIXTURE / "sharded" / "bert_model.ckpt")
    assert find_prefix(str(FIXTURE.parent)) is None  # tests/data holds no checkpoint itself


def test_crc32c_matches_the_standard() -> None:
    # The check value of CRC-32C and RFC 3720's (iSCSI) test vectors.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    # Lengths on both sides of the numpy lanes' thresholds, against Google's compiled crc32c.
    rng = np.random.default_rng(7)
    for size in (4095, 4096, 4097, 65535, 65536, 65537, (1 << 20) + 3, (17 << 20) + 5):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c(data) == google_crc32c.value(data), size
    # LevelDB's mask (rotate right by 15, add a constant), undone.
    assert unmask_crc(0xA282EAD8) == 0
    assert unmask_crc((((0x12345678 >> 15) | (0x12345678 << 17)) + 0xA282EAD8) & 0xFFFFFFFF) == (
        0x12345678
    )


@pytest.mark.parametrize(
    ("google", "hf"),
    [
        ("bert/embeddings/word_embeddings", ("bert.embeddings.word_embeddings.weight", False)),
        ("bert/embeddings/LayerNorm/gamma", ("bert.embeddings.LayerNorm.weight", False)),
        ("bert/embeddings/LayerNorm/beta", ("bert.embeddings.LayerNorm.bias", False)),
        (
            "bert/encoder/layer_11/attention/self/query/kernel",
            ("bert.encoder.layer.11.attention.self.query.weight", True),
        ),
        (
            "bert/encoder/layer_0/attention/output/LayerNorm/beta",
            ("bert.encoder.layer.0.attention.output.LayerNorm.bias", False),
        ),
        (
            "bert/encoder/layer_3/output/dense/bias",
            ("bert.encoder.layer.3.output.dense.bias", False),
        ),
        ("bert/pooler/dense/kernel", ("bert.pooler.dense.weight", True)),
        ("cls/predictions/output_bias", ("cls.predictions.bias", False)),
        (
            "cls/predictions/transform/dense/kernel",
            ("cls.predictions.transform.dense.weight", True),
        ),
        ("cls/seq_relationship/output_weights", ("cls.seq_relationship.weight", False)),
        ("cls/seq_relationship/output_bias", ("cls.seq_relationship.bias", False)),
        ("bert/encoder/layer_0/output/dense/kernel/adam_m", None),
        ("cls/predictions/output_bias/adam_v", None),
        ("global_step", None),
    ],
)
def test_google_names_to_transformers_names(google: str, hf: tuple[str, bool] | None) -> None:
    assert hf_name(google) == hf


@pytest.mark.parametrize(
    "google",
    [
        "bert/encoder/layer_0/adapter/dense/kernel",
        "bert/embeddings/LayerNorm/kernel",
        "bert/pooler/dense/gamma",
        "loss_scale",
    ],
)
def test_unknown_variable_is_refused(google: str) -> None:
    with pytest.raises(TFCheckpointError) as caught:
        hf_name(google)
    assert str(caught.value) == (
        f"variable {google!r} is not part of google-research/bert's BERT or its pre-training "
        "heads; this reader takes those only: convert the checkpoint with the code that made it"
    )


def _refusal(path: Path) -> str:
    """The one line read_tf_bert refuses `path` with (it must refuse it)."""
    with pytest.raises(TFCheckpointError) as caught:
        read_tf_bert(str(path))
    return str(caught.value)


def test_checkpoint_with_an_unknown_variable_is_refused() -> None:
    index = FIXTURE / "unknown" / INDEX
    assert _refusal(FIXTURE / "unknown") == (
        f"{index}: variable 'bert/encoder/layer_0/adapter/dense/kernel' is not part of "
        "google-research/bert's BERT or its pre-training heads; this reader takes those only: "
        "convert the checkpoint with the code that made it"
    )


def test_float16_variable_is_refused() -> None:
    index = FIXTURE / "float16" / INDEX
    assert _refusal(FIXTURE / "float16") == (
        f"{index}: variable bert/embeddings/word_embeddings is float16; this reader takes "
        "float32 checkpoints, as Google released them: convert this one with transformers "
        "instead (docs/training.md)"
    )


def _damaged(path: Path, what: str) -> str:
    return (
        f"{path} is damaged ({what}): it is not a TensorFlow checkpoint as TensorFlow wrote it; "
        "download or copy the checkpoint again"
    )


def test_bad_magic_is_refused(tmp_path: Path) -> None:
    index = _copy(tmp_path) / INDEX
    _patch(index, index.stat().st_size - 1, 0)
    assert _refusal(index.parent) == _damaged(
        index, "its last 8 bytes are not the table's magic number"
    )


def test_truncated_index_is_refused(tmp_path: Path) -> None:
    index = _copy(tmp_path) / INDEX
    index.write_bytes(FIXTURE.joinpath(INDEX).read_bytes()[:3000])
    assert _refusal(index.parent) == _damaged(
        index, "its last 8 bytes are not the table's magic number"
    )
    index.write_bytes(FIXTURE.joinpath(INDEX).read_bytes()[-40:])
    assert _refusal(index.parent) == _damaged(index, "40 bytes, shorter than the table's footer")


def test_damaged_block_fails_its_crc(tmp_path: Path) -> None:
    index = _copy(tmp_path) / INDEX
    _patch(index, 100, FIXTURE.joinpath(INDEX).read_bytes()[100] ^ 1)
    assert _refusal(index.parent) == _damaged(index, "the block at byte 0 fails its crc32c")


def test_compressed_block_is_refused(tmp_path: Path) -> None:
    index = _copy(tmp_path) / INDEX
    _patch(index, DATA_BLOCK_BYTES, 1)  # the data block's compression byte: snappy
    assert _refusal(index.parent) == (
        f"{index}: the block at byte 0 is compressed (type 1, snappy); this reader takes the "
        "uncompressed index TensorFlow's Saver writes: convert the checkpoint with "
        "transformers instead (docs/training.md, 'A Google TensorFlow checkpoint')"
    )


def test_truncated_data_file_is_refused(tmp_path: Path) -> None:
    data = _copy(tmp_path) / DATA
    data.write_bytes(FIXTURE.joinpath(DATA).read_bytes()[:10000])
    # The first variable read past byte 10,000 (Adam's slots, which sit between, are not read).
    assert _refusal(data.parent) == (
        f"{data} ends inside variable bert/encoder/layer_0/intermediate/dense/kernel (bytes "
        "9,600 to 10,112): the file is truncated; download or copy the checkpoint again"
    )


def test_damaged_tensor_fails_its_crc(tmp_path: Path) -> None:
    data = _copy(tmp_path) / DATA
    _patch(data, 9601, FIXTURE.joinpath(DATA).read_bytes()[9601] ^ 0x10)
    assert _refusal(data.parent) == _damaged(
        data, "variable bert/encoder/layer_0/intermediate/dense/kernel's bytes fail their crc32c"
    )


def test_missing_data_file_and_config_are_refused(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / DATA).unlink()
    assert _refusal(copy) == (
        f"{copy / DATA} is missing; {copy / INDEX} stores variables in it: copy the "
        "checkpoint's every .data-* file beside its .index"
    )
    (copy / "bert_config.json").unlink()
    assert _refusal(copy) == (
        f"{copy / 'bert_config.json'} is missing: a Google BERT checkpoint comes with its "
        "bert_config.json; put it beside the checkpoint"
    )


def test_config_that_contradicts_the_checkpoint_is_refused(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    config = copy / "bert_config.json"
    config.write_text(
        config.read_text().replace('"intermediate_size": 16', '"intermediate_size": 32')
    )
    assert _refusal(copy) == (
        f"{copy / INDEX}: variable bert/encoder/layer_0/intermediate/dense/bias has shape [16] "
        "where bert_config.json gives [32]; use the config released with this checkpoint"
    )
    config.write_text(
        FIXTURE.joinpath("bert_config.json")
        .read_text()
        .replace('"num_hidden_layers": 2', '"num_hidden_layers": 1')
    )
    assert _refusal(copy) == (
        f"{copy / INDEX}: variable bert/encoder/layer_1/attention/output/LayerNorm/beta is "
        "beyond the 1 layers bert_config.json gives; use the config released with this checkpoint"
    )
    config.write_text('{"hidden_size": 8}')
    assert _refusal(copy) == (
        f"{config}: no integer vocab_size, num_hidden_layers, num_attention_heads, "
        "intermediate_size, max_position_embeddings, type_vocab_size; a Google BERT config "
        "names all of vocab_size, hidden_size, num_hidden_layers, num_attention_heads, "
        "intermediate_size, max_position_embeddings, type_vocab_size: use the "
        "bert_config.json released with the checkpoint"
    )


def test_two_checkpoints_in_one_directory_are_refused(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    shutil.copy(copy / INDEX, copy / "model.ckpt-1000.index")
    assert _refusal(copy) == (
        f"{copy} holds 2 TensorFlow checkpoints (bert_model.ckpt.index, model.ckpt-1000.index): "
        "pass the one to start from as its prefix (the path without '.index')"
    )
    _, tensors = read_tf_bert(str(copy / "bert_model.ckpt"))
    assert len(tensors) == 46


# One literal batch for the trainer's start: two pairs of 10 tokens (ids < 40, positions
# < 16), the second padded; 3 prediction slots each, the second row's last one padding.
BATCH = LiteralBatch(
    input_ids=[[4, 19, 22, 7, 5, 20, 13, 23, 36, 5], [4, 27, 14, 28, 5, 16, 22, 5, 0, 0]],
    token_types=[[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]],
    attention=[[1] * 10, [1] * 8 + [0, 0]],
    positions=[[1, 3, 7], [2, 6, 0]],
    labels=[[19, 7, 23], [14, 22, -100]],
    nsp=[0, 1],
)


def _transformers_loss(nsp: bool) -> float:
    """transformers' BertForPreTraining holding expected.safetensors (not the reader's
    output), on the literal batch."""
    config, _ = read_tf_bert(str(FIXTURE))
    model = BertForPreTraining(BertConfig(**config))
    expected = load_file(str(FIXTURE / "expected.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in expected.items()}, strict=False)
    return BATCH.transformers_loss(model, nsp)


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm"])
def test_the_trainer_starts_from_a_google_checkpoint(objective: str) -> None:
    """read_released takes Google's directory as it takes a transformers one: bertkit's model
    holding it gives transformers' loss on the same batch (fp32, CPU)."""
    from trainer.released import read_released, released_model

    released = read_released(str(FIXTURE))
    assert sorted(released.files) == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "vocab.txt",
    ]
    assert released.tokenizer_files == {
        "vocab.txt": hashlib.sha256((FIXTURE / "vocab.txt").read_bytes()).hexdigest()
    }
    model, fresh, dropped = released_model(released, objective)
    nsp = objective == "mlm+nsp"
    assert (fresh, dropped) == ([], [] if nsp else ["the pooler", "the NSP head"])
    ours = BATCH.bertkit_loss(model, nsp)
    theirs = _transformers_loss(nsp)
    print(f"Google's TF checkpoint, {objective}: bertkit {ours!r} transformers {theirs!r}")
    assert abs(ours - theirs) / abs(theirs) < 1e-5, (ours, theirs)


def test_the_trainer_takes_a_prefix_and_refuses_in_one_line(tmp_path: Path) -> None:
    from trainer.released import (
        ReleasedModelError,
        is_released_directory,
        read_released,
    )

    copy = _copy(tmp_path)
    shutil.copy(copy / INDEX, copy / "model.ckpt-1000.index")
    prefix = copy / "bert_model.ckpt"
    assert is_released_directory(str(prefix)) and is_released_directory(str(copy))
    with pytest.raises(ReleasedModelError) as caught:  # an index without its data file
        read_released(str(copy / "model.ckpt-1000"))
    assert str(caught.value) == (
        f"{copy / 'model.ckpt-1000.data-00000-of-00001'} is missing; "
        f"{copy / 'model.ckpt-1000.index'} stores variables in it: copy the checkpoint's every "
        ".data-* file beside its .index"
    )
    assert sorted(read_released(str(prefix)).files) == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "vocab.txt",
    ]
    with pytest.raises(ReleasedModelError) as caught:
        read_released(str(copy))
    assert str(caught.value) == (
        f"{copy} holds 2 TensorFlow checkpoints (bert_model.ckpt.index, model.ckpt-1000.index): "
        "pass the one to start from as its prefix (the path without '.index')"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "bert_config.json").write_text("{}")
    with pytest.raises(ReleasedModelError) as caught:
        read_released(str(empty))
    assert str(caught.value) == (
        f"{empty} has neither config.json nor a TensorFlow checkpoint (bert_model.ckpt.index): "
        "pass a transformers BERT directory (config.json with model.safetensors or "
        "pytorch_model.bin) or Google's (bert_config.json with bert_model.ckpt.*)"
    )


def test_bertkit_train_starts_from_a_google_checkpoint(sample_documents, tmp_path, caplog) -> None:
    """The command line: shards made with the checkpoint's own vocab.txt, `bertkit train
    --init-checkpoint` on Google's directory, a 0-step run exported: transformers' names and
    values as expected.safetensors holds them, bit for bit, and the original vocab.txt."""
    from pipelines import examples
    from trainer import export, train

    shards = tmp_path / "shards"
    argv = ["--documents", str(sample_documents[1]), "--vocab", str(FIXTURE), "--no-cased"]
    argv += ["--max-seq-length", "16", "--dupe-factor", "1", "--heldout-fraction", "0"]
    assert examples.run([*argv, "--output", str(shards)]) == 0
    run = tmp_path / "run"
    flags = ["--shards", str(shards), "--init-checkpoint", str(FIXTURE)]
    flags += ["--micro-batch-size", "4", "--max-steps", "2", "--num-workers", "0"]
    flags += ["--no-tensorboard", "--checkpoint-every", "1"]
    with caplog.at_level("INFO", logger="bertkit.train"):
        assert train.run([*flags, "--output", str(run), "--stop-at-step", "0"]) == 0
    assert (
        f"--init-checkpoint: the released BERT at {FIXTURE} (2 layers × 8, 2 heads, "
        "16 positions); every head from it" in caplog.text
    )
    hf = tmp_path / "hf"
    assert export.run([str(run / "checkpoints"), "--output", str(hf)]) == 0
    ours = load_file(str(hf / "model.safetensors"))
    expected = load_file(str(FIXTURE / "expected.safetensors"))
    assert sorted(ours) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    assert (hf / "vocab.txt").read_bytes() == (FIXTURE / "vocab.txt").read_bytes()
    model = BertForPreTraining.from_pretrained(hf)
    assert model.config.num_hidden_layers == 2 and model.config.max_position_embeddings == 16
    # ... and the run goes on from there: two steps of training from Google's weights.
    assert train.run([*flags, "--output", str(tmp_path / "trained")]) == 0
