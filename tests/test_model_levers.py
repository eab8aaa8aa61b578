"""The model's levers (issue 39): hidden and attention dropout apart, attention read from
the fused Q/K/V projection without copies, and the unpadded encoder (`--unpad`), each equal
to the plain path in fp32 on the CPU, gradients included."""

from __future__ import annotations

import collections
import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch.overrides import TorchFunctionMode

from schemas.checkpoint import CheckpointKey
from tests.support.varlen import reference_flash_forward, reference_varlen_attn
from tests.test_step_syncs import OpCounter
from tests.test_train import metrics
from trainer import attention, train
from trainer.attention import PADDED, UNPADDED, VARLEN, Unpadding, attention_path
from trainer.model import BertConfig, BertForPreTraining, BertLayer
from trainer.run.checkpoints import latest_checkpoint

# hidden 32, 2 layers, 4 heads of 8, sequences of 16.
TINY = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 16,
}
# `bertkit train` on the sample's shards: the tiny model, a few steps, nothing but training.
TINY_RUN = ["--model", "tiny", "--micro-batch-size", "8", "--lr", "2e-3", "--log-every", "1",
            "--num-workers", "0", "--eval-every", "0", "--eval-batches", "1",
            "--no-tensorboard"]  # fmt: skip
# Three sequences of 16, 10 and 5 real tokens (the rest padding).
LENGTHS = (16, 10, 5)


def weights_config(run_dir) -> dict:
    """The model config the run's latest checkpoint records."""
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    return checkpoint[CheckpointKey.MODEL_CONFIG]


def literal_batch() -> tuple[torch.Tensor, ...]:
    """input_ids, token_type_ids, attention_mask, masked_positions, masked_labels,
    next_sentence_labels: rows of LENGTHS real tokens, padding slots pointing at [CLS]."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (3, 16), generator=generator)
    mask = torch.arange(16)[None, :] < torch.tensor(LENGTHS)[:, None]
    ids[~mask] = 0
    types = torch.zeros(3, 16, dtype=torch.long)
    types[:, 4:] = 1
    types[~mask] = 0
    positions = torch.tensor([[1, 2, 15], [2, 9, 0], [1, 4, 0]])
    labels = torch.tensor([[7, 8, 9], [10, 11, -100], [12, 13, -100]])
    return ids, types, mask, positions, labels, torch.tensor([0, 1, 0])


def model(unpad: str = "off", hidden: float = 0.0, attn: float = 0.0) -> BertForPreTraining:
    torch.manual_seed(0)
    config = BertConfig(**TINY, hidden_dropout_prob=hidden, attention_probs_dropout_prob=attn)
    return BertForPreTraining(config, unpad=unpad).train()


def step(net: BertForPreTraining, call=None, batch=None, **kwargs) -> tuple[object, dict]:
    """The forward's output on `batch` (the literal one by default) and every parameter's
    gradient, the forward run through `call` (`net` itself by default)."""
    net.zero_grad()
    forward = net if call is None else call
    out = forward(*(literal_batch() if batch is None else batch), **kwargs)
    out.loss.backward()
    return out, {name: p.grad.clone() for name, p in net.named_parameters()}


# --- dropout: hidden and attention apart, and none called at rate 0 ------------------------


class _Calls(TorchFunctionMode):
    """The torch functions called, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.names: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


def dropout_calls(net: BertForPreTraining, monkeypatch) -> tuple[int, list[float]]:
    """F.dropout's calls in one training forward, and SDPA's dropout_p each time."""
    seen: list[float] = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(kwargs["dropout_p"])
        return sdpa(*args, **kwargs)

    with monkeypatch.context() as patch, _Calls() as calls:
        patch.setattr(F, "scaled_dot_product_attention", spy)
        net(*literal_batch())
    return calls.names["dropout"], seen


def test_hidden_and_attention_dropout_are_apart_and_rate_0_calls_no_dropout(monkeypatch):
    """Embeddings + 2 residual branches × 2 layers = 5 hidden dropouts; the attention's rate
    goes to SDPA. At rate 0 no dropout is called and the RNG is not drawn from."""
    assert dropout_calls(model(hidden=0.1, attn=0.1), monkeypatch) == (5, [0.1, 0.1])
    assert dropout_calls(model(hidden=0.0, attn=0.1), monkeypatch) == (0, [0.1, 0.1])
    assert dropout_calls(model(hidden=0.1, attn=0.0), monkeypatch) == (5, [0.0, 0.0])
    net = model(hidden=0.0, attn=0.0)
    before = torch.get_rng_state()
    net(*literal_batch())
    assert torch.equal(torch.get_rng_state(), before)


