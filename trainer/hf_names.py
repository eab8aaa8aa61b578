"""The one mapping between bertkit's parameter names (trainer/model.py's state_dict) and
transformers' (`BertForPreTraining`, `BertForMaskedLM`, `BertModel`), used by the export
(`to_hf`, trainer/export.py) and by a run started from a released model (`from_hf`,
trainer/released.py) alike.

Names map one to one, but for attention: bertkit's `layers.N.qkv` (3H rows: Q, then K,
then V) is transformers' `attention.self.query`, `.key` and `.value`, split on the way out
and joined on the way in. `to_hf` writes what `save_pretrained` writes: the decoder weight
(tied to the word embeddings) and its bias (tied to `cls.predictions.bias`) are left out.

    hf = to_hf(model.state_dict(), num_layers)      # bertkit → transformers
    state = from_hf(hf, num_layers)                 # transformers → bertkit, tied decoder too
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch
from torch import Tensor

HF_PREFIX = "bert."  # the encoder's names in BertForPreTraining and BertForMaskedLM
QKV_PARTS = ("query", "key", "value")  # the order of qkv's row blocks

# bertkit name → HF name, for the tensors outside the encoder layers.
_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "bert.embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight": "bert.embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "bert.embeddings.token_type_embeddings.weight",
    "embeddings.layer_norm.weight": "bert.embeddings.LayerNorm.weight",
    "embeddings.layer_norm.bias": "bert.embeddings.LayerNorm.bias",
}
# Each head's tensors: a released directory has a head whole or not at all.
POOLER = {"pooler.weight": "bert.pooler.dense.weight", "pooler.bias": "bert.pooler.dense.bias"}
MLM_HEAD = {
    "mlm_transform.weight": "cls.predictions.transform.dense.weight",
    "mlm_transform.bias": "cls.predictions.transform.dense.bias",
    "mlm_norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "mlm_norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "decoder.bias": "cls.predictions.bias",
}
NSP_HEAD = {"nsp.weight": "cls.seq_relationship.weight", "nsp.bias": "cls.seq_relationship.bias"}
# bertkit layer part → HF layer part, under `layers.N.` and `bert.encoder.layer.N.`.
_LAYER = {
    "attention_output": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "output_norm": "output.LayerNorm",
}
# The tied tensors save_pretrained leaves out; bertkit's state_dict holds the first as
# `decoder.weight` (the same tensor as the word embeddings).
TIED_DECODER_WEIGHT = "cls.predictions.decoder.weight"
TIED_DECODER_BIAS = "cls.predictions.decoder.bias"


def name_pairs(num_layers: int) -> Iterator[tuple[str, str | tuple[str, str, str]]]:
    """(bertkit name, HF name) for every tensor of a `num_layers` model with all its heads;
    qkv's HF name is its three parts' names (query, key, value)."""
    yield from _EMBEDDINGS.items()
    for index in range(num_layers):
        ours, theirs = f"layers.{index}", f"bert.encoder.layer.{index}"
        for kind in ("weight", "bias"):
            yield (
                f"{ours}.qkv.{kind}",
                tuple(f"{theirs}.attention.self.{part}.{kind}" for part in QKV_PARTS),  # type: ignore[misc]
            )
            for part, hf_part in _LAYER.items():
                yield f"{ours}.{part}.{kind}", f"{theirs}.{hf_part}.{kind}"
    yield from POOLER.items()
    yield from MLM_HEAD.items()
    yield from NSP_HEAD.items()


def to_hf(state: Mapping[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """bertkit's state_dict → the tensors under HF's names, as save_pretrained writes them:
    qkv split into query, key and value; the tied decoder left out; heads the model lacks
    ("mlm": pooler, NSP) absent. Every tensor is a detached contiguous copy sharing memory
    with no other (safetensors refuses shared tensors)."""
    hf: dict[str, Tensor] = {}
    for ours, theirs in name_pairs(num_layers):
        if ours not in state:
            continue
        tensor = state[ours].detach()
        if isinstance(theirs, tuple):
            for name, part in zip(theirs, tensor.chunk(3, dim=0), strict=True):
                hf[name] = part.clone().contiguous()
        else:
            hf[theirs] = tensor.clone().contiguous()
    return hf


def from_hf(hf: Mapping[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """HF-named tensors (with the "bert." prefix) → bertkit's state_dict names: query, key
    and value joined into qkv; `decoder.weight` is the word embeddings (tied). Only the
    tensors `hf` holds: a head it lacks is absent (trainer/released.py says which)."""
    state: dict[str, Tensor] = {}
    for ours, theirs in name_pairs(num_layers):
        if isinstance(theirs, tuple):
            if all(name in hf for name in theirs):
                state[ours] = torch.cat([hf[name] for name in theirs], dim=0)
        elif theirs in hf:
            state[ours] = hf[theirs]
    if "embeddings.word_embeddings.weight" in state:
        state["decoder.weight"] = state["embeddings.word_embeddings.weight"]
    return state


def hf_names(num_layers: int) -> set[str]:
    """Every HF name `from_hf` reads for a `num_layers` model with all its heads."""
    names: set[str] = set()
    for _, theirs in name_pairs(num_layers):
        names.update(theirs if isinstance(theirs, tuple) else (theirs,))
    return names
