"""The Flex Template launcher's program: runs the bertkit stage its template names.

Dataflow's launcher calls `python main.py --name=value …` with the template's parameters and
Dataflow's options; `BERTKIT_STAGE` (wikipedia, books, corpus, dedup, vocab, examples or chain)
comes from the image the template names (build.sh tags one per stage). The stage submits
its job and returns (`pipelines.dataflow.launch`).
"""

import os
import sys

from pipelines.dataflow import STAGE_ENV, launch

if __name__ == "__main__":
    sys.exit(launch(os.environ.get(STAGE_ENV, ""), sys.argv[1:]))