# --- attention from the fused projection ---------------------------------------------------


def permuted_attention(qkv, key_mask, dropout):
    """The formulation before issue 39: (B, L, 3, heads, d) permuted to (3, B, heads, L, d)
    and unbound; its backward stacks the grads and copies them back for the view."""
    batch, length, _, heads, size = qkv.shape
    query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    context = F.scaled_dot_product_attention(
        query, key, value, attn_mask=key_mask, dropout_p=dropout
    )
    return context.transpose(1, 2).reshape(batch, length, heads * size)


def test_attention_from_the_fused_projection_equals_the_permuted_one(monkeypatch):
    """Losses, logits and every gradient bit for bit, with dropout on (the same draws)."""
    torch.manual_seed(7)
    ours, our_grads = step(model(hidden=0.1, attn=0.1))
    monkeypatch.setattr("trainer.model.padded_attention", permuted_attention)
    torch.manual_seed(7)
    theirs, their_grads = step(model(hidden=0.1, attn=0.1))
    assert torch.equal(ours.loss, theirs.loss)
    assert torch.equal(ours.mlm_logits, theirs.mlm_logits)
    assert our_grads.keys() == their_grads.keys()
    for name, grad in our_grads.items():
        assert torch.equal(grad, their_grads[name]), name


def backward_ops(net: BertForPreTraining) -> collections.Counter[str]:
    out = net(*literal_batch())
    with OpCounter() as counted:
        out.loss.backward()
    return counted.calls


def test_the_backward_writes_the_qkv_gradient_once_per_layer(monkeypatch):
    """One stack per layer into the projection's layout, no clone: the permuted
    formulation stacked, then cloned the permuted grad for the view (2 copies a layer)."""
    ops = backward_ops(model())
    assert (ops["aten.stack"], ops["aten.clone"]) == (2, 0)
    monkeypatch.setattr("trainer.model.padded_attention", permuted_attention)
    ops = backward_ops(model())
    assert (ops["aten.stack"], ops["aten.clone"]) == (2, 2)


# --- the unpadded encoder ------------------------------------------------------------------


def test_unpadding_finds_the_real_tokens():
    mask = literal_batch()[2]
    unpadding = Unpadding.of(mask, varlen=False)
    assert (unpadding.tokens, unpadding.max_length, unpadding.padding_share) == (31, 16, 17 / 48)
    assert unpadding.cu_seqlens.tolist() == [0, 16, 26, 31]
    assert unpadding.index[14:19].tolist() == [14, 15, 16, 17, 18]  # row 0 ends, row 1 starts
    assert unpadding.index[-6:].tolist() == [25, 32, 33, 34, 35, 36]
    assert unpadding.positions()[-6:].tolist() == [9, 0, 1, 2, 3, 4]
    values = torch.arange(48.0).view(3, 16, 1)
    back = unpadding.scatter(unpadding.gather(values))
    assert torch.equal(back, torch.where(mask[:, :, None], values, 0.0))


def assert_equal_within(padded, unpadded, atol=1e-6):
    out_p, grads_p = padded
    out_u, grads_u = unpadded
    assert abs(out_p.loss.item() - out_u.loss.item()) <= atol
    assert abs(out_p.mlm_loss.item() - out_u.mlm_loss.item()) <= atol
    assert abs(out_p.nsp_loss.item() - out_u.nsp_loss.item()) <= atol
    torch.testing.assert_close(out_u.mlm_logits, out_p.mlm_logits, rtol=0, atol=atol)
    torch.testing.assert_close(out_u.nsp_logits, out_p.nsp_logits, rtol=0, atol=atol)
    assert grads_p.keys() == grads_u.keys()
    for name, grad in grads_p.items():
        torch.testing.assert_close(grads_u[name], grad, rtol=0, atol=atol, msg=name)


