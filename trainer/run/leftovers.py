"""What in a run directory a run wrote, where it holds no checkpoint (a run killed before its
first) or holds a file beside the run's: shared by a local run directory
(trainer/run/checkpoints.py) and one on object storage (trainer/run/remote.py), so both say
the same. A run opens metrics.jsonl before its TensorBoard event file and writes a row with
a "kind" and a "step" at each log: another tool's metrics.jsonl or log directory is never
taken for a run's."""

from __future__ import annotations

import json
from pathlib import Path

# A metrics.jsonl row is a few hundred bytes; a first line longer than this is no run's.
_FIRST_ROW_BYTES = 1 << 16


def foreign_problem(where: str, name: str, overwrite: bool) -> str:
    """Why a run directory's files are not deleted: `name` beside them is no run's."""
    return (
        f"{'--overwrite: ' if overwrite else ''}{where} also holds {name}, which no training "
        "run writes; nothing was deleted. Move it, or choose another --output"
    )


def leftovers_problem(where: str, names: list[str], metrics: Path, overwrite: bool) -> str | None:
    """Why the files `names` of a run directory with no checkpoint are not replaced without
    --overwrite: its metrics.jsonl (`metrics`, a local copy) is not a run's."""
    if overwrite or _metrics_of_a_run(metrics):
        return None
    return (
        f"{where} holds {', '.join(names)}, names a training run writes, but no metrics.jsonl "
        "a run wrote (its rows have a kind and a step): nothing was deleted. Pass --overwrite "
        "to replace them, or choose another --output"
    )


def _metrics_of_a_run(path: Path) -> bool:
    """Whether `path` is a run's metrics.jsonl: empty (opened, nothing logged yet), or a
    first line that is a JSON object with a "kind" and a "step"."""
    if not path.is_file():
        return False
    with path.open("rb") as source:
        first = source.readline(_FIRST_ROW_BYTES)
    if not first:
        return True
    try:
        row = json.loads(first)
    except ValueError:
        return False
    return isinstance(row, dict) and "kind" in row and "step" in row
