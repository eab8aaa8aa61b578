"""`python -m pipelines.books` = `bertkit books`, its modules imported as a process's
entry point imports them (pipelines/command/startup.py)."""

from pipelines.command.startup import exit_quietly_on_broken_pipe, import_command

with exit_quietly_on_broken_pipe():  # `... | head`: quiet, exit 141
    import_command("pipelines.books.cli").main()
