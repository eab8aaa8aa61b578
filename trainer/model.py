"""BERT for pre-training (masked LM, with or without next sentence prediction), the model
`trainer` trains.

The architecture is Google's BERT, as HF's `BertForPreTraining` implements it, so a
checkpoint exports to HF with a rename (trainer/hf_names.py, `bertkit export-hf`) and gives the
same logits there: post-LayerNorm encoder layers, exact (erf) GELU, learned position and
token type embeddings, a tanh pooler on [CLS], an MLM head whose decoder is tied to the
word embeddings, and a 2-way NSP head.

`BertConfig.objective` picks the heads. "mlm+nsp" (BERT 2018) has all of the above. "mlm"
(RoBERTa's objective) has neither the pooler nor the NSP head, as HF's `BertForMaskedLM`
(`BertModel(add_pooling_layer=False)` + `cls.predictions`): no parameter goes unused, which
DDP needs, and the loss is the MLM loss alone.

Three departures from HF's code, none visible in the weights:
- Q, K and V are one Linear (3·H outputs: Q rows, then K, then V), one matmul instead of
  three; the export splits it back into HF's query / key / value. Attention reads Q, K and
  V as views of its output (trainer/attention.py `padded_attention`).
- The MLM head runs only on the prediction slots (`masked_positions`, padding slots
  included, whose label is IGNORE_INDEX): ~20 of 128 tokens, and the decoder (V × H) is
  the biggest matmul in the model. A fixed number of slots, not a selection of the real
  ones, keeps every shape independent of the data, so `torch.compile` makes one graph
  with no break (tests/test_compile.py). `prediction_scores` runs it on every position,
  as HF does.

- `unpad` (`--unpad`) may run the encoder on the batch's real tokens only, with torch's
  variable-length attention where it runs (trainer/attention.py); the padded batch is the
  default (`off`), and what `auto` keeps on the CPU and under torch.compile.

Attention is `torch.nn.functional.scaled_dot_product_attention` with a boolean padding
mask, so it picks the fused kernel (flash / memory-efficient) the device offers. A dropout
rate of 0 calls no dropout at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from schemas.batch import IGNORE_INDEX, MODEL_INPUTS, BatchField
from trainer.add_norm import add_norm as kernel_add_norm
from trainer.attention import (
    PADDED,
    VARLEN,
    Unpadding,
    attention_path,
    look_up_varlen,
    padded_attention,
    padding_share,
    varlen_usable,
)
from trainer.choices import MODEL_SIZES
from trainer.ffn_epilogue import feed_forward as epilogue_feed_forward
from trainer.hf_names import to_hf

# The pre-training objectives, as `bertkit train --objective` names them once resolved.
OBJECTIVES = ("mlm+nsp", "mlm")
# The state_dict entries "mlm+nsp" has and "mlm" lacks: the pooler and the NSP head.
NSP_HEAD_WEIGHTS = ("pooler.weight", "pooler.bias", "nsp.weight", "nsp.bias")


@dataclass(frozen=True)
class BertConfig:
    """The model's shape and regularisation; field names and defaults are HF's BertConfig,
    but for `objective`, ours: the heads the model has (module docstring)."""

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0
    # A checkpoint's model_config from before this field had both heads: the default.
    objective: str = "mlm+nsp"

    def __post_init__(self) -> None:
        sizes = (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        for name in (*sizes, "pad_token_id"):  # a whole number, not 32.0, "32" or True
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"BertConfig.{name} must be a whole number, got {value!r}")
        rates = ("hidden_dropout_prob", "attention_probs_dropout_prob")
        for name in (*rates, "layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"BertConfig.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0 or (name in rates and value >= 1):
                bound = "in [0, 1)" if name in rates else "a finite number, 0 or more"
                raise ValueError(f"BertConfig.{name} must be {bound}, got {value!r}")
        for name in sizes:
            if getattr(self, name) < 1:
                raise ValueError(f"BertConfig.{name} must be 1 or more, got {getattr(self, name)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                f"{self.num_attention_heads}: each head takes hidden_size / heads features; "
                "pick sizes that divide"
            )
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"BertConfig.objective {self.objective!r}: one of {', '.join(OBJECTIVES)}"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id {self.pad_token_id} is not an id of a {self.vocab_size}-token "
                "vocabulary"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def nsp(self) -> bool:
        """Whether the model has the pooler and the NSP head."""
        return self.objective == "mlm+nsp"


def config_for(name: str, vocab_size: int, **overrides: float | str) -> BertConfig:
    """The BertConfig of a named size (MODEL_SIZES) for a vocabulary; `overrides` set fields."""
    if name not in MODEL_SIZES:
        raise ValueError(f"unknown model size {name!r}: choose one of {', '.join(MODEL_SIZES)}")
    layers, hidden, heads = MODEL_SIZES[name]
    fields = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
    }
    return BertConfig(**{**fields, **overrides})


class PreTrainingOutput(NamedTuple):
    """What `BertForPreTraining.forward` returns. N = valid predictions in the batch."""

    loss: Tensor  # () mlm_loss + nsp_loss, or mlm_loss alone ("mlm", or no NSP labels)
    mlm_loss: Tensor  # () mean cross-entropy over the N predictions
    nsp_loss: Tensor | None  # () mean cross-entropy over the B pairs; None without labels
    mlm_logits: Tensor  # (B·P, V): every prediction slot; padding slots have IGNORE_INDEX labels
    nsp_logits: Tensor | None  # (B, 2); None for "mlm" (no NSP head)
    mlm_correct: Tensor  # () int64: predictions whose argmax is the label
    mlm_count: Tensor  # () int64: N
    nsp_correct: Tensor | None  # () int64; None without NSP labels


def _dropout(tensor: Tensor, rate: float, training: bool) -> Tensor:
    """Dropout at `rate` while training; at rate 0 no call at all (no random draw, nothing
    for torch.compile to keep), which --hidden-dropout 0 relies on."""
    return F.dropout(tensor, rate, training) if rate else tensor


class BertEmbeddings(nn.Module):
    """word + position + token type embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        # padding_idx as HF: the [PAD] row starts at zero and the lookup never updates it
        # (the tied MLM decoder still does).
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.hidden_dropout = config.hidden_dropout_prob

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor, positions: Tensor | None = None
    ) -> Tensor:
        # input_ids, token_type_ids (B, L) → (B, L, H), positions (L,) broadcast over B; or
        # the unpadded tokens: (T,) with their `positions` (T,) → (T, H).
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        embedded = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        return _dropout(self.layer_norm(embedded), self.hidden_dropout, self.training)


