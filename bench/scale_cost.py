"""bench.scale's cost model: the measured per-stage figures projected onto a full English
Wikipedia + BookCorpus-sized run on Dataflow (vCPU-hours, list-price cost, wall time at a
given number of vCPUs, every serial step included). Pure arithmetic on the figures
bench.scale measured; bench/tests/test_scale.py checks it on literal numbers. Not a command.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.measure import (
    MB,
    print_table,
)

MIB = 1 << 20
STAGES = ("wikipedia", "books", "vocab", "examples")  # the chain, in its order

# The full run to project onto: enwiki's multistream dump and a BookCorpus-sized
# book collection.
FULL_WIKITEXT_MB = 100_000.0  # ~100 GB of XML wikitext (a ~22 GB multistream bz2)
FULL_BOOKS_MB = 5_000.0  # ~5 GB of book text, ~11k books
FULL_VOCAB_SAMPLE_MIB = 1024.0  # `bertkit vocab`'s default --sample-mb
# Distinct words in a 1 GiB sample: Heaps' law fitted on the real sample (bench.vocab_learn).
FULL_VOCAB_DISTINCT_WORDS = 1.15e6
# Where the full run's vocabulary is made: Beam's local runner with a worker per vCPU on one
# 16-vCPU machine (the one that launches the chain), which spares a Dataflow job's start-up.
VOCAB_MACHINE_VCPUS = 16
# bench.vocab_learn's figure (LearnPieces: sum the spilled counts, learn 30,522 tokens) when
# its results are not at hand: seconds per million distinct words, measured on this machine.
LEARN_S_PER_MILLION_WORDS = 50.0
# The largest unit of work each Beam stage hands one worker, in MB of the stage's input, from
# the stages' defaults: a wall-time floor however many vCPUs there are. wikipedia: a split of
# --split-mb 64 MiB of bz2, at enwiki's ~100/22 wikitext per bz2 byte; books: --unit-mb 64
# MiB of book files; examples: --work-partition-mb 64 MiB (of token ids, taken as that much
# text, all --dupe-factor passes: an upper bound).
UNIT_MB = {
    "wikipedia": 64 * (1 << 20) / 1e6 * FULL_WIKITEXT_MB / 22_000,
    "books": 64 * (1 << 20) / 1e6,
    "examples": 64 * (1 << 20) / 1e6,
}
JOB_STARTUP_S = 240.0  # Dataflow job start-up, workers up: an assumption (3–5 min per job)
STARTUP_BILLED_S = 120.0  # of which the workers are billed (booting, pulling the image): assumed

# Dataflow list prices, batch, us-central1, USD (cloud.google.com/dataflow/pricing as last
# known: unchanged from 2021 to 2024). NOT verified online from this machine (no network).
DATAFLOW_PRICES = {
    "vcpu_hour": 0.056,
    "memory_gb_hour": 0.003557,
    "pd_gb_hour": 0.000054,  # standard persistent disk
}
# Cloud Storage operations, Standard class, USD per 1,000 (as last known, 2024; NOT verified
# online): a spill file is written once (class A) and read once (class B); deletes are free.
GCS_PRICES = {"class_a_per_1000": 0.005, "class_b_per_1000": 0.0004}
MEMORY_GB_PER_VCPU = 3.75  # n1-standard machines, Dataflow's default batch family
DISK_GB_PER_WORKER = 25.0  # boot disk with Dataflow Shuffle (the batch default)
VCPUS_PER_WORKER = 4  # n1-standard-4 workers


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of y = a + b·x through the smallest and largest x, with b ≥ 0 and a ≥ 0.

    Serial seconds have a fixed part (imports, planning, the manifest) and maybe a part that
    grows with input; two sizes tell them apart. One size: all of it is taken as fixed.
    """
    points = sorted(points)
    (x0, y0), (x1, y1) = points[0], points[-1]
    if x1 == x0:
        return max(y0, 0.0), 0.0
    slope = max((y1 - y0) / (x1 - x0), 0.0)
    return max(y1 - slope * x1, 0.0), slope


