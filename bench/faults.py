"""The fault campaign: kill -9 every stage and the trainer at random points, break object
storage under reads and writes, and check that every rerun's output is byte-identical to an
undisturbed run's.

    python -m bench.faults --kills 5 --seed 1        # the whole campaign, then its table
    python -m bench.faults --kills 2 --only examples,train --s3-runs 0

Everything runs on the embedded real sample (data/: the enwiki dump and four books) through
the real commands, each in a child process of its own session (`python -m bertkit
STAGE …` = `bertkit STAGE …`), so a kill takes its Beam or loader workers with it.

- **kill -9, stages** (wikipedia, books, vocab, examples, and examples on two Beam worker
  processes): an undisturbed reference run writes OUT/<row>/out; then the same command in
  the same directory is SIGKILLed right before each of the renames that publish its files
  (tests.support.killpoint; in-process runs only), and --kills times (its whole process group)
  after a seeded random delay between 30 % and 100 % of the reference's time. Every file
  the killed run left under a name the reference has must already hold the reference's
  bytes (files are written under a temporary name and renamed, or not at all).
  Then the same command again: every file of the reference, the same names and no others,
  compared by sha256. Every run passes --overwrite, which a rerun needs when the killed run
  left files; the same flags everywhere, since vocab.json records them (`overwrite`
  included) and manifests record input paths: nothing is normalised. Every other killed
  run starts in an empty directory, the others over the complete output of the run before.
- **kill -9, training**: a tiny BERT on the sample's shards (dropout on, one loader worker,
  every checkpoint kept), SIGKILLed right before each rename (a checkpoint, then `latest`)
  and --kills times at a random point, then rerun with --resume when `latest` is there
  (--overwrite when not). The checkpoint the killed run left (the
  one `latest` names) must equal the reference's at that step; after the rerun every
  checkpoint must equal the reference's (model, optimizer, schedule, data position, RNG:
  every tensor and value; in `train_config` only the `resume`/`overwrite` flags differ and
  are left out), `latest` the same, and metrics.jsonl (last line per kind and step, as its
  docstring says readers keep) the same values but the throughput figures. A killed
  checkpoint write's `checkpoints/.tmp-*` left after the rerun would be noted (below the
  table); --resume deletes them, so none should be.
- **object storage** (moto's S3 server on loopback behind tests.support.faultproxy): `bertkit
  examples` and `bertkit wikipedia` read from and write to s3:// while --rate of the
  requests meet a 503, a 500, a connection reset mid-request, a write done but its answer
  dropped, or an answer cut mid-body; the objects must be those of a fault-free run at the
  same place. Then an outage: every PUT from a random one (the 3rd to the 12th) on fails
  until the stage gives up, and the rerun (--overwrite, faults at --rate) must again give
  those objects. Last, the trainer streams the shards from s3:// through the faults (at
  least half its requests broken, since it makes few) and must train exactly as from the
  local directory (`train_config.shards` and `data.manifest`, the URL, left out).

The table: per row the faults injected (kills delivered to a running command, or requests
broken by the proxy), the runs recovered (reruns that exited 0 with output identical to the
reference), the files and bytes compared (reruns and what killed runs left; for training the
checkpoints' tensor bytes and metrics lines) and the mismatches, each printed. Kills that
landed after the command had already finished are counted apart. Results also go to
WORKDIR/faults/results.json.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import random
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.measure import (
    DEFAULT_WORKDIR,
    argument_parser,
    print_table,
    write_results,
)
from tests.support.faults_runs import (
    Inputs,
    Tally,
    kill_stage,
    prepare_inputs,
    reference_run,
    snapshot,
    stage_argv,
)
from tests.support.faults_s3 import (
    s3_outage_campaign,
    s3_server,
    s3_stage_campaign,
    s3_training_campaign,
    upload_inputs,
)
from tests.support.faults_training import training_campaign

# --- Stages under kill -9 --------------------------------------------------------------------


def stage_campaign(
    stage: str, inputs: Inputs, workdir: Path, kills: int, rng: random.Random
) -> Tally:
    """Kills right before each rename of the stage (in-process runs only), then `kills` at
    random points of its run."""
    tally = Tally(f"{stage} (kill -9)")
    output = workdir / stage / "out"
    shutil.rmtree(output, ignore_errors=True)
    argv = stage_argv(stage, inputs, str(output))
    finished, renames = reference_run(argv)
    reference = snapshot(output)
    for point in range(1, renames + 1):
        kill_stage(tally, argv, output, reference, fresh=point % 2 == 1, before_rename=point)
    print(
        f"  {tally.row}: killed before each of its {renames} renames; "
        f"{len(tally.mismatches)} mismatches so far"
    )
    for trial in range(kills):
        delay = rng.uniform(0.3, 1.0) * finished.seconds
        kill_stage(tally, argv, output, reference, after_s=delay, fresh=trial % 2 == 0)
        print(
            f"  {tally.row}: kill {trial + 1}/{kills} at {delay:.2f} s of "
            f"{finished.seconds:.2f}; {len(tally.mismatches)} mismatches so far"
        )
    return tally


# --- The command ---------------------------------------------------------------------------------

STAGES = ("wikipedia", "books", "vocab", "examples", "examples-2w")
ROWS = (*STAGES, "train", "s3")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.faults", __doc__)
    parser.add_argument("--kills", type=int, default=5, help="kills per stage and for training")
    parser.add_argument(
        "--s3-runs", type=int, default=2, help="faulty runs per object-storage row (0: none)"
    )
    parser.add_argument(
        "--rate", type=float, default=0.2, help="share of S3 requests broken by the proxy"
    )
    parser.add_argument("--seed", type=int, default=1, help="seeds kill points and faults")
    parser.add_argument(
        "--only", default=",".join(ROWS), help=f"comma-separated rows, of {', '.join(ROWS)}"
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    chosen = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = sorted(set(chosen) - set(ROWS))
    if unknown:
        parser.error(f"--only: unknown rows {unknown}; choose from {', '.join(ROWS)}")
    workdir = args.workdir / "faults"
    rng = random.Random(args.seed)
    start = time.monotonic()
    print(f"inputs: fault-free runs of every stage into {workdir / 'inputs'}")
    inputs = prepare_inputs(workdir / "inputs")
    tallies: list[Tally] = []
    for stage in STAGES:
        if stage in chosen:
            tallies.append(stage_campaign(stage, inputs, workdir, args.kills, rng))
    if "train" in chosen:
        tallies.append(training_campaign(inputs, workdir, args.kills, rng))
    if "s3" in chosen and args.s3_runs > 0:
        with s3_server() as s3:
            remote = upload_inputs(s3, inputs)
            for stage in ("examples", "wikipedia"):
                tallies.append(s3_stage_campaign(stage, s3, remote, args.s3_runs, args.rate, rng))
            tallies.append(s3_outage_campaign("examples", s3, remote, args.s3_runs, args.rate, rng))
            tallies.append(
                s3_training_campaign(s3, inputs, remote, workdir, args.s3_runs, args.rate, rng)
            )
    report(tallies, args, time.monotonic() - start, workdir)
    return 1 if any(t.mismatches for t in tallies) else 0


def report(tallies: list[Tally], args: Any, seconds: float, workdir: Path) -> None:
    print(
        f"\nfault campaign: --kills {args.kills} --s3-runs {args.s3_runs} --rate {args.rate} "
        f"--seed {args.seed}, {seconds:.0f} s\n"
    )
    headers = [
        "row",
        "faults injected",
        "kills after the end",
        "runs",
        "runs recovered",
        "files compared",
        "bytes compared",
        "mismatches",
    ]
    rows = [
        [
            t.row,
            str(t.faults),
            str(t.finished_first),
            str(t.runs),
            str(t.recovered),
            f"{t.files:,}",
            f"{t.bytes:,}",
            str(len(t.mismatches)),
        ]
        for t in tallies
    ]
    total = [
        sum(getattr(t, name) for t in tallies)
        for name in ("faults", "finished_first", "runs", "recovered", "files", "bytes")
    ]
    rows.append(
        [
            "total",
            *map(str, total[:4]),
            f"{total[4]:,}",
            f"{total[5]:,}",
            str(sum(len(t.mismatches) for t in tallies)),
        ]
    )
    print_table(headers, rows)
    for tally in tallies:
        for line in tally.mismatches:
            print(f"MISMATCH {line}")
        for line in tally.notes:
            print(f"note: {line}")
    write_results(
        workdir / "results.json",
        {
            "args": {k: str(v) for k, v in vars(args).items()},
            "seconds": seconds,
            "rows": [asdict(t) for t in tallies],
        },
    )


if __name__ == "__main__":
    sys.exit(main())
