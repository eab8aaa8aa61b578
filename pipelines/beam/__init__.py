"""Beam plumbing shared by the stages: runner choice and flags, whole-file writes through
Beam's FileSystems, the documents directory (Parquet writer, rejects, manifest) and spill
files for shuffling through storage."""
