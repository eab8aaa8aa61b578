"""A released BERT (a transformers directory made here, random weights, no download) read as
the trainer starts from it: one name mapping both ways, loss parity with transformers on a
literal batch, heads the directory lacks, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from tests.support.literal_batch import LiteralBatch
from trainer.hf_names import from_hf, to_hf
from trainer.model import BertConfig, BertForPreTraining
from trainer.released import (
    ReleasedModelError,
    preset_name,
    read_released,
    released_model,
    released_model_config,
)

VOCAB = 40
SIZES = {
    "vocab_size": VOCAB,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 24,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-7,
}
# One literal batch: two pairs of 8 tokens, the second padded; 3 prediction slots each.
BATCH = LiteralBatch(
    input_ids=[[2, 7, 9, 4, 3, 11, 12, 3], [2, 15, 4, 30, 3, 21, 3, 0]],
    token_types=[[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 0]],
    attention=[[1] * 8, [1] * 7 + [0]],
    positions=[[1, 3, 6], [2, 5, 0]],
    labels=[[8, 5, 13], [16, 22, -100]],  # the second row's third slot is padding
    nsp=[0, 1],
)


def _save(tmp_path: Path, cls: type, name: str = "released", **config: object) -> Path:
    torch.manual_seed(7)
    model = cls(transformers.BertConfig(**{**SIZES, **config}))
    directory = tmp_path / name
    model.save_pretrained(directory)
    return directory


def test_the_mapping_round_trips_exactly_both_ways():
    torch.manual_seed(3)
    model = BertForPreTraining(BertConfig(**{k: v for k, v in SIZES.items()}))
    state = model.state_dict()
    hf = to_hf(state, 2)
    # 5 embeddings + 16 a layer (qkv split in three) + 2 pooler + 5 MLM head + 2 NSP head.
    assert len(state) == 5 + 2 * 12 + 2 + 6 + 2 and len(hf) == 5 + 2 * 16 + 2 + 5 + 2
    assert torch.equal(
        hf["bert.encoder.layer.1.attention.self.value.bias"], state["layers.1.qkv.bias"][32:]
    )
    back = from_hf(hf, 2)
    assert sorted(back) == sorted(state)
    assert all(torch.equal(back[name], state[name]) for name in state)
    again = to_hf(back, 2)
    assert sorted(again) == sorted(hf)
    assert all(torch.equal(again[name], hf[name]) for name in hf)
    # transformers' own model holds exactly these names, and loads them with nothing left.
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**SIZES))
    result = theirs.load_state_dict(hf, strict=False)
    assert result.unexpected_keys == []
    # Only the tied decoder, which save_pretrained leaves out too (from_pretrained ties it).
    assert sorted(result.missing_keys) == [
        "cls.predictions.decoder.bias",
        "cls.predictions.decoder.weight",
    ]


@pytest.mark.parametrize(
    ("cls", "objective"),
    [(transformers.BertForPreTraining, "mlm+nsp"), (transformers.BertForMaskedLM, "mlm")],
)
def test_loss_at_step_0_equals_transformers(tmp_path, cls, objective):
    directory = _save(tmp_path, cls)
    nsp = objective == "mlm+nsp"
    model, fresh, dropped = released_model(read_released(str(directory)), objective)
    assert (fresh, dropped) == ([], [])
    ours = BATCH.bertkit_loss(model, nsp)
    theirs = BATCH.transformers_loss(cls.from_pretrained(directory), nsp)
    print(f"{cls.__name__}: bertkit {ours!r} transformers {theirs!r}")
    assert abs(ours - theirs) / abs(theirs) < 1e-5


def test_the_config_gives_the_architecture(tmp_path):
    directory = _save(tmp_path, transformers.BertForMaskedLM, pad_token_id=1)
    config = released_model_config(
        read_released(str(directory)),
        "mlm",
        dropout={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    )
    assert config == BertConfig(
        **{**SIZES, "pad_token_id": 1, "hidden_dropout_prob": 0.0},
        attention_probs_dropout_prob=0.0,
        objective="mlm",
    )
    assert preset_name(config) is None
    assert preset_name(BertConfig(vocab_size=9, hidden_size=128, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=512)) == "tiny"  # fmt: skip


def test_heads_the_directory_lacks_keep_the_seeds_weights(tmp_path):
    directory = _save(tmp_path, transformers.BertModel)
    torch.manual_seed(11)
    model, fresh, dropped = released_model(read_released(str(directory)), "mlm+nsp")
    assert (fresh, dropped) == (["the MLM head", "the NSP head"], [])
    torch.manual_seed(11)
    seeded = BertForPreTraining(model.config)
    for name in ("mlm_transform.weight", "nsp.weight", "decoder.bias"):
        assert torch.equal(model.state_dict()[name], seeded.state_dict()[name])
    saved = load_file(directory / "model.safetensors")
    assert torch.equal(model.pooler.weight, saved["pooler.dense.weight"])
    assert torch.equal(
        model.layers[1].qkv.weight[16:32], saved["encoder.layer.1.attention.self.key.weight"]
    )
    # The pooler and the NSP head are dropped for --objective mlm.
    full = _save(tmp_path, transformers.BertForPreTraining, "full")
    _, fresh, dropped = released_model(read_released(str(full)), "mlm")
    assert (fresh, dropped) == ([], ["the pooler", "the NSP head"])


def test_pytorch_model_bin_and_old_names_and_buffers(tmp_path):
    directory = _save(tmp_path, transformers.BertForMaskedLM)
    tensors = load_file(directory / "model.safetensors")
    reference, _, _ = released_model(read_released(str(directory)), "mlm")
    # The TF-era names of old pytorch_model.bin files, a buffer and the tied decoder.
    old = {
        name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): tensor
        for name, tensor in tensors.items()
    }
    old["bert.embeddings.position_ids"] = torch.arange(12)[None]
    old["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
    old["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
    (directory / "model.safetensors").unlink()
    torch.save(old, directory / "pytorch_model.bin")
    model, _, _ = released_model(read_released(str(directory)), "mlm")
    assert all(
        torch.equal(model.state_dict()[name], tensor)
        for name, tensor in reference.state_dict().items()
    )


def test_sharded_safetensors(tmp_path):
    directory = _save(tmp_path, transformers.BertForMaskedLM)
    tensors = load_file(directory / "model.safetensors")
    names = sorted(tensors)
    first, second = names[:10], names[10:]
    save_file({n: tensors[n] for n in first}, directory / "model-00001-of-00002.safetensors")
    save_file({n: tensors[n] for n in second}, directory / "model-00002-of-00002.safetensors")
    weight_map = {n: "model-00001-of-00002.safetensors" for n in first}
    weight_map |= {n: "model-00002-of-00002.safetensors" for n in second}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (directory / "model.safetensors").unlink()
    released = read_released(str(directory))
    assert sorted(released.tensors) == names
    assert sorted(released.files) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]


def _refusal(directory: Path, objective: str = "mlm") -> str:
    with pytest.raises(ReleasedModelError) as caught:
        released_model(read_released(str(directory)), objective)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_refusals_in_one_line(tmp_path):
    directory = _save(tmp_path, transformers.BertForMaskedLM)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    assert "hidden_act 'relu'" in _refusal(directory)
    (directory / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    assert "model_type is 'roberta', not 'bert'" in _refusal(directory)
    (directory / "config.json").write_text(json.dumps(config))
    tensors = load_file(directory / "model.safetensors")
    untied = {**tensors, "cls.predictions.decoder.weight": torch.zeros(VOCAB, 16)}
    save_file(untied, directory / "model.safetensors")
    assert "cls.predictions.decoder.weight is not bert.embeddings.word_embeddings" in _refusal(
        directory
    )
    save_file({**tensors, "classifier.weight": torch.zeros(2, 16)}, directory / "model.safetensors")
    assert "the weights hold classifier.weight, which no BERT" in _refusal(directory)
    partial = {k: v for k, v in tensors.items() if k != "cls.predictions.transform.dense.bias"}
    save_file(partial, directory / "model.safetensors")
    assert "the MLM head is incomplete (cls.predictions.transform.dense.bias" in _refusal(directory)
    layer = {k: v for k, v in tensors.items() if "layer.1.output.dense.bias" not in k}
    save_file(layer, directory / "model.safetensors")
    assert "lack layers.1.output.bias" in _refusal(directory)
    (directory / "model.safetensors").unlink()
    assert "no model.safetensors" in _refusal(directory)


def test_the_vocabulary_must_be_the_shards(tmp_path):
    import hashlib

    from trainer.released import check_vocabulary

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a"]
    directory = _save(tmp_path, transformers.BertForMaskedLM)
    data = "".join(f"{t}\n" for t in tokens).encode()
    (directory / "vocab.txt").write_bytes(data)
    released = read_released(str(directory))
    check_vocabulary(released, hashlib.sha256(data).hexdigest(), None)  # the same: no error
    shards = tmp_path / "shards_vocab"
    shards.mkdir()
    other = "".join(f"{t}\n" for t in [*tokens[:5], "the", "an"]).encode()
    (shards / "vocab.txt").write_bytes(other)
    with pytest.raises(ReleasedModelError) as caught:
        check_vocabulary(released, hashlib.sha256(other).hexdigest(), str(shards))
    assert str(caught.value) == (
        f"{directory}/vocab.txt differs from the shards' vocabulary at id 6: the model's token "
        f"is 'a', the shards' 'an': make the shards with the model's vocabulary (`bertkit "
        f"examples --vocab {directory}`)"
    )
    longer = other[: -len("an\n")] + b"a\n[unused0]\n"
    (shards / "vocab.txt").write_bytes(longer)
    with pytest.raises(ReleasedModelError, match="has 7 tokens, the shards' vocabulary 8 \\(the"):
        check_vocabulary(released, hashlib.sha256(longer).hexdigest(), str(shards))
    with pytest.raises(ReleasedModelError, match=r"is not the vocabulary the shards were made"):
        check_vocabulary(released, "0" * 64, None)
    (directory / "vocab.txt").unlink()
    with pytest.raises(ReleasedModelError, match=r"has no vocab\.txt or tokenizer\.json, so its"):
        check_vocabulary(read_released(str(directory)), "0" * 64, None)


def test_accent_stripping_is_compared_as_casing_is(tmp_path):
    """The shards' accent stripping (their manifest's: None where it says none) against the
    released tokenizer's: its tokenizer_config.json, else its tokenizer.json normalizer, else
    its casing (an uncased tokenizer strips accents)."""
    import hashlib

    from trainer.released import check_vocabulary

    directory = _save(tmp_path, transformers.BertForMaskedLM)
    data = b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n"
    (directory / "vocab.txt").write_bytes(data)
    normalizer = {"type": "BertNormalizer", "lowercase": True, "strip_accents": False}
    (directory / "tokenizer.json").write_text(json.dumps({"normalizer": normalizer}))
    released = read_released(str(directory))
    sha256 = hashlib.sha256(data).hexdigest()
    check_vocabulary(released, sha256, None, False, False)
    check_vocabulary(released, sha256, None, False, None)  # not known: not compared
    with pytest.raises(ReleasedModelError) as caught:
        check_vocabulary(released, sha256, None, False, True)
    assert str(caught.value) == (
        f"{directory} keeps accents (its tokenizer.json normalizer strip_accents), the shards "
        "were made stripping them (their manifest): its tokenizer, which an export ships, does "
        "not cut text as the shards were cut; make the shards with `bertkit examples --vocab "
        f"{directory}`, which takes its accent stripping"
    )
    # tokenizer_config.json's null wins over tokenizer.json's false: as its casing says.
    (directory / "tokenizer_config.json").write_text(json.dumps({"strip_accents": None}))
    check_vocabulary(released, sha256, None, False, True)
    with pytest.raises(ReleasedModelError) as caught:
        check_vocabulary(released, sha256, None, False, False)
    assert str(caught.value).startswith(
        f"{directory} strips accents (uncased, its strip_accents unset), the shards were made "
        "keeping them (their manifest): "
    )
