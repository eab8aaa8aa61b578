"""`--objective mlm`: a model without the pooler and NSP head, its loss, FLOPs and export
(HF BertForMaskedLM), a run whose metrics and evaluation hold no NSP at all, 2-process DDP,
and the refusals when a checkpoint of the other objective would start or resume a run."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
from pathlib import Path

import pytest
import torch
import torch._dynamo
import transformers

from bertkit import cli
from schemas.batch import IGNORE_INDEX, MODEL_INPUTS, BatchField
from schemas.checkpoint import CheckpointKey
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_model import VOCAB, make_batch
from tests.test_train import TINY, metrics
from trainer import train
from trainer.evaluate import EvalResult
from trainer.export import export_hf
from trainer.metrics import METRICS_FILE
from trainer.model import (
    NSP_HEAD_WEIGHTS,
    BertConfig,
    BertForPreTraining,
    batch_flops,
    config_for,
    flops_per_sequence,
    hf_state_dict,
    parameter_count,
    without_nsp_head,
)
from trainer.run.checkpoints import latest_checkpoint


def tiny(objective: str) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(
        config_for("tiny", VOCAB, max_position_embeddings=64, objective=objective)
    )


def mlm_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: batch[name] for name in MODEL_INPUTS if name != "next_sentence_labels"}


# --------------------------------------------------------------------------- the model


def test_an_mlm_model_has_no_pooler_or_nsp_head():
    mlm, both = tiny("mlm"), tiny("mlm+nsp")
    assert mlm.pooler is None and mlm.nsp is None
    names = [name for name, _ in mlm.named_parameters()]
    assert not [n for n in names if n.startswith(("pooler", "nsp"))]
    assert set(both.state_dict()) - set(mlm.state_dict()) == set(NSP_HEAD_WEIGHTS)
    # pooler 128·128 + 128, NSP head 128·2 + 2
    assert parameter_count(both) - parameter_count(mlm) == 16_512 + 258
    assert mlm.input_names == (
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "masked_positions",
        "masked_labels",
    )
    assert both.input_names == MODEL_INPUTS
    with pytest.raises(ValueError, match=r"BertConfig.objective 'nsp': one of mlm\+nsp, mlm"):
        BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, objective="nsp")
    # A model_config from before the field: both heads.
    assert BertConfig(vocab_size=10).objective == "mlm+nsp"


def test_mlm_loss_is_the_cross_entropy_of_the_masked_tokens_by_hand():
    model = tiny("mlm").eval()
    batch = make_batch()
    with torch.no_grad():
        out = model(**mlm_inputs(batch))
        scores, nsp_scores = model.prediction_scores(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
    assert nsp_scores is None
    assert out.nsp_logits is None and out.nsp_loss is None and out.nsp_correct is None
    # The 5 real predictions: (row, position) → label; row 1's third slot is padding.
    rows, positions = [0, 0, 0, 1, 1], [1, 5, 12, 3, 9]
    labels = torch.tensor([7, 8, 9, 10, 11])
    log_probabilities = scores[rows, positions].log_softmax(dim=-1)  # (5, V)
    by_hand = -log_probabilities[range(5), labels].sum() / 5
    torch.testing.assert_close(out.mlm_loss, by_hand, atol=1e-5, rtol=0)
    assert out.loss is out.mlm_loss  # the MLM loss alone
    assert int(out.mlm_count) == 5
    with pytest.raises(ValueError, match="next_sentence_labels given to an --objective mlm model"):
        model(**batch)


def test_the_mlm_forward_is_one_graph_without_breaks():
    """As tests/test_compile.py holds mlm+nsp: --compile makes one graph, no break."""
    model = tiny("mlm")
    explained = torch._dynamo.explain(model)(**mlm_inputs(make_batch()))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), [
        r.reason for r in explained.break_reasons
    ]


def test_mlm_plus_nsp_is_unchanged():
    """Values of the model before the objective existed, same seed, same batch: the same
    initial weights (the pooler drawn between the layers and the MLM head), losses and counts."""
    model = tiny("mlm+nsp")
    out = model(**make_batch())
    torch.testing.assert_close(out.loss.item(), 5.317373752593994, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.mlm_loss.item(), 4.626582145690918, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.nsp_loss.item(), 0.6907915472984314, atol=1e-6, rtol=0)
    assert (int(out.mlm_correct), int(out.nsp_correct)) == (0, 1)
    assert len(model.state_dict()) == 39 and len(hf_state_dict(model)) == 46


def test_an_mlm_model_from_mlm_plus_nsp_weights_gives_the_same_mlm_loss():
    both = tiny("mlm+nsp").eval()
    mlm = BertForPreTraining(config_for("tiny", VOCAB, max_position_embeddings=64, objective="mlm"))
    mlm.load_state_dict(without_nsp_head(both.state_dict()))  # strict: nothing else differs
    batch = make_batch()
    with torch.no_grad():
        expected, got = both(**batch), mlm.eval()(**mlm_inputs(batch))
    torch.testing.assert_close(got.mlm_loss, expected.mlm_loss, atol=0, rtol=0)
    torch.testing.assert_close(got.mlm_logits, expected.mlm_logits, atol=0, rtol=0)


def test_flops_leave_out_the_pooler_and_nsp_head():
    both = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
    )
    mlm = dataclasses.replace(both, objective="mlm")
    # tests/test_model.py's 369,747,456 less 3 × the pooler and NSP head's 2·(128² + 256).
    assert flops_per_sequence(mlm, seq_len=128, predictions=20) == 369_747_456 - 3 * 33_280
    batch = {
        BatchField.INPUT_IDS: torch.zeros(2, 16, dtype=torch.long),
        BatchField.MASKED_LABELS: torch.tensor([[7, 8, 9], [10, 11, IGNORE_INDEX]]),
    }
    assert batch_flops(both, batch) - batch_flops(mlm, batch) == 2 * 3 * 33_280


def test_mlm_hf_names_are_bert_for_masked_lm_s():
    hf = hf_state_dict(tiny("mlm"))
    assert len(hf) == 46 - 4
    assert not [n for n in hf if n.startswith(("bert.pooler", "cls.seq_relationship"))]
    assert "cls.predictions.transform.dense.weight" in hf and "cls.predictions.bias" in hf


def test_eval_result_without_nsp_has_no_nsp_key_or_words():
    result = EvalResult(2.5, 0.25, None, 40, 8)
    assert result.as_dict() == {
        "mlm_loss": 2.5,
        "mlm_accuracy": 0.25,
        "predictions": 40,
        "sequences": 8,
    }
    assert result.summary() == "MLM loss 2.500, MLM accuracy 0.250"
    with_nsp = EvalResult(2.5, 0.25, 0.5, 40, 8)
    assert with_nsp.as_dict()["nsp_accuracy"] == 0.5
    assert with_nsp.summary() == "MLM loss 2.500, MLM accuracy 0.250, NSP accuracy 0.500"


# --------------------------------------------------------------------------- runs

COMMON = ["--warmup-steps", "1", "--num-workers", "0", "--checkpoint-every", "100"]


def run_train(shards: Path, output: Path, *args: str) -> int:
    return train.run([*TINY, *COMMON, "--shards", str(shards), "--output", str(output), *args])


@pytest.fixture(scope="module")
def runs(sample_shards, tmp_path_factory) -> dict[str, Path]:
    """Two short runs on the real sample: "mlm" (4 steps, evaluated at 2 and 4) and
    "mlm+nsp" (2 steps)."""
    root = tmp_path_factory.mktemp("objective")
    made = {"mlm": root / "mlm", "mlm+nsp": root / "both"}
    assert (
        run_train(
            sample_shards,
            made["mlm"],
            "--objective",
            "mlm",
            "--max-steps",
            "4",
            "--eval-every",
            "2",
        )
        == 0
    )
    assert (
        run_train(
            sample_shards,
            made["mlm+nsp"],
            "--objective",
            "mlm+nsp",
            "--max-steps",
            "2",
            "--eval-every",
            "0",
        )
        == 0
    )
    return made


def test_an_mlm_run_logs_and_evaluates_no_nsp(runs):
    train_log, evals = metrics(runs["mlm"]), metrics(runs["mlm"], "eval")
    assert sorted(train_log) == [1, 2, 3, 4] and sorted(evals) == [2, 4]
    for record in [*train_log.values(), *evals.values()]:
        assert not [key for key in record if "nsp" in key], record
    assert train_log[4]["loss"] == train_log[4]["mlm_loss"]
    assert evals[4]["predictions"] > 0 and 0 <= evals[4]["mlm_accuracy"] <= 1
    checkpoint = torch.load(latest_checkpoint(runs["mlm"] / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"
    assert checkpoint[CheckpointKey.TRAIN_CONFIG]["objective"] == "mlm"
    assert not set(NSP_HEAD_WEIGHTS) & set(checkpoint[CheckpointKey.MODEL])
    # mlm+nsp as before: every NSP metric there.
    assert {"nsp_loss", "nsp_accuracy"} <= set(metrics(runs["mlm+nsp"])[2])


def test_an_mlm_run_prints_and_logs_only_mlm(sample_shards, tmp_path, capsys, caplog):
    with caplog.at_level(logging.INFO):
        code = run_train(sample_shards, tmp_path / "r", "--objective", "mlm", "--max-steps", "1")
    assert code == 0
    printed = capsys.readouterr()
    said = printed.out + printed.err + caplog.text
    assert "held-out: MLM loss" in printed.out and "MLM accuracy" in said
    assert "NSP" not in said and "nsp" not in said


def test_the_export_of_an_mlm_run_is_a_bert_for_masked_lm(runs, tmp_path):
    output = tmp_path / "hf"
    export_hf(runs["mlm"] / "checkpoints", output)
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    hf, info = transformers.BertForMaskedLM.from_pretrained(output, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    checkpoint = torch.load(latest_checkpoint(runs["mlm"] / "checkpoints"), weights_only=True)
    ours = BertForPreTraining(BertConfig(**checkpoint[CheckpointKey.MODEL_CONFIG]))
    ours.load_state_dict(checkpoint[CheckpointKey.MODEL])
    assert sum(p.numel() for p in hf.parameters()) == parameter_count(ours)
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, ours.config.vocab_size, (2, 24), generator=generator)
    input_ids[:, 0] = 2
    attention_mask = torch.ones(2, 24, dtype=torch.bool)
    attention_mask[1, 15:] = False  # row 1: 15 tokens, then [PAD]
    input_ids[1, 15:] = 0
    token_type_ids = torch.zeros(2, 24, dtype=torch.long)
    with torch.no_grad():
        mlm, _ = ours.eval().prediction_scores(input_ids, token_type_ids, attention_mask)
        logits = hf.eval()(
            input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask.long()
        ).logits
    torch.testing.assert_close(logits[0], mlm[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(logits[1, :15], mlm[1, :15], atol=1e-4, rtol=0)
    assert mlm.std() > 1e-2  # not trivially equal


def test_the_export_names_the_hf_class_of_each_objective(runs, tmp_path, capsys):
    export_hf(runs["mlm+nsp"] / "checkpoints", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(runs["mlm"] / "checkpoints"), "--output", str(tmp_path / "m")])
    assert exit_info.value.code == 0
    assert f"{tmp_path / 'm'}: HF BertForMaskedLM, 2 layers × 128" in capsys.readouterr().out


# --------------------------------------------------------------------------- across objectives


def test_phase_two_from_mlm_plus_nsp_into_mlm_drops_the_nsp_head(
    runs, sample_shards, tmp_path, caplog
):
    """One requeue-safe command line (--resume with --init-checkpoint): the first try starts
    from the mlm+nsp weights less the NSP head; the next goes on from its own mlm checkpoint."""
    phase2 = tmp_path / "phase2"
    command = ["--objective", "mlm", "--eval-every", "0", "--resume"]
    command += ["--init-checkpoint", str(runs["mlm+nsp"] / "checkpoints")]
    with caplog.at_level(logging.INFO):
        assert run_train(sample_shards, phase2, *command, "--max-steps", "1") == 0
    assert (
        "--init-checkpoint: its mlm+nsp model starts this --objective mlm run without its "
        "pooler and NSP head"
    ) in caplog.text
    saved = torch.load(latest_checkpoint(phase2 / "checkpoints"), weights_only=True)
    assert saved[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"
    assert not set(NSP_HEAD_WEIGHTS) & set(saved[CheckpointKey.MODEL])
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert run_train(sample_shards, phase2, *command, "--max-steps", "2") == 0
    assert "pooler and NSP head" not in caplog.text  # resumed from its own checkpoint
    assert sorted(metrics(phase2)) == [1, 2]


def test_an_mlm_checkpoint_never_starts_an_mlm_plus_nsp_run(runs, sample_shards, tmp_path, capsys):
    init = runs["mlm"] / "checkpoints"
    code = run_train(
        sample_shards, tmp_path / "r", "--objective", "mlm+nsp", "--init-checkpoint", str(init)
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"bertkit train: error: --init-checkpoint {init} holds an --objective mlm model, with "
        "no pooler or NSP head for --objective mlm+nsp to go on with: train on from it with "
        "--objective mlm\n"
    )
    assert not (tmp_path / "r" / METRICS_FILE).exists()


@pytest.mark.parametrize(
    ("run", "objective", "hint"),
    [
        ("mlm", "mlm+nsp", ""),
        ("mlm+nsp", "mlm", ", or start a new run from it with --init-checkpoint"),
    ],
)
def test_a_resume_never_changes_the_objective(runs, sample_shards, capsys, run, objective, hint):
    before = (runs[run] / METRICS_FILE).read_bytes()
    code = run_train(sample_shards, runs[run], "--objective", objective, "--resume")
    assert code == 2
    assert capsys.readouterr().err == (
        f"bertkit train: error: --resume: the run in {runs[run]} trains --objective {run}, "
        f"this one {objective}: a resume goes on with its objective; pass --objective "
        f"{run}{hint}\n"
    )
    assert (runs[run] / METRICS_FILE).read_bytes() == before  # refused before any work


def test_a_resume_with_init_checkpoint_tells_its_own_checkpoint_apart(
    runs, sample_shards, tmp_path, capsys
):
    """--resume --init-checkpoint: a run dir trained mlm from an mlm+nsp checkpoint is its own
    run's, and goes on only as mlm."""
    run_dir = tmp_path / "r"
    init = ["--init-checkpoint", str(runs["mlm+nsp"] / "checkpoints"), "--eval-every", "0"]
    assert run_train(sample_shards, run_dir, *init, "--objective", "mlm", "--max-steps", "1") == 0
    capsys.readouterr()
    code = run_train(sample_shards, run_dir, *init, "--objective", "mlm+nsp", "--resume")
    assert code == 2
    assert f"--resume: the run in {run_dir} trains --objective mlm, this one mlm+nsp" in (
        capsys.readouterr().err
    )


