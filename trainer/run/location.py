"""Where a run directory or a checkpoint may be, checked before anything is imported that
needs torch: the flags (trainer/config.py) check it, and `bertkit train --help` loads them in
an install without the train extra."""

from __future__ import annotations

from pathlib import Path

from pipelines.io import storage


def check_run_location(flag: str, value: str | Path | None, remote_ok: bool) -> None:
    """Refuse a URL the flag cannot take: `Path("hdfs://nn/run")` would quietly be a local
    directory named `hdfs:`. With `remote_ok`, s3:// and gs:// are taken (trainer/run/remote.py);
    any other scheme never is."""
    if value is None or not storage.is_url(str(value)):
        return
    if remote_ok and storage.scheme(str(value)) in ("s3", "gs"):
        return
    takes = "a local or mounted path, s3:// or gs://" if remote_ok else "a local or mounted path"
    raise CheckpointError(
        f"{flag} {storage.redact(str(value))}: {flag} takes {takes}; a URL is never taken "
        "for a local path"
    )


class CheckpointError(ValueError):
    """A checkpoint cannot be found, read or used."""
