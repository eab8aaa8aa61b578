"""The multi-tensor LAMB (trainer/optim.py) against the per-tensor loop it replaced.

`ReferenceLamb` is `Lamb.step` as it was before it was vectorised: a Python loop over the parameter
tensors, ~20 small ops each (with the trust ratio per Q/K/V block of the fused projection added
since). It lives here only, as the reference the `torch._foreach_*`
implementation must match, update for update and checkpoint for checkpoint.
"""

from __future__ import annotations

import copy
import io
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from schemas.batch import IGNORE_INDEX, BatchField
from trainer.model import BertForPreTraining, config_for
from trainer.optim import FUSED_PARTS, Lamb, build_optimizer

VOCAB = 100
LR = 1e-2
CLOSE = {"rtol": 1e-5, "atol": 1e-7}
STATE_KEYS = {"step", "exp_avg", "exp_avg_sq"}


def _norm(tensor: torch.Tensor) -> torch.Tensor:
    dtype = torch.promote_types(tensor.dtype, torch.float32)
    return torch.linalg.vector_norm(tensor, dtype=dtype)


class ReferenceLamb(Lamb):
    """The per-tensor LAMB step, verbatim from trainer/optim.py before the multi-tensor one."""

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            adapt = group["always_adapt"] or weight_decay != 0.0
            names = group.get("param_names", [""] * len(group["params"]))
            for param, name in zip(group["params"], names, strict=True):
                grad = param.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError(
                        "Lamb does not support sparse gradients; build the embedding with "
                        "nn.Embedding(..., sparse=False)"
                    )
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(
                        param, memory_format=torch.preserve_format
                    )
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                step = int(state["step"].item())

                exp_avg.lerp_(grad, 1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                bias_correction1 = 1.0 - beta1**step
                bias_correction2 = 1.0 - beta2**step
                denom = (exp_avg_sq / bias_correction2).sqrt_().add_(eps)
                update = (exp_avg / bias_correction1).div_(denom)
                if weight_decay != 0.0:
                    update.add_(param, alpha=weight_decay)

                if adapt:  # a trust ratio per row block of a fused Q/K/V tensor
                    count = next((n for end, n in FUSED_PARTS.items() if name.endswith(end)), 1)
                    for weight, piece in zip(param.chunk(count), update.chunk(count), strict=True):
                        weight_norm, update_norm = _norm(weight), _norm(piece)
                        trust = torch.where(
                            (weight_norm > 0) & (update_norm > 0),
                            weight_norm / update_norm,
                            torch.ones_like(weight_norm),
                        )
                        piece.mul_(trust.to(update.dtype) * lr)
                    param.sub_(update)
                else:
                    param.sub_(update, alpha=lr)
        return loss


class AtenCalls(TorchDispatchMode):
    """Counts the aten calls made under it, and keeps the outputs of `_foreach_norm`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.norms: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls[str(func.overloadpacket)] += 1
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket is torch.ops.aten._foreach_norm:
            self.norms.extend(out)
        return out

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def tiny_bert() -> BertForPreTraining:
    torch.manual_seed(0)
    config = config_for(
        "tiny",
        VOCAB,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForPreTraining(config)


def batch(seed: int) -> dict[str, torch.Tensor]:
    """B=2, 16 tokens, 3 prediction slots (one of them padding)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (2, 16), generator=generator)
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 13:] = False
    ids[1, 13:] = 0
    types = torch.zeros(2, 16, dtype=torch.long)
    types[:, 8:13] = 1
    labels = torch.randint(5, VOCAB, (2, 3), generator=generator)
    labels[1, -1] = IGNORE_INDEX
    return {
        BatchField.INPUT_IDS: ids,
        BatchField.TOKEN_TYPE_IDS: types,
        BatchField.ATTENTION_MASK: mask,
        BatchField.MASKED_POSITIONS: torch.tensor([[1, 4, 9], [2, 5, 0]]),
        BatchField.MASKED_LABELS: labels,
        BatchField.NEXT_SENTENCE_LABELS: torch.tensor([0, 1]),
    }


# One tensor of each group never gets a gradient; one more loses it on some steps, so the
# group's step counts drift apart (the multi-tensor step must then bucket by count).
NEVER_GRAD = ("nsp.weight", "nsp.bias")
SOMETIMES_GRAD = "pooler.bias"


def backward(model: BertForPreTraining, step: int) -> None:
    model.zero_grad(set_to_none=True)
    model(**batch(step)).loss.backward()
    parameters = dict(model.named_parameters())
    for name in NEVER_GRAD:
        parameters[name].grad = None
    if step % 3 == 1:
        parameters[SOMETIMES_GRAD].grad = None


def copy_grads(source: nn.Module, target: nn.Module) -> None:
    for (name, mine), (other_name, theirs) in zip(
        source.named_parameters(), target.named_parameters(), strict=True
    ):
        assert name == other_name
        theirs.grad = None if mine.grad is None else mine.grad.clone()


