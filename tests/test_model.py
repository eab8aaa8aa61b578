"""trainer.model: sizes, shapes, the padding mask, the tied decoder, losses, init, FLOPs."""

import pytest
import torch
import torch.nn.functional as F

from schemas.batch import IGNORE_INDEX, MODEL_INPUTS
from trainer.choices import MODEL_SIZES
from trainer.model import (
    BertConfig,
    BertForPreTraining,
    config_for,
    flops_per_sequence,
    hf_state_dict,
    parameter_count,
)

VOCAB = 100


def tiny(**overrides) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(config_for("tiny", VOCAB, max_position_embeddings=64, **overrides))


def make_batch(length: int = 16) -> dict[str, torch.Tensor]:
    """B=2, L=16: row 0 is 16 real tokens, row 1 is 11 real tokens + 5 [PAD]; P=3 with one
    padded prediction in row 1, so N = 5."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, VOCAB, (2, length), generator=generator)
    input_ids[:, 0] = 2  # [CLS]
    attention_mask = torch.ones(2, length, dtype=torch.bool)
    attention_mask[1, 11:] = False
    input_ids[1, 11:] = 0
    token_type_ids = torch.zeros(2, length, dtype=torch.long)
    token_type_ids[0, 8:] = 1
    token_type_ids[1, 6:11] = 1
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "masked_positions": torch.tensor([[1, 5, 12], [3, 9, 0]]),
        "masked_labels": torch.tensor([[7, 8, 9], [10, 11, IGNORE_INDEX]]),
        "next_sentence_labels": torch.tensor([0, 1]),
    }


def test_config_for_sizes_and_unknown_name():
    assert MODEL_SIZES["tiny"] == (2, 128, 2) and MODEL_SIZES["large"] == (24, 1024, 16)
    base = config_for("base", 30522)
    assert (base.num_hidden_layers, base.hidden_size, base.num_attention_heads) == (12, 768, 12)
    assert base.intermediate_size == 3072 and base.max_position_embeddings == 512
    medium = config_for("medium", 8000, hidden_dropout_prob=0.0)
    assert (medium.num_hidden_layers, medium.hidden_size, medium.intermediate_size) == (
        8,
        512,
        2048,
    )
    assert medium.hidden_dropout_prob == 0.0 and medium.vocab_size == 8000
    with pytest.raises(
        ValueError, match=r"unknown model size 'huge'.*tiny, mini, small, medium, base, large"
    ):
        config_for("huge", 8000)
    with pytest.raises(ValueError, match="not a multiple of num_attention_heads"):
        BertConfig(vocab_size=10, hidden_size=100, num_attention_heads=3)


def test_output_shapes_and_batch_fields():
    model = tiny()
    batch = make_batch()
    out = model(**{k: batch[k] for k in MODEL_INPUTS})
    assert out.mlm_logits.shape == (6, VOCAB)  # B·P slots, the padding slot included
    assert out.nsp_logits.shape == (2, 2)
    assert out.loss.shape == out.mlm_loss.shape == out.nsp_loss.shape == ()
    assert int(out.mlm_count) == 5
    assert 0 <= int(out.mlm_correct) <= 5 and 0 <= int(out.nsp_correct) <= 2
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)
    # Without NSP labels: the loss is the MLM loss alone.
    without = model(**{k: batch[k] for k in MODEL_INPUTS[:-1]})
    assert without.nsp_loss is None and without.nsp_correct is None
    torch.testing.assert_close(without.loss, without.mlm_loss)


def test_padding_does_not_change_real_positions():
    model = tiny().eval()
    batch = make_batch()
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    padded = [torch.cat([t, torch.zeros(2, 8, dtype=t.dtype)], dim=1) for t in (ids, types, mask)]
    with torch.no_grad():
        mlm, nsp = model.prediction_scores(ids, types, mask)
        mlm_padded, nsp_padded = model.prediction_scores(*padded)
        out = model(ids, types, mask, batch["masked_positions"], batch["masked_labels"])
        out_padded = model(*padded, batch["masked_positions"], batch["masked_labels"])
    assert mlm_padded.shape == (2, 24, VOCAB)
    torch.testing.assert_close(mlm_padded[0, :16], mlm[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(mlm_padded[1, :11], mlm[1, :11], atol=1e-5, rtol=0)
    torch.testing.assert_close(nsp_padded, nsp, atol=1e-5, rtol=0)
    torch.testing.assert_close(out_padded.mlm_logits, out.mlm_logits, atol=1e-5, rtol=0)
    # The mask matters: without it, the 8 [PAD]s change row 0.
    unmasked = torch.ones(2, 24, dtype=torch.bool)
    with torch.no_grad():
        mlm_unmasked, _ = model.prediction_scores(padded[0], padded[1], unmasked)
    assert (mlm_unmasked[0, :16] - mlm[0]).abs().max() > 1e-3


def test_decoder_is_tied_to_word_embeddings():
    model = tiny()
    assert model.decoder.weight is model.embeddings.word_embeddings.weight
    # Still one tensor after a state_dict round trip, and counted once.
    other = BertForPreTraining(model.config)
    other.load_state_dict(model.state_dict())
    assert other.decoder.weight is other.embeddings.word_embeddings.weight
    torch.testing.assert_close(other.decoder.weight, model.embeddings.word_embeddings.weight)
    separate = sum(p.numel() for n, p in model.named_parameters(remove_duplicate=False))
    assert parameter_count(model) == separate - VOCAB * 128
    # A gradient from the decoder lands in the embeddings.
    model(**make_batch()).loss.backward()
    assert model.embeddings.word_embeddings.weight.grad[7].abs().sum() > 0


def test_mlm_loss_equals_cross_entropy_of_full_scores():
    model = tiny().eval()
    batch = make_batch()
    with torch.no_grad():
        out = model(**batch)
        scores, nsp_scores = model.prediction_scores(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
    # The 5 valid (row, position) pairs, by hand.
    picked = scores[[0, 0, 0, 1, 1], [1, 5, 12, 3, 9]]  # (5, V)
    labels = torch.tensor([7, 8, 9, 10, 11])
    real = batch["masked_labels"].reshape(-1) != IGNORE_INDEX
    torch.testing.assert_close(out.mlm_logits[real], picked, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.mlm_loss, F.cross_entropy(picked, labels), atol=1e-5, rtol=0)
    nsp_loss = F.cross_entropy(nsp_scores, batch["next_sentence_labels"])
    torch.testing.assert_close(out.nsp_loss, nsp_loss, atol=1e-6, rtol=0)
    assert int(out.mlm_correct) == int((picked.argmax(-1) == labels).sum())


def test_batch_without_predictions_has_zero_mlm_loss():
    batch = make_batch()
    batch["masked_labels"] = torch.full((2, 3), IGNORE_INDEX)
    with torch.no_grad():
        out = tiny()(**batch)
    assert out.mlm_logits.shape == (6, VOCAB)
    assert float(out.mlm_loss) == 0.0 and int(out.mlm_count) == 0 and int(out.mlm_correct) == 0


def test_init_matches_bert():
    torch.manual_seed(0)
    model = BertForPreTraining(config_for("base", 1000, num_hidden_layers=1))
    intermediate = model.layers[0].intermediate  # 3072 × 768 = 2.4 M draws
    assert abs(intermediate.weight.std().item() - 0.02) < 2e-4
    assert abs(intermediate.weight.mean().item()) < 1e-4
    assert intermediate.bias.abs().max() == 0
    words = model.embeddings.word_embeddings.weight
    assert abs(words[1:].std().item() - 0.02) < 5e-4
    assert words[0].abs().max() == 0  # [PAD], as HF
    norm = model.layers[0].output_norm
    assert bool((norm.weight == 1).all()) and bool((norm.bias == 0).all())
    assert model.decoder.bias.abs().max() == 0


def test_flops_per_sequence_on_a_literal_config():
    config = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
    )
    # Per layer: 2·128·(4·128² + 2·128·512) = 50,331,648 matmul + 4·128²·128 = 8,388,608
    # attention → 58,720,256; × 2 layers = 117,440,512. Pooler + NSP: 2·(128² + 256) = 33,280.
    # MLM on 20: 2·20·(128² + 1000·128) = 5,775,360. Forward 123,249,152; × 3:
    assert flops_per_sequence(config, seq_len=128, predictions=20) == 369_747_456
    # Attention grows with L², the rest with L; the MLM head with predictions only.
    assert (
        flops_per_sequence(config, 128, 21) - flops_per_sequence(config, 128, 20) == 3 * 2 * 144_384
    )


def test_hf_state_dict_names_and_split_qkv():
    model = tiny()
    hf = hf_state_dict(model)
    assert len(hf) == 5 + 16 * 2 + 2 + 4 + 1 + 2
    assert "cls.predictions.decoder.weight" not in hf  # tied: from_pretrained restores it
    qkv = model.layers[1].qkv
    torch.testing.assert_close(
        hf["bert.encoder.layer.1.attention.self.key.weight"], qkv.weight[128:256]
    )
    torch.testing.assert_close(hf["bert.encoder.layer.1.attention.self.value.bias"], qkv.bias[256:])
    assert hf["cls.predictions.bias"] is not model.decoder.bias
    pointers = {t.untyped_storage().data_ptr() for t in hf.values()}
    assert len(pointers) == len(hf)  # no shared memory: safetensors can write it


def test_tiny_overfits_one_batch():
    model = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    batch = make_batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(30):
        out = model(**batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(out.loss.item())
    # log(100) + log(2) ≈ 5.3 at the start; 30 steps memorise 5 labels and 2 pairs.
    assert losses[0] > 5.0
    assert losses[-1] < 0.5
    assert int(model(**batch).mlm_correct) == 5
