"""Progress of a long run on stderr: the line, how often it is printed, and where the counts
come from. Beam-free: the Beam stages count in their DoFns (`pipelines.beam.progress`), the
trainer shares the number formats.

  wikipedia | read 123.4/575.0 MiB 21% | pages 52100 | documents 18040 | pages/s 5210 | eta 0:00:37

- `Phase`, `ProgressView`: what a stage shows: its steps in order, each measured by one
  counter against a planned total, rates per second of the step, and an ETA for the step.
  A step's total is a number fixed before work starts (input bytes, documents in the
  manifests) or the name of a counter that is final once the step starts (examples made).
- `Throttle`, `ProgressPrinter`: at most one line per interval, on an injectable clock, and
  a last line at the end; `progress_printed` runs one in a thread around a piece of work,
  polling a function for the counts (the vocab stage's own, or the Beam workers' files).
- `StatusLine`: on a terminal one line rewritten in place ("\\r"); elsewhere (CI logs,
  files, `nohup`) one plain line per update, as the trainer's `ProgressLine` does.
- `publish_totals` / `read_totals`: how worker processes hand their counts to the process
  that prints. Beam's local runners expose no metrics until the pipeline has finished, and
  `--direct_running_mode multi_processing` workers are other processes, so each counting
  object writes its running totals to a small JSON file in a folder the driver names
  (`PROGRESS_DIR_ENV`, inherited by the workers), and the driver sums the files.

`PROGRESS_ENV` set to 0 silences the line; a run on a remote runner (Dataflow) never prints
it: there the same counts are Beam counters in the job's UI.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = [
    "PROGRESS_DIR_ENV",
    "PROGRESS_ENV",
    "Phase",
    "ProgressPrinter",
    "ProgressView",
    "StatusLine",
    "Throttle",
    "format_bytes",
    "format_duration",
    "format_value",
    "progress_enabled",
    "progress_printed",
    "publish_totals",
    "read_totals",
]

PROGRESS_ENV = "BERTKIT_PROGRESS"  # "0" (or "false", "no", "off") silences the progress line
PROGRESS_DIR_ENV = "BERTKIT_PROGRESS_DIR"  # set by the printing process for its workers
# On a terminal the line is redrawn every second; in a log a line every 5 s is readable and
# still says "at least every few seconds" what the run is doing.
TTY_INTERVAL_S = 1.0
LOG_INTERVAL_S = 5.0
POLL_INTERVAL_S = 0.25  # how often the printing thread reads the counts

Number = float | int


def format_value(value: Number) -> str:
    """Ints as they are; floats to four significant digits, large ones as whole numbers
    ("1.235e+04" reads badly in a status line): 2.3456 → "2.346", 12345.6 → "12346"."""
    if isinstance(value, int):
        return str(value)
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def format_duration(seconds: float) -> str:
    """H:MM:SS: 312 → "0:05:12", 90061 → "25:01:01"."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_bytes(done: int, total: int | None = None) -> str:
    """MiB with one decimal, as "done/total MiB" when the total is known: 1.5 MiB of 575 MiB
    → "1.5/575.0 MiB"; GiB from 10 GiB on, so a full dump reads "3.2/21.7 GiB"."""
    largest = max(done, total or 0)
    unit, scale = ("GiB", 1 << 30) if largest >= 10 << 30 else ("MiB", 1 << 20)
    shown = f"{done / scale:.1f}" + (f"/{total / scale:.1f}" if total is not None else "")
    return f"{shown} {unit}"


def progress_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a local run prints its progress: yes unless BERTKIT_PROGRESS says 0/false/no/off."""
    value = (os.environ if environ is None else environ).get(PROGRESS_ENV, "")
    return value.strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class Phase:
    """One step of a stage as the progress line shows it.

    `counter` measures the step's work against `total`: a number planned before work starts,
    a counter's name (its value once the step has begun: the examples made before the
    shards are written), or None (no total: no percentage, no ETA). `noun` names the
    counter on the line; with `in_bytes` it is shown as MiB. `rate` is (counter, noun) shown
    per second of the step; `shown` are (counter, noun) shown as they stand.
    """

    label: str
    counter: str
    total: int | str | None
    noun: str
    in_bytes: bool = False
    rate: tuple[str, str] | None = None
    shown: tuple[tuple[str, str], ...] = ()


class ProgressView:
    """Renders a stage's counts as one line; remembers when each step was first seen.

    The current step is the last one whose counter has moved (Beam's local runners run a
    stage's steps one after another: a step after a GroupByKey starts when the one before
    has finished), or the first before anything has. Rates and the ETA are over the time
    the step has been working: since the step before it last moved (the first step: since
    the run started). Not since the step's own counter first moved: a worker publishes its
    counts at the end of its work, so the shard writer's count can arrive all at once, and
    42,132 examples over the quarter second since then read as a million a second.
    """

    def __init__(self, stage: str, phases: Sequence[Phase], start: float) -> None:
        if not phases:
            raise ValueError("a progress view needs at least one phase")
        self.stage = stage
        self.phases = tuple(phases)
        self._since = {0: start}
        self._counts: dict[int, int] = {}  # each step's count as last observed
        self._moved: dict[int, float] = {}  # when each step's count last changed

    def current(self, totals: Mapping[str, int]) -> int:
        moved = [i for i, p in enumerate(self.phases) if totals.get(p.counter, 0) > 0]
        return moved[-1] if moved else 0

    def observe(self, totals: Mapping[str, int], now: float) -> int:
        """The current step's index; a step seen first starts when the one before it last
        moved (or `now`, if it never has)."""
        for number, phase in enumerate(self.phases):
            count = totals.get(phase.counter, 0)
            if count != self._counts.get(number, 0):
                self._counts[number] = count
                self._moved[number] = now
        index = self.current(totals)
        for earlier in range(index + 1):
            if earlier not in self._since:
                self._since[earlier] = self._moved.get(earlier - 1, now)
        return index

    def line(self, totals: Mapping[str, int], now: float, finished: bool = False) -> str:
        index = self.observe(totals, now)
        phase = self.phases[index]
        elapsed = now - self._since[index]
        parts = [self.stage]
        if len(self.phases) > 1:
            parts.append(f"step {index + 1}/{len(self.phases)} {phase.label}")
        done = totals.get(phase.counter, 0)
        total = totals.get(phase.total, 0) if isinstance(phase.total, str) else phase.total
        if phase.in_bytes:
            amount = f"{phase.noun} {format_bytes(done, total)}"
        else:
            amount = f"{phase.noun} {done}" + (f"/{total}" if total is not None else "")
        if total:
            amount += f" {min(100, 100 * done // total)}%"
        if phase.noun:  # a step with nothing to count (work inside a library) shows none
            parts.append(amount)
        parts += [f"{noun} {totals.get(counter, 0)}" for counter, noun in phase.shown]
        if phase.rate is not None and elapsed > 0:
            counter, noun = phase.rate
            parts.append(f"{noun}/s {format_value(totals.get(counter, 0) / elapsed)}")
        if finished:
            parts.append(f"done in {format_duration(now - self._since[0])}")
        elif total and done and elapsed > 0:
            parts.append(f"eta {format_duration(max(0, total - done) * elapsed / done)}")
        return " | ".join(parts)


class Throttle:
    """`due()` is True once `interval` seconds have passed since construction or since it
    was last True: a run shorter than one interval prints only its final line."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last = clock()

    def due(self) -> bool:
        now = self._clock()
        if now - self._last < self.interval:
            return False
        self._last = now
        return True


