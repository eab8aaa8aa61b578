"""How exactly a mix keeps its proportions: each source's share of the first N samples and the
range of one global batch's count, for `bertkit train --mix`.

    python -m bench.mix_shares [--mix 0.7,0.3] [--samples 20000] [--global-batch 32,256]

The counts come from the trainer's own order (trainer/mix.py's MixOrder), which a run draws
from; nothing is read, so the figures hold for any shards of at least these sizes. The goal
(issue 38): over 20,000 samples at 0.7/0.3, each source's share within ±1 point of its weight,
and every global batch's count the floor or the ceiling of weight × batch.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from trainer.mix import MixedSource, MixOrder


@dataclass(frozen=True)
class _Sized:
    """A source as the order sees it: its sample count (the shards are never read here)."""

    samples: int


def shares(weights: list[float], samples: int, global_batch: int, seed: int) -> list[str]:
    sources = tuple(_Sized(1_000_000) for _ in weights)
    names = tuple(f"source{k}" for k in range(len(weights)))
    mix = MixedSource(sources, names, tuple(weights))  # type: ignore[arg-type]
    order = MixOrder.of(mix, global_batch, seed)
    batches = samples // global_batch
    counts = order.counts(0, batches)
    drawn = counts.sum(axis=0)
    rows = []
    for k, weight in enumerate(weights):
        low, high = math.floor(weight * global_batch), math.ceil(weight * global_batch)
        within = bool(((counts[:, k] == low) | (counts[:, k] == high)).all())
        share = drawn[k] / drawn.sum()
        rows.append(
            f"| {global_batch} | {names[k]} ({weight}) | {drawn[k]:,} | {share:.5f} | "
            f"{(share - weight) * 100:+.3f} | {counts[:, k].min()}–{counts[:, k].max()} "
            f"({'floor or ceiling' if within else 'OUTSIDE floor/ceiling'}) |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mix_shares", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--mix", default="0.7,0.3")
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--global-batch", default="32,256")
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    weights = [float(w) for w in args.mix.split(",")]
    print(f"the first {args.samples:,} samples (whole global batches), seed {args.seed}")
    print("| global batch | source | drawn | share | off by (points) | a batch's count |")
    print("|---:|---|---:|---:|---:|---|")
    for size in (int(g) for g in args.global_batch.split(",")):
        print("\n".join(shares(weights, args.samples, size, args.seed)))


if __name__ == "__main__":
    main()