def test_the_unpadded_encoder_equals_the_padded_one():
    """--unpad on, on the CPU (padded attention per layer): MLM and NSP losses, the MLM
    logits (every slot points at a real token) and every gradient within 1e-6; the
    sequence output the same at real positions and zero at padding."""
    padded, unpadded = model("off"), model("on")
    assert_equal_within(step(padded), step(unpadded))
    ids, types, mask = literal_batch()[:3]
    with torch.no_grad():
        plain, real = padded.encode(ids, types, mask), unpadded.encode(ids, types, mask)
    torch.testing.assert_close(real[mask], plain[mask], rtol=0, atol=1e-6)
    assert torch.equal(real[~mask], torch.zeros(48 - 31, 32))


def batch_of_lengths(lengths: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """The literal batch cut to sequences of `lengths` real tokens (padding past them)."""
    ids, types, _, positions, labels, nsp = literal_batch()
    mask = torch.arange(16)[None, :] < torch.tensor(lengths)[:, None]
    return ids * mask, types * mask, mask, positions, labels, nsp


def assert_compiled_trains_as_eager(eager, compiled, forward, batch, **kwargs):
    """`eager` and `compiled` (run through `forward`) on `batch`: the same loss, logits and
    gradients, up to a compiler's summation order."""
    want, want_grads = step(eager, None, batch, **kwargs)
    got, got_grads = step(compiled, forward, batch, **kwargs)
    torch.testing.assert_close(got.loss, want.loss, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got.mlm_logits, want.mlm_logits, rtol=1e-5, atol=1e-5)
    for name, grad in want_grads.items():  # gradients of up to a few thousand here
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-5, atol=1e-5, msg=name)


# Inductor's cold compile is slow (CONTRIBUTING); aot_eager checks the same graph by default.
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_the_compiled_unpadded_encoder_equals_the_eager_one(backend, recwarn):
    """--unpad on under torch.compile, called as the trainer calls it (counts from the
    host): batches of other real-token counts give eager's losses, logits and gradients
    through one graph, compiled dynamic from the first batch: one compile for the
    trainer's two (static, then dynamic; the next test counts those without counts)."""
    torch._dynamo.reset()
    counters.clear()
    eager, compiled = model("on"), model("on")
    forward = torch.compile(compiled, backend=backend, dynamic=True)
    for lengths in ((16, 10, 5), (16, 12, 7), (14, 16, 9)):
        counts = (sum(lengths), max(lengths))
        assert_compiled_trains_as_eager(
            eager, compiled, forward, batch_of_lengths(lengths), counts=counts
        )
    assert counters["stats"]["unique_graphs"] == 1 and dict(counters["graph_break"]) == {}
    # varlen's availability is read from a plain dict: dynamo warns on a functools.cache
    assert [str(w.message) for w in recwarn if "lru_cache" in str(w.message)] == []
    torch._dynamo.reset()


def test_without_counts_the_compiled_unpadded_encoder_reads_them_and_compiles_twice():
    """--unpad on under torch.compile without the host's counts (a user's own loop): the
    read of T breaks the graph; the first batch compiles, the second's other count once
    more (dynamic), no later one; eager's numbers. aot_eager: the graphs are dynamo's."""
    torch._dynamo.reset()
    counters.clear()
    eager, compiled = model("on"), model("on")
    forward = torch.compile(compiled, backend="aot_eager")
    graphs = []
    for lengths in ((16, 10, 5), (16, 12, 7), (14, 16, 9), (16, 3, 11)):
        assert_compiled_trains_as_eager(eager, compiled, forward, batch_of_lengths(lengths))
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[1] > graphs[0] and graphs[3] == graphs[2] == graphs[1]
    assert sum(counters["graph_break"].values()) > 0  # the read of T from the device
    torch._dynamo.reset()


def test_prediction_scores_are_the_padded_batchs_whatever_unpad():
    """HF's scores at every position, padding included: the padded path always."""
    ids, types, mask = literal_batch()[:3]
    with torch.no_grad():
        padded = model("off").eval().prediction_scores(ids, types, mask)
        unpadded = model("on").eval().prediction_scores(ids, types, mask)
    assert torch.equal(padded[0], unpadded[0]) and torch.equal(padded[1], unpadded[1])