class ProgressPrinter:
    """A stage's progress line, printed at most once per interval and once at the end.

    `poll(totals)` is called as often as the caller likes (the driver's thread: every
    quarter second, with the counts it has just read) and prints only when due, so the
    line comes every `TTY_INTERVAL_S` on a terminal and every `LOG_INTERVAL_S` elsewhere
    unless `interval` says otherwise. `clock` is injectable for tests.
    """

    def __init__(
        self,
        stage: str,
        phases: Sequence[Phase],
        status: StatusLine | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.status = status if status is not None else StatusLine()
        if interval is None:
            interval = TTY_INTERVAL_S if self.status.tty else LOG_INTERVAL_S
        self._clock = clock
        self.view = ProgressView(stage, phases, clock())
        self.throttle = Throttle(interval, clock)

    def poll(self, totals: Mapping[str, int]) -> bool:
        """Note which step the counts are in; print the line if it is due. Whether it printed."""
        now = self._clock()
        self.view.observe(totals, now)  # every poll, so a step's start is known to a poll
        if not self.throttle.due():
            return False
        self.status.show(self.view.line(totals, now))
        return True

    def finish(self, totals: Mapping[str, int], finished: bool = True) -> None:
        """The last line (with "done in" when the run `finished`), the cursor below it."""
        self.status.show(self.view.line(totals, self._clock(), finished=finished))
        self.status.close()


class StatusLine:
    """Writes status lines: rewritten in place on a terminal, one per call elsewhere.

    `tty` overrides the detection by `stream.isatty()` (the trainer's `ProgressLine` rule).
    """

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self._stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self._drawn_width = 0

    def show(self, line: str) -> None:
        if self.tty:
            padding = " " * max(0, self._drawn_width - len(line))
            self._stream.write(f"\r{line}{padding}")
            self._drawn_width = len(line)
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn_width:
            self._stream.write("\n")  # leave the last state on screen, the cursor below it
            self._stream.flush()
        self._drawn_width = 0


@contextmanager
def progress_printed(
    stage: str,
    phases: Sequence[Phase],
    read: Callable[[], Mapping[str, int]],
    stream: TextIO | None = None,
    tty: bool | None = None,
    interval: float | None = None,
) -> Iterator[None]:
    """Print `read()`'s counts as the stage's progress line while the body runs: a thread
    polls every `POLL_INTERVAL_S`, the `ProgressPrinter` decides when a line is due, and the
    last line comes when the body ends ("done in …" if it returned). Nothing with
    BERTKIT_PROGRESS=0."""
    if not progress_enabled():
        yield
        return
    printer = ProgressPrinter(stage, phases, StatusLine(stream, tty), interval)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_INTERVAL_S):
            printer.poll(read())

    thread = threading.Thread(target=poll, name=f"bertkit-{stage}-progress", daemon=True)
    thread.start()
    finished = False
    try:
        yield
        finished = True
    finally:
        stop.set()
        thread.join()
        printer.finish(read(), finished)


def publish_totals(directory: str, name: str, totals: Mapping[str, int]) -> None:
    """Write one counting object's running totals as `directory/name.json`, atomically (a
    reader sees the previous totals or these, never half a file)."""
    path = Path(directory, f"{name}.json")
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(dict(totals)), encoding="utf-8")
    # os.rename replaces the file atomically on POSIX as os.replace does; os.replace is left
    # to bertkit's outputs, whose renames the fault suite counts and kills before
    # (tests/support/killpoint.py): a progress file is no output.
    os.rename(temporary, path)


def read_totals(directory: str) -> Counter[str]:
    """The sum of every published file's totals (a file that cannot be read is skipped: the
    next poll reads it)."""
    totals: Counter[str] = Counter()
    for path in Path(directory).glob("*.json"):
        try:
            counts = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        totals.update({k: int(v) for k, v in counts.items()})
    return totals
