"""torch.compile on the training and eval steps: one graph, no break, no recompile.

Before the MLM head worked on fixed prediction slots it selected the real ones with a boolean
mask (`hidden[rows[valid]]`): `torch._dynamo.explain` counted 3 graphs and 2 graph breaks
(`aten.nonzero`, a data-dependent shape) in the training forward and the same in eval. The
tests compile with the `aot_eager` backend (AOT autograd's forward and backward graphs, run
eagerly): the graph capture is the same as inductor's, and no C++ compiler is needed.
"""

from __future__ import annotations

import copy
import json
import logging

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.registry import lookup_backend

from schemas.batch import IGNORE_INDEX, MODEL_INPUTS, BatchField
from trainer.collate import FixedShape, to_device
from trainer.model import BertForPreTraining, config_for

VOCAB = 100
FIXED = FixedShape.of(24, 3)  # 24 tokens, 3 predictions → 8 slots (PAD_MULTIPLE)


def tiny(dropout: float = 0.1) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(
        config_for(
            "tiny",
            VOCAB,
            max_position_embeddings=64,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
    )


def batch_of(seed: int, length: int, predictions: int) -> dict[str, torch.Tensor]:
    """B=2 with `length` tokens and `predictions` slots, as collate makes them (row 1 shorter
    and with one prediction fewer)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (2, length), generator=generator)
    mask = torch.ones(2, length, dtype=torch.bool)
    mask[1, length - 3 :] = False
    ids[1, length - 3 :] = 0
    types = torch.zeros(2, length, dtype=torch.long)
    types[:, length // 2 :] = 1
    types[1, length - 3 :] = 0
    positions = torch.stack([torch.arange(1, predictions + 1) * 2 % (length - 3)] * 2)
    labels = torch.randint(5, VOCAB, (2, predictions), generator=generator)
    labels[1, -1] = IGNORE_INDEX
    positions[1, -1] = 0
    return {
        BatchField.INPUT_IDS: ids,
        BatchField.TOKEN_TYPE_IDS: types,
        BatchField.ATTENTION_MASK: mask,
        BatchField.MASKED_POSITIONS: positions,
        BatchField.MASKED_LABELS: labels,
        BatchField.NEXT_SENTENCE_LABELS: torch.tensor([0, 1]),
    }


def inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: batch[name] for name in MODEL_INPUTS}


def test_training_and_eval_forward_are_one_graph_without_breaks() -> None:
    model, batch = tiny(), inputs(batch_of(0, 16, 3))
    explained = torch._dynamo.explain(model)(**batch)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), [
        r.reason for r in explained.break_reasons
    ]
    model.eval()
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(**batch)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def test_padding_slots_change_neither_the_loss_nor_the_counts() -> None:
    model = tiny().eval()
    batch = batch_of(0, 16, 3)
    padded = to_device(dict(batch), torch.device("cpu"), FIXED)
    assert padded[BatchField.MASKED_POSITIONS].shape == (2, 8)
    assert padded[BatchField.MASKED_LABELS][:, 3:].eq(IGNORE_INDEX).all()
    assert padded[BatchField.MASKED_POSITIONS][:, 3:].eq(0).all()
    assert padded[BatchField.INPUT_IDS].shape == padded[BatchField.ATTENTION_MASK].shape == (2, 24)
    assert not padded[BatchField.ATTENTION_MASK][:, 16:].any()
    with torch.no_grad():
        plain, wide = model(**inputs(batch)), model(**inputs(padded))
    assert int(plain.mlm_count) == int(wide.mlm_count) == 5
    assert int(plain.mlm_correct) == int(wide.mlm_correct)
    torch.testing.assert_close(wide.mlm_loss, plain.mlm_loss, atol=1e-6, rtol=0)
    torch.testing.assert_close(wide.nsp_loss, plain.nsp_loss, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="masked_positions is 8 wide, more than the fixed 4"):
        to_device(dict(padded), torch.device("cpu"), FixedShape((24,), 4))


def test_compiled_steps_match_eager_and_never_recompile() -> None:
    """Three optimizer steps on batches of different lengths and prediction counts, padded
    to one FixedShape: one compilation, and the losses and weights of the eager run."""
    graphs: list[torch.fx.GraphModule] = []
    aot_eager = lookup_backend("aot_eager")

    def counting(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        graphs.append(graph)
        return aot_eager(graph, example_inputs)

    torch._dynamo.reset()
    eager = tiny(dropout=0.0)  # a compiled graph draws its dropout masks differently
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, backend=counting)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (eager, compiled_model)]
    batches = [batch_of(1, 16, 3), batch_of(2, 24, 2), batch_of(3, 9, 3)]
    losses: dict[str, list[float]] = {"eager": [], "compiled": []}
    for raw in batches:
        batch = to_device(dict(raw), torch.device("cpu"), FIXED)
        for name, forward, optimizer in (
            ("eager", eager, optimizers[0]),
            ("compiled", compiled, optimizers[1]),
        ):
            out = forward(**inputs(batch))
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[name].append(float(out.loss.detach()))
    assert len(graphs) == 1
    assert losses["compiled"] == pytest.approx(losses["eager"], abs=1e-5)
    for ours, theirs in zip(compiled_model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_bucketed_widths_compile_once_each() -> None:
    """Length bucketing pads tokens to the narrowest quarter of max_seq_length that holds the
    batch: compiled with dynamic=False (as the trainer does), one static graph per width met,
    and none again when a width returns."""
    graphs: list[torch.fx.GraphModule] = []
    aot_eager = lookup_backend("aot_eager")

    def counting(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        graphs.append(graph)
        return aot_eager(graph, example_inputs)

    fixed = FixedShape.of(32, 3, buckets=4)
    assert fixed.widths == (8, 16, 24, 32) and fixed.slots == 8
    torch._dynamo.reset()
    model = tiny(dropout=0.0).eval()
    compiled = torch.compile(model, backend=counting, dynamic=False)
    widths = []
    with torch.no_grad():
        for length in (16, 9, 24, 10, 16, 23):
            batch = to_device(batch_of(length, length, 3), torch.device("cpu"), fixed)
            widths.append(batch[BatchField.INPUT_IDS].shape[1])
            ours, eager = compiled(**inputs(batch)), model(**inputs(batch))
            torch.testing.assert_close(ours.loss, eager.loss, atol=1e-5, rtol=0)
    assert widths == [16, 16, 24, 16, 16, 24]
    assert len(graphs) == 2  # 16 and 24 wide


def test_the_trainer_compiled_gives_eager_s_losses(
    sample_shards, tmp_path, monkeypatch, caplog
) -> None:
    """`bertkit train --compile` (inductor, on the CPU) on the real shards: one graph for
    every step, and the eager run's losses (no dropout: compiled graphs draw their masks
    differently). Its compilations are cached in the run directory (trainer/compiling.py):
    a --resume there, in a fresh dynamo as a requeued job's process, compiles nothing."""
    from trainer import train
    from trainer.compiling import INDUCTOR_VARIABLE, TRITON_VARIABLE

    for name in (INDUCTOR_VARIABLE, TRITON_VARIABLE):
        monkeypatch.delenv(name, raising=False)

    common = [
        "--model",
        "tiny",
        "--micro-batch-size",
        "16",
        "--lr",
        "2e-3",
        "--log-every",
        "1",
        "--no-tensorboard",
        "--shards",
        str(sample_shards),
        "--max-steps",
        "4",
        "--warmup-steps",
        "1",
        "--dropout",
        "0",
        "--eval-every",
        "0",
    ]
    cache = tmp_path / "compiled" / "compile-cache"
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run([*common, "--output", str(tmp_path / "compiled"), "--compile"]) == 0
    assert f"compile cache {cache}: empty: the first steps compile into it" in caplog.text
    caplog.clear()
    # One graph for the training step, one for evaluation (eval mode, no grad), which ran at
    # the end: its full batches compiled, the last short one eager; no break in either.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    assert train.run([*common, "--output", str(tmp_path / "eager")]) == 0
    losses, evals = {}, {}
    for name in ("compiled", "eager"):
        records = list(
            map(json.loads, (tmp_path / name / "metrics.jsonl").read_text().splitlines())
        )
        losses[name] = [r["loss"] for r in records if r["kind"] == "train"]
        (evals[name],) = [r for r in records if r["kind"] == "eval"]
    assert len(losses["compiled"]) == 4
    assert losses["compiled"] == pytest.approx(losses["eager"], abs=1e-4)
    assert evals["compiled"]["sequences"] == evals["eager"]["sequences"]
    assert evals["compiled"]["sequences"] % 16  # the last batch is short: it ran eagerly
    assert evals["compiled"]["predictions"] == evals["eager"]["predictions"]
    assert evals["compiled"]["mlm_loss"] == pytest.approx(evals["eager"]["mlm_loss"], abs=1e-4)
    assert any((cache / "fxgraph").rglob("*")), "no FX graph cached in the run directory"
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    resumed = [*common, "--max-steps", "6", "--output", str(tmp_path / "compiled")]  # 2 more
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert train.run([*resumed, "--compile", "--resume"]) == 0
    assert f"compile cache {cache}: warm, " in caplog.text
    inductor = torch._dynamo.utils.counters["inductor"]
    assert (inductor["fxgraph_cache_hit"] > 0, inductor["fxgraph_cache_miss"]) == (True, 0)