def test_the_varlen_path_equals_the_padded_one_with_a_stand_in_kernel(monkeypatch):
    """The varlen path's tokens, cu_seqlens and layouts, through a CPU stand-in for torch's
    kernel (which has none on the CPU): equal to the padded model within 1e-6. The kernel
    itself runs on a GPU only (bench/gpu_check.sh)."""
    calls = []

    def kernel(*args):
        calls.append(args[5])  # max_q
        return reference_varlen_attn(*args)

    monkeypatch.setattr(attention, "varlen_attn", kernel)
    monkeypatch.setattr("trainer.model.varlen_usable", lambda *args: True)
    padded, varlen = model("off"), model("auto")
    assert_equal_within(step(padded), step(varlen))
    assert calls == [16, 16]  # one call a layer, the longest sequence's 16 tokens


def test_the_path_is_chosen_by_unpad_and_the_kernel():
    """auto: varlen where it runs and at least 8 % of the batch is padding; on: unpadded
    always; off: padded. padding_share (a wait on the device) is asked only where it
    decides."""
    asked = []

    def padding(share):
        def padding_share():
            asked.append(share)
            return share

        return padding_share

    assert attention.AUTO_MIN_PADDING == 0.08
    assert attention_path("auto", True, padding(0.18)) == VARLEN
    assert attention_path("auto", True, padding(0.08)) == VARLEN
    assert attention_path("auto", True, padding(0.079)) == PADDED
    assert attention_path("auto", True, padding(0.0)) == PADDED
    assert asked == [0.18, 0.08, 0.079, 0.0]
    assert attention_path("auto", False, padding(0.5)) == PADDED
    assert attention_path("on", True, padding(0.0)) == VARLEN
    assert attention_path("on", False, padding(0.5)) == UNPADDED
    assert attention_path("off", True, padding(0.5)) == PADDED
    assert asked == [0.18, 0.08, 0.079, 0.0]
    with pytest.raises(ValueError, match="unpad 'yes': one of auto, on, off"):
        attention_path("yes", True, padding(0.5))


def test_auto_unpads_a_batch_by_its_padding_share_compiled_too(monkeypatch):
    """With the kernel (a CPU stand-in): the literal batch, 17 of 48 positions padding,
    attends through it, eager and where torch.compile traces; a batch of 3 padding
    positions in 48 (6 %) stays padded."""
    calls = []

    def kernel(*args):
        calls.append(args[5])
        return reference_varlen_attn(*args)

    monkeypatch.setattr(attention, "varlen_attn", kernel)
    monkeypatch.setattr("trainer.model.varlen_usable", lambda *args: True)
    assert Unpadding.of(literal_batch()[2], varlen=True).padding_share == 17 / 48
    step(model("auto"))
    assert calls == [16, 16]  # one call a layer
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    step(model("auto"))
    assert calls == [16, 16, 16, 16]  # under compile the batch's length bounds each sequence
    monkeypatch.undo()
    monkeypatch.setattr(attention, "varlen_attn", kernel)
    monkeypatch.setattr("trainer.model.varlen_usable", lambda *args: True)
    ids, types, _, positions, labels, nsp = literal_batch()
    mask = torch.arange(16)[None, :] < torch.tensor([16, 16, 13])[:, None]
    assert Unpadding.of(mask, varlen=True).padding_share == 3 / 48
    out = model("auto")(ids * mask, types * mask, mask, positions, labels, nsp)
    assert out.loss.isfinite() and calls == [16, 16, 16, 16]


