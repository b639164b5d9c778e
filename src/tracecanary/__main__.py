"""``python -m tracecanary``: the command line, its process set up first
(``command_process``), so that the command line's own imports already run under it."""

from tracecanary.command_process import take_the_process

take_the_process()

from tracecanary.cli import main  # noqa: E402 - after the process is set up

raise SystemExit(main())
