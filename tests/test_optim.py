"""The trainer's optimizers and schedule (trainer/optim.py) on literal values."""

import io
import math
import warnings

import pytest
import torch
from torch import nn

from trainer.optim import Lamb, build_optimizer, warmup_decay_schedule


def _factors(warmup: int, total: int, power: float, steps: list[int]) -> dict[int, float]:
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    schedule = warmup_decay_schedule(optimizer, warmup, total, power)
    return {step: schedule.lr_lambdas[0](step) for step in steps}


def test_schedule_linear_warmup_then_linear_decay():
    factors = _factors(10, 110, 1.0, [0, 5, 10, 60, 110, 200])
    assert factors == {0: 0.0, 5: 0.5, 10: 1.0, 60: 0.5, 110: 0.0, 200: 0.0}


def test_schedule_power_half_decay():
    factors = _factors(10, 110, 0.5, [10, 60, 85, 110, 111])
    assert factors == {10: 1.0, 60: math.sqrt(0.5), 85: math.sqrt(0.25), 110: 0.0, 111: 0.0}


def test_schedule_drives_optimizer_lr():
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=2.0)
    schedule = warmup_decay_schedule(optimizer, warmup_steps=4, total_steps=8)
    lrs = []
    for _ in range(9):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert lrs == [0.0, 0.5, 1.0, 1.5, 2.0, 1.5, 1.0, 0.5, 0.0]


def test_schedule_without_warmup_starts_at_full_lr_and_state_round_trips():
    assert _factors(0, 4, 1.0, [0, 2, 4]) == {0: 1.0, 2: 0.5, 4: 0.0}
    param = nn.Parameter(torch.zeros(1))
    schedule = warmup_decay_schedule(torch.optim.SGD([param], lr=1.0), 10, 110, 0.5)
    buffer = io.BytesIO()
    torch.save(schedule.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["lr_lambdas"] == [{"warmup_steps": 10, "total_steps": 110, "power": 0.5}]


def test_a_schedule_built_at_a_step_goes_on_as_a_fresh_one_from_there():
    """A resume's schedule: built at step 4 with a peak of 2.0 on an optimizer whose groups
    hold the old run's lr (0.0, the end of its schedule), it gives steps 4-8 the lrs of a
    fresh 8-step schedule, and warns of nothing."""
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=2.0)
    optimizer.param_groups[0]["lr"] = 0.0
    optimizer.param_groups[0]["initial_lr"] = 1.0  # a loaded state's peak, replaced
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schedule = warmup_decay_schedule(optimizer, 2, 8, step=4, peak_lr=2.0)
        lrs = []
        for _ in range(5):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
    assert lrs == [2.0 * (1 - 2 / 6), 2.0 * (1 - 3 / 6), 2.0 * (1 - 4 / 6), 2.0 * (1 - 5 / 6), 0.0]
    assert schedule.get_last_lr() == [0.0] and schedule.last_epoch == 9
    # Its whole state is a fresh schedule's after the same 9 steps (a checkpoint's bytes).
    fresh_optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=2.0)
    fresh = warmup_decay_schedule(fresh_optimizer, 2, 8)
    for _ in range(9):
        fresh_optimizer.step()
        fresh.step()
    assert schedule.state_dict() == fresh.state_dict()


def test_schedule_rejects_warmup_longer_than_training():
    param = nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match=r"warmup_steps \(20\) exceeds total_steps \(10\)"):
        warmup_decay_schedule(torch.optim.SGD([param], lr=1.0), 20, 10)


class _TinyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.dense = nn.Linear(4, 4)
        self.LayerNorm = nn.LayerNorm(4)
        self.decoder = nn.Linear(4, 10)
        self.decoder.weight = self.embed.weight  # tied, as BERT's MLM decoder


@pytest.mark.parametrize("name", ["adamw", "lamb", "LAMB"])
def test_parameter_groups(name):
    model = _TinyModel()
    optimizer = build_optimizer(model, name, lr=1e-3, weight_decay=0.01)
    decay, no_decay = optimizer.param_groups
    assert decay["param_names"] == ["embed.weight", "dense.weight"]
    assert no_decay["param_names"] == [
        "dense.bias",
        "LayerNorm.weight",
        "LayerNorm.bias",
        "decoder.bias",
    ]
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.01, 0.0)
    # The tied weight is the embedding's tensor, once.
    assert decay["params"][0] is model.embed.weight is model.decoder.weight
    assert len(decay["params"]) == 2 and len(no_decay["params"]) == 4
    assert all(group["lr"] == 1e-3 and group["eps"] == 1e-6 for group in optimizer.param_groups)