def lamb_pair(
    model: nn.Module, reference_model: nn.Module, always_adapt: bool
) -> tuple[Lamb, ReferenceLamb]:
    """`build_optimizer`'s LAMB on `model`, and the reference with the same two groups."""
    optimizer = build_optimizer(model, "lamb", lr=LR, weight_decay=0.01)
    reference = ReferenceLamb(build_optimizer(reference_model, "lamb", lr=LR).param_groups)
    for group in (*optimizer.param_groups, *reference.param_groups):
        group["always_adapt"] = always_adapt
    assert type(optimizer) is Lamb
    return optimizer, reference


def assert_same_state(model: nn.Module, optimizer: Lamb, ref_model: nn.Module, ref: Lamb) -> None:
    for (name, param), (_, ref_param) in zip(
        model.named_parameters(), ref_model.named_parameters(), strict=True
    ):
        torch.testing.assert_close(param, ref_param, **CLOSE, msg=lambda m, n=name: f"{n}: {m}")
        state, ref_state = optimizer.state[param], ref.state[ref_param]
        assert state.keys() == ref_state.keys(), name
        for key in state:
            torch.testing.assert_close(state[key], ref_state[key], **CLOSE)


@pytest.mark.parametrize("always_adapt", [True, False])
def test_matches_per_tensor_reference_on_tiny_bert(always_adapt: bool) -> None:
    model = tiny_bert()
    reference_model = copy.deepcopy(model)
    optimizer, reference = lamb_pair(model, reference_model, always_adapt)
    assert [len(group["params"]) for group in optimizer.param_groups] == [
        len(group["params"]) for group in reference.param_groups
    ]
    assert {group["weight_decay"] for group in optimizer.param_groups} == {0.01, 0.0}
    parameters = dict(model.named_parameters())
    start = {name: param.detach().clone() for name, param in parameters.items()}
    zero_init = [name for name, value in start.items() if not value.any()]
    assert "pooler.bias" in zero_init and len(zero_init) >= 10, zero_init

    for step in range(6):
        backward(model, step)
        copy_grads(model, reference_model)
        optimizer.step()
        reference.step()
        assert_same_state(model, optimizer, reference_model, reference)

    for name in NEVER_GRAD:
        assert torch.equal(parameters[name], start[name]), name
        assert optimizer.state[parameters[name]] == {}, name
    # Steps 1 and 4 had no gradient for it: it stepped 4 times, the others 6.
    assert optimizer.state[parameters[SOMETIMES_GRAD]]["step"] == torch.tensor(4.0)
    assert optimizer.state[parameters["pooler.weight"]]["step"] == torch.tensor(6.0)
    # The zero-initialised tensors moved (trust ratio 1, not 0/0).
    moved = [name for name in zero_init if name not in NEVER_GRAD]
    assert all(parameters[name].any() for name in moved), moved


def _save_load(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("saved_by", ["reference", "multi_tensor"])
def test_checkpoints_load_and_resume_across_implementations(saved_by: str) -> None:
    model = tiny_bert()
    reference_model = copy.deepcopy(model)
    optimizer, reference = lamb_pair(model, reference_model, always_adapt=True)
    for step in range(3):
        backward(model, step)
        copy_grads(model, reference_model)
        optimizer.step()
        reference.step()

    # The same layout: state keys, a CPU float32 step, the same group keys.
    state, ref_state = optimizer.state_dict(), reference.state_dict()
    assert state["state"].keys() == ref_state["state"].keys()
    for index, entry in state["state"].items():
        assert entry.keys() == ref_state["state"][index].keys() == STATE_KEYS
        assert entry["step"].device.type == "cpu" and entry["step"].dtype == torch.float32
        assert entry["step"].dim() == 0
    assert [group.keys() for group in state["param_groups"]] == [
        group.keys() for group in ref_state["param_groups"]
    ]

    # Save with one implementation, resume with the other, and continue both with the
    # implementation that saved.
    saver, saver_model = (
        (reference, reference_model) if saved_by == "reference" else (optimizer, model)
    )
    loaded = _save_load(saver.state_dict())
    resumed_model = copy.deepcopy(saver_model)
    resumed_class = Lamb if saved_by == "reference" else ReferenceLamb
    resumed = resumed_class(build_optimizer(resumed_model, "lamb", lr=LR).param_groups)
    resumed.load_state_dict(loaded)
    assert type(resumed) is resumed_class

    for step in range(3, 6):
        backward(saver_model, step)
        copy_grads(saver_model, resumed_model)
        saver.step()
        resumed.step()
        assert_same_state(resumed_model, resumed, saver_model, saver)
    pooler_weight = dict(resumed_model.named_parameters())["pooler.weight"]
    assert resumed.state[pooler_weight]["step"] == torch.tensor(6.0)


def test_aten_calls_per_step_on_bert_base() -> None:
    """BERT-base's tensors (its 12 layers and every parameter of them), at a narrow width:
    the aten calls of a step count tensors and groups, not their sizes."""
    begin = time.perf_counter()
    narrow = {"hidden_size": 24, "intermediate_size": 96, "max_position_embeddings": 32}
    model = BertForPreTraining(config_for("base", 64, **narrow))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=generator).mul_(1e-3)
    tensors = len(list(model.parameters()))
    counts = {}
    for name, optimizer_class in (("multi_tensor", Lamb), ("reference", ReferenceLamb)):
        optimizer = optimizer_class(build_optimizer(model, "lamb", lr=1e-3).param_groups)
        optimizer.step()  # state initialisation
        with AtenCalls() as calls:
            optimizer.step()
        counts[name] = calls
        del optimizer
    seconds = time.perf_counter() - begin
    summary = (
        f"{tensors} tensors: reference {counts['reference'].total} aten calls per step, "
        f"multi-tensor {counts['multi_tensor'].total} ({seconds:.1f} s)"
    )
    print(summary)
    assert counts["multi_tensor"].total <= 400, (summary, counts["multi_tensor"].calls)
    assert counts["reference"].total > 3000, summary
    # No per-tensor reads: one step read per group (its `stack`), no `item()`.
    assert counts["multi_tensor"].calls["aten._local_scalar_dense"] == 0, summary
    assert counts["reference"].calls["aten._local_scalar_dense"] == tensors, summary


