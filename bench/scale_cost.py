"""bench.scale's cost model: the measured per-stage figures projected onto a full English
Wikipedia + BookCorpus-sized run on Dataflow (vCPU-hours, list-price cost, wall time at a
given number of vCPUs, every serial step included), as ONE job (`bertkit chain`: wikipedia
and books, then the vocabulary, then the examples, on the same workers after one start-up)
and, for comparison, as the stages' separate jobs.

    python -m bench.scale_cost                      # bench.scale's results, else its last table
    python -m bench.scale_cost --results bench/.work/results/scale.json --vcpus 64,256

Pure arithmetic on the figures bench.scale measured (its results file, else
bench/scale_figures.json, its last run's table as docs/benchmarks.md prints it) and on the
examples stage's own planner (its spill files); bench/tests/test_scale.py checks it on
literal numbers. What it prints says which inputs are measured, which are list prices and
which are assumptions.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.measure import DEFAULT_WORKDIR, MB, argument_parser, print_table, write_results

MIB = 1 << 20
# bench.scale's results, else its last run's table (docs/benchmarks.md) transcribed.
RESULTS = DEFAULT_WORKDIR / "results" / "scale.json"
TRANSCRIBED_RESULTS = Path(__file__).with_name("scale_figures.json")
LEARN_RESULTS = DEFAULT_WORKDIR / "results" / "vocab_learn.json"  # python -m bench.vocab_learn
STAGES = ("wikipedia", "books", "vocab", "examples")  # the chain, in its order

# The full run to project onto: enwiki's multistream dump and a BookCorpus-sized
# book collection.
FULL_WIKITEXT_MB = 100_000.0  # ~100 GB of XML wikitext (a ~22 GB multistream bz2)
FULL_BOOKS_MB = 5_000.0  # ~5 GB of book text, ~11k books
FULL_VOCAB_SAMPLE_MIB = 1024.0  # `bertkit vocab`'s default --sample-mb
# Distinct words in a 1 GiB sample: Heaps' law fitted on the real sample (bench.vocab_learn).
FULL_VOCAB_DISTINCT_WORDS = 1.15e6
# Where the separate jobs' vocabulary is made: Beam's local runner with a worker per vCPU on
# one 16-vCPU machine (the one that launches the chain), which spares a Dataflow job's
# start-up. In one job it is made on the job's workers: counts on all, learning on one.
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
# Not counted: the metadata GET (class B) Beam's GCS reader makes when it opens a file.
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
    learn_s: float = 0.0  # vocab: one worker learning the pieces from the summed counts


@dataclass(frozen=True)
class StageProjection:
    stage: str
    vcpu_hours: float
    cost_usd: float
    serial_s: float
    wall_s: dict[int, float]  # vCPUs → wall seconds


def stage_seconds(figures: StageFigures) -> tuple[float, float]:
    """(CPU-seconds, serial seconds) of one stage of the full run, as measured: the serial
    seconds are part of the CPU-seconds, spent by one core while the others wait (learning
    the vocabulary, `learn_s`, is not in either)."""
    serial_s = figures.serial_fixed_s + figures.serial_s_per_mb * figures.full_input_mb
    cpu_s = (
        figures.cpu_fixed_s
        + figures.cpu_s_per_mb * figures.full_input_mb
        + figures.read_cpu_s_per_mb * figures.full_read_mb
    )
    return cpu_s, serial_s


def dataflow_cost(
    vcpus: int, billed_s: float, prices: dict[str, float] = DATAFLOW_PRICES
) -> tuple[float, float]:
    """(vCPU-hours, USD) of `vcpus` held for `billed_s`, with their memory
    (MEMORY_GB_PER_VCPU) and their workers' boot disks."""
    hours = vcpus * billed_s / 3600
    workers = vcpus / VCPUS_PER_WORKER
    cost = (
        hours * prices["vcpu_hour"]
        + hours * MEMORY_GB_PER_VCPU * prices["memory_gb_hour"]
        + workers * DISK_GB_PER_WORKER * billed_s / 3600 * prices["pd_gb_hour"]
    )
    return hours, cost


