"""`python -m pipelines.vocab` = `bertkit vocab`, its modules imported as a process's
entry point imports them (pipelines/command/startup.py)."""

from pipelines.command.startup import import_command

import_command("pipelines.vocab.cli").main()
