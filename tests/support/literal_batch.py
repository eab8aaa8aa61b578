"""One literal pre-training batch and the loss on it of bertkit's model and of transformers'
(fp32, CPU, no dropout): the parity checks of a released model's start in
tests/test_released_model.py and tests/test_tf_checkpoint.py."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LiteralBatch:
    """Pairs of tokens with their segments and padding, the MLM prediction slots (positions
    and labels, -100 for a padded slot) and the NSP labels, as bertkit's batches hold them."""

    input_ids: list[list[int]]
    token_types: list[list[int]]
    attention: list[list[int]]
    positions: list[list[int]]
    labels: list[list[int]]
    nsp: list[int]

    def bertkit_loss(self, model: torch.nn.Module, nsp: bool) -> float:
        model.eval()
        extra = {"next_sentence_labels": torch.tensor(self.nsp)} if nsp else {}
        with torch.no_grad():
            out = model(
                torch.tensor(self.input_ids),
                torch.tensor(self.token_types),
                torch.tensor(self.attention),
                torch.tensor(self.positions),
                torch.tensor(self.labels),
                **extra,
            )
        return float(out.loss)

    def transformers_loss(self, model: torch.nn.Module, nsp: bool) -> float:
        """transformers' BertForPreTraining or BertForMaskedLM: its own loss, the labels
        spread over every token (-100 off the prediction slots). BertForPreTraining without
        NSP: the cross-entropy of its prediction scores (its loss needs both labels)."""
        model.eval()
        labels = torch.full((len(self.input_ids), len(self.input_ids[0])), -100)
        for row, (positions, values) in enumerate(zip(self.positions, self.labels, strict=True)):
            for position, value in zip(positions, values, strict=True):
                if value != -100:
                    labels[row, position] = value
        inputs = {
            "input_ids": torch.tensor(self.input_ids),
            "token_type_ids": torch.tensor(self.token_types),
            "attention_mask": torch.tensor(self.attention),
        }
        extra = {"next_sentence_label": torch.tensor(self.nsp)} if nsp else {}
        with torch.no_grad():
            out = model(**inputs, labels=labels, **extra)
        if out.loss is not None:
            return float(out.loss)
        # BertForPreTraining gives no loss without NSP labels: the MLM loss from its scores.
        scores = out.prediction_logits
        return float(torch.nn.functional.cross_entropy(scores.flatten(0, 1), labels.flatten()))
