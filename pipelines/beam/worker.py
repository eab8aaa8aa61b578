"""`python -m pipelines.beam.worker`: a worker process of a local run with
`--direct_running_mode multi_processing`, started by the driver in place of Beam's own
`apache_beam.runners.worker.sdk_worker_main`, which it then runs as it is.

The one difference is how Beam is imported: as a stage's process imports it
(pipelines/command/startup.py). Without the gcp extra, importing Beam logs a notice about
BigQuery through `logging.warning`, which gives the root logger a handler onto stderr; the
harness then sets the root logger to INFO, and every worker printed its start-up and
shut-down (about twenty INFO lines each) around the stage's progress line. Imported this
way, the notice is dropped and no such handler exists: the worker's records go only to the
driver over Beam's logging channel, where the stage's logging shows warnings and errors
(pipelines/beam/worker_processes.py) and nothing below.
"""

from __future__ import annotations

import sys

from pipelines.command.startup import import_command

if __name__ == "__main__":
    import_command("apache_beam.runners.worker.sdk_worker_main").main(sys.argv)
