"""bench.scale's pure helpers on literal figures: sizes, the serial fit and the cost model
(separate jobs and one job), and the spill files the examples planner counts at full scale.

The benchmark itself (a 1 GB chain, ~25 min) never runs in the tests.
"""

from __future__ import annotations

import bz2
import json
from pathlib import Path

import pytest

from bench import scale_dump
from bench.runs import parse_sizes
from bench.scale_cost import (
    JOB_STARTUP_S,
    STARTUP_BILLED_S,
    Phase,
    StageFigures,
    StageProjection,
    chain_wall_s,
    linear_fit,
    load_chains,
    one_job_phases,
    print_projection,
    project_job,
    project_spill_files,
    project_stage,
)

# Round prices, so every figure below can be checked by hand.
PRICES = {"vcpu_hour": 0.05, "memory_gb_hour": 0.004, "pd_gb_hour": 0.0001}


def test_sizes_are_sorted_unique_and_positive():
    assert parse_sizes("1024,256, 256,") == [256.0, 1024.0]
    assert parse_sizes("0.5") == [0.5]
    for bad in ("", "0,256", "-1"):
        with pytest.raises(ValueError, match="--sizes"):
            parse_sizes(bad)


def test_serial_seconds_fit_a_fixed_part_and_a_part_per_mb():
    assert linear_fit([(1024.0, 30.0), (256.0, 10.0)]) == (
        pytest.approx(10 - 256 * 20 / 768),
        20 / 768,
    )
    # One size: all of it fixed. Less serial time at the larger size: noise, not a negative
    # slope; the larger size's figure is kept as fixed.
    assert linear_fit([(256.0, 7.0)]) == (7.0, 0.0)
    assert linear_fit([(256.0, 9.0), (1024.0, 8.0)]) == (8.0, 0.0)


def test_a_dataflow_stage_spreads_its_cpu_time_and_keeps_its_serial_time():
    # 2 CPU-s/MB over 1,000 MB = 2,000 CPU-s; serial 10 s + 0.01 s/MB = 20 s of it.
    figures = StageFigures("examples", 2.0, 1000.0, 10.0, 0.01)
    projection = project_stage(figures, [32, 256], PRICES)
    assert projection.serial_s == 20.0
    # 20 s + 1,980 CPU-s / N, plus the job's start-up.
    assert projection.wall_s == {
        32: JOB_STARTUP_S + 20 + 1980 / 32,  # 240 + 81.875
        256: JOB_STARTUP_S + 20 + 1980 / 256,  # 240 + 27.734375
    }
    # Billed: 256 vCPUs for 27.734375 s and 120 s of start-up = 37,820 vCPU-s.
    assert STARTUP_BILLED_S == 120
    assert projection.vcpu_hours == pytest.approx(37820 / 3600)
    # vCPU 0.05 + 3.75 GB × 0.004 per vCPU-hour, and 64 workers' 25 GB disks for 147.73 s.
    disk = 64 * 25 * 147.734375 / 3600 * 0.0001
    assert projection.cost_usd == pytest.approx(37820 / 3600 * 0.065 + disk)
    assert projection.cost_usd == pytest.approx(0.689427083)


def test_vocab_runs_locally_on_one_machine_without_a_job_start_up():
    # 1,000 MB of sample at 0.5 CPU-s/MB and 10,000 MB of documents read at 0.01: 600 CPU-s
    # (with the 4 s fixed), of which the 4 s + 0.1 s/MB × 1,000 = 104 s learning is serial.
    figures = StageFigures(
        "vocab",
        0.5,
        1000.0,
        4.0,
        0.1,
        local_vcpus=16,
        cpu_fixed_s=0.0,
        read_cpu_s_per_mb=0.01,
        full_read_mb=10_000.0,
    )
    projection = project_stage(figures, [32, 256], PRICES)
    assert projection.serial_s == 104.0
    run_s = 104 + (600 - 104) / 16  # 135 s, whatever the Dataflow vCPUs
    assert projection.wall_s == {32: run_s, 256: run_s}
    assert projection.vcpu_hours == pytest.approx(16 * run_s / 3600)
    assert projection.cost_usd == pytest.approx(16 * run_s / 3600 * 0.065)