def test_varlen_is_usable_only_where_the_kernel_runs(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert not attention.varlen_available(cpu)  # torch has no CPU kernel
    monkeypatch.setattr(attention, "varlen_available", lambda device: device.type == "cuda")
    assert attention.varlen_usable(cuda, torch.bfloat16, 64, 0.0)
    assert attention.varlen_usable(cuda, torch.float16, 64, 0.0)
    assert not attention.varlen_usable(cpu, torch.bfloat16, 64, 0.0)
    assert not attention.varlen_usable(cuda, torch.float32, 64, 0.0)  # flash: half only
    assert attention.varlen_usable(cuda, torch.bfloat16, 64, 0.1)  # aten's flash op: dropout
    monkeypatch.setattr(attention, "_FLASH_FORWARD", None)
    assert not attention.varlen_usable(cuda, torch.bfloat16, 64, 0.1)
    assert attention.varlen_usable(cuda, torch.bfloat16, 64, 0.0)
    assert not attention.varlen_usable(cuda, torch.bfloat16, 12, 0.0)  # not a multiple of 8
    assert not attention.varlen_usable(cuda, torch.bfloat16, 512, 0.0)


def test_each_reason_the_varlen_kernel_cannot_run_is_named(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    monkeypatch.setattr(attention, "_DEVICE_OBSTACLE", {})
    assert attention.varlen_obstacles(cpu, torch.float32, 12, 0.1) == [
        "it takes bf16 or fp16, and this run computes in float32",
        "it takes head sizes in multiples of 8 up to 256, not 12",
        "torch has no varlen kernel for the cpu device",
    ]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "Tesla V100-SXM2-16GB")
    assert attention.varlen_obstacles(cuda, torch.float16, 64, 0.0) == [
        "Tesla V100-SXM2-16GB is of compute capability 7.0, under 8.0"
    ]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    assert attention.varlen_obstacles(cuda, torch.float16, 64, 0.0) == [  # found once
        "Tesla V100-SXM2-16GB is of compute capability 7.0, under 8.0"
    ]
    monkeypatch.setattr(attention, "_DEVICE_OBSTACLE", {})
    if attention.varlen_attn is not None:  # torch 2.10 and later: an H100 takes it
        assert attention.varlen_obstacles(cuda, torch.bfloat16, 64, 0.0) == []
    monkeypatch.setattr(attention, "varlen_attn", None)  # an older torch, looked up
    monkeypatch.setattr(attention, "_VARLEN_LOOKED_UP", True)
    monkeypatch.setattr(attention, "_DEVICE_OBSTACLE", {})
    assert attention.varlen_obstacles(cuda, torch.bfloat16, 64, 0.0) == [
        f"torch {torch.__version__} has no torch.nn.attention.varlen (2.10 has)"
    ]
    monkeypatch.setattr(attention, "_FLASH_FORWARD", None)
    assert attention.varlen_obstacles(cuda, torch.bfloat16, 64, 0.1)[0] == (
        f"torch {torch.__version__} has no flash kernel with attention dropout, and this "
        "run's is 0.1"
    )


ON = "--unpad on: the encoder runs on the real tokens only, attending through torch's varlen kernel"
PADS_BACK = (
    "--unpad on: the matmuls run on the real tokens only, while every layer pads Q/K/V back "
    "to the batch to attend, since torch's varlen kernel cannot run: "
)
AUTO = "--unpad auto: "
# describe_unpad's arguments after --unpad (device, dtype, head size, attention dropout),
# and the line it gives.
UNPAD_LINES = [
    (("off", "cuda", torch.bfloat16, 64, 0.0), None),
    (("on", "cuda", torch.bfloat16, 64, 0.0), ON),
    (("on", "cuda", torch.bfloat16, 64, 0.1), f"{ON} with attention dropout 0.1"),
    (
        ("on", "cuda", torch.float32, 64, 0.1),
        f"{PADS_BACK}it takes bf16 or fp16, and this run computes in float32. On a GPU that "
        "path can be slower than the padded one (docs/gpu.md)",
    ),
    (
        ("auto", "cuda", torch.bfloat16, 64, 0.0),
        f"{AUTO}a batch of at least 8% padding runs the encoder on its real tokens only, "
        "attending through torch's varlen kernel",
    ),
    (
        ("auto", "cuda", torch.bfloat16, 64, 0.1),
        f"{AUTO}training's forwards take the padded batch: auto unpads only without attention "
        "dropout, and this run's is 0.1 (--unpad on attends through torch's flash varlen "
        "kernel with it; evaluation, which has no dropout, may unpad)",
    ),
    (
        ("auto", "cuda", torch.float16, 12, 0.0),
        f"{AUTO}training's forwards take the padded batch, since torch's varlen kernel cannot "
        "run: it takes head sizes in multiples of 8 up to 256, not 12 (evaluation, which has "
        "no dropout, may unpad)",
    ),
    (("auto", "cpu", torch.bfloat16, 64, 0.0), None),  # the default, with nothing to choose
]


@pytest.mark.parametrize(("args", "line"), UNPAD_LINES)
def test_the_run_says_which_path_unpad_takes(monkeypatch, args, line):
    monkeypatch.setattr(attention, "varlen_available", lambda device: device.type == "cuda")
    unpad, device, *rest = args
    assert attention.describe_unpad(unpad, torch.device(device), *rest) == line


def test_auto_is_the_padded_batch_on_the_cpu_without_looking_at_the_mask(monkeypatch):
    """No unpadding, and no wait on the device, where varlen cannot run."""
    monkeypatch.setattr(
        Unpadding, "of", classmethod(lambda *args: pytest.fail("unpadded on the CPU"))
    )
    out, _ = step(model("auto"))
    assert out.loss.isfinite()


def test_the_layer_keeps_its_parameters():
    """The state dict's names (and so the export's mapping) are those before issue 39."""
    names = [name for name, _ in BertLayer(BertConfig(**TINY)).named_parameters()]
    assert names == [
        f"{layer}.{kind}"
        for layer in (
            "qkv",
            "attention_output",
            "attention_norm",
            "intermediate",
            "output",
            "output_norm",
        )
        for kind in ("weight", "bias")
    ]


def test_a_run_with_unpad_on_trains_as_the_padded_one(sample_shards, tmp_path, caplog):
    """3 steps on the sample's pairs (some shorter than 128), no dropout: the same losses
    within float summation order; the run's log says which path --unpad took, and why."""
    losses, said = {}, {}
    for unpad in ("on", "off"):
        run = tmp_path / unpad
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="bertkit.train"):
            assert train.run([*TINY_RUN, "--shards", str(sample_shards), "--output", str(run),
                              "--max-steps", "3", "--dropout", "0", "--unpad", unpad]) == 0  # fmt: skip
        losses[unpad] = [metrics(run)[step]["loss"] for step in (1, 2, 3)]
        said[unpad] = [r.getMessage() for r in caplog.records if "--unpad" in r.getMessage()]
    assert losses["on"] == pytest.approx(losses["off"], rel=1e-5, abs=0)
    assert said == {
        "on": [
            "--unpad on: the matmuls run on the real tokens only, while every layer pads Q/K/V "
            "back to the batch to attend, since torch's varlen kernel cannot run: it takes "
            "bf16 or fp16, and this run computes in float32; torch has no varlen kernel for "
            "the cpu device. On a GPU that path can be slower than the padded one (docs/gpu.md)"
        ],
        "off": [],
    }


