"""A run directory and what a run starts from, in one home.

directory.py: `RunDirectory`, --output as one object, the one the trainer asks.
checkpoints.py: where a run directory may be, whether it holds an earlier run, atomic
checkpoint writes, `latest`, rotation, reading and checking checkpoints. lock.py: the lock
(`run.lock`) rank 0 holds. remote.py: s3:// and gs:// run directories, staged locally and
mirrored. start.py: what a run starts from, one `Start` (nothing, its own checkpoint, another
run's, a released model).
"""