@dataclass(frozen=True)
class StageFigures:
    """One stage's per-core figures, measured, and how much input the full run gives it."""

    stage: str
    cpu_s_per_mb: float  # CPU-seconds per MB of the stage's input (all processes), marginal
    full_input_mb: float  # the full run's input to the stage
    serial_fixed_s: float  # serial seconds: fixed part …
    serial_s_per_mb: float  # … and the part per MB of input
    local_vcpus: int = 0  # > 0: a local Beam run on one machine of this many vCPUs (vocab)
    cpu_fixed_s: float = 0.0  # CPU-seconds that do not grow with input (imports, start-up)
    unit_cpu_s: float = 0.0  # CPU-seconds of the largest unit of work one worker gets
    read_cpu_s_per_mb: float = 0.0  # vocab: CPU-seconds per MB of documents read to sample …
    full_read_mb: float = 0.0  # … and the documents the full run reads


@dataclass(frozen=True)
class StageProjection:
    stage: str
    vcpu_hours: float
    cost_usd: float
    serial_s: float
    wall_s: dict[int, float]  # vCPUs → wall seconds


def project_stage(
    figures: StageFigures, vcpus: list[int], prices: dict[str, float] = DATAFLOW_PRICES
) -> StageProjection:
    """vCPU-hours, cost and wall time of one stage of the full run.

    A Dataflow stage: its CPU-seconds spread over the vCPUs (but never faster than its
    largest unit of work, `unit_cpu_s`), plus its serial seconds (done by one core while the
    others wait) and the job's start-up. The vCPU-hours bill every
    vCPU for the whole job after start-up (serial time included: the workers are held), and
    memory (MEMORY_GB_PER_VCPU) and boot disks along with them. A local stage (vocab) runs
    on one machine of `local_vcpus`, no job start-up, priced at the same vCPU and memory
    rates (a stand-in for the machine's own price).
    """
    serial_s = figures.serial_fixed_s + figures.serial_s_per_mb * figures.full_input_mb
    cpu_s = (
        figures.cpu_fixed_s
        + figures.cpu_s_per_mb * figures.full_input_mb
        + figures.read_cpu_s_per_mb * figures.full_read_mb
    )
    if figures.local_vcpus:
        run_s = serial_s + max(cpu_s - serial_s, 0.0) / figures.local_vcpus
        hours = figures.local_vcpus * run_s / 3600
        cost = hours * (prices["vcpu_hour"] + MEMORY_GB_PER_VCPU * prices["memory_gb_hour"])
        return StageProjection(figures.stage, hours, cost, serial_s, dict.fromkeys(vcpus, run_s))
    # The serial seconds are spent by one core; the rest of the CPU time is spread.
    parallel_cpu_s = max(cpu_s - serial_s, 0.0)
    run_s = {v: serial_s + max(parallel_cpu_s / v, figures.unit_cpu_s) for v in vcpus}
    # The cost does not depend on the vCPU count but for the held-idle serial time: price
    # the largest count, the dearer one, and report it.
    v = max(vcpus)
    billed_s = run_s[v] + STARTUP_BILLED_S
    hours = v * billed_s / 3600
    workers = v / VCPUS_PER_WORKER
    cost = (
        hours * prices["vcpu_hour"]
        + hours * MEMORY_GB_PER_VCPU * prices["memory_gb_hour"]
        + workers * DISK_GB_PER_WORKER * billed_s / 3600 * prices["pd_gb_hour"]
    )
    wall = {n: JOB_STARTUP_S + s for n, s in run_s.items()}
    return StageProjection(figures.stage, hours, cost, serial_s, wall)


