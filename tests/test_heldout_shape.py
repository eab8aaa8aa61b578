"""Evaluation under --compile pads to the prediction slots the held-out masks need: a run
masking fewer tokens than the shards store (--mask-rate 0.1) trained with 16 slots and
stopped at its first evaluation, whose stored masks need 24."""

from __future__ import annotations

import pytest
import torch

from pipelines.io.vocabulary import load_vocab
from trainer import distributed
from trainer.collate import FixedShape
from trainer.data import open_source
from trainer.evaluate import evaluate
from trainer.masking import DynamicMasking
from trainer.model import BertForPreTraining, config_for
from trainer.recipe import heldout_shape
from trainer.source import heldout_source


def test_evaluation_pads_to_the_slots_of_the_stored_masks(sample_shards, sample_vocab) -> None:
    source = open_source(str(sample_shards), "train", 128)
    heldout = heldout_source(source)
    assert heldout is not None and source.output is not None
    assert source.output.max_predictions_per_seq == 19  # round(128 × 0.15)
    masking = DynamicMasking.from_vocab(load_vocab(str(sample_vocab)), rate=0.1)
    trained = FixedShape.of(128, masking.max_predictions_for(128))  # round(12.8) = 13
    assert trained == FixedShape((128,), 16)
    assert heldout_shape(trained, [heldout], None) == FixedShape((128,), 24)  # stored masks
    assert heldout_shape(trained, [heldout], masking) == FixedShape((128,), 16)  # drawn ones
    assert heldout_shape(None, [heldout], None) is None  # not compiled: no padding

    torch.manual_seed(0)
    model = BertForPreTraining(config_for("tiny", 8000)).eval()
    env = distributed.setup("cpu")
    with pytest.raises(ValueError, match="masked_positions is 24 wide, more than the fixed 16"):
        evaluate(model, heldout, env, 8, max_sequences=16, pad_to=trained)
    padded = evaluate(
        model, heldout, env, 8, max_sequences=16, pad_to=heldout_shape(trained, [heldout], None)
    )
    plain = evaluate(model, heldout, env, 8, max_sequences=16)
    assert padded.predictions == plain.predictions > 0
    assert padded.mlm_loss == pytest.approx(plain.mlm_loss, rel=1e-6)
