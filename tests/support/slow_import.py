"""A module whose import takes as long as a test needs: it says it has started, then waits,
as importing Beam takes seconds (tests/test_stage_signals.py)."""

import sys
import time

print("importing", file=sys.stderr, flush=True)
time.sleep(60)
