"""Progress on long runs: the line on literal numbers, its throttle on an injected clock, and
real stage runs (the lines they write to stderr, the Beam counters they leave)."""

from __future__ import annotations

import io
import json
import re

from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import books, examples, wikipedia
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    NAMESPACE,
    PAGES_READ,
    StageCounters,
    _CountingHandle,
    progress_shown,
    workers_in_this_process,
)
from pipelines.command.progress import (
    PROGRESS_DIR_ENV,
    PROGRESS_ENV,
    ProgressPrinter,
    ProgressView,
    StatusLine,
    Throttle,
    format_bytes,
    format_duration,
    format_value,
    progress_enabled,
    publish_totals,
    read_totals,
)
from pipelines.examples.cli import progress_phases as examples_phases
from pipelines.examples.plan import read_documents_inputs
from schemas import ShardsManifest

MIB = 1 << 20
# The sample dump: 206 pages → 97 documents (README, "Stage 1a").
SAMPLE_PAGES, SAMPLE_DOCUMENTS = 206, 97


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_numbers_are_formatted_as_the_trainer_formats_them():
    assert format_value(5210) == "5210"
    assert format_value(5210.26) == "5210"
    assert format_value(133.24) == "133.2"
    assert format_value(12345.6) == "12346"
    assert format_duration(37.4) == "0:00:37"
    assert format_duration(312) == "0:05:12"
    assert format_duration(90061) == "25:01:01"
    assert format_bytes(0, 575 * MIB) == "0.0/575.0 MiB"
    assert format_bytes(int(123.46 * MIB), 575 * MIB) == "123.5/575.0 MiB"
    assert format_bytes(3 << 30, 22 << 30) == "3.0/22.0 GiB"  # a full dump in GiB
    assert format_bytes(int(1.5 * MIB)) == "1.5 MiB"


def test_the_trainer_shares_the_formatters():
    from trainer import metrics

    assert metrics._format_value is format_value
    assert metrics._format_duration is format_duration


def test_wikipedia_line_shows_bytes_read_of_total_pages_documents_rate_and_eta():
    view = ProgressView("wikipedia", wikipedia.progress_phases(575 * MIB), start=100.0)
    assert view.line({}, 100.0) == "wikipedia | read 0.0/575.0 MiB 0% | pages 0 | documents 0"
    totals = {INPUT_BYTES_READ: int(123.4 * MIB), PAGES_READ: 52100, DOCUMENTS_EXTRACTED: 18040}
    # 123.4 of 575 MiB in 10 s: 451.6 MiB left at 12.34 MiB/s is 36.6 s.
    assert view.line(totals, 110.0) == (
        "wikipedia | read 123.4/575.0 MiB 21% | pages 52100 | documents 18040 | pages/s 5210 "
        "| eta 0:00:37"
    )
    done = {INPUT_BYTES_READ: 575 * MIB, PAGES_READ: 240000, DOCUMENTS_EXTRACTED: 83000}
    assert view.line(done, 160.0, finished=True) == (
        "wikipedia | read 575.0/575.0 MiB 100% | pages 240000 | documents 83000 | pages/s 4000 "
        "| done in 0:01:00"
    )


def test_books_line_counts_files_and_documents():
    view = ProgressView("books", books.progress_phases(40 * MIB), start=0.0)
    totals = {INPUT_BYTES_READ: 12 * MIB, "input_files_read": 30, DOCUMENTS_EXTRACTED: 29}
    assert view.line(totals, 4.0) == (
        "books | read 12.0/40.0 MiB 30% | files 30 | documents 29 | documents/s 7.25 | eta 0:00:09"
    )


