"""bench.scale's pure helpers on literal figures: sizes, the serial fit and the cost model.

The benchmark itself (a 1 GB chain, ~25 min) never runs in the tests.
"""

from __future__ import annotations

import bz2
from pathlib import Path

import pytest

from bench import scale_dump
from bench.runs import parse_sizes
from bench.scale_cost import (
    JOB_STARTUP_S,
    STARTUP_BILLED_S,
    StageFigures,
    StageProjection,
    chain_wall_s,
    linear_fit,
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