def project_stage(
    figures: StageFigures, vcpus: list[int], prices: dict[str, float] = DATAFLOW_PRICES
) -> StageProjection:
    """vCPU-hours, cost and wall time of one stage of the full run, as a job of its own.

    A Dataflow stage: its CPU-seconds spread over the vCPUs (but never faster than its
    largest unit of work, `unit_cpu_s`), plus its serial seconds (done by one core while the
    others wait) and the job's start-up. The vCPU-hours bill every
    vCPU for the whole job after start-up (serial time included: the workers are held), and
    memory (MEMORY_GB_PER_VCPU) and boot disks along with them. A local stage (vocab) runs
    on one machine of `local_vcpus`, no job start-up, priced at the same vCPU and memory
    rates (a stand-in for the machine's own price).
    """
    cpu_s, measured_serial_s = stage_seconds(figures)
    serial_s = measured_serial_s + figures.learn_s
    # The serial seconds are spent by one core; the rest of the CPU time is spread.
    parallel_cpu_s = max(cpu_s - measured_serial_s, 0.0)
    if figures.local_vcpus:
        run_s = serial_s + parallel_cpu_s / figures.local_vcpus
        hours = figures.local_vcpus * run_s / 3600
        cost = hours * (prices["vcpu_hour"] + MEMORY_GB_PER_VCPU * prices["memory_gb_hour"])
        return StageProjection(figures.stage, hours, cost, serial_s, dict.fromkeys(vcpus, run_s))
    run = {v: serial_s + max(parallel_cpu_s / v, figures.unit_cpu_s) for v in vcpus}
    # The cost does not depend on the vCPU count but for the held-idle serial time: price
    # the largest count, the dearer one, and report it.
    hours, cost = dataflow_cost(max(vcpus), run[max(vcpus)] + STARTUP_BILLED_S, prices)
    wall = {n: JOB_STARTUP_S + s for n, s in run.items()}
    return StageProjection(figures.stage, hours, cost, serial_s, wall)


def chain_wall_s(projections: dict[str, StageProjection], vcpus: int) -> float:
    """Separate jobs: wikipedia and books side by side, then vocab, then examples."""
    wall = {name: p.wall_s[vcpus] for name, p in projections.items()}
    return max(wall["wikipedia"], wall["books"]) + wall["vocab"] + wall["examples"]


@dataclass(frozen=True)
class Phase:
    """A step of the one job: CPU-seconds spread over every vCPU, never faster than its
    largest unit of work, then serial seconds one core spends while the others wait."""

    name: str
    parallel_cpu_s: float
    serial_s: float
    unit_cpu_s: float = 0.0

    def wall_s(self, vcpus: int) -> float:
        return self.serial_s + max(self.parallel_cpu_s / vcpus, self.unit_cpu_s)


def one_job_phases(figures: dict[str, StageFigures]) -> list[Phase]:
    """The chain as one job (`bertkit chain`), from each stage's measured figures:
    wikipedia and books side by side on the same workers (their CPU-seconds add up, their
    serial tails overlap), the vocabulary's counts on every worker, its learning on one
    worker from the counts (the examples need the vocabulary: the others wait), the
    examples."""

    def spread(stage: str) -> tuple[float, float]:
        cpu_s, serial_s = stage_seconds(figures[stage])
        return max(cpu_s - serial_s, 0.0), serial_s

    (wiki_cpu, wiki_serial), (books_cpu, books_serial) = spread("wikipedia"), spread("books")
    vocab_cpu, vocab_serial = spread("vocab")
    examples_cpu, examples_serial = spread("examples")
    units = [figures[s].unit_cpu_s for s in ("wikipedia", "books")]
    return [
        Phase(
            "wikipedia + books", wiki_cpu + books_cpu, max(wiki_serial, books_serial), max(units)
        ),
        Phase("vocab: counts", vocab_cpu, vocab_serial),
        Phase("vocab: learning", 0.0, figures["vocab"].learn_s),
        Phase("examples", examples_cpu, examples_serial, figures["examples"].unit_cpu_s),
    ]


