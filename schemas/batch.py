"""The training batch: what `trainer.data` collates and `trainer.model` consumes.

A batch is a dict of tensors, one row per example, padded per batch to a multiple of 8 tokens
(tensor cores want multiples of 8; padding to the batch's longest example instead of
max_seq_length saves compute: docs/benchmarks.md, `python -m bench.padding`):

    input_ids             (B, L) int64   [CLS] A [SEP] B [SEP], masks applied, then [PAD] = 0
    token_type_ids        (B, L) int64   0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    attention_mask        (B, L) bool    True on real tokens
    masked_positions      (B, P) int64   positions of the predicted tokens; 0 on padding
    masked_labels         (B, P) int64   original ids there; IGNORE_INDEX (-100) on padding
    next_sentence_labels  (B,)   int64   0 = IsNext, 1 = NotNext (not read by an "mlm" model)
    sample_index          (B,)   int64   the example's key (its position in its split)

A full-sentence sample is all segment A (token_type_ids 0, label 0). With dynamic masking
the masks are the ones collate drew (trainer/masking.py), not the stored ones. P is the
batch's largest number of predictions, rounded up to a multiple of 8. The model computes the
MLM head only where masked_labels != IGNORE_INDEX (HF's and torch's ignore index).
"""

from __future__ import annotations

IGNORE_INDEX = -100
PAD_MULTIPLE = 8


class BatchField:
    """Keys of a collated batch."""

    INPUT_IDS = "input_ids"
    TOKEN_TYPE_IDS = "token_type_ids"
    ATTENTION_MASK = "attention_mask"
    MASKED_POSITIONS = "masked_positions"
    MASKED_LABELS = "masked_labels"
    NEXT_SENTENCE_LABELS = "next_sentence_labels"
    SAMPLE_INDEX = "sample_index"


# The fields the model's forward() takes, in its argument order.
MODEL_INPUTS = (
    BatchField.INPUT_IDS,
    BatchField.TOKEN_TYPE_IDS,
    BatchField.ATTENTION_MASK,
    BatchField.MASKED_POSITIONS,
    BatchField.MASKED_LABELS,
    BatchField.NEXT_SENTENCE_LABELS,
)