def chain_wall_s(projections: dict[str, StageProjection], vcpus: int) -> float:
    """wikipedia and books run side by side (two jobs), then vocab, then examples."""
    wall = {name: p.wall_s[vcpus] for name, p in projections.items()}
    return max(wall["wikipedia"], wall["books"]) + wall["vocab"] + wall["examples"]


def learn_s_per_million_words(path: Path | None) -> float:
    """bench.vocab_learn's figure from its results file, else LEARN_S_PER_MILLION_WORDS."""
    if path is not None and path.exists():
        return float(json.loads(path.read_text())["s_per_million_words"])
    return LEARN_S_PER_MILLION_WORDS


def stage_figures(
    chains: list[dict[str, Any]], learn_s_per_million: float = LEARN_S_PER_MILLION_WORDS
) -> dict[str, StageFigures]:
    """Per-core figures fitted over the sizes: CPU-seconds and serial seconds, each a fixed
    part (Beam's start-up in every process, imports) plus a part per MB of input; the part
    per MB is what a full run multiplies."""
    largest = chains[-1]
    docs = largest["documents_mb"]
    # The examples stage reads the documents: their text per MB of each stage's input.
    wiki_text_per_mb = docs["wikipedia"] / largest["stages"]["wikipedia"]["input_mb"]
    books_text_per_mb = docs["books"] / largest["stages"]["books"]["input_mb"]
    full_documents_mb = FULL_WIKITEXT_MB * wiki_text_per_mb + FULL_BOOKS_MB * books_text_per_mb
    full_inputs = {
        "wikipedia": FULL_WIKITEXT_MB,
        "books": FULL_BOOKS_MB,
        "vocab": FULL_VOCAB_SAMPLE_MIB * MIB / MB,
        "examples": full_documents_mb,
    }
    figures = {}
    for stage in STAGES:
        measured = [c["stages"][stage] for c in chains if stage in c["stages"]]
        # A Beam stage's serial windows here are the driver's start and finish and the tail
        # of the last unit of work: fixed, not per MB (the unit floor covers the tail at
        # scale). books' whole input is one 64 MiB unit at these sizes, so its serial time
        # grows with it; fitting that per MB would call a parallel stage serial.
        fixed, per_mb = measured[-1]["serial_cpu_s"], 0.0
        cpu_fixed, cpu_per_mb = linear_fit([(s["input_mb"], s["cpu_s"]) for s in measured])
        if cpu_per_mb == 0:  # one size (or noise): the average, start-up included
            cpu_fixed, cpu_per_mb = 0.0, measured[-1]["cpu_s"] / measured[-1]["input_mb"]
        extra: dict[str, Any] = {}
        if stage == "vocab":
            # Here every run's sample is all the documents: CPU-s per MB of sample counts
            # words. The full run also reads every documents file to choose its ~2 % sample
            # (vocab_sampled: what is left of its CPU time once its sample's counting is
            # taken out, fitted per MB of documents read over the sizes), and learns from
            # ~1.15 M distinct words where these corpora have the sample's 37k
            # (bench.vocab_learn).
            sampled = [c["stages"]["vocab_sampled"] for c in chains]
            reading = [(s["input_mb"], s["cpu_s"] - cpu_per_mb * s["sample_mb"]) for s in sampled]
            _, read_per_mb = linear_fit(reading)
            if read_per_mb == 0:  # one size: the average, start-up included
                read_per_mb = max(reading[-1][1], 0.0) / reading[-1][0]
            extra = {
                "local_vcpus": VOCAB_MACHINE_VCPUS,
                "read_cpu_s_per_mb": read_per_mb,
                "full_read_mb": full_documents_mb,
            }
            fixed += learn_s_per_million * FULL_VOCAB_DISTINCT_WORDS / 1e6
        figures[stage] = StageFigures(
            stage=stage,
            cpu_s_per_mb=cpu_per_mb,
            cpu_fixed_s=cpu_fixed,
            full_input_mb=full_inputs[stage],
            serial_fixed_s=fixed,
            serial_s_per_mb=per_mb,
            unit_cpu_s=UNIT_MB.get(stage, 0.0) * cpu_per_mb,
            **extra,
        )
    return figures