def test_the_chain_runs_wikipedia_beside_books_then_vocab_then_examples():
    def stage(name: str, wall: float) -> StageProjection:
        return StageProjection(name, 0.0, 0.0, 0.0, {32: wall})

    projections = {
        "wikipedia": stage("wikipedia", 600.0),
        "books": stage("books", 300.0),
        "vocab": stage("vocab", 120.0),
        "examples": stage("examples", 900.0),
    }
    assert chain_wall_s(projections, 32) == 600 + 120 + 900


def test_the_scaled_multistream_dump_has_an_index_of_stream_starts(tmp_path):
    info = scale_dump.build_scaled_dump(0.3, tmp_path, log=False, multistream=True)
    dump = Path(info.path)
    assert dump.name == "enwiki-scaled-0.3mb-multistream.xml.bz2"
    assert Path(info.index_path).name == "enwiki-scaled-0.3mb-multistream-index.txt.bz2"
    lines = bz2.decompress(Path(info.index_path).read_bytes()).decode().splitlines()
    assert len(lines) == info.pages
    offsets = sorted({int(line.split(":", 1)[0]) for line in lines})
    assert len(offsets) == -(-info.pages // scale_dump.PAGES_PER_STREAM)
    data = dump.read_bytes()
    for offset in offsets:  # each offset starts a bz2 stream of whole pages
        text = bz2.BZ2Decompressor().decompress(data[offset:])
        assert text.lstrip().startswith(b"<page>") and text.rstrip().endswith(b"</page>")
    assert bz2.decompress(data).endswith(b"</mediawiki>\n")


def test_no_vcpu_count_runs_a_stage_faster_than_its_largest_unit_of_work():
    # 1,000 CPU-s over 256 vCPUs is 3.9 s, but one unit takes 30 s on its worker.
    figures = StageFigures("books", 1.0, 1000.0, 0.0, 0.0, unit_cpu_s=30.0)
    projection = project_stage(figures, [32, 256], PRICES)
    assert projection.wall_s == {32: JOB_STARTUP_S + 1000 / 32, 256: JOB_STARTUP_S + 30.0}
    assert projection.vcpu_hours == pytest.approx(256 * (30 + STARTUP_BILLED_S) / 3600)


def test_one_job_runs_its_phases_one_after_the_other_after_one_start_up():
    figures = {
        # 100 CPU-s, 10 of them serial; its largest unit takes 30 s.
        "wikipedia": StageFigures("wikipedia", 0.1, 1000.0, 10.0, 0.0, unit_cpu_s=30.0),
        "books": StageFigures("books", 0.2, 100.0, 4.0, 0.0, unit_cpu_s=5.0),  # 20, 4 serial
        # Counting: 50 CPU-s of sample + 10 of reading, 2 serial; learning: 60 s on one worker.
        "vocab": StageFigures(
            "vocab",
            0.5,
            100.0,
            2.0,
            0.0,
            local_vcpus=16,
            read_cpu_s_per_mb=0.01,
            full_read_mb=1000.0,
            learn_s=60.0,
        ),
        "examples": StageFigures("examples", 1.0, 1000.0, 5.0, 0.0, unit_cpu_s=40.0),
    }
    phases = one_job_phases(figures)
    # wikipedia and books side by side: their spread CPU-s add up, their serial tails overlap.
    assert phases == [
        Phase("wikipedia + books", 90.0 + 16.0, 10.0, 30.0),
        Phase("vocab: counts", 58.0, 2.0),
        Phase("vocab: learning", 0.0, 60.0),
        Phase("examples", 995.0, 5.0, 40.0),
    ]
    job = project_job(phases, [8, 64], PRICES)
    assert job.phases == {
        "wikipedia + books": {8: 10 + 30.0, 64: 10 + 30.0},  # the unit floor: 106 / 8 < 30
        "vocab: counts": {8: 2 + 58 / 8, 64: 2 + 58 / 64},
        "vocab: learning": {8: 60.0, 64: 60.0},  # the others wait: the examples need it
        "examples": {8: 5 + 995 / 8, 64: 5 + 40.0},
    }
    assert job.wall_s == {8: 240 + 238.625, 64: 240 + 147.90625}
    # 64 vCPUs billed for 147.90625 s and 120 s of start-up; 16 workers' 25 GB disks.
    billed = 147.90625 + STARTUP_BILLED_S
    assert job.vcpu_hours == pytest.approx(64 * billed / 3600)
    disk = 16 * 25 * billed / 3600 * 0.0001
    assert job.cost_usd == pytest.approx(64 * billed / 3600 * 0.065 + disk)
    assert job.cost_usd == pytest.approx(0.3125573)


def test_the_one_job_projection_reads_the_measured_figures(tmp_path, capsys):
    # One size: each stage's CPU-s per MB is its average. 40 MB of wiki text per 100 MB of
    # wikitext and 10 per 10 MB of books: the full run's 100 GB + 5 GB give 45,000 MB.
    def stage(input_mb: float, cpu_s: float, serial: float, **extra) -> dict:
        return {"input_mb": input_mb, "cpu_s": cpu_s, "serial_cpu_s": serial, **extra}

    chain = {
        "size_mb": 100.0,
        "documents_mb": {"wikipedia": 40.0, "books": 10.0},
        "stages": {
            "wikipedia": stage(100.0, 20.0, 2.0),
            "books": stage(10.0, 3.0, 1.0),
            "vocab": stage(50.0, 10.0, 1.0),
            "vocab_sampled": stage(50.0, 2.0, 0.5, sample_mb=1.0),
            "examples": stage(50.0, 100.0, 3.0, work_bytes=200e6, output_bytes=100e6),
        },
    }
    results = tmp_path / "scale.json"
    results.write_text(json.dumps({"chains": [chain]}))
    learn = tmp_path / "vocab_learn.json"
    learn.write_text(json.dumps({"s_per_million_words": 40.0}))
    projection = print_projection(load_chains(results), [256], learn)
    assert "one job" in capsys.readouterr().out
    wall = projection["one_job"]["phases"]
    sample_mb = 1024 * (1 << 20) / 1e6
    assert wall["wikipedia + books"][256] == pytest.approx(2 + (19_998 + 1_499) / 256)
    # Counting 0.2 CPU-s per MB of sample; reading (2 - 0.2 × 1) / 50 per MB of documents.
    assert wall["vocab: counts"][256] == pytest.approx(
        1 + (0.2 * sample_mb + 0.036 * 45_000 - 1) / 256
    )
    assert wall["vocab: learning"][256] == pytest.approx(40 * 1.15)  # 1.15 M distinct words
    assert wall["examples"][256] == pytest.approx(3 + (90_000 - 3) / 256)


def test_the_full_run_s_spill_files_come_from_the_examples_planner():
    spills = project_spill_files(48_552.0)
    assert spills.documents_files == 403
    # 403 documents files × 40 route groups of 79 pairing steps, in 160 regroup steps; 3,160
    # pairing steps × 21 groups of 221 buckets, in 273 steps (--regroup-budget-mb 1024).
    assert spills.levels == {"partitions": (16_120, 15_680), "buckets": (66_360, 64_155)}
    assert spills.regroup_steps == {"partitions": 160, "buckets": 273}
    assert (spills.files_planned, spills.files_one_level) == (162_315, 62_581_473)
    assert spills.usd_planned == pytest.approx(162_315 * 0.0054 / 1000)  # $0.88
    # With the earlier 256 MB regroup budget the same planner counts 349,371.
    assert project_spill_files(48_552.0, regroup_budget_mb=256).files_planned == 349_371


def test_the_transcribed_figures_are_the_benchmarks_page_s_table():
    # bench/scale_figures.json stands in for bench.scale's results until it runs again: each
    # figure it holds must be the one docs/benchmarks.md prints (input MB, CPU-s/MB, serial
    # CPU-s, the examples' _work and output MB).
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "benchmarks.md").read_text()
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and " @ " in cells[0] and cells[1][:1].isdigit():
            rows[cells[0]] = cells
    chains = json.loads((root / "bench" / "scale_figures.json").read_text())["chains"]
    assert [c["size_mb"] for c in chains] == [256.0, 1024.0]
    for chain in chains:
        for stage, figures in chain["stages"].items():
            name = "vocab-sampled" if stage == "vocab_sampled" else stage
            suffix = " (2 %)" if stage == "vocab_sampled" else ""
            cells = rows[f"{name} @ {chain['size_mb']:g}{suffix}"]
            assert float(cells[1].replace(",", "")) == figures["input_mb"]
            assert float(cells[2]) == pytest.approx(
                figures["cpu_s"] / figures["input_mb"], abs=5e-4
            )
            assert float(cells[4]) == figures["serial_cpu_s"]
            if stage == "examples":
                work_mb = float(cells[6].split("/")[1].replace(",", ""))
                assert (work_mb, float(cells[7].replace(",", ""))) == (
                    figures["work_bytes"] / 1e6,
                    figures["output_bytes"] / 1e6,
                )