def _linear(dtype: torch.dtype, seed: int) -> nn.Linear:
    torch.manual_seed(seed)
    layer = nn.Linear(6, 4).to(dtype)
    with torch.no_grad():
        layer.bias.zero_()  # trust ratio 1 on the first step
    return layer


@pytest.mark.parametrize(
    ("dtype", "norm_dtype"),
    [(torch.float64, torch.float64), (torch.bfloat16, torch.float32)],
)
def test_norms_reduce_in_at_least_float32(dtype: torch.dtype, norm_dtype: torch.dtype) -> None:
    # A float32 layer in the same group: the step buckets the group by dtype.
    model = nn.Sequential(_linear(dtype, 0), _linear(torch.float32, 1))
    reference_model = copy.deepcopy(model)
    optimizer, reference = lamb_pair(model, reference_model, always_adapt=True)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=generator).to(param.dtype)
        copy_grads(model, reference_model)
        with AtenCalls() as calls:
            optimizer.step()
        reference.step()
        assert_same_state(model, optimizer, reference_model, reference)
        # One norm per tensor for the weights and one for the updates, per dtype bucket.
        dtypes = Counter(norm.dtype for norm in calls.norms)
        assert dtypes == Counter({norm_dtype: 4}) + Counter({torch.float32: 4}), dtypes
    assert model[0].weight.dtype == optimizer.state[model[0].weight]["exp_avg"].dtype == dtype


def test_a_fused_qkv_tensor_steps_as_separate_q_k_and_v_tensors_do() -> None:
    """LAMB over bertkit's fused projection (rows Q, K, V) equals LAMB over three separate
    tensors, as NVIDIA's and transformers' BERT hold them: a trust ratio per block. One
    trust ratio over the whole fused tensor would differ (the last assertion)."""
    torch.manual_seed(0)
    fused = nn.Linear(4, 12)
    with torch.no_grad():  # blocks of very different scales: their trust ratios differ
        fused.weight[8:] *= 20.0
    separate = nn.ModuleDict({part: nn.Linear(4, 4) for part in "qkv"})
    with torch.no_grad():
        for index, part in enumerate("qkv"):
            separate[part].weight.copy_(fused.weight[4 * index : 4 * index + 4])
            separate[part].bias.copy_(fused.bias[4 * index : 4 * index + 4])

    def groups(named: list[tuple[str, nn.Parameter]]) -> list[dict[str, Any]]:
        return [{"params": [p for _, p in named], "param_names": [n for n, _ in named]}]

    fused_named = [("layers.0.qkv.weight", fused.weight), ("layers.0.qkv.bias", fused.bias)]
    optimizer = Lamb(groups(fused_named), lr=0.1, weight_decay=0.01)
    reference = Lamb(groups(list(separate.named_parameters())), lr=0.1, weight_decay=0.01)
    whole = Lamb(groups([("w", nn.Parameter(fused.weight.detach().clone()))]), lr=0.1)
    inputs = torch.randn(6, 4)
    for _ in range(3):
        for optim in (optimizer, reference):
            optim.zero_grad()
        fused(inputs).square().sum().backward()
        torch.cat([separate[part](inputs) for part in "qkv"], dim=1).square().sum().backward()
        whole.param_groups[0]["params"][0].grad = fused.weight.grad.clone()
        optimizer.step()
        reference.step()
        whole.step()
    expected = torch.cat([separate[part].weight for part in "qkv"])
    torch.testing.assert_close(fused.weight, expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(
        fused.bias, torch.cat([separate[part].bias for part in "qkv"]), rtol=1e-6, atol=1e-7
    )
    assert not torch.allclose(whole.param_groups[0]["params"][0], expected, rtol=1e-4)