def test_examples_line_follows_its_three_steps_each_with_its_own_rate_and_eta(
    sample_documents,
):
    config = examples.ExamplesConfig(
        documents=tuple(map(str, sample_documents)), vocab="v", output="o", dupe_factor=5
    )
    inputs = read_documents_inputs([str(d) for d in sample_documents])
    view = ProgressView("examples", examples_phases(config, inputs), start=0.0)
    # 101 documents in the sample's manifests (97 articles, 4 books), 5 passes each.
    assert view.line({"documents_tokenized": 50}, 10.0) == (
        "examples | step 1/3 tokenize | documents 50/101 49% | documents/s 5 | eta 0:00:10"
    )
    paired = {"documents_tokenized": 101, "documents_paired": 101, "examples_made": 8000}
    assert view.line(paired, 20.0) == (  # the step is seen for the first time: no rate yet
        "examples | step 2/3 pair and mask | document passes 101/505 20% | examples 8000"
    )
    paired = {"documents_tokenized": 101, "documents_paired": 303, "examples_made": 25000}
    assert view.line(paired, 25.0) == (
        "examples | step 2/3 pair and mask | document passes 303/505 60% | examples 25000 "
        "| examples/s 5000 | eta 0:00:03"
    )
    # Writing: the total is the examples made, final once the shards are being written.
    writing = {**paired, "documents_paired": 505, "examples_made": 42000}
    assert view.line({**writing, "examples_written": 10000, "shards_written": 5}, 30.0) == (
        "examples | step 3/3 write shards | examples 10000/42000 23% | shards 5"
    )
    finished = {**writing, "examples_written": 42000, "shards_written": 21}
    assert view.line(finished, 32.0, finished=True) == (
        "examples | step 3/3 write shards | examples 42000/42000 100% | shards 21 "
        "| examples/s 21000 | done in 0:00:32"
    )


def test_a_step_whose_count_arrives_at_once_is_timed_from_the_end_of_the_step_before(
    sample_documents,
):
    # A local run as it was seen: the shard writers publish their counts when
    # they finish, so the write step's 42,132 examples came in one poll, 0.1 s before the
    # end, and the line ended with "examples/s 421320". The step began when pairing last
    # moved (25.0): 42,132 examples over its 7 seconds.
    config = examples.ExamplesConfig(
        documents=tuple(map(str, sample_documents)), vocab="v", output="o", dupe_factor=5
    )
    inputs = read_documents_inputs([str(d) for d in sample_documents])
    view = ProgressView("examples", examples_phases(config, inputs), start=0.0)
    view.observe({"documents_tokenized": 101}, 8.0)
    paired = {"documents_tokenized": 101, "documents_paired": 505, "examples_made": 42132}
    view.observe({**paired, "documents_paired": 300, "examples_made": 25000}, 15.0)
    assert view.line(paired, 25.0) == (
        "examples | step 2/3 pair and mask | document passes 505/505 100% | examples 42132 "
        "| examples/s 2478 | eta 0:00:00"
    )  # 42,132 examples over the 17 s since tokenizing last moved (8.0)
    for now in (26.0, 28.0, 30.0):  # reading and sorting the spill buckets: nothing counts
        view.observe(paired, now)
    finished = {**paired, "examples_written": 42132, "shards_written": 1}
    view.observe(finished, 31.9)
    assert view.line(finished, 32.0, finished=True) == (
        "examples | step 3/3 write shards | examples 42132/42132 100% | shards 1 "
        "| examples/s 6019 | done in 0:00:32"
    )


def test_at_most_one_line_per_interval_then_a_last_line():
    clock = FakeClock()
    stream = io.StringIO()
    printer = ProgressPrinter(
        "wikipedia",
        wikipedia.progress_phases(100 * MIB),
        StatusLine(stream, tty=False),
        clock=clock,
    )
    printed = []
    for step in range(1, 81):  # polled every quarter second for 20 s
        clock.now = step * 0.25
        totals = {INPUT_BYTES_READ: step * MIB, PAGES_READ: step * 10}
        printed.append(printer.poll(totals))
    assert printer.throttle.interval == 5.0  # not a terminal: a line every 5 s
    assert [i for i, p in enumerate(printed, start=1) if p] == [20, 40, 60, 80]
    printer.finish({INPUT_BYTES_READ: 100 * MIB, PAGES_READ: 800}, finished=True)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "wikipedia | read 20.0/100.0 MiB 20% | pages 200 | documents 0 | pages/s 40 | eta 0:00:20",
        "wikipedia | read 40.0/100.0 MiB 40% | pages 400 | documents 0 | pages/s 40 | eta 0:00:15",
        "wikipedia | read 60.0/100.0 MiB 60% | pages 600 | documents 0 | pages/s 40 | eta 0:00:10",
        "wikipedia | read 80.0/100.0 MiB 80% | pages 800 | documents 0 | pages/s 40 | eta 0:00:05",
        "wikipedia | read 100.0/100.0 MiB 100% | pages 800 | documents 0 | pages/s 40 "
        "| done in 0:00:20",
    ]