@pytest.mark.slow
def test_a_compiled_run_with_unpad_on_trains_as_the_padded_one(sample_shards, tmp_path):
    """The same under --compile (the trainer pads every batch to 128, then unpads)."""
    losses = {}
    for unpad in ("on", "off"):
        run = tmp_path / unpad
        assert train.run([*TINY_RUN, "--shards", str(sample_shards), "--output", str(run),
                          "--max-steps", "3", "--dropout", "0", "--unpad", unpad,
                          "--compile"]) == 0  # fmt: skip
        losses[unpad] = [metrics(run)[step]["loss"] for step in (1, 2, 3)]
    assert losses["on"] == pytest.approx(losses["off"], rel=1e-5, abs=0)


def test_the_host_gives_a_forward_its_counts_or_keeps_auto_padded():
    cpu, lengths = torch.device("cpu"), np.array([16, 10, 5])  # 31 of 48 positions
    # No varlen kernel (the CPU): auto has nothing to decide, the forward called as ever.
    assert model("auto").unpad_hints(lengths, 48, cpu) == {}
    assert model("off").unpad_hints(lengths, 48, cpu) == {}
    assert model("on").unpad_hints(lengths, 48, cpu) == {"counts": (31, 16)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("trainer.model.varlen_usable", lambda *args: True)
        net = model("auto")
        assert net.unpad_hints(np.array([50, 43]), 100, cpu) == {"unpad": "off"}  # 7 % padding
        assert net.unpad_hints(np.array([50, 42]), 100, cpu) == {"counts": (92, 50)}  # 8 %
        assert net.unpad_hints(np.array([0, 0]), 100, cpu) == {"counts": (0, 0)}
        assert model("on").unpad_hints(np.array([50, 50]), 100, cpu) == {"counts": (100, 50)}
        assert model("off").unpad_hints(np.array([25, 25]), 100, cpu) == {}
        assert net.unpad_hints(lengths, 48, cpu) == {"counts": (31, 16)}
        assert net.unpad_hints(np.array([16, 16, 13]), 48, cpu) == {"unpad": "off"}  # 6 %
        assert model("auto", attn=0.1).unpad_hints(lengths, 48, cpu) == {}  # not measured
        patch.setattr(Unpadding, "of", classmethod(lambda *args: pytest.fail("unpadded")))
        out = net(*literal_batch(), unpad="off")
    assert out.loss.isfinite()


def test_given_counts_the_compiled_unpadded_encoder_is_one_graph(monkeypatch):
    """--unpad on under torch.compile with the counts from the host: no read of the device,
    no graph break; the second batch's other count compiles once more (dynamic), no later
    one does; eager's losses. aot_eager: the graphs are dynamo's, and the cold Inductor
    compile of this encoder is test_the_compiled_unpadded_encoder_equals_the_eager_one's."""
    monkeypatch.setattr(attention, "read_counts", lambda lengths: pytest.fail("read counts"))
    torch._dynamo.reset()
    counters.clear()
    eager, compiled = model("on"), model("on")
    forward = torch.compile(compiled, backend="aot_eager")
    graphs = []
    for lengths in ((16, 10, 5), (16, 12, 7), (14, 16, 9)):
        batch = batch_of_lengths(lengths)
        counts = (sum(lengths), max(lengths))
        want = eager(*batch, counts=counts)
        got = forward(*batch, counts=counts)
        torch.testing.assert_close(got.loss, want.loss, rtol=1e-6, atol=1e-6)
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs == [1, 2, 2] and dict(counters["graph_break"]) == {}
    torch._dynamo.reset()


def test_the_flash_varlen_kernel_with_dropout_binds_and_differentiates_on_meta_tensors():
    """aten's flash op, which torch's CUDA build runs, traced here through its meta kernel:
    the arguments bind as flash_varlen passes them, Q/K/V as views of the fused projection,
    autograd reaches its backward (which regenerates the dropout mask), and torch.compile
    traces both."""
    qkv = torch.empty(31, 3 * 4 * 8, device="meta", dtype=torch.bfloat16, requires_grad=True)
    query, key, value = qkv.view(31, 3, 4, 8).unbind(1)
    cu = torch.tensor([0, 16, 26, 31], dtype=torch.int32, device="meta")
    context = attention.flash_varlen(query, key, value, cu, 16, 0.1)
    assert (context.shape, context.dtype) == ((31, 4, 8), torch.bfloat16)
    assert type(context.grad_fn).__name__ == "FlashAttentionBackward0"
    context.sum().backward()
    assert qkv.grad is not None and qkv.grad.shape == (31, 96)
    # torch.compile's dynamo and AOTAutograd trace it in one graph, forward and backward.
    torch._dynamo.reset()

    def attend(qkv: torch.Tensor) -> torch.Tensor:
        query, key, value = qkv.view(31, 3, 4, 8).unbind(1)
        return attention.flash_varlen(query, key, value, cu, 16, 0.1).reshape(31, 32)

    qkv.grad = None
    torch.compile(attend, backend="aot_eager", fullgraph=True)(qkv).sum().backward()
    assert qkv.grad is not None and qkv.grad.shape == (31, 96)
    torch._dynamo.reset()


def test_unpad_on_with_attention_dropout_attends_through_the_flash_kernel(monkeypatch):
    """--unpad on with the 2018 recipe's attention dropout, where the varlen kernel runs (a
    CPU stand-in): each layer in training calls the flash op with dropout 0.1 on the real
    tokens; evaluation (no dropout) calls varlen_attn. Without dropout applied by the
    stand-in, the losses and gradients are the padded model's without dropout."""
    flash, varlen = [], []

    def flash_op(*args):  # query, key, value, cu_q, cu_k, max_q, max_k, dropout_p, causal, debug
        flash.append((args[7], args[8], args[9], args[5]))
        return reference_flash_forward(*args)

    def varlen_op(*args):
        varlen.append(args[5])
        return reference_varlen_attn(*args)

    monkeypatch.setattr(attention, "_FLASH_FORWARD", flash_op)
    monkeypatch.setattr(attention, "varlen_attn", varlen_op)
    monkeypatch.setattr("trainer.model.varlen_usable", lambda *args: True)
    unpadded = model("on", attn=0.1)
    got = step(unpadded)
    assert flash == [(0.1, False, False, 16)] * 2 and varlen == []
    assert_equal_within(step(model("off")), got)  # attention dropout: the model's only one
    with torch.no_grad():
        unpadded.eval()(*literal_batch())
    assert varlen == [16, 16] and len(flash) == 2
