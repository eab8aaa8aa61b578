"""`python -m pipelines.wikipedia` = `bertkit wikipedia`.

Importing Beam creates about a million objects that live as long as the process, and the
cyclic garbage collector walks all of them at each full collection: several while they are
imported, and one more at exit. As this is the whole process, they are imported with the
collector paused, then frozen out of its view (gc.freeze) before the run; the collector
still collects what the run makes. (Called in another process, `main` leaves its collector
as it is.)
"""

import gc


def _import_cli():
    collecting = gc.isenabled()
    gc.disable()
    try:
        from pipelines.wikipedia import cli
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    return cli


_import_cli().main()