@dataclass(frozen=True)
class SpillProjection:
    """The examples stage's spill files at full scale, from its own planner (plan_routes)."""

    documents_files: int
    files_one_level: int
    files_planned: int  # two levels where the planner takes them
    usd_one_level: float
    usd_planned: float


def project_spill_files(documents_text_mb: float) -> SpillProjection:
    """Spill files of `bertkit examples` (defaults: 128 tokens, dupe 10) on the full run's
    documents: one documents file per wikipedia and books unit of work, ~7,000 bytes of
    text per document; each file written and read once on object storage."""
    from types import SimpleNamespace

    from pipelines.examples.config import ExamplesConfig
    from pipelines.examples.plan import plan_layout, plan_routes

    documents_files = round(FULL_WIKITEXT_MB / UNIT_MB["wikipedia"]) + round(
        FULL_BOOKS_MB / UNIT_MB["books"]
    )
    text_bytes = documents_text_mb * 1e6
    manifest = SimpleNamespace(
        counts={"documents": round(text_bytes / 7_000), "text_bytes": text_bytes},
        files=[None] * documents_files,
    )
    inputs = [SimpleNamespace(manifest=manifest)]
    config = ExamplesConfig(documents=(), vocab="", output="gs://b/shards")
    layout = plan_layout(config, inputs, 30_522)
    planned, one_level = plan_routes(config, layout, inputs).spill_files()
    per_file = (GCS_PRICES["class_a_per_1000"] + GCS_PRICES["class_b_per_1000"]) / 1000
    return SpillProjection(
        documents_files, one_level, planned, one_level * per_file, planned * per_file
    )


def say(text: str) -> None:
    """A long line of the report, wrapped and indented."""
    print(textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="    "))