@dataclass(frozen=True)
class JobProjection:
    phases: dict[str, dict[int, float]]  # phase → vCPUs → wall seconds
    wall_s: dict[int, float]  # vCPUs → wall seconds, the job's one start-up included
    vcpu_hours: float  # at the largest vCPU count
    cost_usd: float  # Dataflow's, at the largest vCPU count


def project_job(
    phases: list[Phase], vcpus: list[int], prices: dict[str, float] = DATAFLOW_PRICES
) -> JobProjection:
    """One Dataflow job: one start-up, then its phases one after the other, every vCPU
    billed from the billed part of the start-up to the end (serial phases included)."""
    walls = {p.name: {v: p.wall_s(v) for v in vcpus} for p in phases}
    run = {v: sum(wall[v] for wall in walls.values()) for v in vcpus}
    hours, cost = dataflow_cost(max(vcpus), run[max(vcpus)] + STARTUP_BILLED_S, prices)
    return JobProjection(walls, {v: JOB_STARTUP_S + s for v, s in run.items()}, hours, cost)


def learn_s_per_million_words(path: Path | None) -> float:
    """bench.vocab_learn's figure from its results file, else LEARN_S_PER_MILLION_WORDS."""
    if path is not None and path.exists():
        return float(json.loads(path.read_text())["s_per_million_words"])
    return LEARN_S_PER_MILLION_WORDS


def full_documents_mb(chains: list[dict[str, Any]]) -> float:
    """The full run's documents text, MB: its wikitext and books at the largest size's text
    per MB of each stage's input."""
    largest = chains[-1]
    docs, stages = largest["documents_mb"], largest["stages"]
    wiki_text_per_mb = docs["wikipedia"] / stages["wikipedia"]["input_mb"]
    books_text_per_mb = docs["books"] / stages["books"]["input_mb"]
    return FULL_WIKITEXT_MB * wiki_text_per_mb + FULL_BOOKS_MB * books_text_per_mb


def stage_figures(
    chains: list[dict[str, Any]], learn_s_per_million: float = LEARN_S_PER_MILLION_WORDS
) -> dict[str, StageFigures]:
    """Per-core figures fitted over the sizes: CPU-seconds and serial seconds, each a fixed
    part (Beam's start-up in every process, imports) plus a part per MB of input; the part
    per MB is what a full run multiplies."""
    documents_mb = full_documents_mb(chains)
    full_inputs = {
        "wikipedia": FULL_WIKITEXT_MB,
        "books": FULL_BOOKS_MB,
        "vocab": FULL_VOCAB_SAMPLE_MIB * MIB / MB,
        "examples": documents_mb,  # the examples stage reads the documents
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
                "full_read_mb": documents_mb,
                "learn_s": learn_s_per_million * FULL_VOCAB_DISTINCT_WORDS / 1e6,
            }
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
    levels: dict[str, tuple[int, int]]  # regrouping → (mappers' files, regroup steps' files)
    regroup_steps: dict[str, int]  # regrouping → regroup steps (0: one level)
    files_one_level: int
    files_planned: int
    usd_one_level: float
    usd_planned: float


def spill_request_usd(files: int) -> float:
    """Each spill file written once (class A) and read once (class B)."""
    return files * (GCS_PRICES["class_a_per_1000"] + GCS_PRICES["class_b_per_1000"]) / 1000


