"""bench.recipes' own arithmetic and command lines, on literal values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import recipes


def test_summary_gives_mean_seed_noise_and_the_difference_from_2018() -> None:
    runs = [
        {"recipe": "mlm+nsp/static", "seed": 1, "mlm_accuracy": 0.10},
        {"recipe": "mlm+nsp/static", "seed": 2, "mlm_accuracy": 0.12},
        {"recipe": "mlm/dynamic", "seed": 1, "mlm_accuracy": 0.13},
        {"recipe": "mlm/dynamic", "seed": 2, "mlm_accuracy": 0.15},
    ]
    rows = recipes.summarise(runs, ["mlm+nsp/static", "mlm/dynamic"])
    assert [row["recipe"] for row in rows] == ["mlm+nsp/static", "mlm/dynamic"]
    assert rows[0]["mean"] == pytest.approx(0.11)
    assert rows[0]["stdev"] == pytest.approx(0.0141421356)
    assert rows[1]["vs_2018"] == pytest.approx(0.03)
    assert rows[1]["vs_2018_in_noise"] == pytest.approx(0.03 / 0.0141421356)


def test_each_recipe_is_the_same_run_but_for_objective_and_masking(tmp_path: Path) -> None:
    a = recipes.train_command("S", tmp_path / "a", "mlm+nsp/static", 7, 600)
    b = recipes.train_command("S", tmp_path / "a", "mlm/dynamic", 7, 600)
    differ = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    assert differ == [("mlm+nsp", "mlm"), ("static", "dynamic")]
    assert a[a.index("--seed") + 1] == "7" and a[a.index("--max-steps") + 1] == "600"


def test_the_last_evaluation_is_read(tmp_path: Path) -> None:
    lines = [
        {"kind": "train", "step": 1},
        {"kind": "eval", "step": 5, "mlm_accuracy": 0.2},
        {"kind": "eval", "step": 10, "mlm_accuracy": 0.3},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert recipes.last_eval(tmp_path)["mlm_accuracy"] == 0.3