class BertLayer(nn.Module):
    """One post-LN encoder layer: x = LN(x + attention(x)); x = LN(x + FFN(x)).

    `forward` takes the padded batch (B, L, H); `forward_unpadded` its real tokens (T, H)
    (trainer/attention.py). Both share every weight and everything but the attention."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.attention_dropout = config.attention_probs_dropout_prob
        self.hidden_dropout = config.hidden_dropout_prob
        self.qkv = nn.Linear(hidden, 3 * hidden)  # rows: Q (H), K (H), V (H)
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(hidden, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        # --ffn-epilogue (trainer/ffn_epilogue.py): the block's GELU in the matmuls' kernels;
        # --add-norm (trainer/add_norm.py): dropout, residual add and LayerNorm in one kernel.
        self.ffn_epilogue = False
        self.add_norm = False

    def forward(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        # hidden (B, L, H); attention_mask (B, 1, 1, L) bool, True = a key to attend to.
        batch, length, _ = hidden.shape
        # (B, L, 3H) → (B, L, 3, heads, d), a view; SDPA reads Q/K/V from it in place.
        qkv = self.qkv(hidden).view(batch, length, 3, self.num_heads, self.head_size)
        context = padded_attention(qkv, attention_mask, self._attention_dropout())
        return self._after_attention(hidden, context)

    def forward_unpadded(self, hidden: Tensor, unpadding: Unpadding) -> Tensor:
        # hidden (T, H), the real tokens → (T, H)
        context = unpadding.attention(self.qkv(hidden), self.num_heads, self._attention_dropout())
        return self._after_attention(hidden, context)

    def _attention_dropout(self) -> float:
        return self.attention_dropout if self.training else 0.0

    def _after_attention(self, hidden: Tensor, context: Tensor) -> Tensor:
        # Row by row on (…, H): the padded batch's (B, L, H) or the tokens' (T, H).
        hidden = self._add_norm(hidden, self.attention_output(context), self.attention_norm)
        if self.ffn_epilogue:
            feed_forward = epilogue_feed_forward(hidden, self.intermediate, self.output)
        else:  # F.gelu's default is the exact erf form: HF's "gelu", Google's `gelu`.
            feed_forward = self.output(F.gelu(self.intermediate(hidden)))
        return self._add_norm(hidden, feed_forward, self.output_norm)

    def _add_norm(self, hidden: Tensor, branch: Tensor, norm: nn.LayerNorm) -> Tensor:
        # LN(hidden + dropout(branch)): in one kernel each way with --add-norm.
        if self.add_norm:
            return kernel_add_norm(hidden, branch, norm, self.hidden_dropout * self.training)
        return norm(hidden + _dropout(branch, self.hidden_dropout, self.training))


class BertForPreTraining(nn.Module):
    """The BERT encoder with the MLM head, and for "mlm+nsp" the pooler and the NSP head."""

    pooler: nn.Linear | None
    nsp: nn.Linear | None

    def __init__(self, config: BertConfig, unpad: str = "off") -> None:
        super().__init__()
        self.config = config
        # --unpad (trainer/choices.py UNPAD_MODES): how `encode` treats padding. Not part
        # of the config: it changes no weight and no result, only the work done.
        self.unpad = unpad
        if torch.cuda.is_available():
            # torch's varlen kernel, imported now: the first compiled forward must not trace
            # the import (trainer/attention.py imports it only where CUDA may run it).
            look_up_varlen()
        hidden = config.hidden_size
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        # Registered in this order, so "mlm+nsp" draws its initial weights as it always has.
        self.pooler = nn.Linear(hidden, hidden) if config.nsp else None
        self.mlm_transform = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        # The decoder's weight IS the word embedding matrix (V, H); its bias is its own.
        # It appears twice in state_dict(), once in parameters().
        self.decoder = nn.Linear(hidden, config.vocab_size)
        self.decoder.weight = self.embeddings.word_embeddings.weight
        self.nsp = nn.Linear(hidden, 2) if config.nsp else None
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """BERT's init, as HF's BertPreTrainedModel: N(0, initializer_range) weights, zero
        biases, LayerNorm (1, 0), the [PAD] embedding row zero."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            # The decoder's weight is the word embeddings, initialised as an Embedding.
            if module is not self.decoder:
                nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def use_kernels(self, ffn_epilogue: bool = False, add_norm: bool = False) -> None:
        """Every layer's feed-forward block through the epilogue kernels, and its dropout,
        residual adds and LayerNorms through the add-norm kernels, or the plain ops."""
        for layer in self.layers:
            layer.ffn_epilogue, layer.add_norm = ffn_epilogue, add_norm

    @property
    def input_names(self) -> tuple[str, ...]:
        """The batch fields `forward` takes, in its order: MODEL_INPUTS, less the NSP label
        for "mlm" (a run without NSP never reads it)."""
        if self.config.nsp:
            return MODEL_INPUTS
        return tuple(name for name in MODEL_INPUTS if name != BatchField.NEXT_SENTENCE_LABELS)

    def encode(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor,
        attention_mask: Tensor,
        unpad: str | None = None,
        counts: tuple[int, int] | None = None,
    ) -> Tensor:
        """The encoder: the sequence output (B, L, H), on the padded batch or on its real
        tokens (`unpad`, this call's or else the model's: trainer/attention.py; zeros at
        padding there). `counts`: the batch's real tokens and longest sequence, where the
        caller counted them on the host (`unpad_hints`), so unpadding waits for nothing."""
        unpad = self.unpad if unpad is None else unpad
        unpadding = self._unpadding(attention_mask, unpad, counts)
        if unpadding is not None:
            return self._encode_unpadded(input_ids, token_type_ids, unpadding)
        # (B, L) → (B, 1, 1, L): one row of keys, broadcast over heads and queries. Padded
        # queries still attend to the real keys, so no row is all-masked (no NaN).
        mask = attention_mask.to(torch.bool)[:, None, None, :]
        hidden = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            hidden = layer(hidden, mask)
        return hidden

    def _unpadding(
        self, attention_mask: Tensor, unpad: str, counts: tuple[int, int] | None
    ) -> Unpadding | None:
        """Where this forward's real tokens are, or None for the padded batch: the path
        `attention_path` picks (trainer/attention.py) for `unpad`. Under torch.compile,
        reading the real tokens' count is a graph break, and from the second batch on the
        graph after it takes the count as a dynamic dimension (one more compilation, then
        none for any later count); given as `counts`, there is no break, and the count is an
        input that turns dynamic the same way."""
        if unpad == "off":
            return None
        varlen = self._varlen_for(unpad, attention_mask.device)
        found: list[Unpadding] = []

        def share() -> float:  # asked by auto with varlen only: a wait without counts
            found.append(Unpadding.of(attention_mask, True, counts))
            return found[0].padding_share

        path = attention_path(unpad, varlen, share)
        if path == PADDED:
            return None
        return found[0] if found else Unpadding.of(attention_mask, path == VARLEN, counts)

    def _varlen_for(self, unpad: str, device: torch.device) -> bool:
        """Whether a forward here, now (autocast's dtype, training's attention dropout or
        evaluation's none), may attend through the varlen kernel under `unpad`. auto only
        where that path's speed is measured, without attention dropout (evaluation, or a
        recipe without it); with dropout the flash kernel's own path is --unpad on's
        (docs/gpu.md)."""
        dropout = self.config.attention_probs_dropout_prob if self.training else 0.0
        if unpad == "auto" and dropout:
            return False
        dtype = self.embeddings.word_embeddings.weight.dtype
        if torch.is_autocast_enabled(device.type):
            dtype = torch.get_autocast_dtype(device.type)
        return varlen_usable(device, dtype, self.config.head_size, dropout)

    def unpad_hints(
        self, lengths: np.ndarray, positions: int, device: torch.device
    ) -> dict[str, Any]:
        """What a forward is called with beside the batch, from its sequences' `lengths`
        (B,) counted on the host and its `positions` (B·L), under the autocast it runs in,
        so that it waits on the device for nothing: {"counts": (T, longest)} where it will
        unpad, {"unpad": "off"} where auto would find the batch under the padding floor
        (trainer/attention.py `attention_path`), and nothing where it takes the padded batch
        without asking (off; auto with no varlen kernel to choose), so a compiled forward
        keeps one call signature there."""
        if self.unpad == "off":
            return {}
        tokens, longest = int(lengths.sum()), int(lengths.max(initial=0))
        if self.unpad == "auto":
            if not self._varlen_for("auto", device):
                return {}
            if attention_path("auto", True, lambda: padding_share(tokens, positions)) == PADDED:
                return {"unpad": "off"}
        return {"counts": (tokens, longest)}

    def _encode_unpadded(
        self, input_ids: Tensor, token_type_ids: Tensor, unpadding: Unpadding
    ) -> Tensor:
        # (B, L) → the T real tokens through every layer as (T, H) → (B, L, H)
        hidden = self.embeddings(
            unpadding.gather(input_ids),
            unpadding.gather(token_type_ids),
            unpadding.positions(),
        )
        for layer in self.layers:
            hidden = layer.forward_unpadded(hidden, unpadding)
        return unpadding.scatter(hidden)

    def _nsp_scores(self, hidden: Tensor) -> Tensor | None:
        # (B, L, H) → the tanh pooler on [CLS] (B, H) → (B, 2); None without the NSP head.
        if self.pooler is None or self.nsp is None:
            return None
        return self.nsp(torch.tanh(self.pooler(hidden[:, 0])))

    def _mlm_scores(self, hidden: Tensor) -> Tensor:
        # (…, H) → (…, V)
        transformed = self.mlm_norm(F.gelu(self.mlm_transform(hidden)))
        return self.decoder(transformed)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor,
        attention_mask: Tensor,
        masked_positions: Tensor,
        masked_labels: Tensor,
        next_sentence_labels: Tensor | None = None,
        unpad: str | None = None,
        counts: tuple[int, int] | None = None,
    ) -> PreTrainingOutput:
        """Losses and logits on a collated batch (schemas/batch.py; argument names are its
        MODEL_INPUTS, `input_names` for this model). The MLM head runs on the B·P prediction
        slots; the loss and counts on the N real ones. `unpad` (this forward's, else the
        model's) and `counts` as `encode` takes them."""
        if next_sentence_labels is not None and not self.config.nsp:
            raise ValueError(
                "next_sentence_labels given to an --objective mlm model, which has no NSP "
                "head: pass the batch fields of model.input_names"
            )
        hidden = self.encode(input_ids, token_type_ids, attention_mask, unpad, counts)
        batch, length, width = hidden.shape
        # masked_positions (B, P) → row indices into hidden flattened to (B·L, H) → (B·P, H)
        # → logits (B·P, V). Every slot is computed, padding included, so the shapes depend
        # on the batch's shape alone (torch.compile: one graph, no data-dependent selection);
        # a padding slot's label is IGNORE_INDEX, which the loss and the counts skip.
        rows = masked_positions + torch.arange(batch, device=hidden.device)[:, None] * length
        labels = masked_labels.reshape(-1)  # (B·P,)
        valid = labels != IGNORE_INDEX
        mlm_logits = self._mlm_scores(hidden.reshape(batch * length, width)[rows.reshape(-1)])
        mlm_count = valid.sum()
        # Summed, then divided by max(N, 1): a batch without predictions gives 0, not NaN.
        mlm_loss = F.cross_entropy(
            mlm_logits.float(), labels, ignore_index=IGNORE_INDEX, reduction="sum"
        )
        mlm_loss = mlm_loss / mlm_count.clamp(min=1)
        mlm_correct = ((mlm_logits.argmax(dim=-1) == labels) & valid).sum()
        nsp_logits = self._nsp_scores(hidden)  # (B, 2), or None for "mlm"
        if nsp_logits is None or next_sentence_labels is None:
            return PreTrainingOutput(
                mlm_loss, mlm_loss, None, mlm_logits, nsp_logits, mlm_correct, mlm_count, None
            )
        nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_labels)
        nsp_correct = (nsp_logits.argmax(dim=-1) == next_sentence_labels).sum()
        return PreTrainingOutput(
            mlm_loss + nsp_loss,
            mlm_loss,
            nsp_loss,
            mlm_logits,
            nsp_logits,
            mlm_correct,
            mlm_count,
            nsp_correct,
        )

    def prediction_scores(
        self, input_ids: Tensor, token_type_ids: Tensor, attention_mask: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """HF's outputs: MLM scores at every position (B, L, V) (BertForMaskedLM's `logits`,
        BertForPreTraining's `prediction_logits`) and NSP scores (B, 2), None for "mlm". The
        padded batch, whatever `unpad`: HF's scores at padding positions too."""
        hidden = self.encode(input_ids, token_type_ids, attention_mask, unpad="off")
        return self._mlm_scores(hidden), self._nsp_scores(hidden)


def parameter_count(model: nn.Module) -> int:
    """Parameters of `model`, each tensor once (the tied decoder weight is the embeddings)."""
    # parameters() already yields a shared tensor once.
    return sum(p.numel() for p in model.parameters())


def flops_per_sequence(config: BertConfig, seq_len: int, predictions: int) -> float:
    """Training FLOPs for one sequence: 3 × the forward pass (backward ≈ 2 × forward).

    Matmuls only, 2 FLOPs per multiply-add; embedding lookups, biases, LayerNorm, softmax
    and GELU are left out (< 1 % at BERT sizes). With L = seq_len, H, I = intermediate,
    V = vocab, n = layers and P = predictions:

        per layer     2·L·(3H² + H² + 2·H·I)     Q/K/V, attention output, FFN in and out
                      + 2·2·L²·H                 scores Q·Kᵀ and context (scores)·V
        pooler + NSP  2·(H² + 2H)                on [CLS] only; 0 for "mlm" (no such heads)
        MLM head      2·P·(H² + V·H)             transform and decoder, predictions only

        flops = 3 · (n · per layer + pooler + NSP + MLM head)
    """
    hidden, inner, length = config.hidden_size, config.intermediate_size, seq_len
    per_layer = 2 * length * (4 * hidden * hidden + 2 * hidden * inner) + 4 * length**2 * hidden
    heads = 2 * (hidden * hidden + 2 * hidden) if config.nsp else 0
    mlm = 2 * predictions * (hidden * hidden + config.vocab_size * hidden)
    return 3.0 * (config.num_hidden_layers * per_layer + heads + mlm)


def hf_state_dict(model: BertForPreTraining) -> dict[str, Tensor]:
    """The weights under HF `BertForPreTraining`'s names ("mlm+nsp") or `BertForMaskedLM`'s
    ("mlm": the same names, less `bert.pooler` and `cls.seq_relationship`), as their
    save_pretrained writes them: trainer/hf_names.py's mapping, the one the import uses too.
    """
    return to_hf(model.state_dict(), model.config.num_hidden_layers)


def without_nsp_head(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """An "mlm+nsp" state_dict as an "mlm" model loads it: the pooler and NSP head left out."""
    return {name: tensor for name, tensor in state_dict.items() if name not in NSP_HEAD_WEIGHTS}


def batch_flops(model_config: BertConfig, batch: dict[str, torch.Tensor]) -> float:
    """Training FLOPs of one micro-batch as collated: padded length, its real predictions.

    `batch` is on the host (the loader's copy): counted through NumPy, so nothing here goes
    through torch's dispatcher or waits on a device."""
    sequences, length = batch[BatchField.INPUT_IDS].shape
    predictions = int(np.count_nonzero(batch[BatchField.MASKED_LABELS].numpy() >= 0))
    encoder = flops_per_sequence(model_config, length, 0)
    head = flops_per_sequence(model_config, length, 1) - encoder  # one prediction's MLM head
    return sequences * encoder + predictions * head


# A layer's index in bertkit's names (`layers.3.qkv.weight`) and transformers'
# (`bert.encoder.layer.3.attention.self.query.weight`).
_LAYER_INDEX = re.compile(r"(?:^|\.)layers?\.(\d+)\.")
# Weights whose shape names config fields, by the end of their name in either naming.
_SHAPED = (
    ("word_embeddings.weight", ("vocab_size", "hidden_size")),
    ("position_embeddings.weight", ("max_position_embeddings", "hidden_size")),
    ("token_type_embeddings.weight", ("type_vocab_size", "hidden_size")),
    (".0.intermediate.weight", ("intermediate_size", "hidden_size")),
    (".0.intermediate.dense.weight", ("intermediate_size", "hidden_size")),
)


def shape_problem(config: BertConfig, weights: Mapping[str, Any]) -> str | None:
    """Where `weights` (bertkit's names or transformers') are not of the sizes `config`
    gives: the field, its value and the weights' own. Checked before the model is built, so
    a config of absurd sizes (a million layers, a billion features) allocates nothing."""
    layers = {int(m.group(1)) for name in weights if (m := _LAYER_INDEX.search(name))}
    if layers and len(layers) != config.num_hidden_layers:
        return f"num_hidden_layers {config.num_hidden_layers}, but the weights hold {len(layers)}"
    for suffix, fields in _SHAPED:
        name = next((n for n in weights if n.endswith(suffix)), None)
        shape = tuple(getattr(weights[name], "shape", ())) if name is not None else None
        if shape is None:
            continue
        want = tuple(getattr(config, field) for field in fields)
        if shape != want:
            named = ", ".join(f"{f} {v}" for f, v in zip(fields, want, strict=True))
            return f"{named}, but the weights' {name} is {'×'.join(map(str, shape))}"
    return None