def test_throttle_waits_a_whole_interval_from_its_start_and_from_each_line():
    clock = FakeClock(100.0)
    throttle = Throttle(1.0, clock)
    due = []
    for now in (100.0, 100.5, 100.99, 101.0, 101.5, 101.99, 102.2, 102.3, 105.0):
        clock.now = now
        due.append(throttle.due())
    assert due == [False, False, False, True, False, False, True, False, True]


def test_a_terminal_gets_one_line_rewritten_in_place():
    stream = io.StringIO()
    status = StatusLine(stream, tty=True)
    status.show("wikipedia | read 1.0/2.0 MiB 50% | eta 0:00:10")
    status.show("wikipedia | read 2.0/2.0 MiB 100%")
    status.close()
    assert stream.getvalue() == (
        "\rwikipedia | read 1.0/2.0 MiB 50% | eta 0:00:10"
        "\rwikipedia | read 2.0/2.0 MiB 100%" + " " * 13 + "\n"
    )
    assert StatusLine(io.StringIO()).tty is False  # StringIO is no terminal
    clock = FakeClock()
    printer = ProgressPrinter(
        "books", books.progress_phases(1), StatusLine(stream, tty=True), clock=clock
    )
    assert printer.throttle.interval == 1.0  # a terminal: redrawn every second


def test_progress_is_on_unless_the_environment_says_0():
    assert progress_enabled({})
    assert progress_enabled({PROGRESS_ENV: "1"})
    for off in ("0", "false", "No", " off "):
        assert not progress_enabled({PROGRESS_ENV: off})


def test_totals_published_by_several_workers_are_summed(tmp_path):
    publish_totals(str(tmp_path), "101-a", {PAGES_READ: 5, INPUT_BYTES_READ: 100})
    publish_totals(str(tmp_path), "202-b", {PAGES_READ: 7})
    publish_totals(str(tmp_path), "101-a", {PAGES_READ: 6, INPUT_BYTES_READ: 150})  # newer
    (tmp_path / "303-c.json").write_text("{half")  # caught mid-write elsewhere: skipped
    assert read_totals(str(tmp_path)) == {PAGES_READ: 13, INPUT_BYTES_READ: 150}
    assert not list(tmp_path.glob(".*.tmp"))


def test_stage_counters_publish_once_per_interval_and_at_each_flush(tmp_path, monkeypatch):
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path))
    clock = FakeClock()
    counters = StageCounters((PAGES_READ,), interval=1.0, clock=clock)
    counters.add(PAGES_READ, 3)
    assert read_totals(str(tmp_path)) == {}  # before the interval: nothing published
    clock.now = 1.0
    counters.add(PAGES_READ)
    assert read_totals(str(tmp_path)) == {PAGES_READ: 4}
    counters.add(PAGES_READ, 2)
    counters.flush()
    (published,) = tmp_path.glob("*.json")
    assert json.loads(published.read_text()) == {PAGES_READ: 6}


