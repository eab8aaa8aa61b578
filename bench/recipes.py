"""Today's recipes against 2018's at equal compute: held-out MLM accuracy over several seeds.

    python -m bench.recipes                                   # out/demo/shards, 3 seeds
    python -m bench.recipes --shards DIR --steps 600 --seeds 1,2,3,4,5
    python -m bench.recipes --recipes mlm+nsp/static,mlm/dynamic --json bench/.work/recipes.json

Every recipe trains the same tiny BERT (`--model tiny` with the demo's flags, from
bertkit/demo.py: batch 32, lr 1e-3, no dropout, no loader worker) for the same number of
steps on the same sentence-pair shards, so each sees the same sequences and spends the same
compute; only the objective and the masking differ:

    mlm+nsp/static    BERT 2018: the shards' stored masks and the NSP head (the default)
    mlm+nsp/dynamic   masks drawn afresh each epoch (the stored ones undone), NSP kept
    mlm/static        the stored masks, no NSP head, loss or label
    mlm/dynamic       RoBERTa's choice: fresh masks, no NSP

Each run ends with an evaluation on the whole held-out split with its *stored* masks, the same
sequences and the same masked positions for every recipe (`bertkit train` evaluates the
held-out shards with their stored masks whatever --masking says). The table gives the mean
and the sample standard deviation over the seeds (the seed noise), each seed's accuracy, and
the difference from 2018's mean in units of that noise. Runs are interleaved (seed by seed,
every recipe in turn), so a change of load on the machine hits them all alike. Each run is
`python -m bertkit train` in a child process; its run directory is under --workdir.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.measure import (
    DEFAULT_WORKDIR,
    DEMO_OUTPUT,
    argument_parser,
    machine_description,
    print_table,
    repo_python,
    write_results,
)
from bertkit.demo import train_args

RECIPES = ("mlm+nsp/static", "mlm+nsp/dynamic", "mlm/static", "mlm/dynamic")
BASELINE = RECIPES[0]


def train_command(shards: str, run_dir: Path, recipe: str, seed: int, steps: int) -> list[str]:
    """`bertkit train` for one recipe and seed: the demo's own flags (bertkit/demo.py), then
    the recipe, the seed, one evaluation at the end and one checkpoint kept."""
    objective, masking = recipe.split("/")
    return [
        repo_python(),
        "-m",
        "bertkit",
        "train",
        *train_args(Path(shards), run_dir, steps),
        "--seed",
        str(seed),
        "--objective",
        objective,
        "--masking",
        masking,
        "--eval-every",
        "0",
        "--log-every",
        str(steps),
        "--keep-checkpoints",
        "1",
        "--no-tensorboard",
    ]


def last_eval(run_dir: Path) -> dict[str, Any]:
    """The run's last held-out evaluation, from its metrics.jsonl."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    evals = [record for record in map(json.loads, lines) if record["kind"] == "eval"]
    if not evals:
        raise RuntimeError(f"{run_dir}: no evaluation in metrics.jsonl")
    return evals[-1]


def run_one(shards: str, workdir: Path, recipe: str, seed: int, steps: int) -> dict[str, Any]:
    run_dir = workdir / "out" / "recipes" / f"{recipe.replace('/', '-')}-seed{seed}"
    if run_dir.exists():
        shutil.rmtree(run_dir)  # this benchmark's own run directory from an earlier run
    log = workdir / "logs" / "recipes" / f"{run_dir.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        code = subprocess.run(
            train_command(shards, run_dir, recipe, seed, steps), stdout=out, stderr=out
        ).returncode
    if code != 0:
        raise RuntimeError(f"{recipe} seed {seed}: bertkit train exited {code}; see {log}")
    result = last_eval(run_dir)
    return {"recipe": recipe, "seed": seed, "mlm_accuracy": result["mlm_accuracy"]}


def summarise(runs: list[dict[str, Any]], recipes: list[str]) -> list[dict[str, Any]]:
    """Per recipe: the mean accuracy, its seed standard deviation, and the difference from
    2018's mean in units of the pooled standard deviation."""
    by_recipe = {
        recipe: [r["mlm_accuracy"] for r in runs if r["recipe"] == recipe] for recipe in recipes
    }
    stdevs = [statistics.stdev(v) for v in by_recipe.values() if len(v) > 1]
    noise = statistics.mean(stdevs) if stdevs else 0.0
    base = statistics.mean(by_recipe[BASELINE]) if by_recipe.get(BASELINE) else None
    rows = []
    for recipe, values in by_recipe.items():
        mean = statistics.mean(values)
        rows.append(
            {
                "recipe": recipe,
                "mean": mean,
                "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
                "seeds": values,
                "vs_2018": None if base is None else mean - base,
                "vs_2018_in_noise": None if base is None or not noise else (mean - base) / noise,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser("bench.recipes", __doc__)
    parser.add_argument("--shards", default=str(DEMO_OUTPUT / "shards"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    recipes = [r for r in args.recipes.split(",") if r.strip()]
    unknown = sorted(set(recipes) - set(RECIPES))
    if unknown or not seeds:
        parser.error(f"--recipes from {', '.join(RECIPES)} and at least one seed ({unknown})")
    if not Path(args.shards).exists():
        parser.error(f"{args.shards} does not exist: run `bertkit demo` first, or give --shards")
    runs = []
    for seed in seeds:
        for recipe in recipes:
            runs.append(run_one(args.shards, args.workdir, recipe, seed, args.steps))
            print(f"  {recipe:16} seed {seed}: MLM accuracy {runs[-1]['mlm_accuracy']:.4f}")
    rows = summarise(runs, recipes)
    print(f"\n{args.steps} steps of 32 sequences, tiny model, seeds {seeds}; held-out MLM accuracy")
    print_table(
        ["recipe", "mean", "seed stdev", "vs 2018", "in noise", "per seed"],
        [
            [
                row["recipe"],
                f"{row['mean']:.4f}",
                f"{row['stdev']:.4f}",
                "" if row["vs_2018"] is None else f"{row['vs_2018']:+.4f}",
                "" if row["vs_2018_in_noise"] is None else f"{row['vs_2018_in_noise']:+.1f}",
                " ".join(f"{v:.4f}" for v in row["seeds"]),
            ]
            for row in rows
        ],
    )
    if args.json:
        write_results(
            args.json,
            {"steps": args.steps, "runs": runs, "rows": rows, "machine": machine_description()},
        )


if __name__ == "__main__":
    sys.exit(main())
