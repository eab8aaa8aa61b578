"""Beam plumbing shared by the stages: runner choice and flags, whole-file writes through
Beam's FileSystems, the documents directory (Parquet writer, rejects, manifest) and spill
files for shuffling through storage."""

import os


def gcs_emulator_connects_anonymously() -> None:
    """With `STORAGE_EMULATOR_HOST` set (a GCS emulator on loopback, as in the tests), Beam's
    GCS client goes anonymous at once. Beam otherwise looks up Google's default credentials
    first, five tries over ~20 s in every process, before it falls back to anonymous; an
    emulator checks no credentials. Runs wherever bertkit's Beam code is imported: the driver
    and every worker."""
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return
    try:
        from apache_beam.internal.gcp import auth
    except ImportError:  # Beam without its gcp extra has no gs:// filesystem to set up
        return
    cache = getattr(auth, "_Credentials", None)
    if cache is not None and hasattr(cache, "_credentials_init"):
        with cache._credentials_lock:
            cache._credentials_init, cache._credentials = True, None


gcs_emulator_connects_anonymously()