def print_projection(
    chains: list[dict[str, Any]], vcpus: list[int], learn_results: Path | None = None
) -> dict[str, Any]:
    learn_rate = learn_s_per_million_words(learn_results)
    figures = stage_figures(chains, learn_rate)
    projections = {name: project_stage(f, vcpus) for name, f in figures.items()}
    print(
        f"\nFull run projected onto Dataflow from the {chains[-1]['size_mb']:g} MB figures: "
        f"{FULL_WIKITEXT_MB / 1000:g} GB of wikitext + {FULL_BOOKS_MB / 1000:g} GB of books"
    )
    say(
        f"prices (USD, batch, us-central1, list prices as last known, 2024; NOT verified "
        f"online here): vCPU-hour {DATAFLOW_PRICES['vcpu_hour']}, memory GB-hour "
        f"{DATAFLOW_PRICES['memory_gb_hour']} ({MEMORY_GB_PER_VCPU} GB per vCPU, "
        f"n1-standard-{VCPUS_PER_WORKER}), PD GB-hour {DATAFLOW_PRICES['pd_gb_hour']} "
        f"({DISK_GB_PER_WORKER:g} GB per worker)"
    )
    say(
        f"assumptions: Dataflow job start-up {JOB_STARTUP_S / 60:g} min per job (3–5 min), "
        f"the workers billed for {STARTUP_BILLED_S / 60:g} min of it; "
        "CPU-s fitted a + b·MB over the sizes, b (the marginal CPU-s/MB below) times the full "
        "input; the CPU time spreads over every vCPU, never faster than the largest unit of "
        "work (unit s), but for the serial seconds (a Beam stage's serial CPU-s at the largest "
        "size), which one core does while the rest are billed idle; vocab runs as a local "
        f"Beam job on one {VOCAB_MACHINE_VCPUS}-vCPU machine (no Dataflow start-up): it "
        f"counts the words of its {FULL_VOCAB_SAMPLE_MIB:g} MiB sample, reads every "
        f"documents file to choose it ({figures['vocab'].read_cpu_s_per_mb:.3f} CPU-s per MB "
        f"read, measured on a 2 % sample), and learns from {FULL_VOCAB_DISTINCT_WORDS / 1e6:g} M "
        f"distinct words at {learn_rate:.0f} s per million (bench.vocab_learn), serial; "
        "wikipedia and books are two jobs side by side. Not counted: Dataflow Shuffle (the "
        "GroupByKeys carry keys, paths and counts) and GCS storage; GCS requests below"
    )
    headers = [
        "stage",
        "full input MB",
        "CPU-s/MB",
        "vCPU-h",
        "serial s",
        "unit s",
        *(f"wall @{v} vCPU" for v in vcpus),
        f"USD @{max(vcpus)}",
    ]
    rows = []
    for name in STAGES:
        f, p = figures[name], projections[name]
        rows.append(
            [
                name,
                f"{f.full_input_mb:,.0f}",
                f"{f.cpu_s_per_mb:.3f}",
                f"{p.vcpu_hours:,.1f}",
                f"{p.serial_s:,.0f}",
                f"{f.unit_cpu_s:,.0f}",
                *(f"{p.wall_s[v] / 60:,.1f} min" for v in vcpus),
                f"{p.cost_usd:,.2f}",
            ]
        )
    total_hours = sum(p.vcpu_hours for p in projections.values())
    total_cost = sum(p.cost_usd for p in projections.values())
    walls = {v: chain_wall_s(projections, v) for v in vcpus}
    rows.append(
        [
            "chain",
            "",
            "",
            f"{total_hours:,.1f}",
            "",
            "",
            *(f"{walls[v] / 60:,.1f} min" for v in vcpus),
            f"{total_cost:,.2f}",
        ]
    )
    print_table(headers, rows)
    spills = project_spill_files(figures["examples"].full_input_mb)
    say(
        f"Cloud Storage requests for the examples stage's spill files (planned by "
        f"pipelines/examples/plan.py from {spills.documents_files} documents files; class A "
        f"${GCS_PRICES['class_a_per_1000']} and class B ${GCS_PRICES['class_b_per_1000']} per "
        f"1,000, NOT verified online): {spills.files_planned / 1e6:,.2f} M files in two levels, "
        f"${spills.usd_planned:,.2f}, on top of the chain's ${total_cost:,.2f} = "
        f"${total_cost + spills.usd_planned:,.2f} (one level would write "
        f"{spills.files_one_level / 1e6:,.1f} M files, ${spills.usd_one_level:,.0f})"
    )
    serial = max(((name, p.serial_s) for name, p in projections.items()), key=lambda item: item[1])
    examples = chains[-1]["stages"]["examples"]
    scale = figures["examples"].full_input_mb / examples["input_mb"]
    say(
        f"the examples stage's _work/ peaks at {examples['work_bytes'] * scale / 1e9:,.0f} GB "
        f"(under the output, deleted at the end) and writes "
        f"{examples['output_bytes'] * scale / 1e9:,.0f} GB of shards at full scale "
        f"({examples['work_bytes'] / examples['output_bytes']:.1f}× and "
        f"{examples['output_bytes'] / (examples['input_mb'] * MB):.1f}× its input here)"
    )
    say(
        f"largest serial step: {serial[0]}, {serial[1] / 60:.1f} min of the chain's wall time "
        f"(beside the assumed {JOB_STARTUP_S / 60:g} min start-up of each Dataflow job)"
    )
    return {
        "figures": {k: asdict(v) for k, v in figures.items()},
        "projections": {k: asdict(v) for k, v in projections.items()},
        "total_vcpu_hours": total_hours,
        "total_cost_usd": total_cost,
        "spill_files": asdict(spills),
        "total_cost_with_requests_usd": total_cost + spills.usd_planned,
        "chain_wall_s": walls,
        "largest_serial": serial,
    }