def _progress_lines(stderr: str, stage: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{stage} | ")]


WIKIPEDIA_LINE = re.compile(
    r"wikipedia \| read \d+\.\d/\d+\.\d MiB \d+% \| pages \d+ \| documents \d+"
    r"(?: \| pages/s [0-9.]+)?(?: \| (?:eta|done in) \d+:\d\d:\d\d)?"
)


def test_a_real_run_prints_progress_lines_and_ends_with_the_totals(
    sample_dump, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    code = wikipedia.run(["--input", str(sample_dump), "--output", str(tmp_path / "out")])
    assert code == 0
    lines = _progress_lines(capsys.readouterr().err, "wikipedia")
    assert len(lines) >= 1  # a line every 5 s (stderr is no terminal here), then the last
    assert all(WIKIPEDIA_LINE.fullmatch(line) for line in lines), lines
    size = format_bytes(sample_dump.stat().st_size, sample_dump.stat().st_size)
    assert lines[-1].startswith(
        f"wikipedia | read {size} 100% | pages {SAMPLE_PAGES} | documents {SAMPLE_DOCUMENTS} | "
    )
    assert " | done in " in lines[-1]


def test_two_worker_processes_report_to_the_driver(sample_dump, tmp_path, capfd, monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    code = wikipedia.run(
        [
            "--input",
            str(sample_dump),
            "--output",
            str(tmp_path / "out"),
            "--direct_num_workers",
            "2",
            "--direct_running_mode",
            "multi_processing",
        ]
    )
    assert code == 0
    lines = _progress_lines(capfd.readouterr().err, "wikipedia")
    # Every page was parsed in a worker process; the driver's last line has them all.
    assert f"| pages {SAMPLE_PAGES} | documents {SAMPLE_DOCUMENTS} |" in lines[-1]


def test_progress_off_prints_nothing(sample_dump, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert wikipedia.run(["--input", str(sample_dump), "--output", str(tmp_path / "o")]) == 0
    assert _progress_lines(capsys.readouterr().err, "wikipedia") == []


def test_the_line_is_shown_where_the_workers_share_the_driver_s_environment(monkeypatch):
    """Locally and with LOOPBACK workers the folder reaches the workers; elsewhere a portable
    run says in one line why it shows none, and Dataflow (whose UI has the counters) or a
    launch that does not wait prints nothing. tests/test_portable.py runs both on a job
    service."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    portable = ["--runner", "PortableRunner", "--job_endpoint", "localhost:1"]
    cases = {
        "local": ([], True),
        "two processes": (
            ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
            True,
        ),
        "loopback": ([*portable, "--environment_type", "LOOPBACK"], True),
        "loopback, no wait": (
            [*portable, "--environment_type", "LOOPBACK", "--no_wait_until_finish"],
            False,
        ),
        "worker pool": (
            [*portable, "--environment_type", "EXTERNAL", "--environment_config", "localhost:2"],
            False,
        ),
        "docker": ([*portable, "--environment_type", "DOCKER"], False),
        "dataflow": (["--runner", "DataflowRunner"], False),
    }
    for name, (flags, shown) in cases.items():
        assert workers_in_this_process(PipelineOptions(flags)) is shown, name

    phases = books.progress_phases(100)
    for name, note in [
        ("worker pool", True),
        ("docker", True),
        ("dataflow", False),
        ("loopback, no wait", False),
    ]:
        stream = io.StringIO()
        with progress_shown(PipelineOptions(cases[name][0]), "books", phases, stream):
            pass
        assert stream.getvalue().startswith("books | no progress line on PortableRunner ") is note
        assert note or stream.getvalue() == "", name


def _extraction_counters(dump, test_pipeline, tmp_path) -> dict[str, int]:
    """The Beam counters of the Wikipedia stage's transform run on `dump`."""
    output = tmp_path / "out"
    output.mkdir()
    config = wikipedia.WikipediaConfig(input=(str(dump),), output=str(output))
    _ = test_pipeline | wikipedia.ExtractArticles([str(dump)], str(output), config)
    result = test_pipeline.run()
    result.wait_until_finish()
    return {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }


def test_extraction_leaves_its_counts_as_beam_counters(sample_dump, test_pipeline, tmp_path):
    """What Dataflow shows in the job's UI: the same counts, as Beam counters."""
    counters = _extraction_counters(sample_dump, test_pipeline, tmp_path)
    assert counters[INPUT_BYTES_READ] == sample_dump.stat().st_size
    assert counters[PAGES_READ] == SAMPLE_PAGES
    assert counters[DOCUMENTS_EXTRACTED] == SAMPLE_DOCUMENTS


def test_a_truncated_dump_read_again_counts_its_bytes_once(sample_dump, test_pipeline, tmp_path):
    """The fast bz2 decoder gives up at a dump cut short and Python's reads the split again
    from its start: the bytes read (the progress line's share of the input) stay the file's
    size, not up to twice it."""
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(sample_dump.read_bytes()[:-5000])
    counters = _extraction_counters(cut, test_pipeline, tmp_path)
    assert counters[INPUT_BYTES_READ] == cut.stat().st_size


def test_bytes_read_again_after_a_seek_back_are_not_counted_twice():
    """A handle read to byte 10, sent back to 4 and read to 15 has read 15 bytes of the file."""
    counters = StageCounters((INPUT_BYTES_READ,), interval=3600.0)
    handle = _CountingHandle(io.BytesIO(bytes(range(20))), counters, INPUT_BYTES_READ)
    assert handle.read(10) == bytes(range(10))
    assert handle.seek(4) == 4
    assert handle.read(11) == bytes(range(4, 15))
    handle.seek(0, io.SEEK_END)
    assert handle.read(3) == b""
    counters.flush()
    assert counters._totals[INPUT_BYTES_READ] == 15


def test_examples_run_ends_with_every_example_written(
    sample_documents, sample_vocab, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    output = tmp_path / "shards"
    code = examples.run(
        [
            "--documents",
            *map(str, sample_documents),
            "--vocab",
            str(sample_vocab),
            "--output",
            str(output),
            "--max-seq-length",
            "128",
            "--dupe-factor",
            "1",
        ]
    )
    assert code == 0
    lines = _progress_lines(capsys.readouterr().err, "examples")
    manifest = ShardsManifest.from_json((output / "manifest.json").read_text())
    splits = [split for output in manifest.outputs.values() for split in output.splits.values()]
    made = sum(split.samples for split in splits)
    shards = sum(len(split.shards) for split in splits)
    assert re.fullmatch(
        rf"examples \| step 3/3 write shards \| examples {made}/{made} 100% \| shards {shards}"
        r"(?: \| examples/s [0-9.]+)? \| done in \d+:\d\d:\d\d",
        lines[-1],
    ), lines


def test_vocab_line_counts_words_then_learns_pieces(
    sample_documents, tmp_path, capsys, monkeypatch
):
    from pipelines import vocab

    documents = [str(d) for d in sample_documents]
    plan = vocab.SamplePlan.open(documents, 1024, 0)
    config = vocab.VocabConfig(documents=tuple(documents), output="unused", vocab_size=2000)
    view = ProgressView("vocab", vocab.progress_phases(plan, config), start=0.0)
    # The sample's 3,580,477 bytes of text are under the 1024 MB budget: all of it is read.
    first = {"text_bytes_counted": 3580477 // 2, "documents_counted": 50}
    assert view.line(first, 2.0) == (
        "vocab | step 1/2 count words | read 1.7/3.4 MiB 49% | documents/s 25 | eta 0:00:02"
    )
    learning = {"text_bytes_counted": 3580477, "documents_counted": 101, "pieces_learned": 500}
    assert view.line(learning, 4.0) == "vocab | step 2/2 learn pieces | tokens 500/2000 25%"
    later = {**learning, "pieces_learned": 1000}
    assert view.line(later, 6.0).startswith(
        "vocab | step 2/2 learn pieces | tokens 1000/2000 50% | eta 0:00:0"
    )
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    output = str(tmp_path / "vocab")
    assert vocab.run(["--documents", *documents, "--output", output, "--vocab-size", "2000"]) == 0
    lines = _progress_lines(capsys.readouterr().err, "vocab")
    assert re.fullmatch(
        r"vocab \| step 2/2 learn pieces \| tokens 2000/2000 100% \| done in \d+:\d\d:\d\d",
        lines[-1],
    ), lines


def test_a_killed_run_s_progress_folder_is_removed_by_the_next_run(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from pipelines.beam.progress import remove_stale_progress_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now
    names = [
        f"bertkit-progress-{dead.pid}-ab12_x",  # a run killed with -9: removed
        f"bertkit-progress-{os.getpid()}-cd34",  # a run still going: kept
        "bertkit-progress-notes",  # not a name bertkit makes: kept
        "other-folder",
    ]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "1-a.json").write_text("{}")
    assert remove_stale_progress_dirs(str(tmp_path)) == [names[0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])


def test_bytes_are_counted_once_in_whatever_order_they_are_read():
    """Read 15-20, then 0-10, then 8-18: bytes 0-20 counted once each."""
    counters = StageCounters((INPUT_BYTES_READ,), interval=3600.0)
    handle = _CountingHandle(io.BytesIO(bytes(range(30))), counters, INPUT_BYTES_READ)
    for start, size in ((15, 5), (0, 10), (8, 10), (20, 0)):
        handle.seek(start)
        assert handle.read(size) == bytes(range(start, start + size))
    counters.flush()
    assert counters._totals[INPUT_BYTES_READ] == 20


def test_a_parquet_file_read_footer_first_counts_its_row_groups():
    """pyarrow reads a Parquet file's footer (at its end) first, then the row groups before
    it: every byte but the leading magic "PAR1" is counted, once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    texts = [f"document number {i} " * 50 for i in range(3000)]
    pq.write_table(pa.table({"text": texts}), buffer, row_group_size=1000)
    data = buffer.getvalue()
    counters = StageCounters((INPUT_BYTES_READ,), interval=3600.0)
    handle = _CountingHandle(io.BytesIO(data), counters, INPUT_BYTES_READ)
    parquet = pq.ParquetFile(handle, buffer_size=1 << 16, pre_buffer=False)
    assert sum(batch.num_rows for batch in parquet.iter_batches(batch_size=100)) == 3000
    counters.flush()
    assert counters._totals[INPUT_BYTES_READ] == len(data) - 4