def project_spill_files(documents_text_mb: float, **flags: Any) -> SpillProjection:
    """Spill files of `bertkit examples` (defaults: 128 tokens, dupe 10; `flags` for others)
    on the full run's documents: one documents file per wikipedia and books unit of work,
    ~7,000 bytes of text per document; each file written and read once on object storage."""
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
    config = ExamplesConfig(documents=(), vocab="", output="gs://b/shards", **flags)
    layout = plan_layout(config, inputs, 30_522)
    routes = plan_routes(config, layout, inputs)
    planned, one_level = routes.spill_files()
    steps = {"partitions": routes.partitions.steps, "buckets": routes.buckets.steps}
    return SpillProjection(
        documents_files,
        routes.level_files(),
        steps,
        one_level,
        planned,
        spill_request_usd(one_level),
        spill_request_usd(planned),
    )


def say(text: str) -> None:
    """A long line of the report, wrapped and indented."""
    print(textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="    "))


def minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"


def print_projection(
    chains: list[dict[str, Any]],
    vcpus: list[int],
    learn_results: Path | None = None,
    source: str = "bench.scale's results",
) -> dict[str, Any]:
    learn_rate = learn_s_per_million_words(learn_results)
    learned = learn_results is not None and learn_results.exists()
    figures = stage_figures(chains, learn_rate)
    job = project_job(one_job_phases(figures), vcpus)
    spills = project_spill_files(figures["examples"].full_input_mb)
    top = max(vcpus)
    print(
        f"\nFull run projected onto Dataflow as one job: {FULL_WIKITEXT_MB / 1000:g} GB of "
        f"wikitext + {FULL_BOOKS_MB / 1000:g} GB of books, from the {chains[-1]['size_mb']:g} MB "
        f"figures of {source}"
    )
    say(
        "measured (bench.scale, 2 local workers): each stage's CPU-s per MB (fitted a + b·MB "
        "over the sizes; b times the full input) and serial CPU-s (at the largest size), the "
        "documents' text per MB of input; the vocabulary's reading per MB of documents (a 2 % "
        f"sample) and its learning, {learn_rate:.0f} s per million distinct words "
        f"({'bench.vocab_learn' if learned else 'bench.vocab_learn, as last measured'}); the "
        "spill files are the examples stage's own planner's count (pipelines/examples/plan.py)"
    )
    say(
        f"list prices (USD, batch, us-central1, as last known, 2024; NOT verified online "
        f"here): vCPU-hour {DATAFLOW_PRICES['vcpu_hour']}, memory GB-hour "
        f"{DATAFLOW_PRICES['memory_gb_hour']}, PD GB-hour {DATAFLOW_PRICES['pd_gb_hour']}; "
        f"Cloud Storage class A ${GCS_PRICES['class_a_per_1000']} and class B "
        f"${GCS_PRICES['class_b_per_1000']} per 1,000 operations"
    )
    say(
        f"assumed: {JOB_STARTUP_S / 60:g} min of Dataflow start-up per job (3–5), "
        f"{STARTUP_BILLED_S / 60:g} of them billed; n1-standard-{VCPUS_PER_WORKER} workers "
        f"({MEMORY_GB_PER_VCPU} GB per vCPU, {DISK_GB_PER_WORKER:g} GB of disk each), held "
        "from start to end; a worker's core as fast as the measuring machine's; CPU time "
        "spread over every vCPU, never faster than a stage's largest unit of work (unit s); "
        "serial seconds spent by one core while the rest are billed idle; "
        f"{FULL_VOCAB_DISTINCT_WORDS / 1e6:g} M distinct words in the 1 GiB sample (Heaps' law "
        "on the real sample); ~7,000 bytes of text per document and one documents file per "
        "extraction unit (for the planner); each spill file written once and read once. Not "
        "counted: Dataflow Shuffle (the GroupByKeys carry keys, paths and counts), GCS storage, "
        "the latency of the requests"
    )
    headers = ["stage", "full input MB", "CPU-s/MB", "CPU-h", "serial s", "unit s"]
    rows = []
    for name in STAGES:
        f = figures[name]
        cpu_s, serial_s = stage_seconds(f)
        rows.append(
            [
                name,
                f"{f.full_input_mb:,.0f}",
                f"{f.cpu_s_per_mb:.3f}",
                f"{cpu_s / 3600:,.2f}",
                f"{serial_s + f.learn_s:,.0f}",
                f"{f.unit_cpu_s:,.0f}",
            ]
        )
    print_table(headers, rows)
    print()
    headers = ["one job", *(f"wall @{v} vCPU" for v in vcpus)]
    rows = [["start-up", *(minutes(JOB_STARTUP_S) for _ in vcpus)]]
    rows += [[name, *(minutes(wall[v]) for v in vcpus)] for name, wall in job.phases.items()]
    rows.append(["job", *(minutes(job.wall_s[v]) for v in vcpus)])
    print_table(headers, rows)
    total = job.cost_usd + spills.usd_planned
    levels = ", ".join(
        f"{name} {first:,} + {second:,} in {spills.regroup_steps[name]} regroup steps"
        for name, (first, second) in spills.levels.items()
    )
    say(
        f"at {top} vCPUs: {minutes(job.wall_s[top])}, {job.vcpu_hours:,.1f} vCPU-hours, "
        f"${job.cost_usd:,.2f} of Dataflow + ${spills.usd_planned:,.2f} of Cloud Storage "
        f"requests for the examples' spill files = ${total:,.2f}"
    )
    say(
        f"spill files (planned from {spills.documents_files} documents files): "
        f"{spills.files_planned / 1e6:,.3f} M in two levels ({levels}); one level would write "
        f"{spills.files_one_level / 1e6:,.1f} M, ${spills.usd_one_level:,.0f}"
    )
    separate = {name: project_stage(f, vcpus) for name, f in figures.items()}
    separate_cost = sum(p.cost_usd for p in separate.values()) + spills.usd_planned
    say(
        f"as separate jobs (wikipedia beside books, the vocabulary on one "
        f"{VOCAB_MACHINE_VCPUS}-vCPU machine, then examples: two Dataflow start-ups in "
        f"sequence): {minutes(chain_wall_s(separate, top))} and ${separate_cost:,.2f} "
        f"at {top} vCPUs"
    )
    learning = job.phases["vocab: learning"][top]
    examples = chains[-1]["stages"]["examples"]
    scale = figures["examples"].full_input_mb / examples["input_mb"]
    say(
        f"the examples stage's _work/ peaks at {examples['work_bytes'] * scale / 1e9:,.0f} GB "
        f"(deleted at the end) and writes {examples['output_bytes'] * scale / 1e9:,.0f} GB of "
        f"shards; the longest serial step, the vocabulary's learning on one worker, takes "
        f"{minutes(learning)} of the job's wall time"
    )
    return {
        "source": source,
        "figures": {k: asdict(v) for k, v in figures.items()},
        "one_job": asdict(job),
        "spill_files": asdict(spills),
        "total_cost_with_requests_usd": total,
        "separate_jobs": {
            "wall_s": {v: chain_wall_s(separate, v) for v in vcpus},
            "cost_with_requests_usd": separate_cost,
        },
    }


def load_chains(path: Path) -> list[dict[str, Any]]:
    chains = json.loads(path.read_text())["chains"]
    missing = [c["size_mb"] for c in chains if not set(STAGES) <= set(c["stages"])]
    if missing:
        raise SystemExit(f"{path}: no figures for every stage at {missing} MB (a stage failed)")
    return chains


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.scale_cost", __doc__)
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"bench.scale's results (default {RESULTS} if it exists, else {TRANSCRIBED_RESULTS})",
    )
    parser.add_argument("--vcpus", default="32,256", help="vCPU counts to project wall time at")
    parser.add_argument("--learn-results", type=Path, default=LEARN_RESULTS)
    args = parser.parse_args(argv)
    path = args.results or (RESULTS if RESULTS.exists() else TRANSCRIBED_RESULTS)
    vcpus = sorted(int(v) for v in args.vcpus.split(","))
    projection = print_projection(load_chains(path), vcpus, args.learn_results, str(path))
    write_results(DEFAULT_WORKDIR / "results" / "scale_cost.json", projection)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