def test_build_optimizer_types_and_unknown_name():
    model = _TinyModel()
    assert type(build_optimizer(model, "adamw", lr=1e-3)) is torch.optim.AdamW
    assert type(build_optimizer(model, "lamb", lr=1e-3)) is Lamb
    # fused AdamW has a CPU kernel too, so the flag is checked here without a GPU.
    assert build_optimizer(model, "adamw", lr=1e-3, fused=True).param_groups[0]["fused"] is True
    assert not build_optimizer(model, "adamw", lr=1e-3).param_groups[0]["fused"]
    with pytest.raises(ValueError, match=r"unknown optimizer 'sgd'; choose one of: adamw, lamb"):
        build_optimizer(model, "sgd", lr=1e-3)


def test_lamb_one_step_by_hand():
    param = nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    param.grad = torch.tensor([0.3, -0.4], dtype=torch.float64)
    Lamb([param], lr=0.1, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01).step()

    # Step 1: m = 0.1 * g, v = 0.001 * g**2; bias correction divides by 0.1 and 0.001, so
    # m_hat = g and v_hat = g**2, and the Adam direction is g / (|g| + eps).
    adam = [0.3 / (0.3 + 1e-6), -0.4 / (0.4 + 1e-6)]
    update = [adam[0] + 0.01 * 3.0, adam[1] + 0.01 * 4.0]  # ~ [1.03, -0.96]
    weight_norm = math.sqrt(3.0**2 + 4.0**2)  # 5
    update_norm = math.sqrt(update[0] ** 2 + update[1] ** 2)
    trust = weight_norm / update_norm  # ~ 3.5
    expected = [3.0 - 0.1 * trust * update[0], 4.0 - 0.1 * trust * update[1]]
    torch.testing.assert_close(param.detach(), torch.tensor(expected, dtype=torch.float64))
    assert expected == pytest.approx([2.6342, 4.3409], abs=1e-4)


def test_lamb_trust_ratio_is_one_for_zero_weights():
    param = nn.Parameter(torch.zeros(2, dtype=torch.float64))
    param.grad = torch.tensor([0.5, -2.0], dtype=torch.float64)
    Lamb([param], lr=0.1, eps=1e-6, weight_decay=0.01).step()
    # ||w|| = 0: plain Adam step of lr * g / (|g| + eps), the decay term being 0.
    expected = [-0.1 * 0.5 / (0.5 + 1e-6), 0.1 * 2.0 / (2.0 + 1e-6)]
    torch.testing.assert_close(param.detach(), torch.tensor(expected, dtype=torch.float64))


def test_lamb_always_adapt_false_skips_trust_ratio_without_decay():
    param = nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    param.grad = torch.tensor([1.0, 1.0], dtype=torch.float64)
    Lamb([param], lr=0.1, eps=1e-6, weight_decay=0.0, always_adapt=False).step()
    step = 0.1 * 1.0 / (1.0 + 1e-6)
    torch.testing.assert_close(
        param.detach(), torch.tensor([3.0 - step, 4.0 - step], dtype=torch.float64)
    )


def _train_steps(optimizer: torch.optim.Optimizer, param: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((param - torch.tensor([1.0, -2.0, 0.5])) ** 2).sum()
        loss.backward()
        optimizer.step()


def test_lamb_state_dict_round_trips_through_weights_only_load():
    torch.manual_seed(0)
    start = torch.randn(3)
    reference = nn.Parameter(start.clone())
    reference_optimizer = Lamb([reference], lr=0.05)
    _train_steps(reference_optimizer, reference, 3)

    buffer = io.BytesIO()
    torch.save(reference_optimizer.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    assert saved["state"][0]["step"] == torch.tensor(3.0)

    resumed = nn.Parameter(reference.detach().clone())
    resumed_optimizer = Lamb([resumed], lr=0.05)
    resumed_optimizer.load_state_dict(saved)
    _train_steps(reference_optimizer, reference, 2)
    _train_steps(resumed_optimizer, resumed, 2)
    assert torch.equal(resumed.detach(), reference.detach())
    assert resumed_optimizer.state[resumed]["step"] == torch.tensor(5.0)


def test_lamb_minimises_a_quadratic():
    # LAMB's step is about lr * ||w|| whatever the gradient's size, so at a constant lr it
    # circles the minimum; the decaying schedule lets it settle, as in training.
    param = nn.Parameter(torch.tensor([4.0, -3.0, 2.0]))
    optimizer = Lamb([param], lr=0.05, weight_decay=0.0)
    schedule = warmup_decay_schedule(optimizer, warmup_steps=10, total_steps=300)
    for _ in range(300):
        _train_steps(optimizer, param, 1)
        schedule.step()
    torch.testing.assert_close(param.detach(), torch.tensor([1.0, -2.0, 0.5]), atol=1e-2, rtol=0)


def test_lamb_closure_and_sparse_gradients():
    param = nn.Parameter(torch.tensor([1.0, 2.0]))

    def closure() -> torch.Tensor:
        loss = (param**2).sum()
        loss.backward()
        return loss

    assert Lamb([param], lr=0.1).step(closure).item() == 5.0

    embedding = nn.Embedding(4, 2, sparse=True)
    embedding(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse=False"):
        Lamb(embedding.parameters(), lr=0.1).step()