# --------------------------------------------------------------------------- DDP


# Slow (5 s): tests/test_recipes_end_to_end.py trains an mlm model (no pooler, no NSP head)
# on two Gloo ranks under torchrun in the default run.
@pytest.mark.slow
def test_two_gloo_processes_train_mlm(sample_shards, tmp_path):
    """DDP fails a step whose model has a parameter without a gradient: an mlm model has none
    (no pooler or NSP head), so three steps of two ranks run and agree."""
    run_dir = tmp_path / "ddp"
    env = torchrun_env()
    command = [
        *torchrun_trainer(2),
        *TINY,
        *COMMON,
        "--objective",
        "mlm",
        "--shards",
        str(sample_shards),
        "--output",
        str(run_dir),
        "--max-steps",
        "3",
        "--eval-every",
        "0",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "NSP" not in done.stdout + done.stderr
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.WORLD_SIZE] == 2
    assert checkpoint[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"
    assert sorted(metrics(run_dir)) == [1, 2, 3]
    assert not [k for r in metrics(run_dir).values() for k in r if "nsp" in k]
    # Evaluated once, at the end: --eval-batches 4 of 16 are the held-out split's first 64
    # sequences whatever the world, 32 on each rank, summed over both
    # (tests/test_eval_world_size.py).
    assert metrics(run_dir, "eval")[3]["sequences"] == 4 * 16
